"""Shapes as docs/rules.md defines them: ONNX shape inference with data propagation after the
graph inputs get their dims, and foldable nodes folded, repeated until nothing changes.

Step by step (:func:`analyse_shapes`):

1. The model inference runs on (:func:`prepare`): the graph inputs' symbolic dims replaced by
   the values given (``dims`` by name, ``shapes`` whole), and nothing else declared that
   inference can find itself: the declared ``value_info`` and output shapes of tensors made by
   ops that have shape inference are dropped (an exporter's stale or internal names must not
   override what inference finds); a custom op's declared outputs are kept (nothing else
   knows them).  Big initializers keep their type and dims but not their data (inference
   reads the values of small integer tensors only).
2. Inference with data propagation; then the nodes that fold with those types.
3. While folding gave values that could fix a shape inference left open (an unfolded node
   reads one and has an output whose shape is not static): infer again on the model without
   the folded nodes, with every folded value the rest reads given as an initializer.  Each
   round knows every value folded so far, so what an earlier round fixed stays fixed.
   Types ONNX leaves open that the runtime fixes are declared for that next inference too:
   control-flow outputs (:func:`control_flow_hints`), a ``Reshape``'s ``-1`` over symbolic
   dims (:func:`reshape_hints`), the axes a ``Slice`` does not slice (:func:`slice_hints`),
   shape arithmetic (:mod:`.symbolic`) and the outputs of onnxruntime's contrib ops, which ONNX
   has no schema for (:mod:`.contrib`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper
from onnx import shape_inference as _onnx_inference

from ..errors import ModelError
from ..units import element_bits
from .flatten import flatten
from .fold import FoldedValues, base_constant_value, find_foldable, folded_readers
from .graph import (GraphLists, InputDim, TensorType, TypeTable, free_names, type_of_proto,
                    type_of_value_info)
from .contrib import contrib_hints
from .symbolic import symbolic_hints
from .weights import data_bytes, elements, is_external, tensor_value

_cpp_inference = getattr(_onnx_inference, "C", None)   # onnx's bytes-in, bytes-out entry point

STRIP_ELEMENTS = 4096
SMALL_FLOAT_ELEMENTS = 64
MAX_ROUNDS = 16
LIGHT_COPY_BYTES = 1 << 30
#: dim_param spellings exporters use for "no name" (Paddle writes "?"; a value given for "?"
#: by name sets every dim so spelled).
ANONYMOUS = frozenset({"?", ""})


@dataclass
class ShapeAnalysis:
    """What shape analysis finds (the fields it gives a :class:`~.graph.ModelGraph`)."""

    types: TypeTable
    declared: dict[str, bytes]
    folded: list[int]
    constant_tensors: frozenset[str]
    nonstatic: frozenset[str]
    folded_values: FoldedValues
    subgraph_nodes: dict[int, onnx.NodeProto]
    warnings: list[str] = field(default_factory=list)


# -- the graph inputs' dims --------------------------------------------------------------------

def input_dims(model: onnx.ModelProto, path: str, dims: dict[str, int],
               shapes: dict[str, tuple[int, ...]]) -> list[InputDim]:
    """Every dimension of every graph input (initializers excluded) and its value once
    ``dims`` (by name) and ``shapes`` (whole shapes) are given.  Raises :class:`ModelError`
    when a whole shape names no input, or disagrees with the input's rank or fixed dims."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    names = [vi.name for vi in inputs]
    for name, shape in shapes.items():
        if name not in names:
            raise ModelError(path, f"--shape {name}: the model has no input {name!r} "
                                           f"(its inputs: {', '.join(names) or 'none'})")
    found = []
    for vi in inputs:
        declared = type_of_value_info(vi).shape
        whole = shapes.get(vi.name)
        if whole is not None:
            whole = tuple(int(d) for d in whole)
            if declared is not None and len(declared) != len(whole):
                raise ModelError(path, f"--shape {vi.name}: the input has rank "
                                               f"{len(declared)}, the shape given has {len(whole)} dims")
            for k, d in enumerate(declared or ()):
                if isinstance(d, int) and d != whole[k]:
                    raise ModelError(path, f"--shape {vi.name}: dim {k} of the input is "
                                                   f"{d}, the shape given says {whole[k]}")
        for k, d in enumerate(declared if declared is not None else whole or ()):
            # "?" is a name like any other once given (every "?" dim takes that value);
            # without a value it is listed as anonymous: a whole shape is the usual fix.
            name = d if isinstance(d, str) and d != "" and (d in dims or d not in ANONYMOUS) \
                else None
            value = whole[k] if whole is not None else d if isinstance(d, int) else \
                dims.get(name) if name is not None else None
            found.append(InputDim(vi.name, k, name, value))
    return found


