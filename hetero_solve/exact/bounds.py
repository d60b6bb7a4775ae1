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
  memory)`` or more (:func:`hetero_solve.fitting.bounds.packing`).  It joins LB2 device by device:
  ``sum_c max(runs_c, packing_c)``.  With fallback fixed at 0 (``fixed``: every node on its
  preferred device) every node is forced: the weights alone bound the parts.

:func:`hetero_solve.fitting.bounds.memory_bounds` bounds the *fallback* when memory binds
(what ``partition.json``'s ``lower_bound.fallback`` and ``explain``'s memory section report).

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

from ..fitting.bounds import packing
from ..fitting.floors import held_items
from ..measures import topological_order as node_order
from ..problem import Problem
from .analysis import shared_devices

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
    """What any part holding ``v`` stores for ``v`` whatever else it holds
    (:func:`hetero_solve.fitting.floors.held_items`), keyed so that runs can merge them."""
    consts, io = held_items(problem, (v,))
    items = {("c", c): problem.const_bytes[c] for c in consts}
    items.update((("t", t), problem.tensor_bytes[t]) for t in io)
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
