"""Cutting a part into runs that fit a room (docs/ARCHITECTURE.md, "Fitting into memory").

A *run* is a contiguous stretch of a topological order of a part.  Any cut of a part into runs
keeps the quotient acyclic (the runs replace the part in the order of parts and every edge
between them goes forward) and keeps value inputs separated (a value edge inside a run was
inside the part).  A run's memory is measured by :func:`hetero_solve.measures.fitting_runs`
(the part's memory grown node by node); a run may hold nodes whose activations would not fit
on their own, as long as the tensors between them stay inside.

Two families of cuts, each kept for the caller that has always used it (their answers differ,
and answers must not change):

* the heuristic's (:mod:`.fit`): :class:`Cutter` takes the longest run that fits a room, front
  to back, along :func:`~.order.branch_order` (``ties="index"``) or growing each run by the node
  that raises its memory least; :func:`dp_runs` is the best cut by dynamic programming, with
  nodes moved to another device between runs; :func:`components` splits a part into
  independent pieces;
* the exact engine's (:mod:`.realize`): :func:`cut_runs` (fewest runs, or least memory, by
  dynamic programming) and :class:`SlotRuns` (each run kept or dropped to an unlimited device,
  at a price per byte), both on runs of at most a work budget past the room
  (:data:`RUN_STEPS`), counted for the deterministic budget.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4, tensor_bytes=1,
...                  const_bytes=[4, 4, 4, 4])
>>> cut_runs(p, [0, 1, 2, 3], 10)
[[0, 1], [2, 3]]
>>> longest_run(p, [0, 1, 2, 3], 0, 10)
(2, 9)
"""

from __future__ import annotations

import heapq
from typing import Iterator, Sequence

from ..budget import Steps
from ..measures import MemoryTracker, RunInputs, fitting_runs
from ..problem import Problem
from .order import branch_order


def longest_run(problem: Problem, order: Sequence[int], start: int, cap: int) -> tuple[int, int]:
    """The longest run ``order[start:end]`` whose memory fits ``cap``: ``(end, memory)``, with
    ``end == start`` when none fits."""
    best, best_mem = start, 0
    for best, best_mem in runs_within(problem, order, start, cap):
        pass
    return best, best_mem


class Cutter:
    """Cuts one part into runs, front to back: each run is a prefix of a topological order of
    what is left of the part, so what is left stays convex and the runs keep edges forward.

    ``pick="order"``: the runs follow :func:`~.order.branch_order` (branch by branch) and each
    is the longest prefix that fits.  ``pick="smallest"``: a run grows by the ready node that raises
    its memory least (a node that brings in the last reader of a large tensor lowers it),
    for parts where branch order strands a large tensor's readers in different runs."""

    MAX_READY = 64      # ready nodes compared per step ("smallest")

    def __init__(self, problem: Problem, nodes: list[int], pick: str):
        self.p = problem
        self.pick = pick
        self.left = set(nodes)
        if pick == "order":
            self.order = branch_order(problem, nodes)
            self.pos = 0
        else:
            self.indeg = {v: sum(1 for u in problem.pred[v] if u in self.left) for v in nodes}
            self.ready = {v for v in nodes if self.indeg[v] == 0}   # left, nothing left before

    def done(self) -> bool:
        return not self.left

    def drop_front(self) -> int:
        """Remove the node the next run would start with (and return it)."""
        if self.pick == "order":
            v = self.order[self.pos]
            self.pos += 1
        else:
            v = min(self.ready)
            self._remove([v])
        self.left.discard(v)
        return v

    def take(self, cap: int) -> tuple[list[int], int] | None:
        """The next run that fits ``cap`` bytes and its memory, or None when none does."""
        if self.pick == "order":
            end, mem = longest_run(self.p, self.order, self.pos, cap)
            if end == self.pos:
                return None
            run = self.order[self.pos:end]
            self.pos = end
        else:
            run, mem = self._grow(cap)
            if not run:
                return None
            self._remove(run)
        self.left.difference_update(run)
        return run, mem

    def _remove(self, run: list[int]) -> None:
        """Take ``run`` (ready, in a topological order) out of the ready set; the nodes it
        leaves without a predecessor become ready."""
        indeg, ready, left = self.indeg, self.ready, self.left
        inside = set(run)
        ready.difference_update(run)
        for v in run:
            for w in self.p.succ[v]:
                if w in indeg:
                    indeg[w] -= 1
                    if indeg[w] == 0 and w in left and w not in inside:
                        ready.add(w)

    def _grow(self, cap: int) -> tuple[list[int], int]:
        p = self.p
        left = self.left
        indeg = self.indeg          # counted down while the run grows, restored below
        lowered: list[int] = []
        ready = sorted(self.ready)
        mem = MemoryTracker(p)
        fixed = RunInputs(p)
        taken: list[int] = []
        best, best_mem = 0, 0
        while ready:
            choice, choice_delta, choice_extra = -1, 0, 0
            for v in ready[:self.MAX_READY]:
                extra = fixed.extra(v)
                if fixed.bytes + extra > cap:
                    continue
                delta = mem.delta(v)
                if choice < 0 or delta < choice_delta:
                    choice, choice_delta, choice_extra = v, delta, extra
            if choice < 0:
                break
            fixed.add(choice, choice_extra)
            mem.add(choice, choice_delta)
            taken.append(choice)
            ready.remove(choice)
            for w in p.succ[choice]:
                if w in left:
                    indeg[w] -= 1
                    lowered.append(w)
                    if indeg[w] == 0:
                        ready.append(w)
            if mem.used <= cap:
                best, best_mem = len(taken), mem.used
        for w in lowered:
            indeg[w] += 1
        return taken[:best], best_mem


