"""Shapes as SPEC section 3 defines them: ONNX shape inference with data propagation after
``dims`` are substituted and foldable nodes folded, repeated until nothing changes.

The inference runs on a light copy of the model: initializers with more than
``STRIP_ELEMENTS`` elements keep their type and dims but not their data (inference reads the
values of small integer tensors only), which keeps the copy cheap for large models and under
protobuf's 2 GiB limit.
"""

from __future__ import annotations

from contextlib import contextmanager

import onnx
from onnx import numpy_helper
from onnx import shape_inference as _onnx_inference

_cpp_inference = getattr(_onnx_inference, "C", None)   # onnx's bytes-in, bytes-out entry point

from ..units import element_bits
from .fold import (constants_before_folding, evaluate_folded, find_foldable, folded_outputs,
                   folded_readers, prediction_holds)
from .graph import ModelGraph, TensorType, type_of_value_info
from .wire import declared_types

STRIP_ELEMENTS = 4096
SMALL_FLOAT_ELEMENTS = 64
MAX_ROUNDS = 5


def first_inference(model: onnx.ModelProto, dims: dict[str, int]) -> onnx.ModelProto:
    """Shape inference with data propagation after ``dims`` are substituted (raises on
    failure).  Runs on the model itself, restored afterwards, unless large initializers call
    for the light copy."""
    if sum(len(t.raw_data) for t in model.graph.initializer) < LIGHT_COPY_BYTES:
        with _dims_substituted(model, dims):
            return onnx.shape_inference.infer_shapes(model, data_prop=True)
    return onnx.shape_inference.infer_shapes(_inference_base_of(model, dims), data_prop=True)


def forked_first_inference(model: onnx.ModelProto, dims: dict[str, int]) -> bytes:
    """:func:`first_inference`, serialised: what the forked process sends back.

    **Destroys weights**: it must only be given a forked child's own copy of the model.
    Floating-point initializers above ``SMALL_FLOAT_ELEMENTS`` elements lose their data in
    place, and the result stays bytes from end to end, so neither side serialises, parses or
    pipes the weights (half the child's time at 100,000 nodes).  Inference reads integer
    tensors (data propagation through Gather, Concat, Slice...) and a few tiny floating-point
    ones (``Resize``/``Upsample`` scales, ``Range`` bounds); integers are kept as
    :func:`first_inference` keeps them (all of them, or up to ``STRIP_ELEMENTS`` elements in
    the light copy of a model over ``LIGHT_COPY_BYTES``), so both give the same shapes."""
    graph = model.graph
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer) \
            or not hasattr(_cpp_inference, "infer_shapes"):
        return first_inference(model, dims).SerializeToString()
    light = sum(len(t.raw_data) for t in graph.initializer) >= LIGHT_COPY_BYTES
    for t in graph.initializer:
        dtype = t.data_type
        if dtype in _FLOAT_TYPES:
            # Weights are raw bytes: their element count is their length, no dims to multiply
            # (a hundred thousand initializers: 1 s in Python for the dims alone).
            raw, bits = len(t.raw_data), element_bits(dtype)
            strip = raw * 8 > SMALL_FLOAT_ELEMENTS * bits if raw and bits \
                else _elements(t) > SMALL_FLOAT_ELEMENTS
        else:
            strip = light and dtype != onnx.TensorProto.STRING and _elements(t) > STRIP_ELEMENTS
        if strip:
            if t.HasField("raw_data"):   # the usual case: one field to clear
                t.ClearField("raw_data")
            else:
                for field in _DATA_FIELDS:
                    t.ClearField(field)
    _substitute_all(model, dims)
    return _cpp_inference.infer_shapes(model.SerializeToString(), False, False, True)


_FLOAT_TYPES = frozenset(t for t in onnx.TensorProto.DataType.values()
                         if onnx.TensorProto.DataType.Name(t).startswith(("FLOAT", "DOUBLE", "BFLOAT",
                                                                          "COMPLEX")))
_DATA_FIELDS = ("float_data", "int32_data", "int64_data", "double_data",
                "uint64_data", "string_data")


def _elements(t: onnx.TensorProto) -> int:
    count = 1
    for d in t.dims:
        count *= d
    return count


