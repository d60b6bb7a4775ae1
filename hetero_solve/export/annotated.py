"""``model.annotated.onnx``: the original model, each placed node tagged with its device and
part (SPEC section 7)."""

from __future__ import annotations

import onnx

from ..model.graph import ModelGraph
from ..problem import Problem
from ..solution import Solution


def build_annotated_model(mg: ModelGraph, problem: Problem, solution: Solution) -> onnx.ModelProto:
    """The original model, each placed node with ``affinity`` and ``partition`` metadata.

    Parameters
    ----------
    mg : ModelGraph
        The loaded model.
    problem : Problem
        The problem compiled from ``mg``.
    solution : Solution
        A partition of ``problem``.

    Returns
    -------
    onnx.ModelProto
        A copy of ``mg.model``: ``metadata_props`` ``affinity`` = device name and
        ``partition`` = part id (decimal) on every placed node; unnamed and duplicate-named
        nodes get the generated names ``affinity.json`` uses.
    """
    m = onnx.ModelProto()
    m.CopyFrom(mg.model)
    nodes = m.graph.node
    names = mg.names
    for g, node in enumerate(nodes):
        if node.name != names[g]:
            node.name = names[g]
    devs = problem.devices
    done: set[int] = set()
    order = sorted(range(problem.n), key=solution.part_of.__getitem__) if problem.members \
        else range(problem.n)
    for v in order:
        p = solution.part_of[v]
        for g in problem.graph_nodes(v):
            if g in done:      # a DequantizeLinear copied into several units: its first part
                continue
            done.add(g)
            node = nodes[g]
            for key, value in (("affinity", devs[solution.part_device[p]].name),
                               ("partition", str(p))):
                entry = node.metadata_props.add()
                entry.key, entry.value = key, value
    return m