# -- the model inference runs on ---------------------------------------------------------------

def prepare(model: onnx.ModelProto, dims: dict[str, int], shapes: dict[str, tuple[int, ...]],
            *, keep_declared: bool = False) -> None:
    """Turn ``model`` (a copy) into what inference runs on, in place: graph inputs with their
    values (``shapes`` whole, ``dims`` by name; a negative declared dim made unknown), and,
    unless ``keep_declared``, no declared shape for a tensor that an op with shape inference
    makes (its ``value_info`` dropped, a graph output's shape cleared)."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    for vi in g.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        whole = shapes.get(vi.name)
        if whole is not None:
            tt.ClearField("shape")
            for d in whole:
                tt.shape.dim.add().dim_value = int(d)
            continue
        if not tt.HasField("shape"):
            continue
        for d in tt.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims and d.dim_param != "":
                d.dim_value = int(dims[d.dim_param])
            elif d.HasField("dim_value") and d.dim_value < 0:
                d.ClearField("dim_value")
    if keep_declared:
        return
    functions = {(f.domain, f.name) for f in model.functions}
    graphs = [g]
    while graphs:   # the main graph and every subgraph
        sub = graphs.pop()
        unknown, bodies = _beyond_inference(sub, functions)
        # Inference declares every tensor an op it knows makes: only the outputs of ops it
        # does not know keep their declarations (nothing else knows them).
        kept = [vi for vi in sub.value_info if vi.name in unknown]
        if len(kept) != len(sub.value_info):
            del sub.value_info[:]
            sub.value_info.extend(kept)
        passed = {vi.name for vi in sub.input} | {t.name for t in sub.initializer}
        for vi in sub.output:
            if vi.name not in unknown and vi.name not in passed and vi.type.HasField("tensor_type"):
                vi.type.tensor_type.ClearField("shape")
        graphs.extend(bodies)


_SCHEMA_KNOWN: dict[tuple[str, str], bool] = {}
_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def _beyond_inference(graph: onnx.GraphProto, functions: set[tuple[str, str]]
                      ) -> tuple[set[str], list[onnx.GraphProto]]:
    """The outputs of the ``graph``'s nodes whose op ONNX shape inference does not know (no
    schema, not a function of the model), and the subgraphs its nodes hold."""
    unknown: set[str] = set()
    bodies: list[onnx.GraphProto] = []
    known = _SCHEMA_KNOWN
    for node, key in zip(graph.node, [(n.domain, n.op_type) for n in graph.node]):
        ok = known.get(key)
        if ok is None:
            ok = known[key] = onnx.defs.has(key[1], key[0])
        if not ok and key not in functions:
            unknown.update(node.output)
        if key[1] in _CONTROL_FLOW or key[0] not in _STANDARD_DOMAINS:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    bodies.append(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    bodies.extend(a.graphs)
    unknown.discard("")
    return unknown, bodies


def light_copy(src: onnx.ModelProto, folder: str | None = None) -> onnx.ModelProto:
    """A copy of the model whose initializers keep their type and dims but, where
    :func:`_strip` says so, not their data; an external one that keeps its data is read from
    ``folder`` (the model's)."""
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
    huge = _is_huge(src)
    g.initializer.extend(_light(t, huge, folder) for t in src.graph.initializer)
    return m


def _is_huge(model: onnx.ModelProto) -> bool:
    return sum(map(data_bytes, model.graph.initializer)) >= LIGHT_COPY_BYTES


def _strip(t: onnx.TensorProto, huge: bool) -> bool:
    """Does inference do without this initializer's data?  It reads integer tensors (data
    propagation through Gather, Concat, Slice...) and a few tiny floating-point ones
    (``Resize``/``Upsample`` scales, ``Range`` bounds): floating-point tensors above
    ``SMALL_FLOAT_ELEMENTS`` elements go, and in a ``huge`` model (over ``LIGHT_COPY_BYTES``
    of weights, near protobuf's 2 GiB limit) integer ones above ``STRIP_ELEMENTS``."""
    dtype = t.data_type
    if dtype in _FLOAT_TYPES:
        # Weights are raw bytes: their element count is their length, no dims to multiply.
        raw, bits = data_bytes(t), element_bits(dtype)
        return raw * 8 > SMALL_FLOAT_ELEMENTS * bits if raw and bits \
            else elements(t) > SMALL_FLOAT_ELEMENTS
    return huge and dtype != onnx.TensorProto.STRING and elements(t) > STRIP_ELEMENTS


def _light(t: onnx.TensorProto, huge: bool, folder: str | None = None) -> onnx.TensorProto:
    if not _strip(t, huge):
        if is_external(t):   # a small one inference may read: its value, inline
            return numpy_helper.from_array(tensor_value(t, folder), t.name)
        return t
    light = onnx.TensorProto()
    light.name = t.name
    light.data_type = t.data_type
    light.dims.extend(t.dims)
    return light


def forked_inference(model: onnx.ModelProto, dims: dict[str, int],
                     shapes: dict[str, tuple[int, ...]], folder: str | None = None) -> bytes:
    """The first inference (:func:`prepare`, then inference), serialised: what a forked
    process sends back.

    **Destroys weights**: it must only be given a forked child's own copy of the model.  The
    initializers :func:`_strip` names lose their data in place (as :func:`light_copy` drops
    them, so both give the same shapes), and the result stays bytes from end to end, so
    neither side serialises, parses or pipes the weights."""
    graph = model.graph
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer) \
            or not hasattr(_cpp_inference, "infer_shapes"):
        base = light_copy(model, folder)
        prepare(base, dims, shapes)
        return infer(base)
    huge = _is_huge(model)
    for t in graph.initializer:
        if _strip(t, huge):
            if t.HasField("raw_data"):   # the usual case: one field to clear
                t.ClearField("raw_data")
            else:
                for name in _DATA_FIELDS:
                    t.ClearField(name)
    prepare(model, dims, shapes)
    return infer(model)