def analyse_shapes(mg: ModelGraph, *, fold: bool = True,
                   inferred: onnx.ModelProto | bytes | None = None) -> None:
    """Fill ``mg``'s tensor types, ``folded`` and ``constant_tensors`` in place.  ``inferred``:
    the first inference when it was already run (serialised, by a forked process)."""
    _unused_dims(mg)
    folded: list[int] = []
    held = None          # the fold prediction, while ``folded`` is what it predicted
    if inferred is None:
        try:
            inferred = first_inference(mg.model, mg.dims)
        except Exception as e:  # a custom op without inference, an inconsistent declared shape
            inferred = _inference_failed(mg, mg.model, e)
    _index_types(mg, inferred)
    indexed = inferred
    base: onnx.ModelProto | None = None
    hints = control_flow_hints(mg)
    if hints:
        base = _inference_base(mg)
        base.graph.value_info.extend(hints)
        inferred = _infer(mg, base)
    for _round in range(MAX_ROUNDS):
        if inferred is not indexed:   # a new inference (folded values are indexed with it)
            _index_types(mg, inferred)
            indexed = inferred
        if not fold:
            break
        prediction = mg._fold_prediction if _round == 0 else None
        if prediction is not None and prediction_holds(mg, prediction.folded):
            new = list(prediction.folded)     # predicted while shapes were inferred (structure.py)
            held = prediction
        else:
            new = find_foldable(mg)
            held = None
        grown = len(new) > len(folded)
        folded = new
        mg.folded = folded
        if not grown:
            break
        dynamic_inputs = _folded_inputs_of_dynamic_nodes(
            mg, held.folded_readers if held is not None else None)
        open_folded = {o for i in folded for o in mg.outputs[i] if o and not mg.tensor_type(o).static}
        if not dynamic_inputs and not open_folded:
            break
        # Folded values give their own shapes exactly (open_folded), and may fix shapes inference
        # left open downstream (a Range of constants, say): then feed them in and infer again.
        values = evaluate_folded(mg, dynamic_inputs | open_folded)
        if not dynamic_inputs:
            mg.index_folded_types()
            break
        base = base or _inference_base(mg)
        dropped = {i for i in folded if all(not o or o in values for o in mg.outputs[i])}
        inferred = _infer(mg, _with_folded(base, dropped, values))
        kept = [i for i in range(len(mg.names)) if i not in dropped]
        mg._inferred_index = {i: j for j, i in enumerate(kept) if mg.has_subgraph[i]}
    else:
        _index_types(mg, inferred)
    mg.folded = folded
    mg.constant_tensors = set(held.constants) if held is not None else _constant_tensors(mg)
    mg.inferred = inferred


def _inference_base(mg: ModelGraph) -> onnx.ModelProto:
    return _inference_base_of(mg.model, mg.dims)


def _inference_base_of(src: onnx.ModelProto, dims: dict[str, int]) -> onnx.ModelProto:
    """A copy of the model with big initializers emptied and ``dims`` substituted."""
    m = onnx.ModelProto()
    m.ir_version = src.ir_version
    m.opset_import.extend(src.opset_import)
    m.functions.extend(src.functions)
    g = m.graph
    g.name = src.graph.name
    g.node.extend(src.graph.node)
    g.input.extend(src.graph.input)
    g.output.extend(src.graph.output)
    g.value_info.extend(src.graph.value_info)
    g.sparse_initializer.extend(src.graph.sparse_initializer)
    for t in src.graph.initializer:
        g.initializer.append(_light(t))
    _substitute_all(m, dims)
    return m


LIGHT_COPY_BYTES = 1 << 30


def _dim_protos(model: onnx.ModelProto):
    """Every dimension of the declared inputs, outputs and value infos, subgraphs included."""
    graphs = [model.graph]
    while graphs:
        g = graphs.pop()
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                yield from vi.type.tensor_type.shape.dim
        for node in g.node:
            if node.op_type in ("If", "Loop", "Scan", "SequenceMap") or node.domain not in ("", "ai.onnx"):
                for a in node.attribute:
                    if a.type == onnx.AttributeProto.GRAPH:
                        graphs.append(a.g)
                    elif a.type == onnx.AttributeProto.GRAPHS:
                        graphs.extend(a.graphs)


def _substitute_all(model: onnx.ModelProto, dims: dict[str, int]) -> list:
    """Replace symbolic dims by their values; returns what to restore."""
    changed = []
    if not dims:
        return changed
    for d in _dim_protos(model):
        if d.HasField("dim_param") and d.dim_param in dims:
            changed.append((d, d.dim_param))
            d.dim_value = int(dims[d.dim_param])
    return changed


@contextmanager
def _dims_substituted(model: onnx.ModelProto, dims: dict[str, int]):
    changed = _substitute_all(model, dims)
    try:
        yield
    finally:
        for d, param in changed:
            d.dim_param = param


def _light(t: onnx.TensorProto) -> onnx.TensorProto:
    if _elements(t) <= STRIP_ELEMENTS or t.data_type == onnx.TensorProto.STRING:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            return numpy_helper.from_array(numpy_helper.to_array(t), t.name)
        return t
    light = onnx.TensorProto()
    light.name = t.name
    light.data_type = t.data_type
    light.dims.extend(t.dims)
    return light


