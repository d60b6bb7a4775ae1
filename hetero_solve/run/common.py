"""What every module of the runner shares: its error and onnxruntime's messages on one line."""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from ..errors import HeteroSolveError, one_line


class RunError(HeteroSolveError):
    """Bad run input (missing or mistyped tensors, an unreadable OUT_DIR) or a part that
    onnxruntime cannot load or run.  ``str(e)`` is one line naming the part or tensor."""


def nbytes(values: Iterable) -> int:
    """Bytes of numpy arrays (and sequences of them): what a part reads or makes."""
    total = 0
    for v in values:
        if isinstance(v, np.ndarray):
            total += int(v.nbytes)
        elif hasattr(v, "tensor_size_in_bytes"):  # an onnxruntime OrtValue, wherever it lives
            total += int(v.tensor_size_in_bytes())
        elif isinstance(v, (list, tuple)):     # sequence outputs
            total += nbytes(v)
        elif v is not None:
            total += int(np.asarray(v).nbytes)
    return total


def ort_line(e: BaseException) -> str:
    """:func:`one_line` without onnxruntime's ``[ONNXRuntimeError] : 1 : FAIL :`` prefix."""
    text = " ".join(str(e).split())
    return one_line(re.sub(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*", "", text))
