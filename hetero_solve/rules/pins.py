"""A rule file's pins (``affinity:``) resolved against a model's nodes: exact names first, then
globs for the nodes no exact name pinned (docs/rules.md), for ``compile`` and ``rules check``.
"""

from __future__ import annotations

import fnmatch

from ..errors import RuleError
from ..model.graph import ModelGraph
from .load import Rules


def resolve_pins(rules: Rules, mg: ModelGraph, placeable: list[int],
                 warnings: list[str]) -> tuple[list[int], list[str]]:
    """Pinned device index per placeable node (-1 = none) and the key that pinned it."""
    n = len(placeable)
    pins = [-1] * n
    keys = [""] * n
    if not rules.affinity:
        return pins, keys
    all_names = set(mg.names)
    pos = {mg.names[g]: v for v, g in enumerate(placeable)}
    exact = set()
    for pin in rules.affinity:
        if pin.is_glob:
            continue
        if pin.pattern not in all_names:
            raise RuleError(rules.path, pin.key, f"no node is named {pin.pattern!r} in {mg.path}")
        v = pos.get(pin.pattern)
        if v is None:
            warnings.append(f"{rules.path}: {pin.key}: node {pin.pattern!r} is a Constant or was "
                            "folded; it belongs to no part, the pin has no effect")
            continue
        pins[v] = rules.device_index(pin.device)
        keys[v] = pin.key
        exact.add(v)
    for pin in rules.affinity:
        if not pin.is_glob:
            continue
        match = fnmatch.fnmatchcase
        hits = 0
        d = rules.device_index(pin.device)
        for v, g in enumerate(placeable):
            if match(mg.names[g], pin.pattern):
                hits += 1
                if v not in exact and pins[v] < 0:
                    pins[v] = d
                    keys[v] = pin.key
        if hits == 0:
            warnings.append(f"{rules.path}: {pin.key}: the glob matches no node")
    return pins, keys
