"""Running an exported partition (``hetero-solve run`` and ``verify``).

- :mod:`.session`: :class:`Session` (an OUT_DIR loaded once, run like an onnxruntime
  ``InferenceSession``), :func:`run_partitioned`, and :func:`run` behind ``hetero-solve run``;
- :mod:`.backend`: the interface a runtime implements to run parts (:class:`PartRunner`,
  :class:`PartSpec`, :class:`RunOptions`); :mod:`.onnxruntime` is the default backend,
  OpenVINO another;
- :mod:`.inputs`: declared inputs, random inputs, ``--input``/``--dim``/``--shape`` checks;
- :mod:`.verify`: the partition against the original, with a tolerance by dtype;
- :mod:`.report`: per-part counters and saved outputs; :mod:`.manifest`: ``partition.json``.

``hetero_solve.run`` is both this package and the function :func:`hetero_solve.run.session.run`:
calling the package calls the function (``hs.run(out_dir)``), so ``import
hetero_solve.run.backend`` and ``hs.run(...)`` both work whatever was imported first.
(The function ``verify`` is not exported here, for the same reason: ``hetero_solve.run.verify``
is the module.)
"""

from __future__ import annotations

import sys
import types

from .backend import (BACKENDS, NodeTime, OPTIMIZATION_LEVELS, PartRunner, PartSpec, RunOptions,
                      TensorInfo, load_backend)
from .common import InputShapeError, RunError
from .inputs import RandomInputsError
from .report import PartRun, RunResult
from .session import Session, run, run_partitioned
from .verify import VerifyError, VerifyReport

__all__ = ["BACKENDS", "NodeTime", "OPTIMIZATION_LEVELS", "PartRunner", "PartSpec",
           "RunOptions", "TensorInfo", "load_backend", "RunError", "InputShapeError",
           "RandomInputsError", "PartRun",
           "RunResult", "Session", "run", "run_partitioned", "VerifyError", "VerifyReport"]


class _CallablePackage(types.ModuleType):
    """A package that is also the library's ``run`` function.  Python binds a package to its
    parent's attribute when it is first imported, so ``hetero_solve.run`` cannot name a
    function and a package at once; a callable package is both."""

    def __call__(self, *args, **kwargs):
        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
