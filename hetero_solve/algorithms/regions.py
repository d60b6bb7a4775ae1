"""Connected same-key regions of a problem's nodes: OpenVINO HETERO's parts from an affinity map.

:func:`regions` makes each connected set of nodes sharing a key (a device, say) one region;
:func:`acyclic_regions` cuts them further, where a path leaves a key and comes back, so the
regions always form a DAG.  The greedy heuristic starts from the first (every node on its
preferred device), ``hetero-solve check`` splits a user's map with either.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from ..measures import part_order, topological_order
from ..problem import Problem

__all__ = ["regions", "acyclic_regions"]


def regions(problem: Problem, node_key: Sequence[Hashable]) -> list[int]:
    """Connected regions of nodes sharing a key (OpenVINO: edges between different affinities
    are boundaries).  Returns a region id per node, numbered by first node."""
    parent = list(range(problem.n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, succ in enumerate(problem.succ):
        for v in succ:
            if node_key[u] == node_key[v]:
                ru, rv = find(u), find(v)
                if ru != rv:
                    parent[max(ru, rv)] = min(ru, rv)
    ids: dict[int, int] = {}
    return [ids.setdefault(find(v), len(ids)) for v in range(problem.n)]


def acyclic_regions(problem: Problem, node_key: Sequence[Hashable]) -> list[int]:
    """:func:`regions` when they form no cycle, else connected sets of nodes sharing a key and
    a level (device changes on the longest path to the node): every edge between two parts
    then climbs a level, so the parts form a DAG.  Region ids numbered by first node."""
    part_of = regions(problem, node_key)
    if part_order(problem, part_of, max(part_of, default=-1) + 1) is not None:
        return part_of
    level = [0] * problem.n
    for v in topological_order(problem.succ, problem.pred):
        for u in problem.pred[v]:
            step = level[u] + (node_key[u] != node_key[v])
            if step > level[v]:
                level[v] = step
    return regions(problem, [(key, lv) for key, lv in zip(node_key, level)])
