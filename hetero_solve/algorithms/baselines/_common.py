"""Helpers shared by the baselines: topological order, building a :class:`Solution` from
clusters, and the "skipped" signal."""

from __future__ import annotations

from typing import Sequence

from ...measures import topological_order as node_order
from ...problem import Problem
from ...solution import Solution, normalize


class BaselineSkipped(RuntimeError):
    """The baseline refuses this input on purpose (e.g. too large for its data structures).

    The study records such a run as ``skipped`` with this message, not as a failure."""


def preferred_devices(problem: Problem) -> list[int]:
    """The priority policy every baseline starts from (OpenVINO's fallback policy, Glow's
    order-sensitive device list): each node on the first device that takes it."""
    return [a[0] for a in problem.allowed]


def topological_order(problem: Problem) -> list[int]:
    """Kahn's order, ties to the smaller index (graph order is already topological for a
    compiled problem; problems built by hand need not be)."""
    return node_order(problem.succ, problem.pred, smallest_first=True)


def solution_from_clusters(problem: Problem, clusters: Sequence[Sequence[int]],
                           devices: Sequence[int], algorithm: str,
                           instances: Sequence[int] | None = None,
                           stats: dict | None = None) -> Solution:
    """A normalized :class:`Solution` with one part per cluster.  Instances default to 0:
    the OpenVINO, XLA and longest-path baselines have no notion of device instances."""
    part_of = [-1] * problem.n
    for p, nodes in enumerate(clusters):
        for v in nodes:
            if part_of[v] != -1:
                raise AssertionError(f"{algorithm}: node {v} is in two clusters")
            part_of[v] = p
    missing = [problem.names[v] for v in range(problem.n) if part_of[v] < 0]
    if missing:
        raise AssertionError(f"{algorithm}: nodes in no cluster: {missing[:5]}")
    inst = list(instances) if instances is not None else [0] * len(clusters)
    sol = Solution(part_of, list(devices), inst, algorithm=algorithm, status="feasible",
                   stats=dict(stats or {}))
    return normalize(problem, sol)