_FLOAT_TYPES = frozenset(t for t in onnx.TensorProto.DataType.values()
                         if onnx.TensorProto.DataType.Name(t).startswith(("FLOAT", "DOUBLE", "BFLOAT",
                                                                          "COMPLEX")))
_DATA_FIELDS = ("float_data", "int32_data", "int64_data", "double_data",
                "uint64_data", "string_data")


def infer(model: onnx.ModelProto) -> bytes:
    """Shape inference with data propagation, serialised in and out (raises on failure)."""
    if hasattr(_cpp_inference, "infer_shapes"):
        return _cpp_inference.infer_shapes(model.SerializeToString(), False, False, True)
    return onnx.shape_inference.infer_shapes(model, data_prop=True).SerializeToString()


# -- the analysis ------------------------------------------------------------------------------

def _new_hints(graph: GraphLists, types: dict, folded: set[int], hinted: dict[str, bytes],
               constant, known_constant, subgraph_nodes) -> list:
    """The value infos every hint source gives (control flow, reshape, slice, symbolic,
    contrib ops) that inference was not already given with the same type."""
    return [vi for vi in itertools.chain(
        control_flow_hints(graph, types, subgraph_nodes, constant),
        reshape_hints(graph, types, folded),
        slice_hints(graph, types, folded, constant),
        symbolic_hints(graph, types, folded, known_constant),
        contrib_hints(graph, types))
        if hinted.get(vi.name) != vi.type.SerializeToString()]


def _close(graph: GraphLists, values: "FoldedValues", types: dict, declared: dict,
           interned: dict) -> None:
    """After the last round: a folded output inference left open gets its value's shape;
    folded outputs drop their declarations; ranks from the declarations (``types`` and
    ``declared`` updated)."""
    values.get([x for x in values.outputs if not types[x].static])
    for name, value in values.computed().items():
        types[name] = _intern(interned, onnx.helper.np_dtype_to_tensor_dtype(value.dtype),
                              tuple(value.shape))
    for name in values.outputs:
        declared.pop(name, None)
    _rank_from_declarations(graph, types, declared, interned)


