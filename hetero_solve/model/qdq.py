"""Quantized units (docs/problem.md): the ``DequantizeLinear -> op -> QuantizeLinear`` groups
a part boundary never cuts.

NPU toolchains, and onnxruntime itself (its ``NodeUnit``), read a QDQ model as units: an op
with the ``DequantizeLinear`` (DQ) nodes feeding it and the ``QuantizeLinear`` (Q) nodes
reading its outputs is one integer kernel (a DQ -> Conv -> Q group becomes a
``QLinearConv``).  A part boundary inside a unit would leave an NPU a float op it cannot
compile, so the unit is placed whole.  Written for hetero-solve after onnxruntime's grouping
(``QDQ::NodeGroupSelector``: a DQ joins the op only when the op is its only reader, a Q only
when it reads the op's output), without its per-op selector tables: every op can be the
centre of a unit, so a rule file decides which quantized ops a device takes
(``when: {Op: {quantized: true}}``).

A unit around an op ``T`` (placed, not a DQ or Q, no subgraph):

- every DQ that makes an input of ``T`` (not a graph output) whose readers could all be the
  op of a unit; a weight's DQ (constant int8/uint8/int4 input) is one of them, so the weight
  stays quantized and travels with its op;
- every Q that reads an output of ``T`` whose readers are all such Q nodes (not a graph
  output), when the Q's scale and zero point are constants (so joining it closes no cycle).

A DQ read by several ops (``quantize_static`` shares one between a residual ``Add`` and the
next ``Conv``) is *shared*: it belongs to the unit of each reader, as onnxruntime copies it
for each (its ``EnsureUniqueDQForNodeUnit`` transformer), so each part holding a reader holds
a copy and the int8 tensor is what crosses.  Otherwise units do not overlap: a Q follows one
op.  A boundary may fall between a Q and the next unit's DQ: the tensor crossing it is the
quantized one.  ``T`` is
*quantized* when its unit has a DQ, every floating-point input of ``T`` comes through a DQ of
the unit, and every floating-point output goes only to Q nodes of the unit: what a rule's
``quantized: true`` asks for.  Why the ordering of units stays topological: module doc of
:mod:`hetero_solve.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from onnx import TensorProto

from .graph import ModelGraph

DEQUANTIZE = "DequantizeLinear"
QUANTIZE = "QuantizeLinear"
_QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
_FLOAT = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16,
                    TensorProto.DOUBLE})


@dataclass(frozen=True)
class QuantizedUnits:
    """The quantized units of a model (module doc), by main-graph node index.

    Attributes
    ----------
    groups : list of tuple of int
        Each unit's nodes in graph order (two or more).
    anchors : list of int
        Each unit's op ``T`` (what the unit is named after).
    unit_of : dict of int to int
        Node -> its unit, for the nodes in a unit (a shared DQ: its first reader's).
    shared : frozenset of int
        The DQ nodes in several units (module doc).
    quantized : frozenset of int
        The anchors that are quantized (module doc).
    """

    groups: list[tuple[int, ...]] = field(default_factory=list)
    anchors: list[int] = field(default_factory=list)
    unit_of: dict[int, int] = field(default_factory=dict)
    shared: frozenset[int] = frozenset()
    quantized: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.groups)


def is_qdq(mg: ModelGraph, i: int, op: str) -> bool:
    """Is node ``i`` a ``op`` (``QuantizeLinear`` or ``DequantizeLinear``) of a domain that
    defines it?"""
    return mg.op_types[i] == op and mg.domains[i] in _QDQ_DOMAINS


def find_units(mg: ModelGraph, placeable: Iterable[int] | None = None) -> QuantizedUnits:
    """The quantized units among the ``placeable`` nodes (default: the model's).

    Parameters
    ----------
    mg : ModelGraph
        A loaded model.
    placeable : iterable of int, optional
        The nodes that are placed (not ``Constant``, not folded).

    Returns
    -------
    QuantizedUnits
        Empty for a model without ``DequantizeLinear`` nodes (one pass over the op types).

    Examples
    --------
    >>> from hetero_solve.model import load_model
    >>> find_units(load_model("examples/resnet_like.onnx")).groups
    []
    """
    ops = mg.op_types
    if DEQUANTIZE not in ops and QUANTIZE not in ops:
        return QuantizedUnits()
    placed = set(mg.placeable() if placeable is None else placeable)
    readers = _readers(mg)
    outputs = set(mg.graph_outputs)
    const = mg.constant_tensors
    def can_anchor(t: int) -> bool:
        return t in placed and not (is_qdq(mg, t, DEQUANTIZE) or is_qdq(mg, t, QUANTIZE)
                                    or mg.has_subgraph[t])

    groups, anchors, quantized, shared = [], [], set(), set()
    for t in sorted(placed):
        if not can_anchor(t):
            continue
        dqs = []
        for x in dict.fromkeys(x for x in mg.inputs[t] if x):
            u = mg.producer.get(x)
            if u is not None and u in placed and is_qdq(mg, u, DEQUANTIZE) \
                    and x not in outputs and all(map(can_anchor, readers.get(x, ()))) \
                    and u not in dqs:
                dqs.append(u)
                if len(set(readers[x])) > 1:
                    shared.add(u)
        qs = []
        for o in (o for o in mg.outputs[t] if o):
            rs = readers.get(o, [])
            if rs and o not in outputs and all(
                    r in placed and is_qdq(mg, r, QUANTIZE) and mg.inputs[r][0] == o
                    and all(x in const for x in mg.inputs[r][1:] if x) for r in rs):
                qs.extend(r for r in dict.fromkeys(rs) if r not in qs)
        if not dqs and not qs:
            continue
        groups.append(tuple(sorted([*dqs, t, *qs])))
        anchors.append(t)
        if dqs and _all_through(mg, t, dqs, qs):
            quantized.add(t)
    unit_of: dict[int, int] = {}
    for k, g in enumerate(groups):
        for i in g:
            unit_of.setdefault(i, k)
    return QuantizedUnits(groups, anchors, unit_of, frozenset(shared), frozenset(quantized))


def _readers(mg: ModelGraph) -> dict[str, list[int]]:
    """Tensor -> the main-graph nodes reading it (subgraphs' outer-scope reads included)."""
    readers: dict[str, list[int]] = {}
    for i in range(len(mg.names)):
        for x in mg.all_inputs(i):
            readers.setdefault(x, []).append(i)
    return readers


def _all_through(mg: ModelGraph, t: int, dqs: list[int], qs: list[int]) -> bool:
    """Every floating-point input of ``t`` made by a DQ of its unit, every floating-point
    output read only by Q nodes of it (those are in ``qs`` by construction)."""
    made = {o for u in dqs for o in mg.outputs[u] if o}
    read_by_q = {mg.inputs[r][0] for r in qs}
    is_float = lambda x: mg.tensor_type(x).elem_type in _FLOAT   # noqa: E731
    return (all(x in made for x in mg.inputs[t] if x and is_float(x))
            and all(o in read_by_q for o in mg.outputs[t] if o and is_float(o)))
