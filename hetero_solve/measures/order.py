"""Topological orders: of the nodes, and of the parts (the quotient graph, docs/problem.md).

* :func:`topological_order`: Kahn's order of the nodes.
* :func:`part_order`: the one order of parts every module uses (the normaliser numbers parts
  with it, the validator tests acyclicity with it, the reductions number units with it, brute
  force filters set partitions with it): Kahn's algorithm on the quotient graph, ties to the
  part whose key (by default its smallest node) is smallest, so that the numbering is
  deterministic.  ``None`` when the quotient graph has a cycle; :func:`find_cycle` then names
  one.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4)
>>> part_order(p, [1, 1, 0, 2], 3)
[1, 0, 2]
>>> part_order(p, [0, 1, 0, 1], 2) is None
True
>>> find_cycle({(0, 1), (1, 0)}, 2)
[0, 1]
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Iterable, Sequence

from .definitions import quotient_edges

if TYPE_CHECKING:
    from ..problem import Problem


def topological_order(succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], *,
                      smallest_first: bool = False) -> list[int]:
    """Kahn's order of a DAG given as successor and predecessor lists (pass them swapped for
    the reversed graph).

    Parameters
    ----------
    succ, pred : list of lists of int
    smallest_first : bool
        Among ready nodes, always the smallest index (a heap; the baselines' documented tie
        rule); else first ready, first out (linear).

    Raises
    ------
    ValueError
        On a cycle.
    """
    indeg = [len(p) for p in pred]
    ready = [v for v in range(len(succ)) if indeg[v] == 0]
    if smallest_first:
        order: list[int] = []
        while ready:
            v = heapq.heappop(ready)
            order.append(v)
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    heapq.heappush(ready, w)
    else:
        order = ready
        for v in order:  # the list grows while it is walked
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    order.append(w)
    if len(order) != len(succ):
        raise ValueError("the graph has a cycle")
    return order


def quotient_order(edges: Iterable[tuple[int, int]], keys: Sequence) -> list[int] | None:
    """Kahn's order of parts ``0..len(keys)-1`` joined by ``edges`` (pairs ``(a, b)``,
    ``a != b``), ties to the smallest ``keys[p]``; ``None`` on a cycle."""
    k = len(keys)
    out: list[list[int]] = [[] for _ in range(k)]
    indeg = [0] * k
    for a, b in edges:
        out[a].append(b)
        indeg[b] += 1
    heap = [(keys[p], p) for p in range(k) if indeg[p] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, p = heapq.heappop(heap)
        order.append(p)
        for q in out[p]:
            indeg[q] -= 1
            if indeg[q] == 0:
                heapq.heappush(heap, (keys[q], q))
    return order if len(order) == k else None


def part_order(problem: "Problem", part_of: Sequence[int], num_parts: int, *,
               edges: Iterable[tuple[int, int]] | None = None) -> list[int] | None:
    """The parts ``0..num_parts-1`` in topological order of the quotient graph, ties to the
    part holding the smallest node (an empty part sorts last); ``None`` when the quotient
    graph has a cycle.  ``edges``: the quotient edges, when the caller has them."""
    n = len(part_of)
    first = [n] * num_parts
    for v, p in enumerate(part_of):
        if v < first[p]:
            first[p] = v
    if edges is None:
        edges = quotient_edges(problem, part_of)
    return quotient_order(edges, first)


def find_cycle(edges: Iterable[tuple[int, int]], num_parts: int) -> list[int]:
    """One cycle of the quotient graph (parts in edge order, starting at the smallest), or
    ``[]`` when it is acyclic."""
    out: list[list[int]] = [[] for _ in range(num_parts)]
    indeg = [0] * num_parts
    for a, b in edges:
        out[a].append(b)
        indeg[b] += 1
    stack = [p for p in range(num_parts) if indeg[p] == 0]
    while stack:
        p = stack.pop()
        for q in out[p]:
            indeg[q] -= 1
            if indeg[q] == 0:
                stack.append(q)
    remaining = {p for p in range(num_parts) if indeg[p] > 0}
    if not remaining:
        return []
    # Every part left after Kahn kept a predecessor that is also left (its in-degree stayed
    # positive), so walking backwards until a part repeats closes a cycle.  (Walking forwards
    # can end at a part downstream of the cycle that has no successor left.)
    back: dict[int, list[int]] = {p: [] for p in remaining}
    for a in remaining:
        for b in out[a]:
            if b in remaining:
                back[b].append(a)
    pos: dict[int, int] = {}
    walk = []
    p = min(remaining)
    while p not in pos:
        pos[p] = len(walk)
        walk.append(p)
        p = back[p][0]
    cycle = walk[pos[p]:]
    cycle.reverse()     # the walk went against the edges
    i = cycle.index(min(cycle))
    return cycle[i:] + cycle[:i]     # start at the smallest part: stable messages
