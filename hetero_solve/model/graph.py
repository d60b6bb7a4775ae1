"""The loaded model: the ONNX graph as flat per-node lists, with its tensor types.

Everything downstream (rule compilation, export, run) reads a :class:`ModelGraph`; the
``onnx.ModelProto`` stays untouched for export.  Per-node data are lists indexed like
``model.graph.node`` so that 100,000-node graphs cost a few lists, not 100,000 objects.

Loading builds it in two explicit steps (:mod:`.load`): :class:`GraphLists` (the structure,
:func:`.flatten.flatten`) and :class:`~.shapes.ShapeAnalysis` (types and folding,
:func:`.shapes.analyse_shapes`); a :class:`ModelGraph` is the two together.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields
from typing import Any, Iterable

import numpy as np
import onnx
from onnx import numpy_helper

from ..units import element_bits
from .weights import tensor_value

#: Shape of a tensor: ``None`` when the rank is unknown, else one entry per dimension,
#: an ``int`` when known, a ``str`` (symbolic name) or ``None`` when not.
Shape = tuple  # tuple[int | str | None, ...] | None


class TensorType:
    """Element type and shape; ``static``, ``rank`` and the element count are computed once
    (loading shares one instance between every tensor of the same type)."""

    __slots__ = ("elem_type", "shape", "rank", "static", "count")

    def __init__(self, elem_type: int, shape: Shape):
        self.elem_type = elem_type      # onnx.TensorProto.DataType; 0 = unknown (or not a tensor)
        self.shape = shape
        self.rank = None if shape is None else len(shape)
        self.static = shape is not None and all(isinstance(d, int) for d in shape)
        count = 1
        for d in shape or ():
            if isinstance(d, int):
                count *= d
        self.count = count              # unknown dimensions count as 1

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorType) and self.elem_type == other.elem_type
                and self.shape == other.shape)

    def __hash__(self) -> int:
        return hash((self.elem_type, self.shape))

    def __repr__(self) -> str:
        return f"TensorType(elem_type={self.elem_type}, shape={self.shape})"


UNKNOWN_TYPE = TensorType(0, None)


def size_of(t: TensorType) -> int:
    """Bytes of a tensor of type ``t``: element count (an unknown dimension counts as 1) x
    element size, rounded up to whole bytes."""
    return (t.count * element_bits(t.elem_type) + 7) // 8


def type_of_value_info(vi: onnx.ValueInfoProto) -> TensorType:
    """Element type and shape of a tensor ``ValueInfoProto`` (``UNKNOWN_TYPE`` otherwise)."""
    return type_of_proto(vi.type)


def type_of_proto(t: onnx.TypeProto) -> TensorType:
    """Element type and shape of a tensor ``TypeProto`` (``UNKNOWN_TYPE`` otherwise).  A
    negative dimension (some exporters write -1 for "any") is unknown."""
    if t.HasField("tensor_type"):
        tt = t.tensor_type
    elif t.HasField("sparse_tensor_type"):
        tt = t.sparse_tensor_type
    else:
        return UNKNOWN_TYPE
    if not tt.HasField("shape"):
        return TensorType(tt.elem_type, None)
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value) if d.dim_value >= 0 else None)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorType(tt.elem_type, tuple(dims))


class TypeTable(dict):
    """Tensor name -> :class:`TensorType`.  Any name not in it is ``UNKNOWN_TYPE``:
    ``table[name]`` never fails, at the cost of one dict lookup."""

    __slots__ = ()

    def __missing__(self, name: str) -> TensorType:
        return UNKNOWN_TYPE


@dataclass(frozen=True)
class InputDim:
    """One dimension of a graph input: ``name`` (a symbolic name, or ``None`` for an
    anonymous one) and ``value`` once given (``None`` while it has none)."""

    input: str
    axis: int
    name: str | None
    value: int | None


@dataclass
class GraphLists:
    """The main graph flattened, structure only (no shapes).  Node ``i`` is
    ``model.graph.node[i]``."""

    model: onnx.ModelProto
    path: str
    opsets: dict[str, int]
    names: list[str]                     # unique (:func:`.flatten.unique_names`)
    op_types: list[str]
    domains: list[str]
    inputs: list[tuple[str, ...]]        # positional; "" marks an absent optional input
    outer_inputs: list[tuple[str, ...]]  # tensors a node's subgraphs read from the main graph
    outputs: list[tuple[str, ...]]
    has_subgraph: list[bool]
    graph_inputs: list[str]              # fed at run time (initializers excluded)
    graph_outputs: list[str]
    initializers: dict[str, onnx.TensorProto]
    constant_nodes: list[int]
    producer: dict[str, int]
    #: Initializers, sparse initializers and ``Constant`` outputs: the constants before folding.
    base_constants: frozenset[str]
    #: node -> the constants its subgraphs hold, ``(qualified name, bytes)``
    #: (:func:`subgraph_constants`); only nodes with subgraphs that hold some.
    subgraph_constants: dict[int, list[tuple[str, int]]]
    #: Each dense initializer's type, from its own dims.
    initializer_types: dict[str, TensorType]
    #: The folder external data locations are relative to (the model file's); ``None`` for a
    #: model given in memory.  External tensors are read from there only when a value is
    #: asked for (:mod:`.weights`).
    weights_dir: str | None = None

    @property
    def opset(self) -> int:
        """Opset of the default ONNX domain."""
        return self.opsets.get("", self.opsets.get("ai.onnx", 1))

    def __len__(self) -> int:
        return len(self.names)

    def all_inputs(self, i: int) -> list[str]:
        """Distinct tensors node ``i`` reads: its inputs and its subgraphs' outer-scope reads."""
        seen: list[str] = []
        for x in self.inputs[i]:
            if x and x not in seen:
                seen.append(x)
        for x in self.outer_inputs[i]:
            if x not in seen:
                seen.append(x)
        return seen


