"""Verify a partition: the original model and the parts, run on the same inputs, must agree.

:func:`verify` is the library call behind ``hetero-solve verify MODEL OUT_DIR``.  Inputs are
given or generated (:func:`hetero_solve.runtime.random_inputs`: the model's declared dtypes,
shapes with the partition's ``dims``, integer inputs used as indices within the table they
index, ``ranges`` as given).  Per graph output it reports the largest absolute and
relative difference; an output **passes** when every element satisfies

    |partitioned - original| <= tolerance * max(1, |original|)

(absolute near zero, relative for large values).  Integer, bool and string outputs must be
equal (any difference of an integer is at least 1); NaN matches NaN and an infinity matches
the same infinity.  Shapes and dtypes must match exactly.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx

from .errors import HeteroSolveError, warn
from .runtime import (RunResult, check_dims, check_inputs, check_ranges, load_manifest,
                      model_input_specs, random_inputs, run_original_timed, run_partitioned)

DEFAULT_TOLERANCE = 1e-5


class VerifyError(HeteroSolveError):
    """The model and OUT_DIR do not belong together, or the inputs are unusable."""


@dataclass
class OutputDiff:
    """How one graph output of the partitioned model differs from the original's."""
    name: str
    shape: tuple
    dtype: str
    max_abs: float
    max_rel: float
    error: float          # max |a - b| / max(1, |b|): what is compared with the tolerance
    ok: bool
    note: str = ""        # why it failed beyond the numbers (shape, dtype, NaN placement)

    def as_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "max_abs": _json_float(self.max_abs), "max_rel": _json_float(self.max_rel),
                "error": _json_float(self.error), "ok": self.ok, "note": self.note}


@dataclass
class VerifyReport:
    outputs: list[OutputDiff]
    tolerance: float
    run: RunResult                       # the partitioned run, with per-part counters
    original_seconds: float = 0.0
    random: list[str] = field(default_factory=list)     # inputs generated
    dims: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def warnings(self) -> list[str]:
        return self.run.warnings

    def as_dict(self) -> dict:
        return {"ok": self.ok, "tolerance": self.tolerance, "dims": self.dims,
                "random_inputs": self.random, "outputs": [o.as_dict() for o in self.outputs],
                "parts": [p.as_dict() for p in self.run.parts],
                "seconds": {"original": self.original_seconds, "partitioned": self.run.seconds}}


def verify(model: str | os.PathLike | onnx.ModelProto, out_dir: str | os.PathLike,
           inputs: Mapping[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
           *, tolerance: float = DEFAULT_TOLERANCE, seed: int = 0,
           ranges: Mapping[str, tuple[float, float]] | None = None) -> VerifyReport:
    """Run ``model`` and the partition in ``out_dir`` on the same inputs and compare every
    graph output.  Raises :class:`VerifyError` / :class:`~hetero_solve.runtime.RunError`
    (both :class:`~hetero_solve.errors.HeteroSolveError`) on bad input; a difference over
    ``tolerance`` is not an error but ``report.ok == False``.

    >>> rep = verify("examples/seed000.onnx", "seed000.hetero")   # doctest: +SKIP
    >>> rep.ok, [(o.name, o.max_abs) for o in rep.outputs]         # doctest: +SKIP
    (True, [('y', 0.0)])
    """
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise VerifyError(f"--tolerance {tolerance}: must be a finite number >= 0")
    out_dir = Path(out_dir)
    manifest = load_manifest(out_dir)
    proto, label = _read(model)
    outs = [o.name for o in proto.graph.output]
    if sorted(outs) != sorted(manifest["graph_outputs"]):
        raise VerifyError(f"{label} has outputs {outs}, {out_dir}/partition.json was made for "
                          f"{manifest['graph_outputs']}: is OUT_DIR from this model?")
    all_dims = check_dims(manifest.get("dims", {}), dims)
    specs = model_input_specs(proto)
    given = {k: np.asarray(v) for k, v in (inputs or {}).items()}
    check_inputs(specs, given, all_dims, where=label)
    missing = [s for s in specs if s.name not in given]
    check_ranges(ranges, specs)
    feeds = {**given, **random_inputs(missing, all_dims, seed=seed, ranges=ranges)}
    # by path when there is one: onnxruntime then reads external data itself (no 2 GiB limit)
    source = proto if isinstance(model, onnx.ModelProto) else label
    expected, _load, original_seconds = run_original_timed(source, feeds)
    run = run_partitioned(out_dir, feeds, manifest=manifest)
    run.random = [s.name for s in missing]
    diffs = [compare(name, run.outputs.get(name), expected[name], tolerance) for name in outs]
    for message in run.warnings:
        warn(message)
    return VerifyReport(diffs, tolerance, run, original_seconds, run.random, all_dims)


def compare(name: str, got, want, tolerance: float) -> OutputDiff:
    """One output's differences (see the module docstring for the pass rule)."""
    want = np.asarray(want)
    if got is None:
        return OutputDiff(name, want.shape, str(want.dtype), math.inf, math.inf, math.inf,
                          False, "not produced by the partition")
    got = np.asarray(got)
    if got.shape != want.shape:
        return OutputDiff(name, want.shape, str(want.dtype), math.inf, math.inf, math.inf,
                          False, f"shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        return OutputDiff(name, want.shape, str(want.dtype), math.inf, math.inf, math.inf,
                          False, f"dtype {got.dtype}, expected {want.dtype}")
    if want.size == 0:
        return OutputDiff(name, want.shape, str(want.dtype), 0.0, 0.0, 0.0, True)
    if want.dtype.kind not in "biufc":           # strings, objects: equal or not
        same = bool(np.array_equal(got, want))
        bad = 0.0 if same else math.inf
        return OutputDiff(name, want.shape, str(want.dtype), bad, bad, bad, same,
                          "" if same else "values differ")
    a = got.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
    b = want.astype(a.dtype)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    same_special = (nan_a & nan_b) | (np.isinf(a) & np.isinf(b) & (a == b))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = np.where(same_special, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)   # NaN on one side only
        ref = np.where(same_special, 1.0, np.abs(b))
        ref = np.where(np.isnan(ref), 1.0, ref)
        rel = np.where(diff == 0, 0.0, diff / ref)
        err = diff / np.maximum(1.0, ref)
    max_abs, max_rel, error = float(diff.max()), float(rel.max()), float(err.max())
    note = ""
    if (nan_a != nan_b).any():
        note = f"NaN in {int((nan_a != nan_b).sum())} place(s) on one side only"
    if want.dtype.kind in "biu":                  # exact types: exactly equal
        ok = bool(np.array_equal(got, want))
        if not ok and not note:
            note = f"{int((got != want).sum())} element(s) differ"
    else:
        ok = error <= tolerance
    return OutputDiff(name, want.shape, str(want.dtype), max_abs, max_rel, error, ok, note)


def _read(model) -> tuple[onnx.ModelProto, str]:
    from .model.load import read_model
    proto, path, _ = read_model(model)
    return proto, path if path != "<model>" else "the model"


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
