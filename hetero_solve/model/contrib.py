"""Output types of onnxruntime's contrib ops, which ONNX shape inference does not know.

Exports that went through onnxruntime's quantizer or its transformer optimizer hold ops of the
``com.microsoft`` domain (``DynamicQuantizeLSTM``, ``QAttention``, ``MatMulIntegerToFloat``,
``SkipLayerNormalization``, ...).  ONNX has no schema for them, so inference leaves their
outputs as the model declares them (often with an unknown axis, or not at all) and every
tensor after them loses its size; onnxruntime's own symbolic shape inference stops at
several of them too.  :func:`contrib_hints` gives their output types from their inputs'
types and attributes, as onnxruntime computes them (``docs/ContribOperators.md`` of
onnxruntime; every function here is checked axis by axis against onnxruntime running the op
at two shapes, ``tests/model/test_contrib.py``), so that the next inference round
(``shapes.analyse_shapes``) carries them on.

A dim is handled as :mod:`.symbolic` does (a number, an expression of the inputs' dim names,
or unknown), so an output is exact for every value of the dims, not only the one given.  An op
or a case not covered here is left as it was: its tensors keep their unknown size, which the
answer then reports as a lower bound (docs/problem.md, "Memory of a part").
"""

from __future__ import annotations

from typing import Callable

import onnx

from .graph import GraphLists, TensorType, TypeTable
from .symbolic import UNKNOWN, _broadcast, _make, parse, written

MS = "com.microsoft"
_F = onnx.TensorProto

#: Shape function: (attributes, input types in order, "" inputs as ``None``) -> one
#: ``(elem_type, dims)`` per output (``None`` where nothing is known); dims are parsed
#: (:func:`.symbolic.parse`): ints, expressions or ``UNKNOWN``.
ShapeFunction = Callable[[dict, list], list]


def _shape(t: TensorType | None):
    """Parsed dims of ``t``, ``None`` when its rank is unknown (or it is absent)."""
    if t is None or t.shape is None:
        return None
    return tuple(parse(d) for d in t.shape)


def _elem(t: TensorType | None) -> int:
    return t.elem_type if t is not None else 0


def _at(xs: list, k: int):
    return xs[k] if k < len(xs) else None


def _same(k: int = 0, outputs: int = 1, elem: Callable[[list], int] | None = None):
    """Every listed output has input ``k``'s shape (and type, unless ``elem`` says)."""
    def f(attrs, ins):
        t = _at(ins, k)
        e = elem(ins) if elem else _elem(t)
        return [(e, _shape(t))] * outputs
    return f