@dataclass
class ModelGraph(GraphLists):
    """A loaded model: its :class:`GraphLists` and what shape analysis found
    (docs/problem.md, docs/rules.md).  Built once by :func:`~hetero_solve.model.load_model`;
    read it, do not write it."""

    #: The symbolic dims of the graph inputs and the values they were given.
    input_dims: list[InputDim] = field(default_factory=list)
    #: The values given for named dims (those the graph inputs use), and whole input shapes.
    dims: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: Every tensor's type by name, after dims, inference and folding.
    types: TypeTable = field(default_factory=TypeTable)
    #: Serialised ``TypeProto`` of each tensor inference typed (not folded values).
    declared: dict[str, bytes] = field(default_factory=dict)
    #: Folded nodes (graph order) and every constant tensor (base constants + folded outputs).
    folded: list[int] = field(default_factory=list)
    constant_tensors: frozenset[str] = frozenset()
    #: Tensors whose shape is not static (a static-shape device refuses what touches them).
    nonstatic: frozenset[str] = frozenset()
    #: The values of folded outputs, computed when first asked for (a
    #: :class:`~.fold.FoldedValues`; not imported here: fold builds on this module).
    folded_values: Any = None
    #: Nodes with subgraphs as shape inference returned them (their bodies carry types).
    subgraph_nodes: dict[int, onnx.NodeProto] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: Tensor names as ids per node, when loading computed them (:mod:`.structure`).
    refs: Any = None
    #: A checker still running in a forked process (``load_model(defer_check=True)``).
    checking: Any = field(default=None, repr=False)
    #: The file held every tensor's data (read whole, no ``location`` in it): nothing of
    #: this model lives in another file, so writing a model built from it need not look
    #: for external tensors.  False when not known.
    weights_inline: bool = False

    @classmethod
    def of(cls, graph: GraphLists, **found: Any) -> "ModelGraph":
        """``graph`` with the fields ``found`` (shape analysis and the rest)."""
        return cls(**{f.name: getattr(graph, f.name) for f in fields(GraphLists)}, **found)

    # -- basic facts -------------------------------------------------------------------------
    def ensure_valid(self) -> None:
        """Wait for the checker of a model loaded with ``defer_check`` (no-op otherwise);
        raises :class:`~hetero_solve.errors.ModelError` when it rejects the model."""
        if self.checking is not None:
            self.checking.raise_if_invalid()

    def placeable(self) -> list[int]:
        """Nodes that must be placed in a part: all but ``Constant`` and folded nodes."""
        skip = set(self.constant_nodes) | set(self.folded)
        return [i for i in range(len(self.names)) if i not in skip]

    def is_constant(self, tensor: str) -> bool:
        return tensor in self.constant_tensors

    def unset_dims(self) -> list[InputDim]:
        """Dimensions of the graph inputs that have no value (named or anonymous)."""
        return [d for d in self.input_dims if d.value is None]

    # -- tensor types ------------------------------------------------------------------------
    def tensor_type(self, name: str) -> TensorType:
        """Inferred element type and shape (after ``dims`` and folding).  A dense initializer
        with no declared type is its own dims."""
        return self.types[name]

    def value_info_proto(self, name: str) -> onnx.ValueInfoProto | None:
        """The ``ValueInfoProto`` a sub-model declares for a tensor: a graph input as the
        model declares it (its untaken branches may not hold for the dims given: onnxruntime
        would refuse the part where it takes the original), another tensor as inference typed
        it; ``None`` when neither (a folded value: its type is the value's)."""
        if name in self.graph_inputs:
            for vi in self.model.graph.input:
                if vi.name == name:
                    own = onnx.ValueInfoProto()
                    own.CopyFrom(vi)
                    for d in own.type.tensor_type.shape.dim:   # -1 is no size: unknown
                        if d.HasField("dim_value") and d.dim_value < 0:
                            d.ClearField("dim_value")
                    return own
        type_bytes = self.declared.get(name)
        if type_bytes is None:
            return None
        vi = onnx.ValueInfoProto()
        vi.name = name
        vi.type.ParseFromString(type_bytes)
        return vi

    def inferred_node(self, i: int) -> onnx.NodeProto:
        """Node ``i`` as shape inference returned it (its subgraphs carry inferred types)."""
        return self.subgraph_nodes.get(i) or self.model.graph.node[i]

    def tensor_bytes(self, name: str) -> int:
        """Element count x element size; an unknown dimension counts as 1 (docs/problem.md)."""
        return self.bytes_of([name])[0]

    def bytes_of(self, names: list[str]) -> list[int]:
        """:meth:`tensor_bytes` of each name, sized once per distinct type (a model repeats
        a few dozen types over a hundred thousand tensors; types are shared objects)."""
        found = list(map(self.types.__getitem__, names))
        ids = list(map(id, found))
        size = {i: size_of(t) for i, t in dict(zip(ids, found)).items()}
        return list(map(size.__getitem__, ids))

    def open_sizes(self, names: list[str]) -> list[str]:
        """The ``names`` whose size counts an unknown dimension or type as 1 (docs/problem.md
        says so with a warning)."""
        found = list(map(self.types.__getitem__, names))
        ids = list(map(id, found))
        open_ids = {i for i, t in dict(zip(ids, found)).items() if not t.static or t.elem_type == 0}
        if not open_ids:
            return []
        return list(itertools.compress(names, map(open_ids.__contains__, ids)))

    # -- constant values ---------------------------------------------------------------------
    def constant_value(self, name: str) -> np.ndarray:
        """Value of a constant tensor: an initializer, a ``Constant`` output or a folded one."""
        if name in self.initializers:
            return tensor_value(self.initializers[name], self.weights_dir)
        i = self.producer.get(name)
        if i is not None and self.op_types[i] == "Constant":
            return constant_node_value(self.model.graph.node[i])
        return self.folded_values.get([name])[name]

    def prefetch_folded(self, names: Iterable[str]) -> None:
        """Compute the folded values among ``names`` together: much faster than one by one
        when some need onnxruntime."""
        if self.folded_values is not None:
            self.folded_values.get([x for x in names if x in self.folded_values.outputs])


