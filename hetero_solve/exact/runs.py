"""From a device per node to a partition that fits memory: parts first, then runs.

:func:`realize` is the primal side of the decomposition (docs/exact.md, "Memory"):

1. **Parts without memory.**  With every node's device fixed, the fewest parts come from the
   maximal extensions of the greedy (forward and backward, the better kept; the memory
   limits are ignored here).
2. **Runs.**  Each part on a device with a memory limit is cut into *contiguous runs of its
   topological order*.  Any such cut keeps the quotient acyclic (the runs replace the part in
   the order of parts, and every edge between runs goes forward) and keeps value inputs
   separated (a value edge inside a run was inside the part).  The cut is chosen by dynamic
   programming on the exact memory of each run (:class:`~hetero_solve.measures.MemoryTracker`,
   SPEC section 5): fewest runs that each fit an instance, ties to the least total memory; or,
   when those do not pack, the least total memory.
3. **Instances.**  The runs of every part on a device are packed into its instances, largest
   first, each into the instance with the most room (a bin packing; first fit decreasing is
   not exact, so a failure here is not a proof of anything).

The result is a valid partition or ``None``; it is never claimed optimal by itself.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0, 1]] * 4,
...                  [Device("NPU", memory=10, instances=2), "CPU"], tensor_bytes=1,
...                  const_bytes=[4, 4, 4, 4])
>>> s = realize(p, [0, 0, 0, 0])
>>> s.num_parts, s.part_device, sorted(s.part_instance)   # 16 bytes of weights: two cards
(2, [0, 0], [0, 1])
"""

from __future__ import annotations

import dataclasses
import heapq

from ..measures import fitting_runs, topological_order
from ..problem import Device, Problem
from ..solution import Solution
from .budget import Guard, Steps

RUN_STEPS = 400_000  # a run DP grows runs by about this many nodes in all: a run stops
                     # growing after max(64, RUN_STEPS / nodes) nodes in a row over capacity
                     # (inner activations can exceed an instance until the run closes them)


def _slack(m: int) -> int:
    return max(64, RUN_STEPS // max(1, m))


def depth_first_order(problem: Problem) -> list[int]:
    """A topological order that finishes a branch before starting the next (Kahn's algorithm
    with a last-in, first-out ready list): contiguous runs of it keep branches together, so
    their boundaries stay small."""
    indeg = [len(p) for p in problem.pred]
    ready = [v for v in range(problem.n) if indeg[v] == 0][::-1]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for w in reversed(problem.succ[v]):
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if len(order) != problem.n:
        raise ValueError("the graph has a cycle")
    return order


def parts_without_memory(problem: Problem, node_device: list[int]) -> Solution:
    """The greedy's maximal extensions with every node's device fixed and memory ignored
    (forward and backward; the fewer parts kept)."""
    from ..algorithms.greedy import greedy      # the heuristic's extension step

    free = dataclasses.replace(
        problem, devices=[Device(d.name, None, d.instances, d.enforce_values)
                          for d in problem.devices],
        allowed=[(node_device[v],) for v in range(problem.n)], arrays=None)
    a = greedy(free, direction="forward", devices=node_device)
    b = greedy(free, direction="backward", devices=node_device)
    return a if a.num_parts <= b.num_parts else b


def _runs_within(problem: Problem, nodes: list[int], i: int, cap: int, slack: int,
                 steps: Steps | None = None):
    """``(end, memory)`` of the runs ``nodes[i:end]`` that fit ``cap``, giving up after
    ``slack`` longer runs in a row that do not (an output made internal later may bring a
    run back under ``cap``, but rarely after many nodes).  ``steps`` counts the nodes added."""
    over = grown = 0
    try:
        for end, used in fitting_runs(problem, nodes, i, cap):
            grown += 1
            if used > cap:
                over += 1
                if over > slack:
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
        for end, used in _runs_within(problem, nodes, i, cap, slack, steps):
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


def _pack(sizes: list[int], bins: int, cap: int) -> list[int] | None:
    """First fit decreasing into the bin with the most room; ``None`` when one does not fit."""
    load = [0] * bins
    where = [0] * len(sizes)
    for k in sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)):
        b = min(range(bins), key=lambda i: (load[i], i))
        if load[b] + sizes[k] > cap:
            return None
        load[b] += sizes[k]
        where[k] = b
    return where


