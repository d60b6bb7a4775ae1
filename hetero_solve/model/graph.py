"""The loaded model: the ONNX graph as flat per-node lists, with inferred tensor types.

Everything downstream (rule compilation, export, run) reads a :class:`ModelGraph`; the
``onnx.ModelProto`` stays untouched for export.  Per-node data are lists indexed like
``model.graph.node`` so that 100,000-node graphs cost a few lists, not 100,000 objects.
Tensor types are indexed in one pass over the inferred (name, serialised ``TypeProto``) pairs,
each distinct type parsed once (:meth:`ModelGraph.index_types`, :mod:`.wire`).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import onnx
from onnx import numpy_helper

from ..units import element_bits
from . import wire

#: Shape of a tensor: ``None`` when the rank is unknown, else one entry per dimension,
#: an ``int`` when known, a ``str`` (symbolic name) or ``None`` when not.
Shape = tuple  # tuple[int | str | None, ...] | None


class TensorType:
    """Element type and shape; ``static``, ``rank`` and the element count are computed once
    (instances are shared by every tensor of the same type)."""

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


def _size_of(t: TensorType) -> int:
    """Bytes of a tensor of type ``t``: element count (an unknown dimension counts as 1) x
    element size, rounded up to whole bytes."""
    return (t.count * element_bits(t.elem_type) + 7) // 8


def type_of_value_info(vi: onnx.ValueInfoProto) -> TensorType:
    """Element type and shape of a tensor ``ValueInfoProto`` (``UNKNOWN_TYPE`` otherwise)."""
    return type_of_proto(vi.type)


def type_of_proto(t: onnx.TypeProto) -> TensorType:
    """Element type and shape of a tensor ``TypeProto`` (``UNKNOWN_TYPE`` otherwise)."""
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
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorType(tt.elem_type, tuple(dims))


class TypeTable(dict):
    """Tensor name -> :class:`TensorType`: dense initializers by their own dims, overridden by
    what inference declared.  Any other name is ``UNKNOWN_TYPE`` (and is remembered):
    ``table[name]`` never fails, at the cost of one dict lookup."""

    __slots__ = ()

    def __init__(self, initializers: dict[str, TensorType], declared: dict[str, TensorType]):
        super().__init__(initializers)
        self.update(declared)

    def __missing__(self, name: str) -> TensorType:
        self[name] = UNKNOWN_TYPE
        return UNKNOWN_TYPE


@dataclass
class ModelGraph:
    """A main graph flattened for fast analysis.  Node ``i`` is ``model.graph.node[i]``."""

    model: onnx.ModelProto
    path: str
    opsets: dict[str, int]
    names: list[str]
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
    dims: dict[str, int] = field(default_factory=dict)
    folded: list[int] = field(default_factory=list)
    constant_tensors: set[str] = field(default_factory=set)
    #: node -> the constants its subgraphs hold, ``(qualified name, bytes)``
    #: (:func:`subgraph_constants`); only nodes with subgraphs that hold some.
    subgraph_constants: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    _inferred: onnx.ModelProto | bytes | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)
    _declared: dict[str, TensorType] = field(default_factory=dict, repr=False)
    _declared_bytes: tuple[list, list] = field(default=([], []), repr=False)
    _value_info: dict | None = field(default=None, repr=False)
    _types: TypeTable | None = field(default=None, repr=False)
    _folded_values: dict[str, np.ndarray] | None = field(default=None, repr=False)
    _unknown_dim_tensors: set[str] = field(default_factory=set, repr=False)
    _inferred_index: dict[int, int] = field(default_factory=dict, repr=False)
    _parsed: dict[bytes, TensorType] = field(default_factory=dict, repr=False)
    _nonstatic: set[str] | None = field(default=None, repr=False)
    _raw_bytes: dict[str, int] | None = field(default=None, repr=False)
    _raw_undeclared: dict[str, int] | None = field(default=None, repr=False)
    _initializer_types: dict[str, TensorType] | None = field(default=None, repr=False)
    _untyped_candidates: set[str] | None = field(default=None, repr=False)
    _interned: dict[tuple, TensorType] = field(default_factory=dict, repr=False)
    _structure_ahead: tuple | None = field(default=None, repr=False)   # model/structure.py
    _fold_prediction: object | None = field(default=None, repr=False)  # structure.FoldPrediction
    _constants_before: frozenset | None = field(default=None, repr=False)  # model/fold.py
    _pending_check: object = field(default=None, repr=False)          # load_model(defer_check)

    # -- basic facts -------------------------------------------------------------------------
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

    @property
    def inferred(self) -> onnx.ModelProto | None:
        """The model as shape inference returned it (parsed when first read: loading needs
        only its types, :mod:`.wire`)."""
        if isinstance(self._inferred, bytes):
            self._inferred = onnx.ModelProto.FromString(self._inferred)
        return self._inferred

    @inferred.setter
    def inferred(self, model: onnx.ModelProto | bytes | None) -> None:
        self._inferred = model

    def ensure_valid(self) -> None:
        """Wait for the checker of a model loaded with ``defer_check`` (no-op otherwise);
        raises :class:`~hetero_solve.errors.ModelError` when it rejects the model."""
        pending, self._pending_check = self._pending_check, None
        if pending is not None:
            pending()

    def placeable(self) -> list[int]:
        """Nodes that must be placed in a part: all but ``Constant`` and folded nodes."""
        skip = set(self.constant_nodes) | set(self.folded)
        return [i for i in range(len(self.names)) if i not in skip]

    def is_constant(self, tensor: str) -> bool:
        return tensor in self.constant_tensors

    # -- tensor types ------------------------------------------------------------------------
    def index_types(self, names: list[str], type_bytes: list[bytes]) -> None:
        """Take the declared tensor types (serialised ``TypeProto`` per name, from
        :func:`.wire.declared_types`; later entries win), then folded values over them.
        Done in bulk: each distinct type is parsed once (models repeat a few dozen types over
        a hundred thousand tensors)."""
        parsed = self._parsed
        for key in set(type_bytes).difference(parsed):
            t = type_of_proto(onnx.TypeProto.FromString(key))
            parsed[key] = self._intern(t.elem_type, t.shape)
        self._declared = dict(zip(names, map(parsed.__getitem__, type_bytes)))
        self._raw_undeclared = None
        self._declared_bytes = (names, type_bytes)
        self._value_info = None
        self._types = TypeTable(self.initializer_types(), self._declared)
        self.index_folded_types()

    def index_folded_types(self) -> None:
        """The types of the folded values computed so far, over the declared ones."""
        for name, value in (self._folded_values or {}).items():
            t = self._intern(onnx.helper.np_dtype_to_tensor_dtype(value.dtype), tuple(value.shape))
            self._declared[name] = self.types[name] = t
        self._nonstatic = None
        self._raw_undeclared = None

    def value_info_proto(self, name: str) -> onnx.ValueInfoProto | None:
        """The inferred ``ValueInfoProto`` of a tensor, if inference declared one."""
        if name in (self._folded_values or {}):
            return None   # its type is the folded value's
        if self._value_info is None:
            self._value_info = dict(zip(*self._declared_bytes))
        type_bytes = self._value_info.get(name)
        return None if type_bytes is None else wire.value_info(name, type_bytes)

    @property
    def types(self) -> TypeTable:
        """Every tensor's type by name (:class:`TypeTable`; read it, do not write it)."""
        if self._types is None:   # shapes not analysed yet: initializers only
            self._types = TypeTable(self.initializer_types(), {})
        return self._types

    def tensor_type(self, name: str) -> TensorType:
        """Inferred element type and shape (after ``dims`` and folding).  A dense initializer
        with no declared type is its own dims."""
        return self.types[name]

    def _intern(self, elem_type: int, shape: Shape) -> TensorType:
        """One shared object per distinct type, so that types compare by identity."""
        key = (elem_type, shape)
        t = self._interned.get(key)
        if t is None:
            t = self._interned[key] = TensorType(elem_type, shape)
        return t

    def tensor_bytes(self, name: str) -> int:
        """Element count x element size; an unknown dimension counts as 1 (and is remembered
        so that a warning can name it, SPEC section 5)."""
        return self.bytes_of([name])[0]

    def bytes_of(self, names: list[str], *, initializers: bool = True) -> list[int]:
        """:meth:`tensor_bytes` of each name.  An initializer stored as raw bytes with no
        declared type is its byte count (the same number), read without parsing its dims (four
        times faster; the weights of a large model are a hundred thousand of them).  The rest
        are sized once per distinct type (a model repeats few).  ``initializers=False``: the
        caller knows that no name is an initializer (skips looking each one up)."""
        if initializers:
            sizes = list(map(self._raw_sizes().get, names))
            rest = [k for k, b in enumerate(sizes) if b is None]
        else:
            sizes, rest = [], range(len(names))
        if not rest:
            return sizes
        # Per name only C-level maps (a hundred thousand names): type, its id, its size.
        rest_names = names if len(rest) == len(names) else [names[k] for k in rest]
        rest_types = list(map(self.types.__getitem__, rest_names))
        ids = list(map(id, rest_types))     # types are shared objects; their hash is slow
        distinct = dict(zip(ids, rest_types))
        size_of = {i: _size_of(t) for i, t in distinct.items()}
        rest_sizes = list(map(size_of.__getitem__, ids))
        open_ids = {i for i, t in distinct.items() if not t.static or t.elem_type == 0}
        if open_ids:
            self._unknown_dim_tensors.update(
                itertools.compress(rest_names, map(open_ids.__contains__, ids)))
        if len(rest) == len(names):
            return rest_sizes
        for k, b in zip(rest, rest_sizes):
            sizes[k] = b
        return sizes

    def _raw_sizes(self) -> dict[str, int]:
        """:meth:`raw_initializer_bytes` of the initializers whose type is not declared (a
        declared type wins)."""
        if self._raw_undeclared is None:
            raw, declared = self.raw_initializer_bytes(), self._declared
            if not raw.keys().isdisjoint(declared.keys()):
                raw = {x: b for x, b in raw.items() if x not in declared}
            self._raw_undeclared = raw
        return self._raw_undeclared

    def initializer_types(self) -> dict[str, TensorType]:
        """Each dense initializer's type from its own dims (computed once; shapes do not
        change it, so large models compute it while their shapes are inferred)."""
        if self._initializer_types is None:
            intern = self._intern
            self._initializer_types = {name: intern(t.data_type, tuple(t.dims))
                                       for name, t in self.initializers.items()}
        return self._initializer_types

    def raw_initializer_bytes(self) -> dict[str, int]:
        """Byte count of each initializer stored as raw bytes (computed once; shapes do not
        change it, so large models compute it while their shapes are inferred)."""
        if self._raw_bytes is None:
            self._raw_bytes = {t.name: len(t.raw_data) for t in self.initializers.values()
                               if t.HasField("raw_data")}
        return self._raw_bytes

    def tensors_needing_a_type(self) -> set[str]:
        """Every tensor a node reads or writes but initializers (computed once, independent
        of shapes): those inference does not declare have no type."""
        if self._untyped_candidates is None:
            chain = itertools.chain.from_iterable
            names = set(chain(self.inputs)).union(chain(self.outputs))
            names.difference_update(self.initializers.keys(), ("",))
            self._untyped_candidates = names
        return self._untyped_candidates

    def nonstatic_tensors(self) -> set[str]:
        """Every tensor whose shape is not static (computed once): declared with an open
        dimension or unknown rank, or read or written by a node with no declared type.  A
        dense initializer's dims are its shape: static (not every constant: a sparse
        initializer, or an initializer also declared as an input, may have open dims)."""
        if self._nonstatic is None:
            declared = self._declared
            found = {x for x, t in declared.items() if not t.static}
            found.update(self.tensors_needing_a_type().difference(declared.keys()))
            found.discard("")
            self._nonstatic = found
        return self._nonstatic

    def unknown_size_warning(self) -> str | None:
        unknown = self._unknown_dim_tensors
        if not unknown:
            return None
        first = heapq.nsmallest(5, unknown)   # the first five by name, without sorting them all
        shown = ", ".join(first) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        return (f"{len(unknown)} tensor(s) have unknown dimensions or type, counted as 1 element "
                f"in memory and transfer sizes (give --dim NAME=VALUE): {shown}")

    def inferred_node(self, i: int) -> onnx.NodeProto:
        """Node ``i`` as shape inference returned it (its subgraphs carry inferred types)."""
        j = self._inferred_index.get(i, i)
        if self.inferred is not None and 0 <= j < len(self.inferred.graph.node):
            return self.inferred.graph.node[j]
        return self.model.graph.node[i]

    # -- constant values ---------------------------------------------------------------------
    def constant_value(self, name: str) -> np.ndarray:
        """Value of a constant tensor: an initializer, a ``Constant`` output or a folded one."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        i = self.producer.get(name)
        if i is not None and self.op_types[i] == "Constant":
            return constant_node_value(self.model.graph.node[i])
        cached = (self._folded_values or {}).get(name)
        if cached is not None:
            return cached
        from .fold import evaluate_folded
        return evaluate_folded(self, {name})[name]

    def prefetch_folded(self, names: Iterable[str]) -> None:
        """Compute the folded values among ``names`` together: much faster than one by one
        when some need onnxruntime."""
        folded_outputs = {o for i in self.folded for o in self.outputs[i]}
        wanted = {x for x in names if x in folded_outputs}
        if wanted:
            from .fold import evaluate_folded
            evaluate_folded(self, wanted)


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
    enclosing scope.  SPEC section 1 treats them as inputs of the node."""
    found: list[str] = []
    own = set(node.input)
    for g in _graph_attributes(node):
        for name in _free_names(g):
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
    ``Constant`` nodes, nested bodies included), each as ``(name, bytes)``.  SPEC section 5
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


def _free_names(g: onnx.GraphProto) -> list[str]:
    defined = {x.name for x in g.input} | {t.name for t in g.initializer}
    defined |= {t.values.name for t in g.sparse_initializer}
    free: list[str] = []
    for n in g.node:
        reads = list(n.input)
        for sub in _graph_attributes(n):
            reads.extend(_free_names(sub))
        for x in reads:
            if x and x not in defined and x not in free:
                free.append(x)
        defined.update(n.output)
    # A name defined later in the same body is not free (bodies are topologically sorted).
    free.extend(o.name for o in g.output if o.name not in defined and o.name not in free)
    return [x for x in free if x not in defined]
