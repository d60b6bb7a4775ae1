"""Folding (docs/problem.md): nodes whose outputs are known before running become constants.

A node folds when every input is constant (an initializer, a ``Constant`` output or an output
of a folded node), or when it is a ``Shape`` of a tensor whose shape is static.  Folded nodes
belong to no part, so the ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains torch
exports in every layer cost no split once shapes are static.

Not folded, by choice: nodes with subgraphs, non-deterministic ops, ops outside the standard
domains, nodes that produce a graph output, non-tensor outputs, and outputs larger than
``FOLD_LIMIT_BYTES`` (a huge ``ConstantOfShape`` would be copied into every consuming part).
Never folded, by docs/problem.md: ``DequantizeLinear`` (of any domain).  Folding it would turn
a quantized weight into a float constant four times its size, with other numerics than the
integer kernels a runtime fuses the quantized unit into; it stays a node of its unit
(:mod:`.qdq`), and its int8/uint8/int4 input is the constant memory counts.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import onnx
from onnx import helper

from .evaluate import evaluate_nodes
from .graph import GraphLists, TensorType, TypeTable, constant_node_value, size_of
from .weights import tensor_value

NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})
FOLD_LIMIT_BYTES = 1 << 20
_STANDARD = frozenset({"", "ai.onnx"})
#: Ops never folded whatever their inputs (module doc).
NEVER_FOLDED = frozenset({"DequantizeLinear"})


def find_foldable(graph: GraphLists, types: TypeTable) -> list[int]:
    """Indices of the nodes that fold with tensor types ``types``, in graph order (a closure:
    folded outputs count as constants)."""
    const = set(graph.base_constants)
    skip = set(graph.constant_nodes)
    graph_outputs = set(graph.graph_outputs)
    ops, domains, has_sub, outputs = graph.op_types, graph.domains, graph.has_subgraph, graph.outputs
    folded: list[int] = []
    for i, ins in enumerate(graph.inputs):
        # The common case first, cheaply: a node reading a tensor not known before running.
        if ops[i] == "Shape":
            first = next((x for x in ins if x), None)
            if first is None or not (first in const or types[first].static):
                continue
        else:
            unknown = False
            for x in ins:
                if x and x not in const:
                    unknown = True
                    break
            if unknown or not any(ins):   # no input at all: nothing to fold from
                continue
        if i in skip or has_sub[i] or domains[i] not in _STANDARD or ops[i] in NONDETERMINISTIC \
                or ops[i] in NEVER_FOLDED:
            continue
        outs = [o for o in outputs[i] if o]
        if any(o in graph_outputs for o in outs) or not all(_small(types[o]) for o in outs):
            continue
        folded.append(i)
        const.update(outs)
    return folded


def folded_outputs(graph: GraphLists, folded: Iterable[int]) -> set[str]:
    """The outputs of the ``folded`` nodes: constants once they are folded."""
    return {o for i in folded for o in graph.outputs[i] if o}


def folded_readers(graph: GraphLists, folded: set[int], outputs: set[str]
                   ) -> list[tuple[int, list[str]]]:
    """Each node not in ``folded`` that reads some of ``outputs`` (its subgraphs' reads
    included), with those tensors."""
    found = []
    for i, ins in enumerate(graph.inputs):
        if i in folded:
            continue
        reads = ins + graph.outer_inputs[i] if graph.has_subgraph[i] else ins
        if not outputs.isdisjoint(reads):
            found.append((i, [x for x in dict.fromkeys(reads) if x in outputs]))
    return found


def base_constant_value(graph: GraphLists, name: str) -> np.ndarray:
    """The value of a constant known before folding: an initializer (dense or sparse) or a
    ``Constant`` node's output."""
    if name in graph.initializers:
        return tensor_value(graph.initializers[name], graph.weights_dir)
    i = graph.producer.get(name)
    if i is not None and graph.op_types[i] == "Constant":
        return constant_node_value(graph.model.graph.node[i])
    for t in graph.model.graph.sparse_initializer:
        if t.values.name == name:
            from onnx.reference import ReferenceEvaluator
            g = helper.make_graph([helper.make_node("Constant", [], [name], sparse_value=t)],
                                  "c", [], [helper.make_tensor_value_info(name, 0, None)])
            return ReferenceEvaluator(helper.make_model(g)).run(None, {})[0]
    raise KeyError(name)