def components(problem: Problem, nodes: list[int]) -> list[list[int]]:
    """The weakly connected components of the part ``nodes`` (each sorted, by first node):
    independent pieces, which a split separates without any tensor crossing."""
    inside = set(nodes)
    seen: set[int] = set()
    out = []
    for v in sorted(nodes):
        if v in seen:
            continue
        comp, stack = [], [v]
        seen.add(v)
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in (*problem.succ[x], *problem.pred[x]):
                if y in inside and y not in seen:
                    seen.add(y)
                    stack.append(y)
        out.append(sorted(comp))
    return out


DP_NODES = 1500      # parts up to this size are also cut by dynamic programming
DP_WORK = 150_000    # node steps of run growth per programme before runs are kept short
DP_SHORT = 64


def dp_runs(problem: Problem, nodes: list[int], cap: int, max_runs: int, movable=None
            ) -> list[tuple[str, list[int], int]] | None:
    """The best cut of a part (along :func:`~.order.branch_order`) into runs of at most ``cap``
    bytes, at most ``max_runs`` of them, by dynamic programming over the cut positions: fewest
    nodes moved off the device first (only nodes ``movable(v)`` accepts may move, as parts of
    their own between runs), then fewest runs.  Unlike the longest-run cuts it sees that a
    shorter run can end where only small tensors cross.  Returns ``("run", nodes, bytes)`` and
    ``("moved", [v], 0)`` steps in order, or None when no cut exists."""
    order = branch_order(problem, nodes)
    L = len(order)
    INF = (L + 1, L + 1)
    # best[r][j]: (moved, -) to cover order[:j] with r runs; parent pointers to rebuild.
    best = [[INF] * (L + 1) for _ in range(max_runs + 1)]
    parent: list[list[tuple | None]] = [[None] * (L + 1) for _ in range(max_runs + 1)]
    best[0][0] = (0, 0)
    runs_from: dict[int, list[tuple[int, int]]] = {}
    work = [0]

    def runs(i: int) -> list[tuple[int, int]]:
        """(end, bytes) of every run order[i:end] that fits (once the work budget is spent,
        of those up to DP_SHORT nodes long)."""
        if i not in runs_from:
            stop = L if work[0] < DP_WORK else min(L, i + DP_SHORT)
            grown = list(fitting_runs(problem, order, i, cap, stop))
            # nodes looked at: the run grown, and the one that stopped it (if any)
            work[0] += min(stop, (grown[-1][0] if grown else i) + 1) - i
            runs_from[i] = [(end, used) for end, used in grown if used <= cap]
        return runs_from[i]

    for j in range(L):
        for r in range(max_runs + 1):
            here = best[r][j]
            if here == INF:
                continue
            if movable is not None and movable(order[j]):
                cand = (here[0] + 1, here[1])
                if cand < best[r][j + 1]:
                    best[r][j + 1], parent[r][j + 1] = cand, ("moved", r, j, 0)
            if r < max_runs:
                for end, size in runs(j):
                    cand = (here[0], here[1] + 1)
                    if cand < best[r + 1][end]:
                        best[r + 1][end], parent[r + 1][end] = cand, ("run", r, j, size)
    r = min(range(max_runs + 1), key=lambda x: (best[x][L], x))
    if best[r][L] == INF:
        return None
    steps: list[tuple[str, list[int], int]] = []
    j = L
    while j > 0:
        kind, r0, i, size = parent[r][j]
        steps.append((kind, order[i:j], size))
        r, j = r0, i
    steps.reverse()
    return steps


RUN_STEPS = 400_000  # a run DP grows runs by about this many nodes in all: a run stops
                     # growing after max(64, RUN_STEPS / nodes) nodes in a row over capacity
                     # (inner activations can exceed an instance until the run closes them)


