"""Verify a partition: the original model and the parts, run on the same inputs with the same
onnxruntime settings, must agree.

:func:`verify` is the library call behind ``hetero-solve verify MODEL OUT_DIR``.  Inputs are
given or generated (:func:`hetero_solve.run.inputs.random_inputs`: the model's declared dtypes,
shapes with the partition's ``dims`` and ``input_shapes``, integer inputs used as indices
within the table they index, ``ranges`` as given).  Per graph output it reports the largest
absolute and relative difference; an output **passes** when every element satisfies

    |partitioned - original| <= step + tolerance * max(1, |original|)

(absolute near zero, relative for large values).  ``tolerance`` follows the output's dtype
unless one is given (:data:`TOLERANCES`, :func:`default_tolerance`); ``step`` is one
quantisation step for an output a ``DequantizeLinear`` makes, else 0.  Given ``rtol`` and/or
``atol``, the rule is ``numpy.allclose``'s instead,

    |partitioned - original| <= atol + step + rtol * |original|

the one not given being the dtype's tolerance.  Each output's ``criterion`` is the rule it was
held to, with its numbers; ``worst`` the largest ratio of a difference to what the rule allows
there (<= 1 passes).  Integer, bool and
string outputs must be equal, except the codes a ``QuantizeLinear`` makes, which may differ by
one.  NaN matches NaN and an infinity matches the same infinity.  Shapes and dtypes must match
exactly.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx

from ..errors import HeteroSolveError, warn
from .backend import RunOptions
from .common import RunError
from .inputs import (RandomInputsError, check_dims, check_inputs, check_ranges, check_shapes,
                     describe_random, is_extra_float, model_input_specs, random_inputs,
                     with_shapes)
from .manifest import load_manifest
from .onnxruntime import run_original_timed
from .report import RunResult
from .session import run_partitioned
from ..model.load import read_model

#: Default tolerance by output dtype.  A part boundary changes where onnxruntime rounds: a
#: fused kernel of the original (MatMul+Add, LayerNorm, Gelu, attention, the float32 islands
#: onnxruntime's CPU inserts around float16 ops it has no float16 kernel for) keeps a value in
#: a wider type where the parts must store it in the output dtype at the boundary, and a
#: different graph may sum in another order.  Each is about one rounding of the dtype, carried
#: through the layers after it; so the default is a small multiple of the dtype's machine
#: epsilon: 10 eps for the 16-bit (and 8-bit) floats, where one or two roundings are expected
#: and visible; float32 keeps the 1e-5 (84 eps) hetero-solve has always used, which leaves room
#: for long fused sums; float64 1e-12 (4,500 eps).
TOLERANCES = {"float64": 1e-12, "float32": 1e-5, "float16": 10 * 2.0 ** -10,
              "bfloat16": 10 * 2.0 ** -7}
#: Floats not listed (float8): this many machine epsilons.
EPS_FACTOR = 10
#: Kept for callers of the fixed tolerance before it followed the dtype.
DEFAULT_TOLERANCE = TOLERANCES["float32"]


class VerifyError(HeteroSolveError):
    """The model and OUT_DIR do not belong together, or the inputs are unusable."""


@dataclass
class OutputDiff:
    """How one graph output of the partitioned model differs from the original's, and the
    tolerance it was held to (``rule`` says where that came from)."""
    name: str
    shape: tuple
    dtype: str
    max_abs: float
    max_rel: float
    error: float          # max (|a - b| - step) / max(1, |b|): compared with the tolerance
    ok: bool
    note: str = ""        # why it failed beyond the numbers (shape, dtype, NaN placement)
    tolerance: float = 0.0
    rule: str = ""
    criterion: str = ""   # the pass rule with its numbers, e.g. |a-b| <= 1e-05*max(1,|b|)
    worst: float = 0.0    # largest |a-b| / allowed difference (<= 1: passes)

    def as_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "max_abs": _json_float(self.max_abs), "max_rel": _json_float(self.max_rel),
                "error": _json_float(self.error), "ok": self.ok, "note": self.note,
                "tolerance": self.tolerance, "tolerance_rule": self.rule,
                "criterion": self.criterion, "worst": _json_float(self.worst)}


@dataclass
class VerifyReport:
    outputs: list[OutputDiff]
    tolerance: float | None              # as given; None: each output's dtype decided
    run: RunResult                       # the partitioned run, with per-part counters
    original_seconds: float = 0.0
    random: list[str] = field(default_factory=list)     # inputs generated
    dims: dict[str, int] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)         # onnxruntime settings of both sides

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def warnings(self) -> list[str]:
        return self.run.warnings

    def as_dict(self) -> dict:
        return {"ok": self.ok, "tolerance": self.tolerance, "dims": self.dims,
                "settings": self.settings,
                "random_inputs": self.random, "outputs": [o.as_dict() for o in self.outputs],
                "parts": [p.as_dict() for p in self.run.parts],
                "seconds": {"original": self.original_seconds, "partitioned": self.run.seconds}}


def verify(model: str | os.PathLike | onnx.ModelProto, out_dir: str | os.PathLike,
           inputs: Mapping[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
           *, tolerance: float | None = None, seed: int = 0,
           ranges: Mapping[str, tuple[float, float]] | None = None,
           shapes: Mapping[str, Sequence[int]] | None = None,
           optimization: str = "all", rtol: float | None = None, atol: float | None = None,
           repeat: int = 0, threads: int = 0) -> VerifyReport:
    """Run ``model`` and the partition in ``out_dir`` on the same inputs, with the same
    onnxruntime settings, and compare every graph output.

    Parameters
    ----------
    model, out_dir
        The original model and its partition.
    inputs : mapping, optional
        Graph inputs by name; the others are random (``seed``, ``ranges``).
    dims, shapes : mapping, optional
        Symbolic dims and whole input shapes added to those the partition was solved for
        (``partition.json``'s ``dims`` and ``input_shapes``), which they may not contradict.
    tolerance : float, optional
        One tolerance for every output; by default each output's dtype decides
        (:func:`default_tolerance`).
    rtol, atol : float, optional
        ``numpy.allclose``'s rule instead, ``|a - b| <= atol + rtol * |b|`` (the one not
        given: the tolerance), for every output.
    optimization : {"all", "extended", "basic", "disabled"}
        onnxruntime's graph optimisation level, the same on both sides.
    repeat : int, default 0
        Time both sides as the median of this many warm runs after the compared one (0: the
        compared run's time, the first after loading).
    threads : int, default 0
        onnxruntime's intra-op threads on both sides (0: its default, every core).

    Returns
    -------
    VerifyReport
        ``report.ok`` is False when an output is over its tolerance (not an error).

    Raises
    ------
    VerifyError, hetero_solve.run.common.RunError
        Bad input (both :class:`~hetero_solve.errors.HeteroSolveError`).

    Examples
    --------
    >>> rep = verify("examples/seed000.onnx", "seed000.hetero")   # doctest: +SKIP
    >>> rep.ok, [(o.name, o.max_abs, o.tolerance) for o in rep.outputs]   # doctest: +SKIP
    (True, [('y', 0.0, 1e-05)])
    """
    for label, value in (("tolerance", tolerance), ("rtol", rtol), ("atol", atol)):
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise VerifyError(f"{label} {value}: must be a finite number >= 0")
    if repeat < 0 or threads < 0:
        raise VerifyError(f"repeat {repeat}, threads {threads}: must be >= 0")
    out_dir = Path(out_dir)
    manifest = load_manifest(out_dir)
    proto, label = _read(model)
    outs = [o.name for o in proto.graph.output]
    if sorted(outs) != sorted(manifest["graph_outputs"]):
        raise VerifyError(f"{label} has outputs {outs}, {out_dir}/partition.json was made for "
                          f"{manifest['graph_outputs']}: is OUT_DIR from this model?")
    all_dims = check_dims(manifest.get("dims", {}), dims)
    all_shapes = check_shapes(manifest.get("input_shapes"), shapes)
    specs = with_shapes(model_input_specs(proto), all_shapes, all_dims, given=list(shapes or {}))
    given = {k: np.asarray(v) for k, v in (inputs or {}).items()}
    check_inputs(specs, given, all_dims, where=label)
    missing = [s for s in specs if s.name not in given]
    check_ranges(ranges, specs)
    feeds = {**given, **random_inputs(missing, all_dims, seed=seed, ranges=ranges)}
    options = RunOptions(optimization=optimization, intra_op_threads=threads)
    # by path when there is one: onnxruntime then reads external data itself (no 2 GiB limit)
    source = proto if isinstance(model, onnx.ModelProto) else label
    how = describe_random(missing, all_dims, ranges)
    try:
        expected, _load, original_seconds = run_original_timed(source, feeds, options,
                                                               repeat=repeat)
        run = run_partitioned(out_dir, {k: v for k, v in feeds.items()
                                        if k in manifest["graph_inputs"]},
                              manifest=manifest, options=options, repeat=max(1, repeat),
                              warmup=repeat > 0)
    except RunError as e:
        if not how or isinstance(e, RandomInputsError):
            raise
        raise RandomInputsError(e, how) from None
    run.random = [s.name for s in missing]
    run.random_how = how
    quantized = quantized_outputs(proto)
    diffs = [compare(name, run.outputs.get(name), expected[name], tolerance,
                     step=quantized.get(name, 0.0), rtol=rtol, atol=atol) for name in outs]
    for message in run.warnings:
        warn(message)
    settings = {"optimization": optimization, "original_providers": ["CPUExecutionProvider"],
                "same_session_options": True, "threads": threads, "repeat": repeat,
                "timing": (f"median of {repeat} warm run(s)" if repeat else
                           "one run, the first after loading")}
    return VerifyReport(diffs, tolerance, run, original_seconds, run.random, all_dims, settings)


def default_tolerance(dtype: np.dtype) -> tuple[float, str]:
    """The tolerance an output of ``dtype`` is held to by default, and how it was chosen."""
    name = np.dtype(dtype).name
    if name in TOLERANCES:
        tol = TOLERANCES[name]
        return tol, (f"{name} default" if name in ("float32", "float64") else
                     f"{name} default ({EPS_FACTOR} eps)")
    if is_extra_float(np.dtype(dtype)):
        import ml_dtypes
        eps = float(ml_dtypes.finfo(np.dtype(dtype)).eps)
        return EPS_FACTOR * eps, f"{name} default ({EPS_FACTOR} eps)"
    return 0.0, f"{name}: equal"


def quantized_outputs(model: onnx.ModelProto) -> dict[str, float]:
    """Graph outputs made by a quantisation op: a ``DequantizeLinear`` output -> its largest
    scale (one quantisation step) when the scale is a constant, a ``QuantizeLinear`` output
    -> -1 (its integer codes may differ by one)."""
    consts = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    consts[node.output[0]] = a.t
    made = {o: n for n in model.graph.node for o in n.output}
    out: dict[str, float] = {}
    for vi in model.graph.output:
        node = made.get(vi.name)
        if node is None or node.domain not in ("", "ai.onnx", "com.microsoft"):
            continue
        if node.op_type == "QuantizeLinear":
            out[vi.name] = -1.0
        elif node.op_type == "DequantizeLinear" and len(node.input) > 1 \
                and node.input[1] in consts:
            scale = onnx.numpy_helper.to_array(consts[node.input[1]]).astype(np.float64)
            if scale.size:
                out[vi.name] = float(np.abs(scale).max())
    return out


def compare(name: str, got, want, tolerance: float | None = None, *,
            step: float = 0.0, rtol: float | None = None,
            atol: float | None = None) -> OutputDiff:
    """One output's differences (see the module docstring for the pass rule).

    ``tolerance`` None: the dtype's default.  ``step`` > 0: one quantisation step allowed on
    top (an output a ``DequantizeLinear`` makes); -1: integer codes may differ by one (an
    output a ``QuantizeLinear`` makes).  ``rtol``/``atol``: ``numpy.allclose``'s rule (the one
    not given: the tolerance)."""
    want = np.asarray(want)
    tol, rule = ((tolerance, "given") if tolerance is not None else default_tolerance(want.dtype))
    close = rtol is not None or atol is not None
    r_tol = rtol if rtol is not None else tol
    a_tol = atol if atol is not None else tol
    if close:
        rule = "rtol/atol given" if rtol is not None and atol is not None else \
            f"{'rtol' if rtol is not None else 'atol'} given, the other {rule}"
    if step > 0:
        rule += f" + one quantisation step ({step:.3g})"
    elif step < 0:
        rule = "quantised codes: within 1"
    plus = f" + {step:.3g}" if step > 0 else ""
    exact = want.dtype.kind in "biu" or not (want.dtype.kind in "fc" or is_extra_float(want.dtype))
    criterion = ("|a-b| <= 1" if step < 0 else "a == b" if exact else
                 f"|a-b| <= {a_tol:.3g}{plus} + {r_tol:.3g}*|b|" if close else
                 f"|a-b| <= {tol:.3g}*max(1,|b|){plus}")

    def diff_of(*args, **kwargs) -> OutputDiff:
        return OutputDiff(*args, tolerance=tol, rule=rule, criterion=criterion, **kwargs)

    def failed(note: str) -> OutputDiff:
        return diff_of(name, want.shape, str(want.dtype), math.inf, math.inf, math.inf,
                       False, note, worst=math.inf)
    if got is None:
        return failed("not produced by the partition")
    got = np.asarray(got)
    if got.shape != want.shape:
        return failed(f"shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        return failed(f"dtype {got.dtype}, expected {want.dtype}")
    if want.size == 0:
        return diff_of(name, want.shape, str(want.dtype), 0.0, 0.0, 0.0, True, "")
    numeric = want.dtype.kind in "biufc" or is_extra_float(want.dtype)
    if not numeric:                              # strings, objects: equal or not
        same = bool(np.array_equal(got, want))
        bad = 0.0 if same else math.inf
        return diff_of(name, want.shape, str(want.dtype), bad, bad, bad, same,
                       "" if same else "values differ", worst=bad)
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
        err = np.maximum(diff - max(step, 0.0), 0.0) / np.maximum(1.0, ref)
        allowed = (a_tol + max(step, 0.0) + r_tol * ref if close else
                   max(step, 0.0) + tol * np.maximum(1.0, ref))
        ratio = np.where(diff == 0, 0.0, np.where(allowed > 0, diff / allowed, np.inf))
    max_abs, max_rel, error = float(diff.max()), float(rel.max()), float(err.max())
    worst = float(ratio.max())
    note = ""
    if (nan_a != nan_b).any():
        note = f"NaN in {int((nan_a != nan_b).sum())} place(s) on one side only"
    if want.dtype.kind in "biu":                  # exact types: equal (codes: within one)
        ok = bool(max_abs <= 1) if step < 0 else bool(np.array_equal(got, want))
        worst = (max_abs if step < 0 else (0.0 if ok else math.inf))
        if not ok and not note:
            note = f"{int((got != want).sum())} element(s) differ"
    elif close:
        ok = bool((diff <= allowed).all())
    else:
        ok = error <= tol
    return diff_of(name, want.shape, str(want.dtype), max_abs, max_rel, error, ok, note,
                   worst=worst)


def _read(model) -> tuple[onnx.ModelProto, str]:
    proto, path, _ = read_model(model)
    return proto, path if path != "<model>" else "the model"


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
