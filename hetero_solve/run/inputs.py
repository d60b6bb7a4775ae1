"""Inputs of a run: what the parts (or the original model) declare, random values of the
declared dtype and shape, and checks of the values a user gives (``--input``, ``--dim``,
``--shape``, ``--input-range``)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from ..readers import check_regular
from .common import InputShapeError, RunError, ort_line
from .manifest import load_manifest, load_part_model

#: Random integer inputs (token ids, indices, counts) are drawn from ``[0, INT_HIGH)``: small
#: and non-negative, so that they index any embedding table and bound any loop.
INT_HIGH = 10


@dataclass(frozen=True)
class InputSpec:
    """A model input as declared: element type (ONNX enum) and shape (ints, names, None).
    ``index_bound``: for an integer input the model uses as indices (``Gather`` into a table of
    that many rows, ...), random values stay in ``[0, index_bound)``.  ``compared``: for a
    single integer (a sample rate) that the model compares with constants, those constants
    (:func:`compared_values`): its value is the first of them."""
    name: str
    elem_type: int
    shape: tuple | None
    index_bound: int | None = None
    compared: tuple | None = None


def part_input_specs(out_dir: str | os.PathLike, manifest: dict | None = None) -> list[InputSpec]:
    """The graph inputs the parts read, typed as the first part reading each declares them."""
    out_dir = Path(out_dir)
    manifest = manifest if manifest is not None else load_manifest(out_dir)
    wanted = list(manifest["graph_inputs"])
    found: dict[str, InputSpec] = {}
    models = sorted(manifest["partitions"], key=lambda p: p["id"])
    direct = manifest.get("direct_outputs")
    if direct and direct.get("inputs"):   # graph inputs passed straight to the outputs
        models.append({"id": "direct outputs", "inputs": direct["inputs"], "file": direct["file"]})
    graphs = []
    declared: dict[str, onnx.ValueInfoProto] = {}
    for part in models:
        model = load_part_model(out_dir, part, load_external_data=False)
        graphs.append(model.graph)
        for vi in model.graph.input:
            if vi.name in wanted and vi.name in part["inputs"] and vi.name not in found:
                found[vi.name] = spec_of(vi)
                declared[vi.name] = vi
    bounds = graphs_index_bounds(graphs, list(declared.values()))
    compared = compared_values(graphs, list(declared.values()))
    return [dataclasses.replace(found[x], index_bound=bounds.get(x), compared=compared.get(x))
            for x in wanted if x in found]


def model_input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The inputs a model must be fed (initializers excluded), with the index bounds the
    model implies (:func:`index_bounds`)."""
    inits = {t.name for t in model.graph.initializer}
    bounds = index_bounds(model)
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    compared = compared_values([model.graph], inputs)
    return [dataclasses.replace(spec_of(vi), index_bound=bounds.get(vi.name),
                                compared=compared.get(vi.name))
            for vi in inputs]


#: Ops that pass an integer tensor's values on unchanged (position 0 is the data), so an index
#: read after them is still the input's value.
_VALUE_PRESERVING = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity",
                               "Expand", "Slice", "Transpose", "Tile", "Gather", "Concat"})
