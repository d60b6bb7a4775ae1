"""Atomic units: a problem whose groups of nodes are each one node.

docs/problem.md makes quantized units (:mod:`hetero_solve.model.qdq`) atomic, as it makes a
node with subgraphs atomic.  Compile contracts each unit into one problem node that stands for
all its ONNX nodes (``Problem.members``), so that every algorithm, brute force and the
validator solve and judge the problem as they do any other: no colocation constraint exists
anywhere else.  The unit node takes what its members take together:

- devices: those that take every member (a unit is supported only whole), in priority order;
  a device that refuses it names the first member it refuses and why; pins of members apply
  to the unit, so two members pinned apart leave it no device;
- edges, value edges, tensors and constants: the members' (deduplicated), without the tensors
  made and read only inside the unit (they never cross a part boundary, so cost nothing,
  docs/problem.md); a value edge inside a unit keeps the unit off devices that enforce value
  inputs (the value would be made in the part that reads it);
- the name, op type and graph index of its anchor (the unit's op); fallback counts a unit once,
  as it counts a node with subgraphs once.

Groups are given as problem node ids, each listed with its anchor first.  A node may be in
several groups (a shared DQ, copied into each reader's unit, as onnxruntime does): it is then
never an anchor, and only nodes of those groups read what it makes; each unit gets its inputs
and constants.  Contracting a set
``S`` is acyclic when every path from ``S`` back to ``S`` stays inside ``S``; the units of
:func:`~hetero_solve.model.qdq.find_units` are such sets (a DQ's only reader is the op, a Q's
only data input is the op's output, its other inputs are constants), and ordering unit nodes by
their anchor keeps the node order topological: a node feeding a unit feeds a DQ or the op, both
before the op; a node fed by a unit reads the op or a Q, both after it.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0, 1], [0, 1], [1], [0, 1]])
>>> c, m = contract(p, [[1, 0]])
>>> c.n, c.succ, c.allowed, c.members, m.sources
(3, [[1], [2], []], [(0, 1), (1,), (0, 1)], {0: (0, 1)}, ((1, 0), (2,), (3,)))
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from .errors import InfeasibleError
from .nodemap import NodeMap, remap
from .problem import Problem


def contract(problem: Problem, groups: Sequence[Sequence[int]]) -> tuple[Problem, NodeMap]:
    """``problem`` with each group of nodes made one node (module doc).

    Parameters
    ----------
    problem : Problem
        A compiled problem whose nodes are single ONNX nodes (``members`` empty).
    groups : sequence of sequence of int
        Node groups, each anchor first, each closed under paths (module doc); only nodes
        that are no anchor and whose outputs only the groups holding them read may be in
        several.

    Returns
    -------
    Problem
        The contracted problem; ``members`` maps each unit node to its ONNX nodes' graph
        indices (graph order).  ``problem`` itself when ``groups`` is empty.
    NodeMap
        Unit node -> its nodes (:mod:`hetero_solve.nodemap`, which carries every per-node
        field: devices, refusals, pins, value edges, node times).

    Raises
    ------
    InfeasibleError
        A unit that no device takes whole.
    """
    groups = [list(dict.fromkeys(g)) for g in groups if len(set(g)) > 1]
    n = problem.n
    if not groups:
        return problem, NodeMap.extended(n, 0)
    anchor_of = {g[0]: k for k, g in enumerate(groups)}
    in_group: list[list[int]] = [[] for _ in range(n)]
    for k, g in enumerate(groups):
        for v in g:
            in_group[v].append(k)
    # new ids: nodes outside groups and anchors, in the old order (module doc: topological)
    order = [v for v in range(n) if not in_group[v] or v in anchor_of]
    new_of = {v: u for u, v in enumerate(order)}
    new_ids = [[new_of[groups[k][0]] for k in in_group[v]] if in_group[v] else [new_of[v]]
               for v in range(n)]
    members_of = {new_of[g[0]]: sorted(g) for g in groups}
    # sources anchor first (names, op types, the preferred device), then graph order
    sources = [[v] + [w for w in members_of.get(u, [v]) if w != v] for u, v in enumerate(order)]
    succ, pred = _edges(problem, order, members_of, new_ids)
    tensors, kept = _tensors(problem, new_ids, len(order))
    nmap = NodeMap.of_groups(n, sources, tensors=tuple(kept), label="quantized unit")
    structure = dataclasses.replace(
        problem, succ=succ, pred=pred, arrays=None,
        node_consts=[list(dict.fromkeys(c for w in members_of.get(u, [v])
                                        for c in problem.node_consts[w]))
                     for u, v in enumerate(order)],
        names=[problem.names[v] for v in order], **tensors)
    out = remap(problem, structure, nmap)
    _refuse_homeless(out, problem, nmap)
    return out, nmap


def _refuse_homeless(out: Problem, problem: Problem, nmap: NodeMap) -> None:
    """A unit no device takes whole is a clear error naming the unit and each reason."""
    homeless = [u for u, vs in enumerate(nmap.sources) if len(vs) > 1 and not out.allowed[u]]
    if not homeless:
        return
    u = homeless[0]
    v = nmap.sources[u][0]
    why = "; ".join(f"{dev.name}: {out.why_not(u, d)}" for d, dev in enumerate(out.devices))
    names = [problem.names[w] for w in sorted(nmap.sources[u])]
    raise InfeasibleError(
        f"node {problem.names[v]!r} ({problem.op_types[v]}) and its quantized unit "
        f"({', '.join(repr(x) for x in names)}) fit no device whole: {why}", names)


def _edges(problem: Problem, order: list[int], members_of: dict[int, list[int]],
           new_ids: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """Data edges between new nodes (value edges: :func:`~hetero_solve.nodemap.remap`).  A
    member read or made inside its own unit maps to the unit itself (dropped); a shared node
    outside the unit maps to every unit holding it."""
    def mapped(lists: list[list[int]], u: int, v: int, self_ok: bool,
               forward: bool = False) -> list[int]:
        inside = set(members_of.get(u, [v]))
        # a shared member's readers outside this unit read their own copy: no edge
        out = dict.fromkeys(y for w in inside for x in lists[w]
                            if x in inside or not forward or len(new_ids[w]) == 1
                            for y in ([u] if x in inside else new_ids[x]))
        if not self_ok:
            out.pop(u, None)
        return list(out)

    succ = [mapped(problem.succ, u, v, False, forward=True) for u, v in enumerate(order)]
    pred = [mapped(problem.pred, u, v, False) for u, v in enumerate(order)]
    return succ, pred


def _tensors(problem: Problem, new_ids: list[list[int]], n_new: int) -> tuple[dict, list[int]]:
    """Tensor lists with the new node ids, without the tensors made and read only inside one
    unit (and not graph outputs); a shared node's outputs are read only inside the units that
    hold it, so they go too."""
    keep, consumers, producers = [], [], []
    for t, prod in enumerate(problem.tensor_producer):
        readers = list(dict.fromkeys(u for r in problem.tensor_consumers[t] for u in new_ids[r]))
        if prod >= 0 and len(new_ids[prod]) > 1:
            continue                         # made by a shared node: inside each unit
        p = new_ids[prod][0] if prod >= 0 else -1
        if p >= 0 and readers:
            readers = [r for r in readers if r != p]
            if not readers and not problem.tensor_is_output[t]:
                continue                     # inside one unit
        keep.append(t)
        consumers.append(readers)
        producers.append(p)
    node_inputs: list[list[int]] = [[] for _ in range(n_new)]
    node_outputs: list[list[int]] = [[] for _ in range(n_new)]
    for new_t, (p, rs) in enumerate(zip(producers, consumers)):
        if p >= 0:
            node_outputs[p].append(new_t)
        for r in rs:
            node_inputs[r].append(new_t)
    return {
        "tensor_names": [problem.tensor_names[t] for t in keep],
        "tensor_bytes": [problem.tensor_bytes[t] for t in keep],
        "tensor_producer": producers, "tensor_consumers": consumers,
        "tensor_is_output": [problem.tensor_is_output[t] for t in keep],
        "node_inputs": node_inputs, "node_outputs": node_outputs}, keep
