"""Helpers shared by the baselines: topological order, building a :class:`Solution` from
clusters, an incremental part-memory tracker, and the "skipped" signal."""

from __future__ import annotations

from typing import Sequence

from ...problem import Problem, topological_order as problem_topological_order
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
    return problem_topological_order(problem.succ, problem.pred, smallest_first=True)


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


class PartMemory:
    """Memory of a part being built node by node (SPEC section 5, the same definition as
    :func:`hetero_solve.problem.part_memory`), in O(degree) per node.

    A tensor counts as an input while a consumer is inside and its producer is outside (or it
    is a graph input), and as an output while its producer is inside and it is a graph output
    or some consumer is outside.  Adding a node can lower the total (an output becomes
    internal), exactly as Glow's ``updateGraphMemInfoByAddingNode`` does."""

    __slots__ = ("p", "used", "inside_consumers", "produced", "consts")

    def __init__(self, problem: Problem):
        self.p = problem
        self.used = 0
        self.inside_consumers: dict[int, int] = {}
        self.produced: set[int] = set()
        self.consts: set[int] = set()

    def _bytes(self, t: int, inside: int, produced: bool) -> int:
        p = self.p
        if produced:
            if p.tensor_is_output[t] or inside < len(p.tensor_consumers[t]):
                return p.tensor_bytes[t]
            return 0
        return p.tensor_bytes[t] if inside else 0

    def delta(self, v: int) -> int:
        """How much the part's memory changes if ``v`` joins it."""
        p = self.p
        d = sum(p.const_bytes[c] for c in set(p.node_consts[v]) if c not in self.consts)
        for t in p.node_inputs[v]:
            k = self.inside_consumers.get(t, 0)
            prod = t in self.produced
            d += self._bytes(t, k + 1, prod) - self._bytes(t, k, prod)
        for t in p.node_outputs[v]:
            k = self.inside_consumers.get(t, 0)
            d += self._bytes(t, k, True) - self._bytes(t, k, False)
        return d

    def add(self, v: int) -> None:
        self.used += self.delta(v)
        p = self.p
        self.consts.update(p.node_consts[v])
        for t in p.node_inputs[v]:
            self.inside_consumers[t] = self.inside_consumers.get(t, 0) + 1
        self.produced.update(p.node_outputs[v])