#: (op, input position) that index into another tensor, with the data input and axis rule.
_INDEXING = {("Gather", 1), ("GatherElements", 1), ("GatherND", 1)}


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Integer graph inputs the model uses as indices, with the number of values they may take:
    an input read (directly, or through ops that keep its values: Cast, Reshape, Unsqueeze...)
    as the indices of a ``Gather``, ``GatherElements`` or ``GatherND`` whose data has a known
    size along the indexed axis (an embedding table: token ids, ``token_type_ids``).  The
    bound is the smallest such size; inputs without one are absent."""
    inits = {t.name for t in model.graph.initializer}
    return graphs_index_bounds([model.graph],
                               [vi for vi in model.graph.input if vi.name not in inits])


def graphs_index_bounds(graphs: Sequence[onnx.GraphProto],
                        inputs: Sequence[onnx.ValueInfoProto]) -> dict[str, int]:
    """:func:`index_bounds` over graphs that pass tensors to each other by name (the parts of
    a partition): an input cast in one part may index a table in the next."""
    sizes: dict[str, tuple] = {}
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for graph in graphs:
        sizes.update((t.name, tuple(t.dims)) for t in graph.initializer)
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            spec = spec_of(vi)
            if spec.shape is not None and vi.name not in sizes:
                sizes[vi.name] = spec.shape
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for a in node.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                        sizes[node.output[0]] = tuple(a.t.dims)
            for k, x in enumerate(node.input):
                if x:
                    readers.setdefault(x, []).append((node, k))
    out: dict[str, int] = {}
    for vi in inputs:
        if numpy_kind(vi.type.tensor_type.elem_type) not in ("i", "u"):
            continue
        bound = None
        seen, todo = {vi.name}, [vi.name]
        while todo:
            name = todo.pop()
            for node, k in readers.get(name, ()):
                if (node.op_type, k) in _INDEXING:
                    size = _indexed_size(node, sizes.get(node.input[0]))
                    if size is not None:
                        bound = size if bound is None else min(bound, size)
                elif node.op_type in _VALUE_PRESERVING and (k == 0 or node.op_type == "Concat"):
                    for y in node.output:
                        if y and y not in seen:
                            seen.add(y)
                            todo.append(y)
        if bound is not None and bound > 0:
            out[vi.name] = bound
    return out


#: Ops that pass a single value on unchanged, for :func:`compared_values`.
_SCALAR_PRESERVING = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                "Identity", "Expand"})


def compared_values(graphs: Sequence[onnx.GraphProto],
                    inputs: Sequence[onnx.ValueInfoProto]) -> dict[str, tuple]:
    """Integer inputs holding one value (rank 0, or every dim 1) that the model tests for
    equality with constants (``Equal(sr, 16000)`` choosing a VAD's branch for its sample
    rate), read directly or through ops that keep the value (Cast, Reshape, Unsqueeze...):
    input -> those constants, in the order the nodes come, each once.  Such an input is a
    setting, not data: a random value takes a branch the model was not made to run (or none)."""
    consts: dict[str, np.ndarray] = {}
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for graph in graphs:
        for t in graph.initializer:
            if math.prod(t.dims) == 1:
                consts[t.name] = numpy_helper.to_array(t)
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for a in node.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR \
                            and math.prod(a.t.dims) == 1:
                        consts[node.output[0]] = numpy_helper.to_array(a.t)
            for k, x in enumerate(node.input):
                if x:
                    readers.setdefault(x, []).append((node, k))
    out: dict[str, tuple] = {}
    for vi in inputs:
        spec = spec_of(vi)
        if numpy_kind(spec.elem_type) not in ("i", "u") or spec.shape is None \
                or any(d != 1 for d in spec.shape):
            continue
        found: list = []
        seen, todo = {vi.name}, [vi.name]
        while todo:
            name = todo.pop(0)
            for node, k in readers.get(name, ()):
                if node.op_type == "Equal" and len(node.input) == 2:
                    other = consts.get(node.input[1 - k])
                    if other is not None and other.dtype.kind in "iuf" \
                            and float(other.reshape(-1)[0]).is_integer():
                        value = int(other.reshape(-1)[0])
                        if value not in found:
                            found.append(value)
                elif node.op_type in _SCALAR_PRESERVING and k == 0:
                    for y in node.output:
                        if y and y not in seen:
                            seen.add(y)
                            todo.append(y)
        if found:
            out[vi.name] = tuple(found)
    return out


def _indexed_size(node: onnx.NodeProto, data_shape: tuple | None) -> int | None:
    """How many values the indices of ``node`` may take, when the data's size is known."""
    if not data_shape:
        return None
    if node.op_type == "GatherND":
        known = [d for d in data_shape if isinstance(d, int) and d > 0]
        return min(known) if known else None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    if axis < 0:
        axis += len(data_shape)
    if not 0 <= axis < len(data_shape):
        return None
    size = data_shape[axis]
    return size if isinstance(size, int) and size > 0 else None


