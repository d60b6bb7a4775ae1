"""Contiguous stages with colocation: a group is one part, so contract it to one node.

With at most one part per device instance, nodes that must share an instance (colocation)
share a part; so do groups that reach each other (a path from a part back into it would make
the quotient cyclic).  :func:`contract_groups` merges each such closed set into one node of a
smaller problem with the same answers: a node's time is the sum of its members' times on each
device they all allow (:func:`hetero_solve.nodemap.remap`), its constants are theirs, every tensor keeps its bytes, its volume and
its readers outside the merged node.  Memory (docs/exact.md) and every cost term of a
partition are the same on both problems (:mod:`hetero_solve.measures`), so optima and bounds
carry over; :func:`expand` maps an answer back.
"""

from __future__ import annotations

from dataclasses import replace

from ..nodemap import NodeMap, remap
from ..problem import Problem
from ..solution import Solution


def _components(p: Problem) -> list[int]:
    """Node -> merged node: colocation groups, then strongly connected components of the
    graph of groups (numbered in a topological order)."""
    import networkx as nx     # imported when used: it costs a tenth of a second at start-up
    group = list(range(p.n))
    for members in p.colocation:
        for v in members:
            group[v] = members[0]
    g = nx.DiGraph()
    g.add_nodes_from(sorted(set(group)))
    g.add_edges_from((group[u], group[v]) for u in range(p.n) for v in p.succ[u]
                     if group[u] != group[v])
    cond = nx.condensation(g)
    order = list(nx.lexicographical_topological_sort(
        cond, key=lambda c: min(cond.nodes[c]["members"])))
    rank = {c: k for k, c in enumerate(order)}
    return [rank[cond.graph["mapping"][group[v]]] for v in range(p.n)]


def contract_groups(p: Problem) -> tuple[Problem, NodeMap]:
    """The contracted problem (module doc) and its :class:`~hetero_solve.nodemap.NodeMap`
    (merged node -> its nodes; :func:`~hetero_solve.nodemap.remap` sums their times)."""
    comp = _components(p)
    k = max(comp, default=-1) + 1
    members: list[list[int]] = [[] for _ in range(k)]
    for v, c in enumerate(comp):
        members[c].append(v)
    succ = [sorted({comp[w] for v in ms for w in p.succ[v]} - {c}) for c, ms in enumerate(members)]
    pred: list[list[int]] = [[] for _ in range(k)]
    for c, ss in enumerate(succ):
        for d in ss:
            pred[d].append(c)
    producer = [comp[u] if u >= 0 else -1 for u in p.tensor_producer]
    consumers = [sorted({comp[r] for r in rs} - {producer[t]})
                 for t, rs in enumerate(p.tensor_consumers)]
    node_inputs: list[set[int]] = [set() for _ in range(k)]
    for t, rs in enumerate(consumers):
        for r in rs:
            node_inputs[r].add(t)
    node_outputs: list[list[int]] = [[] for _ in range(k)]
    for t, u in enumerate(producer):
        if u >= 0:
            node_outputs[u].append(t)
    nmap = NodeMap.of_groups(p.n, members, tensors=tuple(range(len(p.tensor_bytes))),
                             label="colocation group")
    structure = replace(
        p, names=[p.names[ms[0]] for ms in members], succ=succ, pred=pred,
        tensor_producer=producer, tensor_consumers=consumers,
        node_inputs=[sorted(s) for s in node_inputs], node_outputs=node_outputs,
        node_consts=[sorted({w for v in ms for w in p.node_consts[v]}) for ms in members],
        arrays=None, fold_options=[])
    return remap(p, structure, nmap), nmap


def contract_solution(sol: Solution, nmap: NodeMap) -> Solution | None:
    """An answer of the original problem on the contracted one (``None`` when a merged node's
    members are in different parts)."""
    part = nmap.restrict(sol.part_of)
    if part is None:
        return None
    return Solution(part, list(sol.part_device), list(sol.part_instance), sol.algorithm,
                    sol.status, sol.lower_bound, dict(sol.stats))


def expand(sol: Solution, nmap: NodeMap) -> Solution:
    """An answer of the contracted problem on the original one."""
    return Solution(nmap.expand(sol.part_of), list(sol.part_device),
                    list(sol.part_instance), sol.algorithm, sol.status, sol.lower_bound,
                    dict(sol.stats))