def _unused_dims(mg: ModelGraph) -> None:
    if not mg.dims:
        return
    used = set()
    for vi in mg.model.graph.input:
        if vi.type.HasField("tensor_type"):
            used.update(d.dim_param for d in vi.type.tensor_type.shape.dim if d.HasField("dim_param"))
    unused = sorted(set(mg.dims) - used)
    if unused:
        mg.warnings.append(f"dims {', '.join(unused)} name no symbolic dimension of the model's "
                           f"inputs (it has: {', '.join(sorted(used)) or 'none'})")


def _infer(mg: ModelGraph, model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:  # a custom op without inference, an inconsistent declared shape
        return _inference_failed(mg, model, e)


def _inference_failed(mg: ModelGraph, model: onnx.ModelProto, e: Exception) -> onnx.ModelProto:
    first = " ".join(str(e).split())[:300]
    mg.warnings.append(f"shape inference failed, using the shapes the model declares: {first}")
    return model


def _index_types(mg: ModelGraph, inferred: onnx.ModelProto | bytes) -> None:
    mg.index_types(*declared_types(inferred))


def control_flow_hints(mg: ModelGraph) -> list[onnx.ValueInfoProto]:
    """Ranks ONNX inference leaves open on ``Loop`` and ``Scan`` outputs.

    A loop-carried output has the rank of its initial value (dims: the body output's where
    known); a ``Loop`` scan output adds a leading iteration axis to the body's.  Without this,
    ``h = Loop(...)`` has no shape and every node after it loses its rank, and a part boundary of
    unknown rank cannot be declared in a sub-model that ``onnx.checker`` accepts.
    """
    hints = []
    for i, op in enumerate(mg.op_types):
        if op != "Loop" or mg.domains[i] not in ("", "ai.onnx"):
            continue
        outs = mg.outputs[i]
        if all(not o or mg.tensor_type(o).rank is not None for o in outs):
            continue
        node = mg.model.graph.node[i]
        body = next(a.g for a in node.attribute if a.name == "body")
        body_outs = [_with_dims(type_of_value_info(vi), mg.dims) for vi in body.output[1:]]
        carried = len(node.input) - 2
        for j, o in enumerate(outs):
            if not o or mg.tensor_type(o).rank is not None or j >= len(body_outs):
                continue
            b = body_outs[j]
            if j < carried:
                init = mg.tensor_type(node.input[2 + j])
                rank = init.rank if init.rank is not None else b.rank
                if rank is None:
                    continue
                dims = [d if isinstance(d, int) else None for d in (b.shape or [None] * rank)]
                if len(dims) != rank:
                    dims = [None] * rank
                elem = init.elem_type or b.elem_type
            else:
                if b.rank is None:
                    continue
                dims = [None] + [d if isinstance(d, int) else None for d in b.shape]
                elem = b.elem_type
            hints.append(onnx.helper.make_tensor_value_info(o, elem, dims))
    return hints


def _with_dims(t: TensorType, dims: dict[str, int]) -> TensorType:
    if t.shape is None or not dims:
        return t
    return TensorType(t.elem_type, tuple(dims.get(d, d) if isinstance(d, str) else d for d in t.shape))


def _folded_inputs_of_dynamic_nodes(mg: ModelGraph,
                                    readers: list[tuple[int, list[str]]] | None = None) -> set[str]:
    """Folded tensors read by an unfolded node with an output of unknown shape: only those
    nodes can gain from another round (their inputs just became constant values).
    ``readers``: the unfolded nodes that read folded outputs, and which, when known."""
    if readers is None:
        readers = folded_readers(mg, set(mg.folded), folded_outputs(mg, mg.folded))
    types = mg.types
    found: set[str] = set()
    for i, ins in readers:
        if any(o and not types[o].static for o in mg.outputs[i]):
            found.update(ins)
    return found


def _with_folded(base: onnx.ModelProto, dropped: set[int], values: dict) -> onnx.ModelProto:
    """``base`` without the ``dropped`` folded nodes, their values given as initializers."""
    m = onnx.ModelProto()
    m.CopyFrom(base)
    del m.graph.node[:]
    m.graph.node.extend(n for i, n in enumerate(base.graph.node) if i not in dropped)
    for name, value in values.items():
        m.graph.initializer.append(_light(numpy_helper.from_array(value, name)))
    return m


def _constant_tensors(mg: ModelGraph) -> set[str]:
    const = constants_before_folding(mg)
    const.update(folded_outputs(mg, mg.folded))
    return const

