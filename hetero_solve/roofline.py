"""Each node's arithmetic and memory traffic from its shapes: what a device's roofline turns
into a time (docs/costs.md, ``roofline`` in docs/rules.md).

:func:`node_work` gives a node's :class:`Work`: **FLOPs** (a multiply-add counts 2) and
**bytes** (every distinct tensor it reads, constants included, plus every tensor it writes).
Shapes are what loading found (docs/problem.md): an unknown dimension counts as 1, as in
memory sizes.  Per op family:

* **Conv** (and ``ConvInteger``, ``QLinearConv``, ``com.microsoft.FusedConv``): 2 x output
  elements x (input channels per group x kernel size), + output elements for a bias.
* **ConvTranspose**: 2 x input elements x (output channels per group x kernel size), + output
  elements for a bias.
* **MatMul** (``MatMulInteger``, ``QLinearMatMul``, ``FusedMatMul``): 2 x output elements x
  the reduced dimension; **Gemm**: the same, + output elements for ``C``.
* **Attention-like** (``Attention`` of ONNX and com.microsoft, ``MultiHeadAttention``,
  ``GroupQueryAttention``): 2 x batch x queries x keys x (query width + value width) for the
  scores and the weighted sum, + 5 per score for the softmax; com.microsoft's ``Attention``
  adds its input projection (2 x tokens x input width x weight columns).
* **Recurrent** (``LSTM``, ``GRU``, ``RNN``): per step and batch row, 2 x (the ``W`` and
  ``R`` elements), + 4 per gate value.
* **Normalisations and softmax**: 5 per output element; **pooling**: output elements x kernel
  size; **reductions** (``Reduce*``, ``ArgMax``, global pools): input elements.
* **Data movement** (``Transpose``, ``Concat``, ``Gather``, ``Slice``, ``Pad``, ``Cast``...):
  no FLOPs, bytes in and out; **views** (``Reshape``, ``Flatten``, ``Squeeze``,
  ``Unsqueeze``, ``Identity``, ``Dropout``): nothing (a runtime moves no data for them).
* **Elementwise** and any other op: 1 FLOP per output element.  ``If``/``Loop``/``Scan``
  bodies are not counted (a measured profile gives their time).

>>> from hetero_solve.model import load_model
>>> mg = load_model("examples/seed000.onnx")
>>> w = node_work(mg, 0)
>>> w.flops >= 0 and w.bytes > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx.helper

from .model.graph import ModelGraph


@dataclass(frozen=True)
class Work:
    """A node's arithmetic (``flops``: a multiply-add is 2) and memory traffic (``bytes``)."""

    flops: float
    bytes: float


VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
MOVEMENT = frozenset({
    "Transpose", "Concat", "Split", "Slice", "Gather", "GatherND", "GatherElements",
    "Scatter", "ScatterND", "ScatterElements", "Pad", "Tile", "Expand", "Cast", "CastLike",
    "DepthToSpace", "SpaceToDepth", "Shape", "Size", "ConstantOfShape", "Compress",
    "ReverseSequence", "OneHot", "NonZero", "Range", "Trilu", "SplitToSequence",
    "ConcatFromSequence", "SequenceAt", "SequenceConstruct", "SequenceInsert",
    "SequenceErase", "SequenceLength", "EyeLike", "TopK", "Unique", "Optional",
    "OptionalGetElement", "OptionalHasElement"})
