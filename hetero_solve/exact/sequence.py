"""Exact search over device sequences: the fewest parts when memory limits cannot bind.

Argument (docs/exact.md, "Search over device sequences"; the same search over ideals found
twice).  Number the parts of a solution topologically, ``P1 .. Pk`` on devices
``c1 .. ck``.  From a placed set ``I`` (predecessor-closed), the *maximal c-extension* adds every
unplaced node that may go to ``c`` and whose predecessors are placed or being added, unless
``c`` enforces value inputs and one of its value inputs is made in the part being built.  By
induction on ``j``, the placed set after extending with ``c1 .. cj`` contains ``P1 u .. u Pj``
(process ``Pj``'s nodes in topological order: each has its predecessors placed or just added,
its value inputs in earlier parts).  So some device sequence of length ``k`` reaches every node,
and the extension is monotone in ``I``: a placed set contained in another one reached with no
more parts can be dropped.  A breadth-first search over the sequences with that dominance rule
is exact; the first depth at which every node is placed is the optimum.

The number of placed sets kept per depth stays small on DNN graphs (the design notes measured at
most 9); ``max_states`` caps it, and when the cap bites the search becomes a beam (largest sets
first) and its answer is no longer a proof (``exact=False``).

Memory is ignored here: use it only when no device's memory limit can bind
(:func:`~hetero_solve.exact.analysis.binding_devices`).

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])   # A->B and B->A, disjoint
>>> r = search(p, [(a[0],) for a in p.allowed])
>>> r.parts, r.exact
(3, True)
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass
from typing import Callable

from ..problem import Problem
from .bounds import Bounds


@dataclass
class SequenceResult:
    parts: int | None            # parts of the best complete sequence found (None: none)
    part_of: list[int] | None    # node -> part (topological numbering)
    part_device: list[int] | None
    exact: bool                  # the search was exhaustive: ``parts`` is the optimum
    lower_bound: int             # no solution within ``R`` has fewer parts
    max_states: int              # the most placed sets kept at one depth
    depth: int                   # depths explored
    expansions: int = 0          # extensions computed
    work: int = 0                # their cost, the deterministic measure: n + 3000 each
    timed_out: bool = False      # stopped by ``deadline`` (a wall clock: not reproducible)


class _State:
    __slots__ = ("where", "bits", "count", "ready", "seq", "h")

    def __init__(self, where: array, bits: int, count: int, ready: list[int], seq: tuple | None):
        self.where = where      # node -> 1 + part index, 0 = unplaced
        self.bits = bits        # placed set as a bitset (for the dominance test)
        self.count = count
        self.ready = ready      # unplaced nodes whose predecessors are all placed
        self.seq = seq          # devices of the parts, as a linked list (device, previous)
        self.h = 0              # a lower bound on the parts still needed


def search(problem: Problem, R: list[tuple[int, ...]], *, max_states: int = 64,
           upper: int | None = None, lower: int = 1, deadline: float | None = None,
           progress: Callable[[str], None] | None = None,
           bounds: Bounds | None = None, max_work: int | None = None) -> SequenceResult:
    """Breadth-first search over device sequences (module doc).  ``upper``: stop without an
    answer once ``upper`` parts are reached (a solution with ``upper`` parts is known), which
    proves ``upper`` optimal when the search is exact.  ``deadline``: ``time.perf_counter()``
    value after which the search gives up (inexact).  ``bounds`` (lower bounds of the same
    problem): prune placed sets that cannot beat ``upper`` and, when the cap bites, keep the
    ones needing the fewest further parts (branch and bound).  ``max_work``: give up
    (inexact) after that much work (``n + 3000`` units per extension: copying the placed
    array dominates; calibrated on 5,000 and 20,000-node runs), a limit that does not depend
    on the machine."""
    n = problem.n
    succ, pred, vp = problem.succ, problem.pred, problem.value_pred
    enforce = [d.enforce_values for d in problem.devices]
    devices = sorted({d for r in R for d in r})
    future = _future_bound(bounds, devices) if bounds is not None else None
    start = _State(array("i", [0]) * n, 0, 0, [v for v in range(n) if not pred[v]], None)
    layer = [start]
    exact = True
    widest = 1
    depth = 0
    work = 0
    unit = n + 3000

    def result(parts=None, part_of=None, seq=None, proven=None, timed_out=False):
        ok = exact if proven is None else proven
        lb = (parts if parts is not None else upper) if ok else lower
        return SequenceResult(parts, part_of, seq, ok, lb, widest, depth, work // unit,
                              work=work, timed_out=timed_out)

    while True:
        if upper is not None and depth + 1 >= upper:
            return result()     # depth + 1 parts would not beat the known solution
        if deadline is not None and time.perf_counter() > deadline:
            return result(proven=False, timed_out=True)
        if max_work is not None and work >= max_work:
            return result(proven=False)
        mark = depth + 1
        children: list[tuple[_State, int]] = []
        for s in layer:
            for c in devices:
                work += unit
                child = _extend(s, c, mark, R, succ, pred, vp, enforce[c])
                if child is None:
                    continue
                if child.count == n:
                    seq = []
                    link = child.seq
                    while link is not None:
                        seq.append(link[0])
                        link = link[1]
                    depth = mark
                    return result(mark, [w - 1 for w in child.where], seq[::-1])
                if future is not None:
                    child.h = future(child.ready)
                    if upper is not None and mark + child.h >= upper:
                        continue        # cannot beat the known solution
                children.append((child, c))
        depth = mark
        kept = _undominated([ch for ch, _ in children], layer)
        if not kept:        # every branch pruned: nothing beats ``upper`` (if exhaustive)
            return result()
        if len(kept) > max_states:
            exact = False
            if future is not None:      # best first: fewest parts still needed, then largest
                kept.sort(key=lambda st: st.h)
            kept = kept[:max_states]
        widest = max(widest, len(kept))
        layer = kept
        if progress is not None and depth % 200 == 0:
            progress(f"sequence search: depth {depth}, {len(layer)} placed set(s), "
                     f"most placed {layer[0].count}/{n}")


def _extend(s: _State, c: int, mark: int, R, succ, pred, vp, enforce: bool) -> _State | None:
    queue = [v for v in s.ready if c in R[v]]
    if not queue:
        return None
    where = array("i", s.where)
    rest = [v for v in s.ready if c not in R[v]]
    waiting: set[int] = set()
    for v in queue:
        where[v] = mark     # marked when queued: the value test below sees the whole part
    bits = s.bits
    i = 0
    while i < len(queue):
        v = queue[i]
        i += 1
        bits |= 1 << v
        for w in succ[v]:
            if where[w] or w in waiting or not all(where[u] for u in pred[w]):
                continue
            if c in R[w] and not (enforce and any(where[u] == mark for u in vp[w])):
                where[w] = mark
                queue.append(w)
            else:
                waiting.add(w)
                rest.append(w)
    return _State(where, bits, s.count + len(queue), rest, (c, s.seq))


def _undominated(children: list[_State], previous: list[_State]) -> list[_State]:
    """Children not contained in another child (ties: the first) nor in a placed set of the
    previous depth; largest first, creation order among equals (deterministic)."""
    order = sorted(range(len(children)), key=lambda i: -children[i].count)
    kept: list[_State] = []
    for i in order:
        s = children[i]
        b = s.bits
        if any(b & ~k.bits == 0 for k in kept) or any(b & ~p.bits == 0 for p in previous
                                                      if p.count >= s.count):
            continue
        kept.append(s)
    return kept


def _future_bound(bounds, devices: list[int]):
    """Parts still needed once the ``ready`` nodes (and everything after them) are unplaced:
    every unplaced node lies in a later part, so (docs/exact.md, "Lower bounds") at least
    ``bottom[v] + 1`` parts for any ready ``v``, and, summed over devices, the most ``c``-runs
    on a path from a ready node."""
    bottom = bounds.bottom
    after = [bounds.after(c) for c in devices]

    def h(ready: list[int]) -> int:
        if not ready:
            return 0
        h1 = max(bottom[v] for v in ready) + 1
        h2 = sum(max(a[v] for v in ready) for a in after)
        return max(h1, h2)

    return h
