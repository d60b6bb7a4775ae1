"""The order runs are cut along: a topological order that finishes a branch before starting
the next (docs/ARCHITECTURE.md, "Fitting into memory").  Contiguous stretches of it keep
branches together, so few tensors are open between two runs.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 2), (0, 1), (1, 3)], [[0]] * 4)
>>> branch_order(p), branch_order(p, ties="edges")
([0, 1, 3, 2], [0, 2, 1, 3])
>>> branch_order(p, [1, 2, 3])
[1, 3, 2]
"""

from __future__ import annotations

from typing import Literal, Sequence

from ..problem import Problem


def branch_order(problem: Problem, nodes: Sequence[int] | None = None, *,
                 ties: Literal["index", "edges"] = "index") -> list[int]:
    """A topological order of ``nodes`` (default: every node) by Kahn's algorithm with a
    last-in, first-out ready list, so that a branch is finished before the next starts.

    Parameters
    ----------
    problem : Problem
    nodes : sequence of int, optional
        A node set (edges from outside it are ignored); ``None``: the whole graph.
    ties : {"index", "edges"}
        Which of the nodes made ready by one node comes next: the smallest index (the
        heuristic's cuts, :mod:`.fit`) or the first in ``problem.succ`` (the exact engine's
        runs, :mod:`.realize`).  The two callers always differed here; each keeps its own so
        that answers do not change.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        When the whole graph (``nodes is None``) has a cycle.
    """
    whole = nodes is None
    members = range(problem.n) if whole else nodes
    inside = None if whole else set(nodes)
    pred, succ = problem.pred, problem.succ
    if whole:       # a list: the exact engine orders whole graphs of 100,000 nodes
        indeg = [len(x) for x in pred]
    else:
        indeg = {v: sum(1 for u in pred[v] if u in inside) for v in members}   # type: ignore
    stack = sorted((v for v in members if indeg[v] == 0), reverse=True)
    order: list[int] = []
    while stack:
        v = stack.pop()
        order.append(v)
        ready = []
        for w in succ[v]:
            if whole or w in inside:
                indeg[w] -= 1
                if indeg[w] == 0:
                    ready.append(w)
        if ties == "index":
            ready.sort()
        stack.extend(reversed(ready))
    if whole and len(order) != problem.n:
        raise ValueError("the graph has a cycle")
    return order
