"""Running an exported partition (``hetero-solve run`` and ``verify``).

- :mod:`.backend`: the interface a runtime implements to run parts (:class:`PartRunner`,
  :class:`PartSpec`, :class:`RunOptions`); onnxruntime and OpenVINO are backends.

``hetero_solve.run`` is both this package and the function :func:`hetero_solve.runtime.run`:
calling the package calls the function (``hs.run(out_dir)``), so ``import
hetero_solve.run.backend`` and ``hs.run(...)`` both work whatever was imported first.
"""

from __future__ import annotations

import sys
import types

from .backend import (BACKENDS, NodeTime, OPTIMIZATION_LEVELS, PartRunner, PartSpec, RunOptions,
                      TensorInfo, load_backend)

__all__ = ["BACKENDS", "NodeTime", "OPTIMIZATION_LEVELS", "PartRunner", "PartSpec",
           "RunOptions", "TensorInfo", "load_backend"]


class _CallablePackage(types.ModuleType):
    """A package that is also the library's ``run`` function.  Python binds a package to its
    parent's attribute when it is first imported, so ``hetero_solve.run`` cannot name a
    function and a package at once; a callable package is both."""

    def __call__(self, *args, **kwargs):
        from ..runtime import run
        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
