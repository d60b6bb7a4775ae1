"""Measured per-node times of a model on devices: the profile file (:mod:`.format`), what
``hetero-solve profile`` measures and imports.  docs/costs.md, "Profiles"."""

from .format import (DeviceProfile, ModelInfo, Profile, ProfileError, check_model, fingerprint,
                     model_info, read_profile, write_profile)

__all__ = ["DeviceProfile", "ModelInfo", "Profile", "ProfileError", "check_model",
           "fingerprint", "model_info", "read_profile", "write_profile"]
