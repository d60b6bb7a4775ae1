"""The memory of a node set as a minimum cut: which nodes can ever share a device, and which
to keep on a device whose memory is too small for all of them.

A part's memory (docs/problem.md, "Memory of a part") counts, for a part ``S``, the
distinct constants its nodes read and the tensors that cross its boundary.  Both are *cut
functions* of ``S`` (Lawler's hypergraph cuts), so ``min {w(V \\ S) + lam * memory(S)}`` over
every set ``S`` of candidate nodes is one s-t minimum cut (source side = ``S``) in a network
with

* a node arc ``s -> v`` of capacity ``w(v)``: cut when ``v`` is left out of ``S``;
* per constant, and per graph input, an *any member* gadget: readers ``-> a`` (infinite),
  ``a -> t`` (``lam`` x bytes): paid as soon as one reader is in ``S``;
* per produced tensor whose producer and readers are all candidates, a *split* gadget:
  members ``-> a`` (infinite), ``a -> b`` (``lam`` x bytes), ``b ->`` members (infinite):
  paid when some members are in ``S`` and some are not (an input or output of ``S``); a graph
  output, or a tensor with a member that is not a candidate (always outside), gets the any
  member gadget instead (paid whenever a member is in ``S``); two-member tensors get the two
  arcs ``u <-> v`` directly.

``memory(S)`` here is the memory of ``S`` as *one* part.  Two facts make it useful for parts
on a device with instances of ``cap`` bytes:

* a part holding ``v`` has memory at least ``min {memory(S) : v in S}``: if that exceeds
  ``cap``, ``v`` can never be on the device (:func:`placeable_nodes`, iterated to a fixed
  point because a node that cannot be on the device cannot help another one);
* merging never raises memory (``memory(P | Q) <= memory(P) + memory(Q)``), so the union of
  every part on a device fits ``cap * instances``, and the parametric cut with ``lam``
  (:meth:`MemoryNetwork.best_set`) trades nodes kept on the device against the memory they
  need: :func:`keep_within` finds the cheapest ``lam`` whose set fits a byte target, and its
  Lagrangian value ``min_S w(V \\ S) + lam * (memory(S) - target)`` is a lower bound on the
  weight that must leave the device (:func:`.bounds.memory_bounds` uses it as
  the fallback bound).

The cuts are solved with OR-Tools' ``SimpleMaxFlow`` (a push-relabel max flow in C++); the
network is built once per device and only capacities change between solves.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0]] * 3, [Device("NPU", memory=50)],
...                  tensor_bytes=[100, 10, 1])
>>> net = MemoryNetwork(p, range(3))
>>> net.min_memory_containing(0)       # alone, node 0 holds its 100-byte output; the chain, 1 byte
1
>>> placeable_nodes(p, 0)              # every node fits some part of at most 50 bytes
([0, 1, 2], {})
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..measures import MemoryTracker, part_memory
from ..problem import Problem

INF = 1 << 58          # an arc never cut (every finite capacity is clamped below it)
CLAMP = 1 << 50        # no finite arc is larger
SCALE = 1 << 16        # node weights are multiplied by this: lam x bytes is rounded up per
                       # arc, and a byte must be able to cost a small fraction of a node


class MemoryNetwork:
    """The cut network of a part's memory over node sets of ``candidates``.

    Parameters
    ----------
    problem : Problem
    candidates : iterable of int
        The nodes a set may contain (e.g. those allowed on one device); the others are always
        outside.
    """

    def __init__(self, problem: Problem, candidates: Iterable[int]):
        self.p = problem
        self.nodes = sorted(set(candidates))
        index = {v: 2 + i for i, v in enumerate(self.nodes)}
        self.index = index
        tails: list[int] = []
        heads: list[int] = []
        self.mem_arc: list[int] = []       # arc id -> bytes (memory arcs only)
        self.mem_bytes: list[int] = []
        self.next_vertex = 2 + len(self.nodes)

        def arc(a: int, b: int) -> int:
            tails.append(a)
            heads.append(b)
            return len(tails) - 1

        def memory_arc(a: int, b: int, size: int) -> None:
            if size > 0:
                self.mem_arc.append(arc(a, b))
                self.mem_bytes.append(size)

        def vertex() -> int:
            self.next_vertex += 1
            return self.next_vertex - 1

        infinite: list[int] = []

        def any_member(members: list[int], size: int) -> None:
            if size <= 0:
                return
            if len(members) == 1:
                memory_arc(members[0], 1, size)
                return
            a = vertex()
            for m in members:
                infinite.append(arc(m, a))
            memory_arc(a, 1, size)

        def split(members: list[int], size: int) -> None:
            if size <= 0 or len(members) < 2:
                return
            if len(members) == 2:
                memory_arc(members[0], members[1], size)
                memory_arc(members[1], members[0], size)
                return
            a, b = vertex(), vertex()
            for m in members:
                infinite.append(arc(m, a))
                infinite.append(arc(b, m))
            memory_arc(a, b, size)

        # Node arcs first: arc 2i is s -> node i (its weight), 2i + 1 is node i -> t (forcing out).
        for v in self.nodes:
            arc(0, index[v])
            arc(index[v], 1)
        readers: dict[int, list[int]] = {}
        for v in self.nodes:
            for c in problem.node_consts[v]:
                readers.setdefault(c, []).append(index[v])
        for c, members in readers.items():
            any_member(sorted(set(members)), problem.const_bytes[c])
        touched = sorted({t for v in self.nodes for t in problem.node_inputs[v]}
                         | {t for v in self.nodes for t in problem.node_outputs[v]})
        for t in touched:
            size = problem.tensor_bytes[t]
            u = problem.tensor_producer[t]
            members = ([u] if u >= 0 else []) + list(problem.tensor_consumers[t])
            inside = sorted({index[m] for m in members if m in index})
            if u < 0 or problem.tensor_is_output[t] or len(inside) < len(set(members)):
                any_member(inside, size)
            else:
                split(inside, size)
        self._make_flow(tails, heads, infinite)

    def _make_flow(self, tails: list[int], heads: list[int], infinite: list[int]) -> None:
        """The OR-Tools network of these arcs (capacities set per solve; ``infinite`` arcs
        are never cut)."""
        from ortools.graph.python import max_flow   # the solver imported when used
        self.flow = max_flow.SimpleMaxFlow()
        self.flow.add_arcs_with_capacity(np.array(tails, dtype=np.int32),
                                         np.array(heads, dtype=np.int32),
                                         np.zeros(len(tails), dtype=np.int64))
        if infinite:
            self.flow.set_arcs_capacity(np.array(infinite, dtype=np.int32),
                                        np.full(len(infinite), INF, dtype=np.int64))
        self._mem_arc = np.array(self.mem_arc, dtype=np.int32)
        self._mem_bytes = np.array(self.mem_bytes, dtype=np.float64)
        self._node_arcs = np.arange(2 * len(self.nodes), dtype=np.int32)

    def _solve(self, weights: np.ndarray, lam: float, forced_in: Iterable[int],
               forced_out: Iterable[int], round_down: bool = False) -> tuple[list[int], int]:
        """Min cut with node weights ``weights`` (per candidate, in ``self.nodes`` order) and
        memory arcs at ``lam`` per byte (rounded up, or down with ``round_down``).  Returns
        the set and the cut's value."""
        k = len(self.nodes)
        node_caps = np.zeros(2 * k, dtype=np.int64)
        node_caps[0::2] = weights
        # Without forced nodes the empty set is a cut of value sum(weights): an arc above that
        # is never in a minimum cut, so clamping there changes nothing.
        clamp = CLAMP if forced_in else min(CLAMP, int(node_caps.sum()) + 1)
        for v in forced_in:
            node_caps[2 * (self.index[v] - 2)] = INF
        for v in forced_out:
            node_caps[2 * (self.index[v] - 2) + 1] = INF
        self.flow.set_arcs_capacity(self._node_arcs, node_caps)
        if len(self._mem_arc):
            scaled = self._mem_bytes * lam
            scaled = np.floor(scaled) if round_down else np.ceil(scaled)
            caps = np.minimum(scaled, clamp).astype(np.int64)
            self.flow.set_arcs_capacity(self._mem_arc, caps)
        status = self.flow.solve(0, 1)
        if status != self.flow.OPTIMAL:
            raise RuntimeError(f"max flow failed: {status}")
        side = self.flow.get_source_side_min_cut()
        chosen = sorted(self.nodes[i - 2] for i in side if 2 <= i < 2 + k)
        return chosen, int(self.flow.optimal_flow())

    def min_memory_containing(self, v: int, excluded: Iterable[int] = ()) -> int:
        """``min {memory(S) : v in S}`` over sets of candidates without ``excluded``: a lower
        bound on the memory of every part that holds ``v`` (and reaches it)."""
        _, value = self._solve(np.zeros(len(self.nodes), dtype=np.int64), 1.0, [v], excluded)
        return value

    def best_set(self, weights: Sequence[int], lam: float,
                 excluded: Iterable[int] = ()) -> tuple[list[int], float]:
        """``argmin_S w(V \\ S) + lam * memory(S)`` over sets without the ``excluded``
        nodes (``weights``: non-negative integers per node of ``self.nodes``), and that
        minimum.  ``lam x bytes`` is rounded up to a multiple of ``1 / SCALE`` per arc, so the
        value is at least the true minimum, and at most ``#arcs / SCALE`` above it."""
        w = np.asarray(weights, dtype=np.int64) * SCALE
        S, value = self._solve(w, lam * SCALE, (), excluded)
        return S, value / SCALE

    def lagrangian(self, weights: Sequence[int], lam: float, excluded: Iterable[int] = ()
                   ) -> tuple[list[int], float]:
        """A lower bound on ``min_S w(V \\ S) + lam * memory(S)`` (memory arcs rounded
        down, so no set's value is overestimated) and the set reaching it."""
        w = np.asarray(weights, dtype=np.int64) * SCALE
        S, value = self._solve(w, lam * SCALE, (), excluded, round_down=True)
        return S, value / SCALE