def constant_node_value(node: onnx.NodeProto) -> np.ndarray:
    """The value a ``Constant`` node produces, whichever attribute holds it."""
    attr = node.attribute[0]
    name = attr.name
    if name == "value":
        return numpy_helper.to_array(attr.t)
    if name == "sparse_value":
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(_single_node_model(node)).run(None, {})[0]
    if name == "value_float":
        return np.array(attr.f, dtype=np.float32)
    if name == "value_floats":
        return np.array(list(attr.floats), dtype=np.float32)
    if name == "value_int":
        return np.array(attr.i, dtype=np.int64)
    if name == "value_ints":
        return np.array(list(attr.ints), dtype=np.int64)
    if name == "value_string":
        return np.array(attr.s.decode())
    if name == "value_strings":
        return np.array([s.decode() for s in attr.strings])
    raise ValueError(f"Constant node {node.name!r} has no value attribute")


def _single_node_model(node: onnx.NodeProto) -> onnx.ModelProto:
    g = onnx.helper.make_graph([node], "c", [], [onnx.helper.make_tensor_value_info(
        node.output[0], onnx.TensorProto.UNDEFINED, None)])
    return onnx.helper.make_model(g)


def subgraph_outer_inputs(node: onnx.NodeProto) -> tuple[str, ...]:
    """Names a node's subgraphs (``If``/``Loop``/``Scan`` bodies, recursively) read from the
    enclosing scope.  docs/problem.md treats them as inputs of the node."""
    found: list[str] = []
    own = set(node.input)
    for g in _graph_attributes(node):
        for name in free_names(g):
            if name not in own and name not in found:
                found.append(name)
    return tuple(found)