def analyse_shapes(graph: GraphLists, dims: dict[str, int], shapes: dict[str, tuple[int, ...]],
                   *, fold: bool = True, first: bytes | None = None) -> ShapeAnalysis:
    """Tensor types and folded nodes of ``graph`` with the graph inputs' ``dims`` (by name)
    and ``shapes`` (whole), as the module docstring describes.  ``first``: the first
    inference when it was already run (by :func:`forked_inference`)."""
    warnings: list[str] = []
    base: onnx.ModelProto | None = None

    def inference_base() -> onnx.ModelProto:
        nonlocal base
        if base is None:
            base = light_copy(graph.model, graph.weights_dir)
            prepare(base, dims, shapes)
        return base

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        try:
            return onnx.ModelProto.FromString(infer(model))
        except Exception as e:  # a custom op without inference, an inconsistent model
            first_words = " ".join(str(e).split())[:300]
            warnings.append(f"shape inference failed, using the shapes the model declares: "
                            f"{first_words}")
            fallback = light_copy(graph.model, graph.weights_dir)
            prepare(fallback, dims, shapes, keep_declared=True)
            return fallback

    interned: dict[tuple, TensorType] = {}
    inferred = onnx.ModelProto.FromString(first) if first is not None else run(inference_base())
    types, declared = _types(graph, inferred, interned, TypeTable(graph.initializer_types))
    kept_nodes = list(range(len(graph.names)))
    values = FoldedValues(graph, [], types)
    folded: list[int] = []
    given: set[str] = set()    # the folded values inference was given, kept for every later round
    hinted: dict[str, bytes] = {}   # control-flow outputs given a type (:func:`control_flow_hints`)

    def constant(name: str) -> np.ndarray | None:
        if name in values:
            return values.get([name])[name]
        return base_constant_value(graph, name) if name in graph.base_constants else None

    def known_constant(name: str) -> np.ndarray | None:
        """A constant's value without folding anything (folding stays lazy)."""
        if name in graph.base_constants:
            return base_constant_value(graph, name)
        return values.computed().get(name) if name in values else None

    for _round in range(MAX_ROUNDS):
        if fold:
            found = sorted(set(find_foldable(graph, types)).union(folded))   # a folded value stays
            if len(found) != len(folded):
                folded = found
                values = FoldedValues(graph, folded, types, known=values.computed())
        # Inference can use a folded value where an unfolded node reads it and has an output
        # whose shape is not static.
        useful = {x for i, xs in folded_readers(graph, set(folded), values.outputs)
                  if any(o and not types[o].static for o in graph.outputs[i]) for x in xs}
        hints = _new_hints(graph, types, set(folded), hinted, constant, known_constant,
                           lambda: _subgraph_nodes(graph, inferred, kept_nodes))
        if useful <= given and not hints:
            break
        given |= useful
        hinted.update((vi.name, vi.type.SerializeToString()) for vi in hints)
        _declare(inference_base(), hints)
        known = values.get(given)
        # The folded nodes whose every output is given are dropped (their values are
        # initializers now); the others stay, and inference finds them again.
        dropped = {i for i in folded if all(not o or o in known for o in graph.outputs[i])}
        inferred = run(_without(base, dropped, known))
        kept_nodes = [i for i in range(len(graph.names)) if i not in dropped]
        types, declared = _types(graph, inferred, interned, types)
    values = FoldedValues(graph, folded, types, known=values.computed())
    _close(graph, values, types, declared, interned)
    return ShapeAnalysis(
        types=types, declared=declared, folded=folded,
        constant_tensors=frozenset(graph.base_constants | values.outputs),
        nonstatic=_nonstatic(graph, types), folded_values=values,
        subgraph_nodes=_subgraph_nodes(graph, inferred, kept_nodes), warnings=warnings)


def _rank_from_declarations(graph: GraphLists, types: TypeTable, declared: dict[str, bytes],
                            interned: dict) -> None:
    """A tensor inference left without a rank or element type takes those of the model's own
    declaration, if it has one (an ``If`` whose branches disagree, say), with every dimension
    unknown: a declaration is never trusted for a size, only for what nothing else gives."""
    g = graph.model.graph
    for vi in itertools.chain(g.value_info, g.output):
        t = types[vi.name]
        if t.rank is not None and t.elem_type:
            continue
        own = type_of_value_info(vi)
        if own.rank is None and not own.elem_type:
            continue
        rank = t.rank if t.rank is not None else own.rank
        declared.pop(vi.name, None)   # what inference said (nothing) is not the type any more
        types[vi.name] = _intern(interned, t.elem_type or own.elem_type,
                                 t.shape if rank == t.rank else (None,) * rank if rank is not None else None)