def standalone_memory(problem: Problem, v: int) -> int:
    """Memory of ``v`` alone in a part: an upper bound on the least memory of a
    part holding it."""
    return MemoryTracker(problem).delta(v)


def placeable_nodes(problem: Problem, d: int, candidates: Iterable[int] | None = None,
                    network: MemoryNetwork | None = None, max_tests: int | None = None
                    ) -> tuple[list[int], dict[int, int]]:
    """The candidates (default: the nodes allowed on device ``d``) that some part on one
    instance of ``d`` can hold, and for the others the least memory of a part holding them.

    A node fits when it fits alone; otherwise the least memory of a part holding it, among
    sets of candidates, must fit.  A node that cannot be on ``d`` is dropped from the sets
    and the test repeated until nothing changes (a fixed point): exact for "no part on ``d``
    holding ``v`` fits one instance", whatever else the partition does.  ``max_tests``: at
    most this many nodes are tested (the largest on their own first); the others are kept,
    which is safe for every use (a bound only gets weaker)."""
    cap = problem.devices[d].memory
    if candidates is None:
        candidates = [v for v in range(problem.n) if d in problem.allowed[v]]
    nodes = sorted(set(candidates))
    if cap is None:
        return nodes, {}
    alone = {v: standalone_memory(problem, v) for v in nodes}
    doubtful = [v for v in nodes if alone[v] > cap]
    if max_tests is not None and len(doubtful) > max_tests:
        doubtful = sorted(sorted(doubtful, key=lambda v: -alone[v])[:max_tests])
    excluded: dict[int, int] = {}
    if not doubtful:
        return nodes, excluded
    net = network or MemoryNetwork(problem, nodes)
    changed = True
    while changed:
        changed = False
        for v in doubtful:
            if v in excluded:
                continue
            need = net.min_memory_containing(v, excluded)
            if need > cap:
                excluded[v] = need
                changed = True
    return [v for v in nodes if v not in excluded], excluded


