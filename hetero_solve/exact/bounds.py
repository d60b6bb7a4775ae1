"""Lower bounds on the number of parts, slot windows, and the chains that explain them.

Every bound rests on one fact (dagP, Herrmann et al. 2019): a partition has an
acyclic quotient iff the parts can be numbered so that every edge goes to the same or a later
part.  Hence **a part meets any path in one contiguous stretch**: if it held path nodes ``a``
and ``c`` but not ``b`` between them, the path would leave the part and come back, a cycle.

* ``path`` (LB1): ``1 +`` the most forced breaks on a path.  An edge is a forced break when its
  ends cannot share a part: no common device, or a value edge whose common devices all
  enforce value inputs.
* ``segments`` (LB2): for each device ``c``, the most *c-runs* on one path.  A run is a
  maximal stretch of nodes that must be on ``c`` (``R(v) == (c,)``), joined through nodes that
  may be on ``c``; it ends at a node that cannot be on ``c``, at a value edge when ``c``
  enforces value inputs, or, when ``c``'s memory can bind, where the constants (and graph
  inputs/outputs) of the run's nodes would overflow one instance (a greedy split, optimal for a
  fixed sequence because the weight of a stretch only grows with it).  Different runs meet
  different ``c``-parts (contiguity), and parts on different devices are different, so the sum
  over devices is a bound.
* ``through`` (LB3): for one node ``v``, the ``c``-runs on paths ending at ``v`` lie in parts
  numbered ``<= p(v)`` and those on paths starting at ``v`` in parts ``>= p(v)``: at least
  ``sum_c fwd_c(v) + sum_c bwd_c(v) - 1`` parts.
* ``packing``, per device ``c`` whose memory can bind: the constants, graph inputs and graph
  outputs of the nodes that must be on ``c`` (``R(v) == (c,)``) are held by some part on
  ``c`` each (a constant whose readers no part can hold together, such as a tied embedding
  read at both ends of a decoder, by one part per such reader), and a part holds at most one
  instance's memory: at least the bins of a bin packing of those items, ``ceil(T_c /
  memory)`` or more (:func:`packing`).  It joins LB2 device by device:
  ``sum_c max(runs_c, packing_c)``.  With fallback fixed at 0 (``fixed``: every node on its
  preferred device) every node is forced: the weights alone bound the parts.

:func:`memory_bounds` bounds the *fallback* when memory binds (module doc there); the
:class:`MemoryBounds` it returns is what ``partition.json``'s ``lower_bound.fallback`` and
``explain``'s memory section report.

The same quantities bound each node's slot (its part number in any solution with ``K`` slots):
``top[v] <= p(v) <= K - 1 - bottom[v]``.  These are the CP-SAT windows.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(5, [(0, 1), (1, 2), (2, 3), (0, 4)], [[0], [1], [0], [1], [0]])
>>> b = lower_bounds(p, [(a[0],) for a in p.allowed])
>>> b.lb, b.top, b.bottom
(4, [0, 1, 2, 3, 0], [3, 2, 1, 0, 0])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import math

import numpy as np

from ..algorithms.memory_cut import MemoryNetwork
from ..measures import part_memory, topological_order as node_order
from ..problem import Problem
from .analysis import binding_devices, shared_devices

NEG = -1  # an impossible state (counts are >= 0)


@dataclass
class Bounds:
    """Lower bounds on the number of parts for the solutions whose nodes stay within ``R``."""
    lb: int
    kind: str                          # which bound gives lb: "path", "segments" or "through"
    lb_path: int
    lb_segments: int
    lb_through: int
    per_device: list[int]              # LB2 terms: parts on each device at least (runs, packing)
    top: list[int]                     # p(v) >= top[v]
    bottom: list[int]                  # p(v) <= K - 1 - bottom[v]
    through_node: int = -1             # the node giving lb_through
    _runs: dict = field(default_factory=dict, repr=False)   # internals for chains
    _path: tuple = field(default=(), repr=False)
    packing: list[int] = field(default_factory=list)         # per device: bin packing of T_c
    packing_bytes: list[int] = field(default_factory=list)   # per device: T_c (copies counted)
    runs_per_device: list[int] = field(default_factory=list)  # LB2's runs alone, per device
    #: per device: constant id -> readers no part holds together (:func:`held_copies`)
    packing_copies: dict = field(default_factory=dict)

    def window(self, v: int, K: int) -> tuple[int, int]:
        return self.top[v], K - 1 - self.bottom[v]

    def after(self, c: int) -> list[int]:
        """Per node ``v``: the most ``c``-runs on one path starting at ``v`` (parts on ``c``
        that hold ``v`` or its descendants)."""
        if c not in self._runs:
            return [0] * len(self.top)
        st = self._runs[c][1]
        return [max(a, b) for a, b in zip(st.open, st.closed)]


class _Runs:
    """The c-run dynamic programme for one device in one direction (see module doc)."""

    __slots__ = ("open", "closed", "open_par", "closed_par", "open_mem")

    def __init__(self, n: int):
        self.open = [NEG] * n
        self.closed = [NEG] * n
        self.open_par: list = [None] * n    # (u, state, event) for the open state
        self.closed_par: list = [None] * n
        self.open_mem: list = [None] * n    # (items, bytes) of the current run when memory binds

    def best(self, v: int) -> int:
        return max(self.open[v], self.closed[v])


def _items(problem: Problem, v: int) -> dict:
    """What any part holding ``v`` stores for ``v`` whatever else it holds (SPEC section 5)."""
    items = {("c", c): problem.const_bytes[c] for c in problem.node_consts[v]}
    for t in problem.node_inputs[v]:
        if problem.tensor_producer[t] < 0:
            items[("t", t)] = problem.tensor_bytes[t]
    for t in problem.node_outputs[v]:
        if problem.tensor_is_output[t]:
            items[("t", t)] = problem.tensor_bytes[t]
    return items


def _device_runs(problem: Problem, R, order, inn, value, c: int, cap: int | None) -> _Runs:
    """``value(u, v)``: the edge between ``u`` (earlier in ``order``) and ``v`` is a value edge."""
    n = problem.n
    st = _Runs(n)
    enforce = problem.devices[c].enforce_values
    for v in order:
        capable = c in R[v]
        ci, cpar = 0, None
        oi, opar, omem = NEG, None, None
        for u in inn[v]:
            cu = st.closed[u]
            if cu > ci:
                ci, cpar = cu, (u, "closed", None)
            ou = st.open[u]
            if ou >= 0:
                if capable and not (enforce and value(u, v)):
                    mem = st.open_mem[u]
                    key = (ou, mem[1] if mem else 0)
                    if oi < 0 or key > (oi, omem[1] if omem else 0):
                        oi, opar, omem = ou, (u, "open", None), mem
                elif ou > ci:
                    ci, cpar = ou, (u, "open", ("device", v) if not capable else ("value", u, v))
        if not capable:
            st.closed[v], st.closed_par[v] = ci, cpar
            continue
        if R[v] != (c,):        # may be on c: joins a run, never starts one
            st.open[v], st.open_par[v], st.open_mem[v] = oi, opar, omem
            st.closed[v], st.closed_par[v] = ci, cpar
            continue
        # forced onto c: continue the open run, or start a new one after a break
        items = _items(problem, v) if cap is not None else None
        cand = []
        if oi >= 0:
            if cap is not None:
                merged = dict(omem[0]) if omem else {}
                merged.update(items)
                size = sum(merged.values())
                if size > cap:
                    cand.append((oi + 1, sum(items.values()), (opar[0], "open", ("memory", v)),
                                 (items, sum(items.values()))))
                else:
                    cand.append((oi, size, opar, (merged, size)))
            else:
                cand.append((oi, 0, opar, None))
        size0 = sum(items.values()) if items is not None else 0
        cand.append((ci + 1, size0, (cpar[0], cpar[1], "start") if cpar else None,
                     (items, size0) if items is not None else None))
        best = max(cand, key=lambda x: (x[0], x[1]))
        st.open[v], _, st.open_par[v], st.open_mem[v] = best
        st.closed[v] = NEG
    return st


def lower_bounds(problem: Problem, R: list[tuple[int, ...]],
                 memory_devices: list[int] | tuple[int, ...] = ()) -> Bounds:
    """LB1, LB2, LB3 and the slot windows for solutions within ``R`` (see module doc).
    ``memory_devices``: devices whose memory limit can bind (their runs split on memory)."""
    n = problem.n
    if n == 0:
        return Bounds(0, "path", 0, 0, 0, [0] * len(problem.devices), [], [])
    order = node_order(problem.succ, problem.pred)
    rev = order[::-1]
    vp = problem.value_pred
    fwd_value = lambda u, v: u in vp[v]   # noqa: E731  (u before v)
    bwd_value = lambda w, v: v in vp[w]   # noqa: E731  (w after v: edge v -> w)

    # LB1: forced breaks on one path
    top1 = [0] * n
    par1: list = [None] * n
    for v in order:
        best, pu = 0, None
        for u in problem.pred[v]:
            x = top1[u] + (0 if shared_devices(problem, R, u, v) else 1)
            if pu is None or x > best:
                best, pu = x, u
        top1[v], par1[v] = best, pu
    bot1 = [0] * n
    for v in rev:
        for w in problem.succ[v]:
            x = bot1[w] + (0 if shared_devices(problem, R, v, w) else 1)
            if x > bot1[v]:
                bot1[v] = x
    end1 = max(range(n), key=lambda v: (top1[v], -v))
    lb1 = top1[end1] + 1

    # LB2 / LB3: device runs, both directions
    D = len(problem.devices)
    used = sorted({d for r in R for d in r})
    fsum = [0] * n
    bsum = [0] * n
    per_device = [0] * D
    runs = {}
    for c in used:
        cap = problem.devices[c].memory if c in memory_devices else None
        f = _device_runs(problem, R, order, problem.pred, fwd_value, c, cap)
        b = _device_runs(problem, R, rev, problem.succ, bwd_value, c, cap)
        runs[c] = (f, b)
        for v in range(n):
            fv, bv = f.best(v), b.best(v)
            fsum[v] += fv
            bsum[v] += bv
            if fv > per_device[c]:
                per_device[c] = fv
    packed = packing(problem, R, memory_devices)
    packing_, packing_bytes = packed.parts, packed.held
    runs_per_device = list(per_device)
    per_device = [max(a, b) for a, b in zip(per_device, packing_)]
    lb2 = sum(per_device)
    mid = max(range(n), key=lambda v: (fsum[v] + bsum[v], -v))
    lb3 = fsum[mid] + bsum[mid] - 1
    top = [max(top1[v], fsum[v] - 1) for v in range(n)]
    bottom = [max(bot1[v], bsum[v] - 1) for v in range(n)]
    lb = max(lb1, lb2, lb3, 1)
    kind = "path" if lb == lb1 else ("segments" if lb == lb2 else "through")
    return Bounds(lb, kind, lb1, lb2, lb3, per_device, top, bottom, mid, runs,
                  (end1, par1), packing=packing_, packing_bytes=packing_bytes,
                  runs_per_device=runs_per_device, packing_copies=packed.copies)


# -- memory -----------------------------------------------------------------------------------

#: Shared constants examined for copies (:func:`held_copies`), per device, largest first, and
#: the pairs of their readers checked in all: each check is a search of the nodes between.
COPY_CONSTANTS = 16
COPY_PAIRS = 48
#: Readers of one constant looked at (in graph order) when counting its copies.
COPY_READERS = 8


@dataclass
class Packing:
    """Per device whose memory can bind, what :func:`packing_parts` found: the bound, the
    bytes behind it, and the constants held by more than one part (constant id -> the readers
    no part can hold together)."""
    parts: list[int]
    held: list[int]
    copies: dict[int, dict[int, list[int]]]


def packing_parts(problem: Problem, R: list[tuple[int, ...]], memory_devices
                  ) -> tuple[list[int], list[int]]:
    """Per device: the least number of parts its memory forces (module doc, ``packing``) and
    the bytes ``T_c`` behind it (0 for devices whose memory cannot bind)."""
    found = packing(problem, R, memory_devices)
    return found.parts, found.held


def packing(problem: Problem, R: list[tuple[int, ...]], memory_devices) -> Packing:
    """The parts on each memory-limited device ``c`` that the nodes forced onto it
    (``R(v) == (c,)``) need: each of their constants, graph inputs and graph outputs is held
    by some part on ``c``, a constant read by nodes no part can hold together by one part per
    such reader (:func:`held_copies`), and a part holds at most one instance's memory.  So the
    parts on ``c`` are at least the bins of a bin packing of those items (Martello and Toth's
    L2, :func:`bin_packing_bound`, at least ``ceil(T_c / memory)``).

    Examples
    --------
    A weight read at both ends of a chain whose middle alone fills a card is held twice:
    0.6 + 0.6 + 0.5 = 1.7 cards of items, two of them over half a card, so 3 parts (the bytes
    alone would say 2).

    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0]] * 3, [Device("CARD", memory=10, instances=4)],
    ...                  tensor_bytes=0, const_bytes=[6, 5, 0])
    >>> p.node_consts[2].append(0)            # node 2 reads node 0's weight
    >>> found = packing(p, [(0,)] * 3, [0])
    >>> found.parts, found.held, found.copies
    ([3], [17], {0: {0: [0, 2]}})
    """
    D = len(problem.devices)
    parts, held = [0] * D, [0] * D
    copies: dict[int, dict[int, list[int]]] = {}
    for c in memory_devices:
        cap = problem.devices[c].memory
        if not cap:
            continue
        readers: dict[int, list[int]] = {}
        io: set[int] = set()
        for v in range(problem.n):
            if R[v] != (c,):
                continue
            for k in problem.node_consts[v]:
                readers.setdefault(k, []).append(v)
            io.update(t for t in problem.node_inputs[v] if problem.tensor_producer[t] < 0)
            io.update(t for t in problem.node_outputs[v] if problem.tensor_is_output[t])
        apart = held_copies(problem, R, c, cap, readers)
        if apart:
            copies[c] = apart
        sizes = [problem.const_bytes[k] for k, vs in readers.items()
                 for _ in range(len(apart.get(k, ())) or 1)]
        sizes.extend(problem.tensor_bytes[t] for t in io)
        held[c] = sum(sizes)
        parts[c] = bin_packing_bound(sizes, cap)
    return Packing(parts, held, copies)


def held_copies(problem: Problem, R: list[tuple[int, ...]], c: int, cap: int,
                readers: dict[int, list[int]]) -> dict[int, list[int]]:
    """Constants that more than one part on ``c`` must hold: constant id -> readers of it
    (forced onto ``c``) no two of which can share a part.

    Readers ``u`` and ``w`` (``u`` first in graph order) cannot share a part when the nodes
    any such part holds, ``u``, ``w`` and every node on a path between them (a part meets a
    path in one stretch), include one that cannot be on ``c`` or have constants over one
    instance.  A tied embedding is the case: read by the first node (``Gather``) and the
    last (the LM head), with the whole decoder between.  Only the :data:`COPY_CONSTANTS`
    largest shared constants and :data:`COPY_PAIRS` pairs in all are examined (each pair is
    a search): what is not examined counts once, which keeps the bound a bound."""
    shared = sorted((k for k, vs in readers.items() if len(vs) > 1),
                    key=lambda k: (-problem.const_bytes[k], k))[:COPY_CONSTANTS]
    budget = COPY_PAIRS
    found: dict[int, list[int]] = {}
    for k in shared:
        vs = sorted(readers[k])[:COPY_READERS]
        picked = [vs[0]]
        for w in vs[1:]:
            if budget < len(picked):
                break
            budget -= len(picked)
            if all(_apart(problem, R, c, cap, u, w) for u in picked):
                picked.append(w)
        if len(picked) > 1:
            found[k] = picked
    return found


def _apart(problem: Problem, R, c: int, cap: int, u: int, w: int) -> bool:
    """Can no part on ``c`` hold both ``u`` and ``w`` (``u < w``, graph order)?  (See
    :func:`held_copies`.)"""
    # the ancestors of w that may lie after u (nodes are in topological order)
    between = {w}
    stack = [w]
    while stack:
        x = stack.pop()
        for y in problem.pred[x]:
            if y > u and y not in between:
                between.add(y)
                stack.append(y)
    # those of them u reaches, u and w included
    held = {u, w}
    stack = [u]
    reached = False
    while stack:
        x = stack.pop()
        for y in problem.succ[x]:
            if y in between and y not in held:
                held.add(y)
                stack.append(y)
            reached |= y == w
    if not reached:
        held = {u, w}
    if any(c not in R[x] for x in held):
        return True
    consts = set().union(*(problem.node_consts[x] for x in held))
    return sum(problem.const_bytes[k] for k in consts) > cap


def bin_packing_bound(sizes, cap: int) -> int:
    """The least number of bins of ``cap`` bytes that hold items of ``sizes`` at least
    (Martello and Toth's L2, 1990): for every ``a <= cap / 2``, the items over ``cap - a``
    and those over ``cap / 2`` each need a bin of their own, and the items of at least ``a``
    and at most ``cap / 2`` need what the room those bins leave cannot take.  Never below
    ``ceil(sum / cap)`` (``a = 0``).

    >>> bin_packing_bound([6, 6, 5], 10), bin_packing_bound([6, 6, 5, 4, 4], 10)
    (3, 3)
    """
    s = np.sort(np.asarray([x for x in sizes if x > 0], dtype=np.int64))
    if not len(s):
        return 0
    best = -(-int(s.sum()) // cap)
    small = s[2 * s <= cap]                          # ascending
    large = s[2 * s > cap]                           # ascending
    large_prefix = np.concatenate([[0], np.cumsum(large)])
    small_suffix = np.concatenate([np.cumsum(small[::-1])[::-1], [0]])
    alphas = np.unique(np.concatenate([[0], small]))
    # J1: items > cap - a; J2: cap/2 < items <= cap - a; J3: a <= items <= cap/2
    j2_end = np.searchsorted(large, cap - alphas, side="right")       # large[:j2_end] are J2
    n1 = len(large) - j2_end
    j3_sum = small_suffix[np.searchsorted(small, alphas, side="left")]
    room = j2_end * cap - large_prefix[j2_end]
    rest = np.maximum(0, -(-(j3_sum - room) // cap))
    return max(best, int((n1 + j2_end + rest).max()))


@dataclass
class DeviceMemoryBound:
    """Why nodes must leave one device (SPEC section 5), as :func:`memory_bounds` found it."""
    device: int
    capacity: int                       # memory x instances
    preferred: int                      # nodes preferring the device
    need: int                           # memory of the nodes preferring it, as one part
    need_possible: int                  # memory of the nodes that may be on it, as one part
    cannot: list[int]                   # preferred nodes no part on one instance can hold
    bound: int                          # preferred nodes that must leave it, at least
    lam: float = 0.0                    # the Lagrange price (nodes per byte) of the bound


@dataclass
class MemoryBounds:
    """A lower bound on the fallback of every valid partition, and per device the reason."""
    fallback: int
    devices: list[DeviceMemoryBound]


LAGRANGE_STEPS = 40


def memory_bounds(problem: Problem, R: list[tuple[int, ...]] | None = None) -> MemoryBounds:
    """A lower bound on the fallback (nodes off their preferred device) of every valid
    partition.

    Per device ``d`` whose memory can bind: let ``P`` be the nodes preferring ``d`` and ``A``
    those that may be on it (``R``, default :func:`~.analysis.device_sets`).  Nodes of ``P``
    outside ``A`` must leave.  For the rest, the union ``S`` of every part on ``d`` needs at
    most ``memory x instances`` (merging never raises memory: SPEC section 5 counts a
    constant or boundary tensor of a union in one of the merged parts), so for every price
    ``lam >= 0``::

        fallback on d >= min over S in A of  |P \\ S| + lam * (memory(S) - memory x instances)

    and the minimum is one minimum cut (:class:`~hetero_solve.algorithms.memory_cut.
    MemoryNetwork`, capacities rounded down so it never overestimates).  The price is
    bisected on the sign of ``memory(S) - capacity`` (the bound is concave in ``lam``).
    Devices' preferred nodes are disjoint: the bounds add up.

    Examples
    --------
    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
    ...                  tensor_bytes=1, const_bytes=[6, 6, 2])
    >>> memory_bounds(p).fallback      # 14 bytes of constants, 10 bytes of room
    1
    """
    from .analysis import device_sets
    if R is None:
        R = device_sets(problem, fixed=False)
    out: list[DeviceMemoryBound] = []
    total = 0
    for d in binding_devices(problem, R):
        dev = problem.devices[d]
        capacity = dev.memory * dev.instances
        preferred = [v for v in range(problem.n) if problem.allowed[v][0] == d]
        if not preferred:
            continue
        cannot = [v for v in preferred if d not in R[v]]
        members = [v for v in range(problem.n) if d in R[v]]
        need = part_memory(problem, members)
        bound, lam = len(cannot), 0.0
        if need > capacity and members:
            extra, lam = _lagrange(problem, members, set(preferred), capacity)
            bound += extra
        total += bound
        out.append(DeviceMemoryBound(d, capacity, len(preferred), part_memory(problem, preferred),
                                     need, cannot, bound, lam))
    return MemoryBounds(total, out)


def _lagrange(problem: Problem, members: list[int], preferred: set[int],
              capacity: int) -> tuple[int, float]:
    """``max over lam`` of the Lagrangian bound (see :func:`memory_bounds`), rounded up to an
    integer, and the price reaching it."""
    net = MemoryNetwork(problem, members)
    weights = [1 if v in preferred else 0 for v in net.nodes]
    total_bytes = float(sum(net.mem_bytes)) or 1.0
    lo, hi = np.log(1e-3 / total_bytes), np.log(2.0 * max(1, len(preferred)))
    best, best_lam = 0.0, 0.0
    for _ in range(LAGRANGE_STEPS):
        lam = float(np.exp((lo + hi) / 2))
        S, value = net.lagrangian(weights, lam)
        bound = value - lam * capacity
        if bound > best:
            best, best_lam = bound, lam
        if part_memory(problem, S) > capacity:
            lo = np.log(lam)        # the set still needs too much: a higher price
        else:
            hi = np.log(lam)
        if hi - lo < 1e-4:
            break
    return max(0, math.ceil(best - 1e-6)), best_lam


# -- chains for explanations ----------------------------------------------------------------

def path_chain(problem: Problem, R, b: Bounds) -> list[int]:
    """The nodes of the LB1 path, source first."""
    if not b._path:
        return []
    v, par = b._path
    out = [v]
    while par[v] is not None:
        v = par[v]
        out.append(v)
    return out[::-1]


def run_chain(problem: Problem, b: Bounds, c: int, v: int | None = None,
              backward: bool = False) -> list[tuple[int, tuple | None]]:
    """The path behind a device's run count, as ``(node, event)`` pairs in path order; events
    are ``None``, ``("start",)``, ``("device", w)``, ``("value", u, w)`` or ``("memory", w)``.
    ``v`` defaults to the node with the most ``c``-runs."""
    if c not in b._runs:
        return []
    st = b._runs[c][1 if backward else 0]
    n = problem.n
    if v is None:
        v = max(range(n), key=lambda x: (st.best(x), -x))
    state = "open" if st.open[v] >= st.closed[v] else "closed"
    out: list[tuple[int, tuple | None]] = []
    seen = 0
    while v is not None and seen <= n:
        seen += 1
        par = st.open_par[v] if state == "open" else st.closed_par[v]
        event = None
        if par is not None:
            event = par[2]
            if event == "start":
                event = ("start",)
        elif state == "open":
            event = ("start",)
        out.append((v, event))
        if par is None:
            break
        v, state = par[0], par[1]
    return out if backward else out[::-1]