def _intern(interned: dict, elem_type: int, shape) -> TensorType:
    """One shared object per distinct type (types are compared and grouped by identity)."""
    key = (elem_type, shape)
    t = interned.get(key)
    if t is None:
        t = interned[key] = TensorType(elem_type, shape)
    return t


def _types(graph: GraphLists, inferred: onnx.ModelProto, interned: dict,
           before: TypeTable) -> tuple[TypeTable, dict[str, bytes]]:
    """The types ``before`` with what an inference declared over them (value infos, then
    inputs and outputs: later entries win), and the declared ``TypeProto`` bytes by name.
    Each distinct type is parsed once (models repeat a few dozen types over a hundred
    thousand tensors)."""
    g = inferred.graph
    infos = list(itertools.chain(g.value_info, g.input, g.output))
    names = [vi.name for vi in infos]
    type_bytes = [vi.type.SerializeToString() for vi in infos]
    parsed: dict[bytes, TensorType] = {}
    for key in set(type_bytes):
        t = type_of_proto(onnx.TypeProto.FromString(key))
        parsed[key] = _intern(interned, t.elem_type, t.shape)
    types = TypeTable(before)
    types.update(zip(names, map(parsed.__getitem__, type_bytes)))
    return types, dict(zip(names, type_bytes))


def _declare(model: onnx.ModelProto, types: list[onnx.ValueInfoProto]) -> None:
    """Declare the ``types`` in ``model``: a graph output's own entry, else a value info (an
    earlier one of the same name replaced)."""
    g = model.graph
    outputs = {vi.name: vi for vi in g.output}
    new = {vi.name: vi for vi in types}
    for name, vi in new.items():
        if name in outputs:
            outputs[name].type.CopyFrom(vi.type)
    kept = [vi for vi in g.value_info if vi.name not in new]
    del g.value_info[:]
    g.value_info.extend(kept)
    g.value_info.extend(vi for name, vi in new.items() if name not in outputs)