def keep_within(problem: Problem, network: MemoryNetwork, weights: Sequence[int], target: int,
                excluded: Iterable[int] = (), steps: int = 40) -> tuple[list[int], int]:
    """A heavy set of candidates whose memory (as one part) is at most ``target`` bytes.

    The parametric cut at the smallest ``lam`` (searched in log scale) whose set fits gives a
    set on the lower convex hull of (weight left out, memory); the nodes it leaves out are then
    added back, heaviest first and cheapest in memory first, while the set still fits (the
    hull can jump over sets a knapsack would take).  Returns the set and its exact memory."""
    excluded = set(excluded)
    allowed = [v for v in network.nodes if v not in excluded]
    whole = part_memory(problem, allowed)
    if whole <= target:
        return allowed, whole
    weight = dict(zip(network.nodes, weights))
    wsum = float(sum(weights)) or 1.0
    total_bytes = float(sum(network.mem_bytes)) or 1.0
    lo_log, hi_log = np.log(wsum / total_bytes / 1e3), np.log(wsum * 2.0)
    best: list[int] = []
    for _ in range(steps):
        mid = float(np.exp((lo_log + hi_log) / 2))
        S, _ = network.best_set(weights, mid, excluded)
        if part_memory(problem, S) <= target:
            best = S
            hi_log = np.log(mid)
        else:
            lo_log = np.log(mid)
        if hi_log - lo_log < 1e-3:
            break
    tracker = MemoryTracker(problem)
    for v in best:
        tracker.add(v)
    inside = set(best)
    rest = [v for v in allowed if v not in inside and weight[v] > 0]
    rest.sort(key=lambda v: (-weight[v], tracker.delta(v), v))
    for v in rest:
        delta = tracker.delta(v)
        if tracker.used + delta <= target:
            tracker.add(v, delta)
            inside.add(v)
    return sorted(inside), tracker.used