def _small(t: TensorType) -> bool:
    """Is a tensor of type ``t`` small enough to fold?"""
    if t.elem_type == 0:
        return False
    if not t.static:
        return True  # size decided by values (a Range of constants): fold, it fixes the shape
    return size_of(t) <= FOLD_LIMIT_BYTES


class FoldedValues:
    """The values of the outputs of the ``folded`` nodes, each computed once, when first
    asked for (export reads those its parts consume; shape analysis those inference can
    use).  ``known``: values already computed (by an earlier fold round)."""

    def __init__(self, graph: GraphLists, folded: list[int], types: TypeTable,
                 known: Mapping[str, np.ndarray] | None = None):
        self.graph = graph
        self.folded = list(folded)
        self.types = types
        self.outputs = folded_outputs(graph, folded)
        self._values: dict[str, np.ndarray] = {k: v for k, v in (known or {}).items()
                                               if k in self.outputs}

    def __contains__(self, name: str) -> bool:
        return name in self.outputs

    def computed(self) -> dict[str, np.ndarray]:
        """The values computed so far."""
        return dict(self._values)

    def get(self, wanted: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """The values of the folded outputs ``wanted`` (default: all of them), computing only
        them and the folded nodes they depend on."""
        cache = self._values
        wanted = self.outputs if wanted is None else set(wanted)
        todo = [x for x in wanted if x not in cache]
        if todo:
            self._compute(todo)
        return {x: cache[x] for x in wanted}

    def _compute(self, todo: list[str]) -> None:
        graph, cache, folded = self.graph, self._values, set(self.folded)
        producer = graph.producer
        # The folded nodes the wanted values depend on (a Shape of a static tensor needs no
        # input value).
        needed: set[int] = set()
        shapes: set[int] = set()   # of these, the Shape nodes whose value is a static shape
        stack = [producer[x] for x in todo if producer.get(x) in folded]
        inputs = graph.inputs
        while stack:
            i = stack.pop()
            if i in needed:
                continue
            needed.add(i)
            if self._shape_is_known(i):
                shapes.add(i)
                continue
            for x in inputs[i]:
                j = producer.get(x)
                if j is not None and j in folded and x not in cache:
                    stack.append(j)
        nodes = graph.model.graph.node
        known: dict[str, np.ndarray] = dict(cache)
        body = []
        static: dict[tuple, np.ndarray] = {}   # one array per (shape, start, end)
        for i in sorted(needed):
            node = nodes[i]
            if i in shapes:   # its value is the static shape: no evaluation
                known[graph.outputs[i][0]] = self._static_shape(node, static)
                continue
            body.append(node)
            for x in inputs[i]:
                if x and x not in known and producer.get(x) not in needed:
                    known[x] = base_constant_value(graph, x)   # an initializer or a Constant's value
        values = evaluate_nodes(body, known, graph.opset, self._onnx_model)
        for i in needed:
            for o in graph.outputs[i]:
                if o:
                    cache[o] = values[o] if o in values else known[o]

    def _onnx_model(self, nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray],
                    outputs: list[str]) -> onnx.ModelProto:
        """A model computing ``outputs`` from ``nodes``, with ``inputs`` as initializers."""
        src = self.graph.model
        graph = helper.make_graph(
            nodes, "fold", [],
            [helper.make_tensor_value_info(o, self.types[o].elem_type, None) for o in outputs],
            initializer=[onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inputs.items()])
        model = helper.make_model(graph, opset_imports=list(src.opset_import))
        model.ir_version = src.ir_version
        if src.functions:
            model.functions.extend(src.functions)
        return model

    def _shape_is_known(self, i: int) -> bool:
        """A ``Shape`` node whose input's shape is static: its value needs no input value.
        (A ``Shape`` of a constant with open declared dims, say an initializer also declared
        as an input, is evaluated from the constant's value like any other folded node.)"""
        graph = self.graph
        return graph.op_types[i] == "Shape" and self.types[graph.inputs[i][0]].static

    def _static_shape(self, node: onnx.NodeProto, made: dict[tuple, np.ndarray]) -> np.ndarray:
        """The value of a ``Shape`` node of a static tensor; ``made``: the arrays made so far,
        by (shape, start, end), shared by the nodes that give the same value."""
        shape = self.types[node.input[0]].shape
        start, end = 0, None
        for a in node.attribute:
            if a.name == "start":
                start = a.i
            elif a.name == "end":
                end = a.i
        key = (shape, start, end)
        if key not in made:   # Python slicing clamps as ONNX does
            made[key] = np.array(list(shape)[start:end], dtype=np.int64)
        return made[key]
