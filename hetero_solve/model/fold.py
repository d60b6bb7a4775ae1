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

from .graph import ModelGraph, TensorType

NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})
FOLD_LIMIT_BYTES = 1 << 20
_STANDARD = frozenset({"", "ai.onnx"})


def find_foldable(mg: ModelGraph, *, assume_static: bool = False) -> list[int]:
    """Indices of foldable nodes, in graph order (closure: folded outputs count as constants).

    ``assume_static``: a prediction made before shapes are known, as if every shape were
    static and every output small; :func:`prediction_holds` tells, once they are known,
    whether the prediction is the answer."""
    const = constants_before_folding(mg)
    skip = set(mg.constant_nodes)
    graph_outputs = set(mg.graph_outputs)
    ops, domains, has_sub, outputs = mg.op_types, mg.domains, mg.has_subgraph, mg.outputs
    types = mg.types
    folded: list[int] = []
    for i, ins in enumerate(mg.inputs):
        # The common case first, cheaply: a node reading a tensor not known before running.
        if ops[i] == "Shape":
            first = next((x for x in ins if x), None)
            if first is None or not (assume_static or first in const or mg.tensor_type(first).static):
                continue
        else:
            unknown = False
            for x in ins:
                if x and x not in const:
                    unknown = True
                    break
            if unknown or not any(ins):   # no input at all: nothing to fold from
                continue
        if i in skip or has_sub[i] or domains[i] not in _STANDARD or ops[i] in NONDETERMINISTIC:
            continue
        outs = [o for o in outputs[i] if o]
        if any(o in graph_outputs for o in outs) or not (
                assume_static or all(_small_tensor(mg, o, types[o]) for o in outs)):
            continue
        folded.append(i)
        const.update(outs)
    return folded


def prediction_holds(mg: ModelGraph, predicted: list[int]) -> bool:
    """Is ``predicted`` (``find_foldable(mg, assume_static=True)``, made before shapes were
    known) what :func:`find_foldable` gives now?  Only two of its tests read shapes: a
    ``Shape`` needs a constant or static input, every output must be small.  When both hold
    for every predicted node, in graph order, each decision of the real search is the
    prediction's (the other tests do not read shapes), at a fraction of its cost."""
    const = constants_before_folding(mg)
    ops, inputs, outputs, types = mg.op_types, mg.inputs, mg.outputs, mg.types
    for i in predicted:
        if ops[i] == "Shape":
            first = next((x for x in inputs[i] if x), None)
            if first is None or not (first in const or types[first].static):
                return False
        for o in outputs[i]:
            if o:
                if not _small_tensor(mg, o, types[o]):
                    return False
                const.add(o)
    return True


def folded_outputs(mg: ModelGraph, folded: list[int]) -> set[str]:
    """The outputs of the ``folded`` nodes: constants once they are folded."""
    return {o for i in folded for o in mg.outputs[i] if o}


def folded_readers(mg: ModelGraph, folded: set[int], folded_out: set[str]
                   ) -> list[tuple[int, list[str]]]:
    """Each node not in ``folded`` that reads some of ``folded_out``, with those inputs."""
    return [(i, [x for x in ins if x in folded_out]) for i, ins in enumerate(mg.inputs)
            if i not in folded and not folded_out.isdisjoint(ins)]


def constants_before_folding(mg: ModelGraph) -> set[str]:
    """Initializers, sparse initializers and ``Constant`` outputs (a new set each call, from
    one computed once: shapes do not change it)."""
    if mg._constants_before is None:
        const = set(mg.initializers)
        const.update(t.values.name for t in mg.model.graph.sparse_initializer)
        for i in mg.constant_nodes:
            const.update(o for o in mg.outputs[i] if o)
        mg._constants_before = frozenset(const)
    return set(mg._constants_before)


def _small_tensor(mg: ModelGraph, name: str, t: TensorType) -> bool:
    """Is tensor ``name`` (of type ``t``) small enough to fold?"""
    if t.elem_type == 0:
        return False
    if not t.static:
        return True  # size decided by values (a Range of constants): fold, it fixes the shape
    return t.count <= FOLD_LIMIT_BYTES // 16 or mg.tensor_bytes(name) <= FOLD_LIMIT_BYTES


def evaluate_folded(mg: ModelGraph, wanted: set[str] | None = None) -> dict[str, np.ndarray]:
    """Values of the folded tensors ``wanted`` (default: every folded output), computing only
    them and the folded nodes they depend on.  Results accumulate in ``mg``'s cache, so each
    value is computed once however often it is asked for."""
    cache = mg._folded_values
    if cache is None:
        cache = mg._folded_values = {}
    folded = set(mg.folded)
    if wanted is None:
        wanted = {o for i in mg.folded for o in mg.outputs[i] if o}
    todo = [x for x in wanted if x not in cache]
    if not todo:
        return {x: cache[x] for x in wanted}
    # The folded nodes the wanted values depend on (Shape needs no input value).
    needed: set[int] = set()
    stack = [mg.producer[x] for x in todo if mg.producer.get(x) in folded]
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        if _shape_is_known(mg, i):
            continue
        for x in mg.inputs[i]:
            j = mg.producer.get(x)
            if j is not None and j in folded and x not in cache:
                stack.append(j)
    order = sorted(needed)
    nodes = mg.model.graph.node
    known: dict[str, np.ndarray] = dict(cache)
    body = []
    for i in order:
        node = nodes[i]
        if _shape_is_known(mg, i):   # its value is the static shape: no evaluation
            known[node.output[0]] = _static_shape(mg, node)
            continue
        body.append(node)
        for x in node.input:
            if x and x not in known and mg.producer.get(x) not in needed:
                known[x] = mg.constant_value(x)   # an initializer or a Constant's value
    from .evaluate import evaluate_nodes
    values = evaluate_nodes(body, known, mg.opset, lambda ns, ins, outs: _onnx_model(mg, ns, ins, outs))
    for i in order:
        for o in mg.outputs[i]:
            if o:
                cache[o] = values[o] if o in values else known[o]
    return {x: cache[x] for x in wanted}


def _onnx_model(mg: ModelGraph, nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray],
                outputs: list[str]) -> onnx.ModelProto:
    """A model computing ``outputs`` from ``nodes``, with ``inputs`` as initializers."""
    graph = helper.make_graph(
        nodes, "fold", [],
        [helper.make_tensor_value_info(o, mg.tensor_type(o).elem_type, None) for o in outputs],
        initializer=[onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inputs.items()])
    model = helper.make_model(graph, opset_imports=list(mg.model.opset_import))
    model.ir_version = mg.model.ir_version
    if mg.model.functions:
        model.functions.extend(mg.model.functions)
    return model


def _shape_is_known(mg: ModelGraph, i: int) -> bool:
    """A ``Shape`` node whose input's declared shape is static: its value needs no input value.
    (A ``Shape`` of a constant with open declared dims, say an initializer also declared as an
    input, is evaluated from the constant's value like any other folded node.)"""
    return mg.op_types[i] == "Shape" and mg.tensor_type(mg.inputs[i][0]).static


def _static_shape(mg: ModelGraph, node: onnx.NodeProto) -> np.ndarray:
    shape = list(mg.tensor_type(node.input[0]).shape)
    start, end = 0, None
    for a in node.attribute:
        if a.name == "start":
            start = a.i
        elif a.name == "end":
            end = a.i
    return np.array(shape[start:end], dtype=np.int64)  # Python slicing clamps as ONNX does