def _slack(m: int) -> int:
    return max(64, RUN_STEPS // max(1, m))


def runs_within(problem: Problem, nodes: Sequence[int], i: int, cap: int,
                slack: int | None = None, steps: Steps | None = None
                ) -> Iterator[tuple[int, int]]:
    """``(end, memory)`` of the runs ``nodes[i:end]`` (``nodes`` in topological order) that
    fit ``cap``, shortest first; with ``slack``, giving up after ``slack`` longer runs in a
    row that do not (an output made internal later may bring a run back under ``cap``, but
    rarely after many nodes).  ``steps`` counts the nodes added."""
    over = grown = 0
    try:
        for end, used in fitting_runs(problem, nodes, i, cap):
            grown += 1
            if used > cap:
                over += 1
                if slack is not None and over > slack:
                    return
                continue
            over = 0
            yield end, used
    finally:
        if steps is not None:
            steps.add(grown)


def cut_runs(problem: Problem, nodes: list[int], cap: int, *, fewest: bool = True,
             steps: Steps | None = None) -> list[list[int]] | None:
    """Cut ``nodes`` (in topological order) into contiguous runs that each fit ``cap`` bytes:
    the fewest runs, ties to the least total memory (``fewest``), or the least total memory.
    ``None`` when some node does not fit on its own.  ``steps`` counts the work."""
    m = len(nodes)
    INF = (float("inf"), float("inf"))
    best: list[tuple] = [INF] * (m + 1)
    back = [0] * (m + 1)
    best[0] = (0, 0)
    slack = _slack(m)
    for i in range(m):
        if best[i] == INF:
            continue
        runs_i, mem_i = best[i]
        for end, used in runs_within(problem, nodes, i, cap, slack, steps):
            key = (runs_i + 1, mem_i + used) if fewest else (mem_i + used, runs_i + 1)
            if key < best[end]:
                best[end] = key
                back[end] = i
    if best[m] == INF:
        return None
    runs = []
    j = m
    while j > 0:
        i = back[j]
        runs.append(nodes[i:j])
        j = i
    return runs[::-1]


def drop_device(problem: Problem, v: int, d: int) -> int:
    """Where ``v`` goes when its run leaves ``d``: its last allowed device without a memory
    limit (-1 when none)."""
    for e in reversed(problem.allowed[v]):
        if e != d and problem.devices[e].memory is None:
            return e
    return -1


class SlotRuns:
    """The runs one slot (nodes in topological order, on limited device ``d``) can be cut
    into: ``keep[i]`` = ``(j, memory)`` for every run ``nodes[i:j]`` that fits ``cap``
    (measured once, exactly, with :class:`~hetero_solve.measures.MemoryTracker`), and
    ``drop_end[i]`` = how far a run starting at ``i`` can go when dropped to an unlimited
    device (one device for the whole run, no value edge inside on an enforcing one)."""

    def __init__(self, problem: Problem, nodes: list[int], d: int, cap: int,
                 steps: Steps | None = None):
        self.nodes = nodes
        self.d = d
        m = len(nodes)
        slack = _slack(m)
        self.keep: list[list[tuple[int, int]]] = []
        for i in range(m):
            self.keep.append(list(runs_within(problem, nodes, i, cap, slack, steps)))
        self.size = m + sum(map(len, self.keep))     # the work of one cut()
        self.pref = [0]         # prefix counts of nodes preferring d (fallback when dropped)
        for v in nodes:
            self.pref.append(self.pref[-1] + (problem.allowed[v][0] == d))
        self.drop_to = [drop_device(problem, v, d) for v in nodes]
        self.drop_end = []
        vp = problem.value_pred
        for i in range(m):
            e = self.drop_to[i]
            if e < 0:
                self.drop_end.append(i)
                continue
            enforce = problem.devices[e].enforce_values
            inside: set[int] = set()
            j = i
            while j < m:
                v = nodes[j]
                if e not in problem.allowed[v] or (enforce and any(u in inside for u in vp[v])):
                    break
                inside.add(v)
                j += 1
            self.drop_end.append(j)

    def cut(self, lam: float, part_cost: float) -> list[tuple[int, int, int, int]]:
        """Runs minimising ``sum(part_cost + (lam x memory if kept else fallback))``, as
        ``(start, end, device, memory)``; exact over the cut points.  ``[]`` when none."""
        m = len(self.nodes)
        INF = float("inf")
        best = [INF] * (m + 1)
        back: list[tuple[int, int, int]] = [(0, -1, 0)] * (m + 1)
        best[0] = 0.0
        pref, drop_end = self.pref, self.drop_end
        # A dropped run nodes[i:j] costs best[i] + part_cost - pref[i] + pref[j]: the open
        # drops (i < j <= drop_end[i]) wait in a heap by their part before j, so each end j
        # takes the cheapest in O(log m) instead of every start relaxing every end (O(m^2)).
        open_drops: list[tuple[float, int]] = []
        for i in range(m + 1):
            while open_drops and drop_end[open_drops[0][1]] < i:
                heapq.heappop(open_drops)       # expired: it cannot reach i or beyond
            if open_drops:
                key, k = open_drops[0]
                cost = key + pref[i]
                # ties go to the earlier start, and to keeping over dropping at one start
                if cost < best[i] or (cost == best[i] and k < back[i][0]):
                    best[i] = cost
                    back[i] = (k, self.drop_to[k], 0)
            b = best[i]
            if i == m or b == INF:
                continue
            base = b + part_cost
            for j, used in self.keep[i]:
                cost = base + lam * used
                if cost < best[j]:
                    best[j] = cost
                    back[j] = (i, self.d, used)
            if drop_end[i] > i:
                heapq.heappush(open_drops, (base - pref[i], i))
        if best[m] == INF:
            return []
        runs = []
        j = m
        while j > 0:
            i, dev, used = back[j]
            runs.append((i, j, dev, used))
            j = i
        return runs[::-1]
