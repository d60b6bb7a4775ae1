"""Longest-path clustering with 0/1 edge weights (seed 002), extended to several devices.

Source: "Clustering DAG nodes for accelerators" (an essay on TensorFlow/XLA auto-clustering),
the idea it presents after GraphCycles: give an edge weight 1 when its two ends must be in
different clusters and 0 otherwise, run a longest-path pass from the sources (linear on a DAG),
and put the nodes with the same longest-path number in one cluster.

Weights here:

- 1 on an edge u -> v whose ends are on different devices (the seed: every edge into or out of
  an unsupported node);
- 1 on a value-dependent input u -> v when v's device enforces them (the seed: Reshape's
  ``shape`` input);
- 0 otherwise.

Extension to several devices (the seed has one accelerator and "unsupported" nodes): every node
is on its preferred device, and the cluster is the pair (longest-path level, device).  The
seed's "same number, same cluster" would mix devices whenever two independent regions of
different devices reach the same level; the pair keeps each cluster on one device.  Nodes of
the same device in independent regions at the same level do share a cluster: parts need not be
connected (docs/problem.md).  Edges between two CPU (or any same-device) nodes weigh 0: the seed
would leave unsupported nodes unclustered, which here would make each a part of its own.

Why the answer is always acyclic and honours value inputs: for every edge u -> v,
level(v) >= level(u) + w(u, v).  If both ends are in one cluster, their levels are equal, so
w = 0.  Otherwise the edge goes from a lower level to a higher one, or between two clusters of
the same level, which needs w = 0 and hence one device: the same cluster, a contradiction.  So
numbering clusters by level is a topological order of the quotient graph, and a value input on
an enforcing device (w = 1) never shares a cluster.  Memory limits and device instances are not
part of the source: they are ignored (everything on instance 0) and the validator reports
overflows.

Example (the seed 000 graph: node 4 on the CPU splits the accelerator's chain in two levels):

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
...                  [[0, 1], [0, 1], [0, 1], [1], [0, 1], [0, 1], [0, 1]])
>>> sol = longest_path(p)
>>> [[v + 1 for v in nodes] for nodes in sol.parts()]
[[1, 2, 3], [4], [5, 6, 7]]
"""

from __future__ import annotations

from ...problem import Problem
from ...solution import Solution
from ._common import preferred_devices, solution_from_clusters, topological_order

NAME = "longest-path"


def edge_weights(problem: Problem, dev: list[int]) -> dict[tuple[int, int], int]:
    """The seed's 0/1 weights: 1 where the two ends must be in different clusters."""
    enforce = [d.enforce_values for d in problem.devices]
    w: dict[tuple[int, int], int] = {}
    for u in range(problem.n):
        for v in problem.succ[u]:
            w[(u, v)] = 1 if dev[u] != dev[v] else 0
    for v, us in enumerate(problem.value_pred):
        if enforce[dev[v]]:
            for u in us:
                w[(u, v)] = 1
    return w


def longest_path_levels(problem: Problem, dev: list[int]) -> list[int]:
    """Longest 0/1-weighted path from any source to each node (sources are level 0)."""
    w = edge_weights(problem, dev)
    level = [0] * problem.n
    for v in topological_order(problem):
        for u in problem.pred[v]:
            cand = level[u] + w[(u, v)]
            if cand > level[v]:
                level[v] = cand
    return level


def longest_path(problem: Problem) -> Solution:
    """Clusters = (longest-path level, device)."""
    dev = preferred_devices(problem)
    level = longest_path_levels(problem, dev)
    groups: dict[tuple[int, int], list[int]] = {}
    for v in range(problem.n):
        groups.setdefault((level[v], dev[v]), []).append(v)
    keys = sorted(groups)
    return solution_from_clusters(problem, [groups[k] for k in keys], [k[1] for k in keys], NAME,
                                  stats={"levels": (max(level) + 1) if level else 0})
