"""What every module of the runner shares: its error and onnxruntime's messages on one line."""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from ..errors import HeteroSolveError, one_line


class RunError(HeteroSolveError):
    """Bad run input (missing or mistyped tensors, an unreadable OUT_DIR) or a part that
    onnxruntime cannot load or run.  ``str(e)`` is one line naming the part or tensor."""


class InputShapeError(RunError):
    """An input whose shape is not the one the partition was built for (its shape chains were
    folded for that size).  ``name``, ``shape`` (given), ``built`` (the partition's shape, ints
    and dim names), ``dim`` (the index that differs) and ``dim_name`` (its symbolic name, or
    None); ``str(e)`` is one line."""

    def __init__(self, name: str, shape: tuple, built: tuple, dim: int,
                 dim_name: str | None, dims: dict):
        self.name, self.shape, self.built, self.dim = name, tuple(shape), tuple(built), dim
        self.dim_name = dim_name
        sizes = [dims.get(d, d) if isinstance(d, str) else ("?" if d is None else d)
                 for d in built]
        got = ",".join(map(str, shape))
        if dim_name is not None:
            why = f"{dim_name}={sizes[dim]}"
            again = f"{dim_name}={shape[dim]}"
        else:
            why = f"dimension {dim} is {sizes[dim]}"
            again = f"shape {name}={got}"
        super().__init__(f"input {name!r} has shape {got}: the partition was built for "
                         f"{name}={','.join(map(str, sizes))} ({why}; its shape chains were "
                         f"folded for that size): solve again with {again} to run this size")

    @property
    def cli_hint(self) -> str:
        """The command line's way to solve again for the given shape."""
        if self.dim_name is not None:
            return f"--dim {self.dim_name}={self.shape[self.dim]}"
        return f"--shape {self.name}={','.join(map(str, self.shape))}"


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
