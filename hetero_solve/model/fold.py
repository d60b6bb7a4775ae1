"""Folding (SPEC section 1): nodes whose outputs are known before running become constants.

A node folds when every input is constant (an initializer, a ``Constant`` output or an output
of a folded node), or when it is a ``Shape`` of a tensor whose shape is static.  Folded nodes
belong to no part, so the ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains torch
exports in every layer cost no split once shapes are static.

Not folded, by choice: nodes with subgraphs, non-deterministic ops, ops outside the standard
domains, nodes that produce a graph output, non-tensor outputs, and outputs larger than
``FOLD_LIMIT_BYTES`` (a huge ``ConstantOfShape`` would be copied into every consuming part).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from .graph import ModelGraph

NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})
FOLD_LIMIT_BYTES = 1 << 20
_STANDARD = frozenset({"", "ai.onnx"})


def find_foldable(mg: ModelGraph) -> list[int]:
    """Indices of foldable nodes, in graph order (closure: folded outputs count as constants)."""
    const = set(mg.initializers)
    const.update(t.values.name for t in mg.model.graph.sparse_initializer)
    for i in mg.constant_nodes:
        const.update(mg.outputs[i])
    skip = set(mg.constant_nodes)
    graph_outputs = set(mg.graph_outputs)
    folded: list[int] = []
    for i, op in enumerate(mg.op_types):
        if i in skip or mg.has_subgraph[i] or mg.domains[i] not in _STANDARD or op in NONDETERMINISTIC:
            continue
        ins = [x for x in mg.inputs[i] if x]
        if op == "Shape" and ins and mg.tensor_type(ins[0]).static:
            pass
        elif not ins or not all(x in const for x in ins):
            continue
        outs = [o for o in mg.outputs[i] if o]
        if any(o in graph_outputs for o in outs) or not all(_small_tensor(mg, o) for o in outs):
            continue
        folded.append(i)
        const.update(outs)
    return folded


def _small_tensor(mg: ModelGraph, name: str) -> bool:
    t = mg.tensor_type(name)
    if t.elem_type == 0:
        return False
    if not t.static:
        return True  # size decided by values (a Range of constants): fold, it fixes the shape
    return mg.tensor_bytes(name) <= FOLD_LIMIT_BYTES


def evaluate_folded(mg: ModelGraph) -> dict[str, np.ndarray]:
    """Values of every folded node's outputs, computed in one onnxruntime session (the
    reference evaluator when onnxruntime cannot run the ops or the opset)."""
    if not mg.folded:
        return {}
    model = _folding_model(mg)
    names = [o.name for o in model.graph.output]
    try:
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        values = sess.run(names, {})
    except Exception:
        from onnx.reference import ReferenceEvaluator
        values = ReferenceEvaluator(model).run(names, {})
    return {n: np.asarray(v) for n, v in zip(names, values)}


def _folding_model(mg: ModelGraph) -> onnx.ModelProto:
    nodes = mg.model.graph.node
    needed: set[str] = set()
    body: list[onnx.NodeProto] = []
    for i in mg.folded:
        node = nodes[i]
        if mg.op_types[i] == "Shape":  # its input may not be computable here; its value is known
            body.append(helper.make_node("Constant", [], [node.output[0]],
                                         value=onnx.numpy_helper.from_array(_static_shape(mg, node))))
            continue
        body.append(node)
        needed.update(x for x in node.input if x)
    produced = {o for n in body for o in n.output}
    constants = [nodes[i] for i in mg.constant_nodes if nodes[i].output[0] in needed]
    inits = [t for name, t in mg.initializers.items() if name in needed and name not in produced]
    sparse = [t for t in mg.model.graph.sparse_initializer if t.values.name in needed]
    outputs = [helper.make_tensor_value_info(o, mg.tensor_type(o).elem_type, None)
               for i in mg.folded for o in mg.outputs[i] if o]
    graph = helper.make_graph(constants + body, "fold", [], outputs, initializer=inits,
                              sparse_initializer=sparse)
    model = helper.make_model(graph, opset_imports=list(mg.model.opset_import))
    model.ir_version = mg.model.ir_version
    return model


def _static_shape(mg: ModelGraph, node: onnx.NodeProto) -> np.ndarray:
    shape = list(mg.tensor_type(node.input[0]).shape)
    start, end = 0, None
    for a in node.attribute:
        if a.name == "start":
            start = a.i
        elif a.name == "end":
            end = a.i
    return np.array(shape[start:end], dtype=np.int64)  # Python slicing clamps as ONNX does
