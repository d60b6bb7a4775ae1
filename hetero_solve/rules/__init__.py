"""Rule files (docs/rules.md): schema, includes, value-input catalogs, support conditions."""

from .load import DeviceRules, OpCondition, Rules, load_rules

__all__ = ["DeviceRules", "OpCondition", "Rules", "load_rules"]