def _graph_attributes(node: onnx.NodeProto) -> Iterable[onnx.GraphProto]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def subgraph_constants(node: onnx.NodeProto, owner: str) -> list[tuple[str, int]]:
    """The constants a node's subgraphs hold (their initializers, sparse initializers and
    ``Constant`` nodes, nested bodies included), each as ``(name, bytes)``.  docs/problem.md
    counts them as constants the node consumes: they live on the device that runs it.

    Names are qualified by the owning node and the attribute path
    (``"<owner>/<attribute>/<tensor>"``): a body's names are local to it, and two bodies (or a
    body and the main graph) may reuse one."""
    found: list[tuple[str, int]] = []
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
            list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
        for k, g in enumerate(graphs):
            prefix = f"{owner}/{a.name}" + (f"[{k}]" if a.type == onnx.AttributeProto.GRAPHS else "")
            for t in g.initializer:
                found.append((f"{prefix}/{t.name}", _tensor_proto_bytes(t)))
            for t in g.sparse_initializer:
                found.append((f"{prefix}/{t.values.name}", _tensor_proto_bytes(t.values)
                              + _tensor_proto_bytes(t.indices)))
            for inner in g.node:
                if inner.op_type == "Constant" and inner.domain in ("", "ai.onnx"):
                    found.extend((f"{prefix}/{o}", b) for o, b in
                                 zip(inner.output, [_constant_node_bytes(inner)]) if o)
                elif any(x.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                         for x in inner.attribute):
                    found.extend(subgraph_constants(inner, f"{prefix}/{inner.name or inner.op_type}"))
    return found


def _tensor_proto_bytes(t: onnx.TensorProto) -> int:
    """Element count x element size of a ``TensorProto`` (from its dims: no data read)."""
    count = 1
    for d in t.dims:
        count *= d
    return (count * element_bits(t.data_type) + 7) // 8


def _constant_node_bytes(node: onnx.NodeProto) -> int:
    """Bytes of the value a ``Constant`` node holds."""
    for a in node.attribute:
        if a.name == "value":
            return _tensor_proto_bytes(a.t)
        if a.name == "sparse_value":
            return _tensor_proto_bytes(a.sparse_tensor.values) + _tensor_proto_bytes(a.sparse_tensor.indices)
        if a.name in ("value_floats", "value_ints"):
            return 4 * len(a.floats) if a.name == "value_floats" else 8 * len(a.ints)
        if a.name in ("value_float", "value_int"):
            return 4 if a.name == "value_float" else 8
        if a.name == "value_strings":
            return sum(len(x) for x in a.strings)
        if a.name == "value_string":
            return len(a.s)
    return 0


def free_names(g: onnx.GraphProto) -> list[str]:
    """Names a graph reads from its enclosing scope."""
    defined = {x.name for x in g.input} | {t.name for t in g.initializer}
    defined |= {t.values.name for t in g.sparse_initializer}
    free: list[str] = []
    for n in g.node:
        reads = list(n.input)
        for sub in _graph_attributes(n):
            reads.extend(free_names(sub))
        for x in reads:
            if x and x not in defined and x not in free:
                free.append(x)
        defined.update(n.output)
    # A name defined later in the same body is not free (bodies are topologically sorted).
    free.extend(o.name for o in g.output if o.name not in defined and o.name not in free)
    return [x for x in free if x not in defined]