def _div(a, b):
    """``a / b`` when it is exact (numbers, or an expression over a number dividing every
    coefficient), else ``UNKNOWN``."""
    if isinstance(a, int) and isinstance(b, int) and b and a % b == 0:
        return a // b
    if isinstance(b, int) and b and a is not UNKNOWN and not isinstance(a, int):
        if all(c % b == 0 for c in a.terms.values()):
            return _make({k: c // b for k, c in a.terms.items()})
    return UNKNOWN


def _matmul(a, b):
    """numpy.matmul's shape (1-D operands promoted and the added axis removed)."""
    if a is None or b is None or not a or not b:
        return None
    a1, b1 = len(a) == 1, len(b) == 1
    a = (1,) + a if a1 else a
    b = b + (1,) if b1 else b
    batch = _broadcast(a[:-2], b[:-2])
    if batch is None:
        return None
    out = batch + (() if a1 else (a[-2],)) + (() if b1 else (b[-1],))
    return out


def _lstm(attrs, ins):
    """``DynamicQuantizeLSTM``: ``X [seq, batch, input]`` (time-major, the op has no
    ``layout``), ``W [directions, input, 4 hidden]``: ``Y [seq, directions, batch,
    hidden]``, ``Y_h`` and ``Y_c [directions, batch, hidden]``."""
    x = _shape(_at(ins, 0))
    hidden = attrs.get("hidden_size")
    dirs = 2 if attrs.get("direction", b"forward") == b"bidirectional" else 1
    if x is None or len(x) != 3 or hidden is None:
        return []
    e = _elem(ins[0])
    return [(e, (x[0], dirs, x[1], hidden)), (e, (dirs, x[1], hidden)), (e, (dirs, x[1], hidden))]


def _present(attrs, x, hidden, past):
    """``Attention``'s ``present [2, batch, heads, past + sequence, head size]``."""
    heads = attrs.get("num_heads")
    if x is None or len(x) != 3 or heads is None or hidden is UNKNOWN:
        return None
    total = x[1] if past is None or len(past) != 5 else past[3] + x[1]
    return (2, x[0], heads, total, _div(hidden, heads))


def _attention(attrs, ins, elem):
    """``Attention`` / ``QAttention``: ``input [batch, sequence, in]``, ``weights [in,
    q + k + v]``: ``output [batch, sequence, v]`` (``qkv_hidden_sizes`` when given, else a
    third each), ``present`` as :func:`_present` (keys' hidden size)."""
    x = _shape(_at(ins, 0))
    w = _shape(_at(ins, 1))
    if x is None or len(x) != 3 or w is None or len(w) != 2:
        return []
    sizes = attrs.get("qkv_hidden_sizes")
    if sizes:
        q_hidden, v_hidden = sizes[0], sizes[2]
    else:
        q_hidden = v_hidden = _div(w[1], 3)
    past_index = 4 if elem is None else 8
    past = _shape(_at(ins, past_index))
    e = _elem(ins[0]) if elem is None else elem(ins)
    return [(e, (x[0], x[1], v_hidden)), (e, _present(attrs, x, q_hidden, past))]


def _multi_head(attrs, ins):
    """``MultiHeadAttention`` with separate 3-D ``query [batch, sequence, d]``, ``key
    [batch, kv, d]`` and ``value [batch, kv, dv]``: ``output [batch, sequence, dv]``,
    ``present_key/value [batch, heads, past + kv, head size]``.  Packed forms: unknown."""
    q, k, v = (_shape(_at(ins, i)) for i in range(3))
    heads = attrs.get("num_heads")
    if q is None or len(q) != 3 or k is None or len(k) != 3 or v is None or len(v) != 3 \
            or heads is None:
        return []
    e = _elem(ins[0])
    past_k, past_v = _shape(_at(ins, 6)), _shape(_at(ins, 7))

    def present(kv, past, d):
        total = kv[1] if past is None or len(past) != 4 else past[2] + kv[1]
        return (e, (q[0], heads, total, _div(d, heads)))
    return [(e, (q[0], q[1], v[2])), present(k, past_k, k[2]), present(v, past_v, v[2])]


def _skip_norm(attrs, ins):
    """``SkipLayerNormalization`` / ``SkipSimplifiedLayerNormalization``: ``output`` and
    ``input_skip_bias_sum`` are the input's shape; ``mean``, ``inv_std_var`` the input's with
    the last axis 1 (float)."""
    x = _shape(_at(ins, 0))
    e = _elem(ins[0])
    stat = None if x is None else x[:-1] + (1,)
    return [(e, x), (_F.FLOAT, stat), (_F.FLOAT, stat), (e, x)]


def _embed_norm(attrs, ins):
    """``EmbedLayerNormalization``: ``input_ids [batch, sequence]``, ``word_embedding
    [vocabulary, hidden]``: ``output [batch, sequence, hidden]``, ``mask_index [batch]``
    (int32), ``embedding_sum`` like the output."""
    ids, word = _shape(_at(ins, 0)), _shape(_at(ins, 2))
    if ids is None or len(ids) != 2 or word is None or len(word) != 2:
        return []
    e = _elem(ins[2])
    out = (ids[0], ids[1], word[1])
    return [(e, out), (_F.INT32, (ids[0],)), (e, out)]


def _matmul_as(elem: Callable[[list], int], a: int = 0, b: int = 1):
    def f(attrs, ins):
        return [(elem(ins), _matmul(_shape(_at(ins, a)), _shape(_at(ins, b))))]
    return f


def _fused_matmul(attrs, ins):
    """``FusedMatMul``: ``alpha * op(A) @ op(B)``, ``transA``/``transB`` swapping the last
    two axes (the batch transposes are left unknown)."""
    if attrs.get("transBatchA") or attrs.get("transBatchB"):
        return []
    a, b = _shape(_at(ins, 0)), _shape(_at(ins, 1))
    if a is None or b is None:
        return []
    if attrs.get("transA") and len(a) >= 2:
        a = a[:-2] + (a[-1], a[-2])
    if attrs.get("transB") and len(b) >= 2:
        b = b[:-2] + (b[-1], b[-2])
    return [(_elem(ins[0]), _matmul(a, b))]


def _matmul_nbits(attrs, ins):
    """``MatMulNBits``: ``A [..., K]`` times the packed ``N x K`` weight: ``[..., N]``."""
    a = _shape(_at(ins, 0))
    n = attrs.get("N")
    if a is None or not a or n is None:
        return []
    return [(_elem(ins[0]), a[:-1] + (n,))]


def _qgemm(attrs, ins):
    """``QGemm``: ``[M, N]`` of ``op(A) op(B)``; quantized (``y_zero_point``'s type) when
    ``y_scale`` is given, else float."""
    a, b = _shape(_at(ins, 0)), _shape(_at(ins, 3))
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return []
    m = a[1] if attrs.get("transA") else a[0]
    n = b[0] if attrs.get("transB") else b[1]
    quantized = _at(ins, 7) is not None
    e = (_elem(_at(ins, 8)) or _F.UINT8) if quantized else _F.FLOAT
    return [(e, (m, n))]


def _qlinear_binary(attrs, ins):
    """``QLinearAdd`` / ``QLinearMul``: the broadcast of ``A`` and ``B`` (inputs 0 and 3)."""
    return [(_elem(ins[0]), _broadcast(_shape(_at(ins, 0)), _shape(_at(ins, 3))))]


def _qlinear_concat(attrs, ins):
    """``QLinearConcat(Y_scale, Y_zero_point, (X, scale, zero point)...)`` along ``axis``."""
    xs = [_shape(_at(ins, k)) for k in range(2, len(ins), 3)]
    if not xs or any(x is None for x in xs) or len({len(x) for x in xs}) != 1 or not xs[0]:
        return []
    axis = attrs.get("axis", 0) % len(xs[0])
    total = 0
    for x in xs:
        total = total + x[axis]
    return [(_elem(ins[2]), xs[0][:axis] + (total,) + xs[0][axis + 1:])]


def _qlinear_global_pool(attrs, ins):
    """``QLinearGlobalAveragePool``: spatial axes 1 (``channels_last``: ``[N, 1.., C]``)."""
    x = _shape(_at(ins, 0))
    if x is None or len(x) < 3:
        return []
    if attrs.get("channels_last"):
        return [(_elem(ins[0]), (x[0],) + (1,) * (len(x) - 2) + (x[-1],))]
    return [(_elem(ins[0]), x[:2] + (1,) * (len(x) - 2))]


def _elem_of(k: int, default: int = 0):
    return lambda ins: _elem(_at(ins, k)) or default


#: ``(domain, op) -> shape function``.
SHAPE_FUNCTIONS: dict[tuple[str, str], ShapeFunction] = {
    (MS, "DynamicQuantizeLSTM"): _lstm,
    (MS, "Attention"): lambda a, i: _attention(a, i, None),
    (MS, "QAttention"): lambda a, i: _attention(a, i, _elem_of(3, _F.FLOAT)),
    (MS, "MultiHeadAttention"): _multi_head,
    (MS, "SkipLayerNormalization"): _skip_norm,
    (MS, "SkipSimplifiedLayerNormalization"): _skip_norm,
    (MS, "EmbedLayerNormalization"): _embed_norm,
    (MS, "MatMulInteger16"): _matmul_as(lambda ins: _F.INT32),
    (MS, "MatMulIntegerToFloat"): _matmul_as(_elem_of(2, _F.FLOAT)),
    (MS, "DynamicQuantizeMatMul"): _matmul_as(_elem_of(0)),
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "MatMulNBits"): _matmul_nbits,
    (MS, "QGemm"): _qgemm,
    (MS, "QLinearAdd"): _qlinear_binary,
    (MS, "QLinearMul"): _qlinear_binary,
    (MS, "QLinearConcat"): _qlinear_concat,
    (MS, "QLinearGlobalAveragePool"): _qlinear_global_pool,
    (MS, "QLinearSigmoid"): _same(),
    (MS, "QLinearLeakyRelu"): _same(),
    (MS, "QLinearSoftmax"): _same(),
    (MS, "Gelu"): _same(),
    (MS, "FastGelu"): _same(),
    (MS, "BiasGelu"): _same(),
    (MS, "QuickGelu"): _same(),
    (MS, "RotaryEmbedding"): _same(),
    (MS, "QuantizeLinear"): _same(elem=_elem_of(2, _F.UINT8)),
    (MS, "DequantizeLinear"): _same(elem=_elem_of(1, _F.FLOAT)),
}


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def output_types(node: onnx.NodeProto, types: TypeTable) -> list[tuple[int, tuple | None]] | None:
    """The output types of ``node`` (a contrib op :data:`SHAPE_FUNCTIONS` knows) from its
    inputs' ``types``: one ``(elem_type, dims)`` per output, dims written as shapes hold them
    (int, expression text, ``None``); ``None`` when the op is not known here."""
    f = SHAPE_FUNCTIONS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
    if f is None:
        return None
    ins = [types[x] if x else None for x in node.input]
    found = f(_attributes(node), ins)
    return [(e, None if dims is None else tuple(written(d) for d in dims))
            for e, dims in found]


def contrib_hints(graph: GraphLists, types: TypeTable) -> list[onnx.ValueInfoProto]:
    """The output types of the contrib ops :data:`SHAPE_FUNCTIONS` knows that say more than
    ``types`` (a rank, a dim, an element type), each dim the op's own where it knows it.
    A model's own declaration of a contrib op's output is what inference keeps otherwise;
    where it disagrees with the op, the op wins (it is what onnxruntime makes)."""
    hints = []
    nodes = graph.model.graph.node
    for i, (domain, op) in enumerate(zip(graph.domains, graph.op_types)):
        if (domain if domain != "ai.onnx" else "", op) not in SHAPE_FUNCTIONS:
            continue
        outs = graph.outputs[i]
        if all(not o or types[o].static and types[o].elem_type for o in outs):
            continue
        found = output_types(nodes[i], types) or []
        for o, (elem, dims) in zip(outs, found):
            if not o or dims is None:
                continue
            t = types[o]
            old = t.shape if t.shape is not None and len(t.shape) == len(dims) else (None,) * len(dims)
            merged = tuple(d if d is not None else (e if _named(e) else None)
                           for d, e in zip(dims, old))
            elem = elem or t.elem_type
            if merged != t.shape or elem != t.elem_type:
                hints.append(onnx.helper.make_tensor_value_info(o, elem, list(merged)))
    return hints


def _named(d) -> bool:
    return isinstance(d, int) or (isinstance(d, str) and d not in ("", "?")
                                  and not d.startswith("unk__"))
