"""Lower bounds that memory limits force (docs/exact.md, "Memory"; docs/ARCHITECTURE.md,
"Fitting into memory").

* :func:`packing`: per device whose memory can bind, the least number of parts the nodes
  forced onto it need (their constants, graph inputs and graph outputs, packed into parts of
  one instance each); :func:`hetero_solve.exact.bounds.lower_bounds` joins it to the run
  counts.
* :func:`memory_bounds`: a lower bound on the fallback of every valid partition; the
  :class:`MemoryBounds` it returns is what ``partition.json``'s ``lower_bound.fallback`` and
  ``explain``'s memory section report.
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np

from ..measures import part_memory
from ..problem import Problem
from .devices import device_sets
from .floors import binding_devices, held_items
from .network import MemoryNetwork
from .packing import bin_packing_bound


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
        readers, io = held_items(problem, (v for v in range(problem.n) if R[v] == (c,)))
        apart = held_copies(problem, R, c, cap, readers)
        if apart:
            copies[c] = apart
        sizes = [problem.const_bytes[k] for k, vs in readers.items()
                 for _ in range(len(apart.get(k, ())) or 1)]
        sizes.extend(problem.tensor_bytes[t] for t in io)
        held[c] = sum(sizes)
        parts[c] = bin_packing_bound(sizes, cap)
    return Packing(parts, held, copies)


def kept_packing(problem: Problem, R: list[tuple[int, ...]], fallback: int) -> int:
    """A lower bound on the parts of every valid partition with at most ``fallback`` nodes off
    their preferred device (``R``: :func:`~.devices.device_sets` with ``fixed=False``).

    A node not moved is on its preferred device.  On a device ``c`` with a memory limit, the
    nodes preferring it that stay hold their constants, graph inputs and graph outputs in
    parts on ``c``, each part at most one instance's memory.  At most ``fallback`` nodes move,
    less those that must (``c`` not in ``R(v)``); those that cannot (``R(v) == (c,)``) never
    do; a moved node takes at most its own items out of the union.  So the parts on ``c`` are
    at least ``ceil((T_c - the largest such removals) / memory)``; summed over the limited
    devices, plus one part when some node can only be on devices without a limit.  The
    :func:`packing` bound with room for the fallback the answer has (it is 0 there), which the
    run counts cannot see when every node may leave (a decoder on cards whose largest
    matrices fit none: the rest still needs its share of cards).

    Examples
    --------
    Ten nodes of 4 bytes each on 10-byte cards, the CPU allowed: with no node moved, 4 parts
    (40 bytes); with up to 3 moved, at least 28 bytes stay: 3 parts.

    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(10, [(i, i + 1) for i in range(9)], [[0, 1]] * 10,
    ...                  [Device("CARD", memory=10, instances=4), "CPU"], tensor_bytes=0,
    ...                  const_bytes=[4] * 10)
    >>> R = [(0, 1)] * 10
    >>> kept_packing(p, R, 0), kept_packing(p, R, 3)
    (4, 3)
    """
    D = len(problem.devices)
    limited = [d for d in range(D) if problem.devices[d].memory]
    if not limited:
        return 0
    forced = sum(1 for v in range(problem.n) if problem.allowed[v][0] not in R[v])
    room = max(0, fallback - forced)
    total = 0
    for c in limited:
        cap = problem.devices[c].memory
        stay = [v for v in range(problem.n) if problem.allowed[v][0] == c and c in R[v]]
        if not stay:
            continue
        readers, io = held_items(problem, stay)
        held = (sum(problem.const_bytes[k] for k in readers)
                + sum(problem.tensor_bytes[t] for t in io))
        own = []
        for v in stay:
            if R[v] == (c,):
                continue      # never moves
            readers_v, io_v = held_items(problem, [v])
            own.append(sum(problem.const_bytes[k] for k in readers_v)
                       + sum(problem.tensor_bytes[t] for t in io_v))
        own.sort(reverse=True)
        left = held - sum(own[:room])
        if left > 0:
            total += math.ceil(left / cap)
    # a node that only fits devices without a limit is in a part none of the above counts
    unlimited = any(all(not problem.devices[d].memory for d in R[v]) for v in range(problem.n))
    return total + (1 if unlimited else 0)


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


@dataclass
class DeviceMemoryBound:
    """Why nodes must leave one device (memory limits), as :func:`memory_bounds` found it."""
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
    those that may be on it (``R``, default :func:`.devices.device_sets`).
    Nodes of ``P`` outside ``A`` must leave.  For the rest, the union ``S`` of every part on
    ``d`` needs at most ``memory x instances`` (merging never raises memory: a part's memory
    counts a constant or boundary tensor of a union in one of the merged parts), so for every
    price ``lam >= 0``::

        fallback on d >= min over S in A of  |P \\ S| + lam * (memory(S) - memory x instances)

    and the minimum is one minimum cut (:class:`~.network.MemoryNetwork`, capacities rounded
    down so it never overestimates).  The price is bisected on the sign of ``memory(S) -
    capacity`` (the bound is concave in ``lam``). Devices' preferred nodes are disjoint: the
    bounds add up.

    Examples
    --------
    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
    ...                  tensor_bytes=1, const_bytes=[6, 6, 2])
    >>> memory_bounds(p).fallback      # 14 bytes of constants, 10 bytes of room
    1
    """
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
