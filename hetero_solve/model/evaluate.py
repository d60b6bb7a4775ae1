"""Values of folded nodes, computed directly with numpy for the ops shape arithmetic uses.

Folded nodes are mostly the ``Shape -> Gather -> Unsqueeze -> Concat`` chains torch exports in
every layer.  onnxruntime evaluates them correctly but its session start-up grows faster than
linearly with the graph (18 s for 41,000 folded nodes, even with optimisations off), while these
ops are a few microseconds each in numpy.  :func:`evaluate` computes what it can here and hands
the rest (any other op, and everything downstream of one) to onnxruntime in one small session.

Semantics follow the ONNX operator specifications; ``tests/model/test_fold_evaluate.py`` holds each
op to onnxruntime.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import helper

Values = dict[str, np.ndarray]


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _axes(node: onnx.NodeProto, ins: list, opset: int, since: int) -> list[int] | None:
    """Axes from the second input (``opset >= since``) or the ``axes`` attribute."""
    if opset >= since:
        return [int(a) for a in ins[1].reshape(-1)] if len(ins) > 1 and ins[1] is not None else None
    axes = _attrs(node).get("axes")
    return [int(a) for a in axes] if axes is not None else None


def _unsqueeze(node, ins, opset):
    x = ins[0]
    axes = _axes(node, ins, opset, 13)
    rank = x.ndim + len(axes)
    for a in sorted(a + rank if a < 0 else a for a in axes):
        x = np.expand_dims(x, a)
    return x


def _squeeze(node, ins, opset):
    x = ins[0]
    axes = _axes(node, ins, opset, 13)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))


def _slice(node, ins, opset):
    x = ins[0]
    if opset >= 10:
        starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
        axes = ins[3].reshape(-1) if len(ins) > 3 and ins[3] is not None else range(len(starts))
        steps = ins[4].reshape(-1) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    else:
        a = _attrs(node)
        starts, ends = a["starts"], a["ends"]
        axes = a.get("axes", range(len(starts)))
        steps = [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = int(ax) + x.ndim if int(ax) < 0 else int(ax)
        # Python slicing clamps out-of-range starts and ends the way ONNX specifies.
        index[ax] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _reshape(node, ins, opset):
    x, shape = ins[0], [int(d) for d in ins[1].reshape(-1)]
    if not _attrs(node).get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _int_div(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):   # C division truncates toward zero
        q = np.abs(a) // np.abs(b)
        return (q * np.sign(a) * np.sign(b)).astype(np.result_type(a, b))
    return np.true_divide(a, b).astype(np.result_type(a, b))


def _range(node, ins, opset):
    start, limit, delta = (x.item() for x in ins[:3])
    return np.arange(start, limit, delta, dtype=ins[0].dtype)


def _constant_of_shape(node, ins, opset):
    value = _attrs(node).get("value")
    fill = onnx.numpy_helper.to_array(value) if value is not None else np.zeros(1, np.float32)
    return np.full([int(d) for d in ins[0].reshape(-1)], fill.reshape(-1)[0], dtype=fill.dtype)


def _binary(fn):
    return lambda node, ins, opset: np.asarray(fn(ins[0], ins[1]))


#: op type -> fn(node, inputs, opset) -> output (single-output ops only).
NATIVE: dict[str, Callable] = {
    "Identity": lambda node, ins, opset: ins[0],
    "Gather": lambda node, ins, opset: np.take(ins[0], ins[1], axis=_attrs(node).get("axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda node, ins, opset: np.concatenate([np.atleast_1d(x) if x.ndim == 0 else x for x in ins],
                                                      axis=_attrs(node)["axis"]),
    "Slice": _slice,
    "Reshape": _reshape,
    "Cast": lambda node, ins, opset: ins[0].astype(onnx.helper.tensor_dtype_to_np_dtype(_attrs(node)["to"])),
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": _binary(_int_div),
    "Equal": _binary(np.equal), "Less": _binary(np.less), "Greater": _binary(np.greater),
    "Neg": lambda node, ins, opset: np.negative(ins[0]),
    "Where": lambda node, ins, opset: np.where(ins[0], ins[1], ins[2]),
    "Range": _range,
    "ConstantOfShape": _constant_of_shape,
    "Expand": lambda node, ins, opset: np.array(np.broadcast_to(
        ins[0], np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in ins[1].reshape(-1))))),
    "Transpose": lambda node, ins, opset: np.transpose(ins[0], _attrs(node).get("perm")),
}


def evaluate_nodes(nodes: list[onnx.NodeProto], known: Values, opset: int,
                   onnx_model: Callable[[list[onnx.NodeProto], Values, list[str]], onnx.ModelProto]
                   ) -> Values:
    """Outputs of ``nodes`` (in topological order) given the values ``known`` of their other
    inputs.  Ops of :data:`NATIVE` are computed here; the rest, with everything downstream of
    them, in one onnxruntime session built by ``onnx_model(nodes, inputs, outputs)``.

    A node whose op, attributes and (small) input values equal an earlier one's takes that
    node's value, computed once: the chains torch exports repeat a handful of values in every
    layer (28,500 folded nodes, 3 distinct values, in the 100,000-node benchmark DAG)."""
    values: Values = {}
    deferred: list[onnx.NodeProto] = []
    deferred_out: set[str] = set()
    memo: dict[tuple, np.ndarray] = {}
    for node in nodes:
        fn = NATIVE.get(node.op_type) if node.domain in ("", "ai.onnx") and len(node.output) == 1 else None
        if fn is None or any(x in deferred_out for x in node.input):
            deferred.append(node)
            deferred_out.update(node.output)
            continue
        ins = [values[x] if x in values else known[x] if x else None for x in node.input]
        key = _memo_key(node, ins)
        if key is not None and key in memo:
            values[node.output[0]] = memo[key]
            continue
        try:
            values[node.output[0]] = value = np.asarray(fn(node, ins, opset))
        except Exception:   # an unusual form (a missing optional input, say): let onnxruntime do it
            deferred.append(node)
            deferred_out.update(node.output)
            continue
        if key is not None:
            memo[key] = value
    if deferred:
        needed = {x for n in deferred for x in n.input if x and x not in deferred_out}
        inputs = {x: values[x] if x in values else known[x] for x in needed}
        outputs = [o for n in deferred for o in n.output if o]
        values.update(run_onnxruntime(onnx_model(deferred, inputs, outputs), outputs))
    return values


#: Inputs up to this many elements make a node's value reusable by equal nodes (shape arithmetic).
MEMO_ELEMENTS = 64


def _memo_key(node: onnx.NodeProto, ins: list) -> tuple | None:
    """What a node's value depends on, when all its inputs are small arrays: the op, its
    attributes (serialised) and each input's dtype, shape and bytes; else None."""
    parts: list = [node.op_type, tuple(a.SerializeToString() for a in node.attribute)]
    for x in ins:
        if x is None:
            parts.append(None)
        elif isinstance(x, np.ndarray) and x.size <= MEMO_ELEMENTS and x.dtype != object:
            parts.append((x.dtype.str, x.shape, x.tobytes()))
        else:
            return None
    return tuple(parts)


def run_onnxruntime(model: onnx.ModelProto, outputs: list[str]) -> Values:
    try:
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        got = sess.run(outputs, {})
    except Exception:   # an op or opset this onnxruntime lacks
        from onnx.reference import ReferenceEvaluator
        got = ReferenceEvaluator(model).run(outputs, {})
    return {name: np.asarray(v) for name, v in zip(outputs, got)}