def numpy_kind(elem_type: int) -> str:
    """numpy's kind letter of an ONNX element type ('f', 'i', 'u', 'b', ...; '' if none)."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).kind
    except Exception:
        return ""


def spec_of(vi: onnx.ValueInfoProto) -> InputSpec:
    t = vi.type
    if not t.HasField("tensor_type"):
        return InputSpec(vi.name, 0, None)
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return InputSpec(vi.name, tt.elem_type, None)
    shape = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            shape.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            shape.append(d.dim_param)
        else:
            shape.append(None)
    return InputSpec(vi.name, tt.elem_type, tuple(shape))


def numpy_dtype(elem_type: int, name: str) -> np.dtype:
    try:
        if elem_type == onnx.TensorProto.STRING:
            return np.dtype(object)
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        kind = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "unknown"
        raise RunError(f"input {name!r} has element type {kind}, which numpy cannot "
                       "represent: this runner feeds numpy arrays only") from None


def concrete_shape(spec: InputSpec, dims: Mapping[str, int]) -> tuple[int, ...]:
    """The shape of ``spec`` with symbolic dimensions replaced by ``dims``; a clear error
    when one is unknown."""
    if spec.shape is None:
        raise RunError(f"input {spec.name!r} has no declared shape: pass it with "
                       f"--input {spec.name}=FILE.npy")
    out = []
    for i, d in enumerate(spec.shape):
        if isinstance(d, int) and d >= 0:   # a declared negative size says nothing
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        elif isinstance(d, str):
            raise RunError(f"input {spec.name!r}: dimension {i} is {d!r}, which has no value: "
                           f"give --dim {d}=VALUE or --input {spec.name}=FILE.npy")
        else:
            raise RunError(f"input {spec.name!r}: dimension {i} has no size: "
                           f"pass it with --input {spec.name}=FILE.npy")
    return tuple(out)


def check_dims(built: Mapping[str, int], dims: Mapping[str, int] | None) -> dict[str, int]:
    """``built`` (the manifest's dims: what the partition was made for) with ``dims`` added;
    a dimension given a different value than the partition was built for is an error (its
    shapes were folded for that value)."""
    out = dict(built)
    for name, value in (dims or {}).items():
        if name in built and int(built[name]) != int(value):
            raise RunError(f"--dim {name}={value}: the partition was built for {name}="
                           f"{built[name]} (partition.json dims); solve again with "
                           f"--dim {name}={value} to run it with that size")
        out[name] = int(value)
    return out


#: Most elements a generated input may have (4 GiB of float32).
RANDOM_ELEMENTS = 1 << 30


def random_inputs(specs: Iterable[InputSpec], dims: Mapping[str, int] | None = None, *,
                  seed: int = 0, ranges: Mapping[str, tuple[float, float]] | None = None
                  ) -> dict[str, np.ndarray]:
    """Inputs of the declared dtype and shape: floats ~ N(0, 1); integers in
    ``[0, spec.index_bound)`` when the model uses them as indices (token ids into an embedding
    table), else in ``[0, INT_HIGH)``; bools fair coins; strings short words.  ``ranges``:
    name -> (low, high), values uniform in ``[low, high]`` (``--input-range``).
    Deterministic for a ``seed``."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    ranges = dict(ranges or {})
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        dtype = numpy_dtype(spec.elem_type, spec.name)
        shape = concrete_shape(spec, dims)
        if math.prod(shape) > RANDOM_ELEMENTS:
            raise RunError(f"input {spec.name!r} has {math.prod(shape):,} elements (shape "
                           f"{shape}), too many to generate: pass it with --input "
                           f"{spec.name}=FILE.npy")
        if spec.name in ranges and (dtype.kind in "iufb" or is_extra_float(dtype)):
            low, high = ranges[spec.name]
            if dtype.kind in "iub":
                value = rng.integers(math.ceil(low), math.floor(high) + 1, size=shape)
            else:
                value = rng.uniform(low, high, size=shape)
            value = value.astype(dtype)
        elif dtype == np.bool_:
            value = rng.random(shape) < 0.5
        elif dtype.kind in "iu" and spec.compared:
            value = np.full(shape, spec.compared[0], dtype=dtype)
        elif dtype.kind in "iu":
            high = spec.index_bound if spec.index_bound is not None else INT_HIGH
            value = rng.integers(0, high, size=shape).astype(dtype)
        elif dtype.kind in "fc" or is_extra_float(dtype):
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "O":
            words = np.array(["alpha", "beta", "gamma", "delta"], dtype=object)
            value = words[rng.integers(0, len(words), size=shape)]
        else:
            raise RunError(f"input {spec.name!r}: cannot generate values of dtype {dtype}")
        feeds[spec.name] = np.asarray(value)
    return feeds


def describe_random(specs: Iterable[InputSpec], dims: Mapping[str, int] | None = None,
                    ranges: Mapping[str, tuple[float, float]] | None = None) -> dict[str, str]:
    """How :func:`random_inputs` draws each input: name -> ``"int64 () from 0..9"`` (dtype,
    shape, values), for the line that says which inputs were random."""
    ranges = dict(ranges or {})
    out: dict[str, str] = {}
    for spec in specs:
        dtype = numpy_dtype(spec.elem_type, spec.name)
        try:
            shape = "(" + ",".join(map(str, concrete_shape(spec, dims or {}))) + ")"
        except RunError:
            shape = "(?)"
        if spec.name in ranges and (dtype.kind in "iufb" or is_extra_float(dtype)):
            low, high = ranges[spec.name]
            how = (f"from {math.ceil(low)}..{math.floor(high)}" if dtype.kind in "iub"
                   else f"uniform in {low:g}..{high:g}")
        elif dtype == np.bool_:
            how = "true or false"
        elif dtype.kind in "iu" and spec.compared:
            how = (f"{spec.compared[0]} (the model compares it with "
                   f"{', '.join(map(str, spec.compared))})")
        elif dtype.kind in "iu":
            high = spec.index_bound if spec.index_bound is not None else INT_HIGH
            how = f"from 0..{high - 1}"
        elif dtype.kind in "fc" or is_extra_float(dtype):
            how = "standard normal"
        else:
            how = "short words"
        out[spec.name] = f"{dtype.name} {shape} {how}"
    return out


class RandomInputsError(RunError):
    """A run on random inputs failed (a model that needs particular values: a sample rate, a
    count): the runtime's message, then the inputs that were random and how they were drawn
    (``random``: name -> description, :func:`describe_random`)."""

    def __init__(self, error: BaseException, random: Mapping[str, str]):
        self.error = error
        self.random = dict(random)
        shown = "; ".join(f"{k} {v}" for k, v in self.random.items())
        super().__init__(f"{error} (random inputs: {shown}; a model that needs particular "
                         "values in them must be given those values)")


def check_ranges(ranges: Mapping[str, tuple[float, float]] | None,
                 specs: Sequence[InputSpec]) -> None:
    """``--input-range`` names must be inputs; low <= high, both finite."""
    names = [s.name for s in specs]
    for name, (low, high) in (ranges or {}).items():
        if name not in names:
            raise RunError(f"--input-range {name}: no such input (inputs: "
                           f"{', '.join(names) or 'none'})")
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise RunError(f"--input-range {name}={low:g},{high:g}: expected finite LO <= HI")


def check_inputs(specs: Sequence[InputSpec], feeds: Mapping[str, np.ndarray],
                 dims: Mapping[str, int] | None = None, *, where: str = "the partition") -> None:
    """Given inputs must be known names, of the declared dtype, rank and static sizes."""
    by_name = {s.name: s for s in specs}
    unknown = [x for x in feeds if x not in by_name]
    if unknown:
        raise RunError(f"unknown input {unknown[0]!r}: {where} takes "
                       f"{', '.join(repr(s.name) for s in specs) or 'no inputs'}")
    dims = dims or {}
    for name, value in feeds.items():
        spec = by_name[name]
        value = np.asarray(value)
        if spec.elem_type:
            want = numpy_dtype(spec.elem_type, name)
            ok = (value.dtype.kind in "OUS") if want.kind == "O" else value.dtype == want
            if not ok:
                raise RunError(f"input {name!r} is {value.dtype}, {where} expects {want}")
        if spec.shape is None:
            continue
        if value.ndim != len(spec.shape):
            raise RunError(f"input {name!r} has shape {tuple(value.shape)}, {where} expects "
                           f"rank {len(spec.shape)} {_show_shape(spec.shape)}")
        for i, (got, want) in enumerate(zip(value.shape, spec.shape)):
            fixed = (want if isinstance(want, int) and want >= 0 else
                     dims.get(want) if isinstance(want, str) else None)
            if fixed is not None and got != fixed:
                raise InputShapeError(name, value.shape, spec.shape, i,
                                      want if isinstance(want, str) else None, dict(dims))


def is_extra_float(dtype: np.dtype) -> bool:
    """Floats numpy has no kind letter for (bfloat16, float8: ``ml_dtypes``, which onnx maps
    those element types to)."""
    return dtype.kind == "V" and dtype.name.startswith(("bfloat", "float8", "float4"))


def check_shapes(built: Mapping[str, Sequence[int]] | None,
                 shapes: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]]:
    """The whole input shapes the partition was solved for (``partition.json``'s
    ``input_shapes``) with ``shapes`` (``--shape``) added; a shape different from the one the
    partition was built for is an error (its shape chains were folded for that one)."""
    out = {name: [int(d) for d in dims] for name, dims in (built or {}).items()}
    for name, dims in (shapes or {}).items():
        dims = [int(d) for d in dims]
        if name in out and out[name] != dims:
            raise RunError(f"--shape {name}={','.join(map(str, dims))}: the partition was built "
                           f"for {name}={','.join(map(str, out[name]))} (partition.json "
                           f"input_shapes); solve again with that --shape to run it")
        out[name] = dims
    return out