NORMALISATIONS = frozenset({
    "Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "BatchNormalization",
    "InstanceNormalization", "GroupNormalization", "LpNormalization",
    "MeanVarianceNormalization", "RMSNormalization", "SkipLayerNormalization",
    "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "LRN"})
POOLS = frozenset({"MaxPool", "AveragePool", "LpPool", "MaxRoiPool", "QLinearAveragePool"})
REDUCTIONS = frozenset({
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
    "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "QLinearGlobalAveragePool"})
#: Convolution-like ops: op type -> index of the weight input.
CONVS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3, "FusedConv": 1, "NhwcConv": 1}
#: MatMul-like ops: op type -> (index of A, index of B).
MATMULS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3),
           "FusedMatMul": (0, 1), "MatMulNBits": (0, 1)}
GEMMS = frozenset({"Gemm", "FusedGemm", "QGemm"})
ATTENTIONS = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
RECURRENT = {"LSTM": 4, "GRU": 3, "RNN": 1}     # gates
#: Softmax FLOPs per score, normalisation FLOPs per element.
PER_SCORE = PER_NORMALISED = 5


class _Node:
    """Shapes and attributes of one node, unknown dims counted as 1."""

    def __init__(self, mg: ModelGraph, i: int):
        self.mg, self.i = mg, i
        self.inputs, self.outputs = mg.inputs[i], mg.outputs[i]

    def shape(self, name: str) -> tuple[int, ...]:
        shape = self.mg.tensor_type(name).shape if name else None
        return tuple(d if isinstance(d, int) and d >= 0 else 1 for d in shape or ())

    def input_shape(self, k: int) -> tuple[int, ...]:
        return self.shape(self.inputs[k]) if k < len(self.inputs) else ()

    def has_input(self, k: int) -> bool:
        return k < len(self.inputs) and bool(self.inputs[k])

    def out_count(self) -> int:
        return sum(self.mg.tensor_type(o).count for o in self.outputs if o)

    def in_count(self, k: int = 0) -> int:
        return self.mg.tensor_type(self.inputs[k]).count if self.has_input(k) else 0

    def attr(self, name: str, default=None):
        for a in self.mg.model.graph.node[self.i].attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default


def node_work(mg: ModelGraph, i: int) -> Work:
    """FLOPs and bytes of node ``i`` of ``mg.model.graph.node`` (module doc)."""
    return nodes_work(mg, [i])[0]


def nodes_work(mg: ModelGraph, nodes: list[int]) -> list[Work]:
    """:func:`node_work` of each node, every tensor sized once."""
    tensors = {x for i in nodes for x in (*mg.all_inputs(i), *mg.outputs[i]) if x}
    names = list(tensors)
    size = dict(zip(names, mg.bytes_of(names)))
    out = []
    for i in nodes:
        if mg.op_types[i] in VIEWS:
            out.append(Work(0.0, 0.0))
            continue
        nbytes = sum(size[x] for x in mg.all_inputs(i)) + \
            sum(size[o] for o in mg.outputs[i] if o)
        out.append(Work(float(node_flops(mg, i)), float(nbytes)))
    return out


def node_flops(mg: ModelGraph, i: int) -> int:
    """FLOPs of node ``i`` (module doc); a multiply-add counts 2."""
    op = mg.op_types[i]
    n = _Node(mg, i)
    if op in VIEWS or op in MOVEMENT:
        return 0
    if op in CONVS:
        w = n.input_shape(CONVS[op])
        bias = n.out_count() if op in ("Conv", "FusedConv", "NhwcConv") and n.has_input(2) else 0
        return 2 * n.out_count() * math.prod(w[1:]) + bias
    if op == "ConvTranspose":
        w = n.input_shape(1)
        return 2 * n.in_count(0) * math.prod(w[1:]) + (n.out_count() if n.has_input(2) else 0)
    if op in MATMULS:
        a = n.input_shape(MATMULS[op][0])
        return 2 * n.out_count() * (a[-1] if a else 1)
    if op in GEMMS:
        a = n.input_shape(0)
        k = (a[0] if n.attr("transA", 0) else a[-1]) if a else 1
        return 2 * n.out_count() * k + (n.out_count() if n.has_input(2) else 0)
    if op in ATTENTIONS:
        return _attention_flops(n, op, mg.domains[i])
    if op in RECURRENT:
        return _recurrent_flops(n, RECURRENT[op])
    if op in NORMALISATIONS:
        return PER_NORMALISED * n.out_count()
    if op in POOLS:
        return n.out_count() * math.prod(n.attr("kernel_shape", []) or [1])
    if op in REDUCTIONS:
        return n.in_count(0)
    return n.out_count()


def _attention_flops(n: _Node, op: str, domain: str) -> int:
    """Scores and weighted sum (2 x B x S x L x (Dq + Dv)), softmax (5 per score and head),
    and com.microsoft ``Attention``'s input projection."""
    q = n.input_shape(0)
    out = n.shape(n.outputs[0]) if n.outputs and n.outputs[0] else ()
    heads = int(n.attr("num_heads", 0) or n.attr("q_num_heads", 0) or 1)
    if op == "Attention" and domain == "com.microsoft":
        b, s, width = (q + (1, 1, 1))[:3] if len(q) < 3 else q[:3]
        w = n.input_shape(1)
        sizes = n.attr("qkv_hidden_sizes", None)
        dq, dv = (sizes[0], sizes[2]) if sizes else ((w[-1] // 3,) * 2 if w else (1, 1))
        past = n.input_shape(4)
        keys = s + (past[3] if len(past) == 5 else 0)
        projection = 2 * b * s * width * (w[-1] if w else 1)
        return projection + 2 * b * s * keys * (dq + dv) + PER_SCORE * b * heads * s * keys
    if len(q) == 4:    # ONNX Attention with (B, heads, S, head size)
        b, heads, s, hq = q
        k, v = n.input_shape(1), n.input_shape(2)
        keys = k[2] if len(k) == 4 else s
        hv = v[3] if len(v) == 4 else hq
        return 2 * b * heads * s * keys * (hq + hv) + PER_SCORE * b * heads * s * keys
    b, s = (q + (1, 1))[:2]
    dq = q[2] if len(q) == 3 else 1
    dv = out[-1] if out else dq
    if op == "GroupQueryAttention" or not n.has_input(1):
        k = n.input_shape(1)
        keys = k[1] if len(k) == 3 else s
        past = n.input_shape(3)
        keys += past[2] if op == "GroupQueryAttention" and len(past) == 4 else 0
        if op == "GroupQueryAttention" and not n.has_input(1):   # packed QKV
            dq = dv
    else:
        k = n.input_shape(1)
        keys = k[1] if len(k) == 3 else k[2] if len(k) == 4 else s
    return 2 * b * s * keys * (dq + dv) + PER_SCORE * b * heads * s * keys


def _recurrent_flops(n: _Node, gates: int) -> int:
    """Per step and batch row: 2 x (W and R elements) + 4 per gate value."""
    x, w, r = n.input_shape(0), n.input_shape(1), n.input_shape(2)
    steps, batch = ((x[1], x[0]) if n.attr("layout", 0) else (x[0], x[1])) if len(x) >= 2 \
        else (1, 1)
    gate_values = (w[0] * w[1]) if len(w) >= 2 else gates
    return steps * batch * (2 * (math.prod(w) + math.prod(r)) + 4 * gate_values)


__all__ = ["Work", "node_work", "nodes_work", "node_flops"]
