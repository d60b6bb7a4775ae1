"""Where a problem's times come from: the profile file (:mod:`.profile`, measured seconds per
ONNX node per device) and the one door that makes them, with the rule file's rooflines, into
the problem's cost model (:mod:`.sources`).  docs/costs.md.

Measuring a profile runs the pipeline and the runtimes: that is :mod:`hetero_solve.profiles`,
above the pipeline; this package is below it.
"""

from .profile import (DeviceProfile, ModelInfo, Profile, ProfileError, check_model, fingerprint,
                      model_info, read_profile, write_profile)
from .sources import Measured, NoCosts, cost_model

__all__ = ["DeviceProfile", "ModelInfo", "Profile", "ProfileError", "check_model",
           "fingerprint", "model_info", "read_profile", "write_profile",
           "Measured", "NoCosts", "cost_model"]