def with_shapes(specs: Sequence[InputSpec], shapes: Mapping[str, Sequence[int]],
                dims: Mapping[str, int] | None = None, *,
                given: Iterable[str] = ()) -> list[InputSpec]:
    """``specs`` with the whole shapes of ``shapes`` in place of the declared ones.

    A whole shape must agree with the declaration (rank, fixed sizes, dims with a value).
    Names in ``given`` (those the user passed with ``--shape``) must be inputs; other names
    (the manifest's, for an input no part reads) are skipped."""
    by_name = {s.name: s for s in specs}
    for name in given:
        if name not in by_name:
            raise RunError(f"--shape {name}: no such input (inputs: "
                           f"{', '.join(by_name) or 'none'})")
    dims = dims or {}
    out = []
    for spec in specs:
        whole = shapes.get(spec.name)
        if whole is None:
            out.append(spec)
            continue
        whole = tuple(int(d) for d in whole)
        declared = spec.shape
        if declared is not None and len(declared) != len(whole):
            raise RunError(f"--shape {spec.name}={','.join(map(str, whole))}: the input has "
                           f"rank {len(declared)} {_show_shape(declared)}")
        for i, (want, got) in enumerate(zip(declared or (), whole)):
            fixed = (want if isinstance(want, int) and want >= 0 else
                     dims.get(want) if isinstance(want, str) else None)
            if fixed is not None and fixed != got:
                raise RunError(f"--shape {spec.name}={','.join(map(str, whole))}: dimension {i} "
                               f"is {fixed} {_show_shape(declared)}")
        out.append(dataclasses.replace(spec, shape=whole))
    return out


def _show_shape(shape: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def load_npy(path: str | os.PathLike, name: str = "") -> np.ndarray:
    """A ``.npy`` file, or a one-line error naming it."""
    path = Path(path)
    label = f"input {name!r}: " if name else ""
    check_regular(path, lambda why: RunError(f"{label}{path}: {why}"))   # a FIFO would block
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise RunError(f"{label}{path}: not a .npy array ({ort_line(e)})") from None