def realize(problem: Problem, node_device: list[int], *, parts: Solution | None = None,
            steps: Steps | None = None) -> Solution | None:
    """A valid-by-construction partition with these devices that fits memory, or ``None``
    (module doc).  ``parts``: the parts to cut (default :func:`parts_without_memory`);
    ``steps`` counts the work (nodes added to runs, :mod:`.budget`)."""
    from ..measures import part_memory

    n = problem.n
    if parts is None:
        parts = parts_without_memory(problem, node_device)
    pos = {v: k for k, v in enumerate(topological_order(problem.succ, problem.pred))}
    members: list[list[int]] = [[] for _ in range(parts.num_parts)]
    for v in sorted(range(n), key=pos.__getitem__):
        members[parts.part_of[v]].append(v)
    devs = problem.devices
    for fewest in (True, False):
        out_part = [0] * n
        out_device: list[int] = []
        runs_mem: list[int] = []
        ok = True
        for p, nodes in enumerate(members):
            d = parts.part_device[p]
            cap = devs[d].memory
            runs = [nodes] if cap is None else cut_runs(problem, nodes, cap, fewest=fewest,
                                                        steps=steps)
            if runs is None:
                ok = False
                break
            for run in runs:
                q = len(out_device)
                for v in run:
                    out_part[v] = q
                out_device.append(d)
                runs_mem.append(part_memory(problem, run) if cap is not None else 0)
        if not ok:
            return None
        out_instance = [0] * len(out_device)
        for d, dev in enumerate(devs):
            if dev.memory is None:
                continue
            qs = [q for q, e in enumerate(out_device) if e == d]
            where = _pack([runs_mem[q] for q in qs], dev.instances, dev.memory)
            if where is None:
                ok = False
                break
            for q, b in zip(qs, where):
                out_instance[q] = b
        if ok:
            return Solution(out_part, out_device, out_instance, algorithm="exact-runs")
    return None


def _drop_device(problem: Problem, v: int, d: int) -> int:
    """Where ``v`` goes when its run leaves ``d``: its last allowed device without a memory
    limit (-1 when none)."""
    for e in reversed(problem.allowed[v]):
        if e != d and problem.devices[e].memory is None:
            return e
    return -1


class _SlotRuns:
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
            self.keep.append(list(_runs_within(problem, nodes, i, cap, slack, steps)))
        self.size = m + sum(map(len, self.keep))     # the work of one cut()
        self.pref = [0]         # prefix counts of nodes preferring d (fallback when dropped)
        for v in nodes:
            self.pref.append(self.pref[-1] + (problem.allowed[v][0] == d))
        self.drop_to = [_drop_device(problem, v, d) for v in nodes]
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


def fit_by_runs(problem: Problem, parts: Solution, *, part_cost: float = 1e-3,
                iterations: int = 40, depth_first: bool = True,
                guard: Guard | None = None, steps: Steps | None = None) -> Solution | None:
    """Make ``parts`` (valid apart from memory) fit: every part on a limited device is cut into
    contiguous runs of its topological order, each kept on the device or dropped to an
    unlimited one, choosing the cuts that minimise ``fallback + lam x memory kept`` per part
    (:class:`_SlotRuns`), with ``lam`` the smallest (by bisection on a log scale) whose kept
    runs pack into the instances.  A Lagrangian relaxation of the capacity: each evaluation is
    exact, the packing is first fit decreasing.  ``None`` when no ``lam`` packs.  The work is a
    fixed number of bisection steps (counted in ``steps``, :mod:`.budget`); once ``guard``
    has passed (:class:`.budget.Guard`, never in a normal run), the bisection stops at the
    best ``lam`` found."""
    order = depth_first_order(problem) if depth_first else topological_order(problem.succ,
                                                                             problem.pred)
    members: list[list[int]] = [[] for _ in range(parts.num_parts)]
    for v in order:
        members[parts.part_of[v]].append(v)
    devs = problem.devices
    slots = {p: _SlotRuns(problem, members[p], parts.part_device[p],
                          devs[parts.part_device[p]].memory, steps)
             for p in range(parts.num_parts) if devs[parts.part_device[p]].memory is not None}
    cache: dict[float, Solution | None] = {}

    def attempt(lam: float) -> Solution | None:
        if lam not in cache:
            if steps is not None:
                steps.add(sum(sr.size for sr in slots.values()))
            chosen = {}
            for p, sr in slots.items():
                runs = sr.cut(lam, part_cost)
                if not runs:
                    cache[lam] = None
                    return None
                chosen[p] = runs
            cache[lam] = _assemble(problem, parts, members, chosen)
        return cache[lam]

    if attempt(0.0) is not None:
        return attempt(0.0)
    lo, hi = 1e-12, float(problem.n + 1)    # at hi, a kept byte costs more than every node
    if attempt(hi) is None:
        return None
    for _ in range(iterations):
        if guard is not None and guard.passed():
            break
        mid = (lo * hi) ** 0.5
        if attempt(mid) is None:
            lo = mid
        else:
            hi = mid
    return attempt(hi)


def _assemble(problem: Problem, parts: Solution, members, chosen) -> Solution | None:
    """Parts in order, limited ones replaced by their runs; instances packed per device."""
    from ..measures import part_memory

    n = problem.n
    out_part = [0] * n
    out_device: list[int] = []
    out_mem: list[int] = []
    for p, nodes in enumerate(members):
        runs = chosen.get(p)
        if runs is None:
            q = len(out_device)
            for v in nodes:
                out_part[v] = q
            out_device.append(parts.part_device[p])
            out_mem.append(0)
            continue
        for i, j, dev, used in runs:
            q = len(out_device)
            for v in nodes[i:j]:
                out_part[v] = q
            out_device.append(dev)
            out_mem.append(used)
    out_instance = [0] * len(out_device)
    for d, dev in enumerate(problem.devices):
        if dev.memory is None:
            continue
        qs = [q for q, e in enumerate(out_device) if e == d]
        where = _pack([out_mem[q] for q in qs], dev.instances, dev.memory)
        if where is None:
            return None
        for q, b in zip(qs, where):
            out_instance[q] = b
    return Solution(out_part, out_device, out_instance, algorithm="exact-runs")