def _without(base: onnx.ModelProto, dropped: set[int], values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``base`` without the ``dropped`` (folded) nodes, the ``values`` they give the rest as
    initializers."""
    m = onnx.ModelProto()
    m.CopyFrom(base)
    del m.graph.node[:]
    m.graph.node.extend(n for i, n in enumerate(base.graph.node) if i not in dropped)
    for name, value in values.items():
        m.graph.initializer.append(_light(numpy_helper.from_array(value, name), False))
    return m


def _nonstatic(graph: GraphLists, types: TypeTable) -> frozenset[str]:
    """Every tensor a node reads or writes whose shape is not static (a dense initializer's
    dims are its shape, unless it is also a graph input declared with open dims)."""
    chain = itertools.chain.from_iterable
    names = set(chain(graph.inputs)).union(chain(graph.outputs))
    names.discard("")
    return frozenset(x for x in names if not types[x].static)


def _subgraph_nodes(graph: GraphLists, inferred: onnx.ModelProto,
                    kept: list[int]) -> dict[int, onnx.NodeProto]:
    """The nodes with subgraphs as the last inference returned them (``kept``: the main-graph
    index of each node it ran on)."""
    nodes = inferred.graph.node
    if len(nodes) != len(kept):   # inference failed: the model's own nodes
        return {}
    return {i: nodes[k] for k, i in enumerate(kept) if graph.has_subgraph[i]}


def control_flow_hints(graph: GraphLists, types: TypeTable,
                       inferred_nodes: Callable[[], dict[int, onnx.NodeProto]],
                       constant: Callable[[str], np.ndarray | None]) -> list[onnx.ValueInfoProto]:
    """Types ONNX inference leaves open on control-flow outputs that the runtime fixes.

    - ``If`` on a constant condition (a folded one, often: an exporter's check of the input's
      rank or sample rate) runs one branch: its outputs are that branch's.  ONNX inference
      merges both branches (and loses the rank when they differ).
    - ``Loop``: a loop-carried output has the rank of its initial value, and each dimension on
      which the initial value and the body's output agree; a scan output adds a leading
      iteration axis to the body's.

    Without this, every node after such an output loses its shape, and a part boundary of
    unknown rank cannot be declared in a sub-model that ``onnx.checker`` accepts.
    ``inferred_nodes()``: the nodes with subgraphs as inference returned them (their bodies
    typed; read only when needed); ``constant(name)``: a constant's value, else ``None``.
    """
    hints = []
    bodies = None
    for i, op in enumerate(graph.op_types):
        if op not in ("If", "Loop") or graph.domains[i] not in ("", "ai.onnx"):
            continue
        outs = graph.outputs[i]
        if all(not o or types[o].static for o in outs):
            continue
        if op == "If":
            cond = graph.inputs[i][0]
            value = constant(cond) if cond else None
            if value is not None and value.size == 1:   # the runtime takes one branch
                taken = ["then_branch" if bool(value.reshape(-1)[0]) else "else_branch"]
            else:                                       # either: what both agree on
                taken = ["then_branch", "else_branch"]
            branches = {a.name: a.g for a in graph.model.graph.node[i].attribute}
            found = [_branch_types(graph, branches[b], types, constant) for b in taken]
            for o, b in zip(outs, map(_agreed, *found)):
                if not o or b.rank is None:
                    continue
                t = types[o]
                if t.rank is None or (t.rank == b.rank and _more_known(b.shape, t.shape)):
                    hints.append(onnx.helper.make_tensor_value_info(
                        o, b.elem_type or t.elem_type, _ints(b.shape)))
            continue
        if all(not o or types[o].rank is not None for o in outs):
            continue
        if bodies is None:
            bodies = inferred_nodes()
        node = bodies.get(i) or graph.model.graph.node[i]
        body = next(a.g for a in node.attribute if a.name == "body")
        body_outs = [type_of_value_info(vi) for vi in body.output[1:]]
        carried = len(node.input) - 2
        for j, o in enumerate(outs):
            if not o or types[o].rank is not None or j >= len(body_outs):
                continue
            b = body_outs[j]
            if j < carried:
                init = types[node.input[2 + j]]
                if init.rank is None:
                    continue
                agreed = b.shape if b.rank == init.rank else (None,) * init.rank
                dims = [d if isinstance(d, int) and d == e else None
                        for d, e in zip(init.shape, agreed)]
                elem = init.elem_type or b.elem_type
            else:
                if b.rank is None:
                    continue
                dims = [None] + _ints(b.shape)
                elem = b.elem_type
            hints.append(onnx.helper.make_tensor_value_info(o, elem, dims))
    return hints


def reshape_hints(graph: GraphLists, types: TypeTable, folded: set[int]
                  ) -> list[onnx.ValueInfoProto]:
    """The dimension ONNX inference leaves open on a ``Reshape`` output whose input has
    symbolic dims, found by counting elements (the runtime's way).

    ``Reshape(x: [batch, sequence, 128], [batch, sequence, -1, 32])`` (transformers' ``view``
    of the attention heads) gives ``[batch, sequence, ?, 32]``: ONNX computes ``-1`` only when
    every input dimension is a number.  A reshape keeps the element count, so when the
    input's symbolic dims and the output's known ones cancel (equal names are equal values,
    as ONNX reads them) the one dimension left is the quotient of the numbers: 4 here.  An
    anonymous (``?``) or unknown input dim never cancels; nothing is claimed then."""
    hints = []
    for i, op in enumerate(graph.op_types):
        if op != "Reshape" or graph.domains[i] not in ("", "ai.onnx") or i in folded:
            continue
        out = graph.outputs[i][0] if graph.outputs[i] else ""
        t = types[out] if out else None
        if t is None or t.shape is None or t.static:
            continue
        value = _count_left(types[graph.inputs[i][0]].shape, t.shape)
        if value is None:
            continue
        k, d = value
        dims = list(t.shape[:k]) + [d] + list(t.shape[k + 1:])
        hints.append(onnx.helper.make_tensor_value_info(
            out, t.elem_type, [x if _named(x) else None for x in dims]))
    return hints


def slice_hints(graph: GraphLists, types: TypeTable, folded: set[int],
                constant: Callable[[str], np.ndarray | None]) -> list[onnx.ValueInfoProto]:
    """The dimensions of a ``Slice`` output on axes it does not slice, which ONNX inference
    leaves open with the rest when the starts or ends are not constants (``position_ids[:,
    :Shape(input_ids)[1]]``: ``[?, ?]`` where the runtime has ``[1, sequence]``).  The axes
    must be known: constant, or absent (then the first ``len(starts)``)."""
    hints = []
    for i, op in enumerate(graph.op_types):
        if op != "Slice" or graph.domains[i] not in ("", "ai.onnx") or i in folded \
                or graph.opsets.get("", 0) < 10:
            continue
        ins = graph.inputs[i]
        out = graph.outputs[i][0] if graph.outputs[i] else ""
        t = types[out] if out else None
        before = types[ins[0]].shape if ins and ins[0] else None
        if t is None or t.shape is None or t.static or before is None or len(before) != len(t.shape):
            continue
        if len(ins) > 3 and ins[3]:
            value = constant(ins[3])
            if value is None:
                continue
            rank = len(before)
            axes = {int(a) % rank for a in np.asarray(value).reshape(-1)}
        else:
            starts = types[ins[1]].shape if len(ins) > 1 and ins[1] else None
            if starts is None or len(starts) != 1 or not isinstance(starts[0], int):
                continue
            axes = set(range(starts[0]))
        dims = [d if k in axes or _named(d) else before[k] for k, d in enumerate(t.shape)]
        if dims != list(t.shape) and any(not _named(d) and _named(e)
                                         for d, e in zip(t.shape, dims)):
            hints.append(onnx.helper.make_tensor_value_info(
                out, t.elem_type, [x if _named(x) else None for x in dims]))
    return hints


def _named(d) -> bool:
    """A dimension with a number or a name inference can carry (``?`` is no name)."""
    return isinstance(d, int) or (isinstance(d, str) and d not in ANONYMOUS
                                  and not d.startswith("unk__"))


def _count_left(before: tuple | None, after: tuple) -> tuple[int, int] | None:
    """The axis of ``after`` (a reshape of a tensor of shape ``before``) that is the only one
    the equal element counts leave open, and its value; ``None`` when there is no such axis."""
    if before is None:
        return None
    symbols: dict[str, int] = {}
    number = 1
    for d in before:
        if isinstance(d, int):
            number *= d
        elif d is None or d in ANONYMOUS:
            return None
        else:
            symbols[d] = symbols.get(d, 0) + 1
    open_axes = []
    known = 1
    for k, d in enumerate(after):
        if isinstance(d, int):
            known *= d
        elif d is not None and d not in ANONYMOUS and symbols.get(d, 0) > 0:
            symbols[d] -= 1
        else:
            open_axes.append(k)
    if len(open_axes) != 1 or any(symbols.values()) or known == 0 or number % known:
        return None
    return open_axes[0], number // known


def _branch_types(graph: GraphLists, body: onnx.GraphProto, types: TypeTable,
                  constant: Callable[[str], np.ndarray | None]) -> list[TensorType]:
    """The types of the outputs of an ``If`` branch that the runtime will take: the branch
    analysed as a model of its own (so that what it computes from constants folds, and a
    nested ``If`` on such a value is resolved the same way), its outer-scope reads as inputs
    of their types or, when constant, initializers of their values."""
    inputs, inits = [], []
    for name in free_names(body):
        value = constant(name)
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
            continue
        t = types[name]
        inputs.append(onnx.helper.make_tensor_value_info(
            name, t.elem_type, None if t.shape is None else _ints(t.shape)))
    g = onnx.helper.make_graph(list(body.node), body.name or "branch", inputs,
                               [onnx.helper.make_value_info(vi.name, vi.type) for vi in body.output],
                               initializer=list(body.initializer) + inits,
                               value_info=list(body.value_info),
                               sparse_initializer=list(body.sparse_initializer))
    src = graph.model
    model = onnx.helper.make_model(g, opset_imports=list(src.opset_import))
    model.ir_version = src.ir_version
    model.functions.extend(src.functions)
    found = analyse_shapes(flatten(model, graph.path), {}, {})
    return [found.types[vi.name] for vi in body.output]


def _agreed(*found: TensorType) -> TensorType:
    """What types ``found`` (one per branch) agree on: the rank, and each dimension."""
    first = found[0]
    if any(t.rank != first.rank or t.elem_type != first.elem_type for t in found[1:]):
        return TensorType(first.elem_type, None)
    if first.shape is None:
        return first
    return TensorType(first.elem_type, tuple(
        d if all(t.shape[k] == d for t in found) else None for k, d in enumerate(first.shape)))


def _ints(shape: tuple) -> list[int | None]:
    """The known dimensions of ``shape`` (symbolic names inside a body mean nothing outside)."""
    return [d if isinstance(d, int) else None for d in shape]


def _more_known(a: tuple, b: tuple) -> bool:
    """Does shape ``a`` know a dimension that ``b`` (same rank) does not?"""
    return any(isinstance(x, int) and not isinstance(y, int) for x, y in zip(a, b))
