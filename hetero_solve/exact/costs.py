"""Exact refinement for the cost terms of docs/costs.md (``latency``, ``throughput``), with CP-SAT.

One model, the ordinal one the fewest-parts engine uses (docs/exact.md), grown with device
instances and times:

* slots ``j = 0..K-1`` are parts in topological order: ``ge[v, j] = [slot(v) >= j]``, with
  ``ge[u, j] -> ge[v, j]`` on every edge and ``ge[u, j] -> ge[v, j + 1]`` on a value edge whose
  consumer sits on an enforcing device; ``x[v, j] = ge[v, j] - ge[v, j + 1]``;
* ``b[j, g]``: slot ``j`` runs on device instance ``g`` (at most one; used slots a prefix);
  ``ni[v, g]``: node ``v`` is on instance ``g`` (exactly one, among its allowed devices'),
  tied by ``x[v, j] & b[j, g] -> ni[v, g]``; colocation groups share ``ni``; contiguous stages
  allow one slot per instance;
* memory (a part's constants and boundary tensors, docs/exact.md) per slot from literals
  bounded from below (a constant read, a tensor entering or leaving), summed per instance where a device's limit can bind;
* ``latency``: node times by device, part costs by slot, and per tensor a write-out literal
  (it leaves its part) and read-in literals per slot and device (module
  :mod:`hetero_solve.measures.costs`); ``throughput``: ``T >= load(g)`` for every instance,
  with per-instance in/out literals.

**Scale.** Times are floats; CP-SAT needs integers.  Every time coefficient is multiplied by
``scale`` (a power of ten chosen so that the largest possible total stays below ``2**40``) and
rounded *down*, so a model value never exceeds ``scale`` x the true value and the solver's
bound divided by ``scale`` is a true lower bound.  The value reported is recomputed exactly
from the answer (:mod:`hetero_solve.measures.costs`); the answer is reported optimal when the
solver proved its stage and the exact value is within ``resolution`` (the rounding the model
can hide: the number of time coefficients / ``scale``) of that bound.

**Slots.** Contiguous stages need at most one slot per instance; otherwise ``K = n`` (complete)
up to :data:`MAX_SLOTS`, beyond it the start's part count plus the device count: the model's
bound then bounds nothing, and only :func:`simple_bound` (no solver: over every set of devices
an answer may use) can prove an answer.
A throughput-only objective without part costs and whose memory cannot depend on the parts
(no limit can bind) is solved without slots, over instance assignments alone, and the parts
are built afterwards (any assignment is the instances of an acyclic partition).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..budget import Budget
from ..fitting.floors import binding_devices, slot_items
from ..nodemap import NodeMap
from ..problem import COST_TERMS, Problem
from ..solution import Solution, normalize
from . import cpsat
from .cpsat import EngineResult
from .cost_terms import TOTAL_BITS, Term, stage_term

MAX_SLOTS = 64          # K = n up to here (complete); beyond, a bounded search


def choose_scale(problem: Problem) -> int:
    """The power of ten that keeps the largest possible total below ``2**TOTAL_BITS``."""
    c = problem.costs
    total = sum(max((t for t in row if t is not None), default=0.0) for row in c.node_time)
    total += max(c.part_cost, default=0.0) * problem.n
    most = max((c.tensor_time(d, t, problem.tensor_bytes) for d in range(len(problem.devices))
                for t in range(len(problem.tensor_bytes))), default=0.0)
    total += most * sum(1 + len(cs) for cs in problem.tensor_consumers)
    k = math.floor(math.log10(2 ** TOTAL_BITS / max(total, 1e-9)))
    return 10 ** max(0, min(k, 15))


class CostModelCP:
    """The CP-SAT model of module doc for one problem and ``K`` slots (``K = 0``: no slots,
    instance assignment only)."""

    def __init__(self, problem: Problem, K: int, window: tuple[list[int], list[int]] | None = None):
        from ortools.sat.python import cp_model
        self.p, self.K, self.m = problem, K, cp_model.CpModel()
        # each node's slots: lo[v] .. hi[v] (all of them, or a neighbourhood: :class:`Slots`)
        self.lo, self.hi = window if window is not None else ([0] * problem.n,
                                                              [K - 1] * problem.n)
        self._zero = None
        self.c = problem.costs
        self.scale = choose_scale(problem)
        # Contiguous stages: a slot is a device instance, so a slot needs only a device (the
        # instances of a device are interchangeable: they are numbered in slot order when
        # the answer is read); otherwise every instance is a choice of its own.
        self.stages = bool(K) and self.c.contiguous
        self.G = ([(d, 0) for d in range(len(problem.devices))] if self.stages else
                  [(d, i) for d, dev in enumerate(problem.devices) for i in range(dev.instances)])
        self.lits: dict = {}     # derived literals made once, by key (enter, leave, sent)
        self.objective, self.timed, self.rounded = None, False, 0   # (:meth:`minimize`)
        self._nodes()
        if K:
            self._slots()
        self._memory()

    # -- the protocol of the runner's models (.runner) ---------------------------------------
    @staticmethod
    def estimate(problem: Problem, K: int, width: float | None = None) -> int:
        """About how many literals the model of ``problem`` with ``K`` slots makes (each node
        free in ``width`` of them on average: all by default)."""
        G = sum(d.instances for d in problem.devices)
        k = max(K, 1) if width is None else max(width, 1)
        edges = sum(len(s) for s in problem.succ)
        return problem.n * (G + 2 * k) + edges * k + len(problem.tensor_bytes) * k * (2 + G)

    def term(self, name: str) -> Term:
        """One objective term as an expression of the model (:mod:`.cost_terms`)."""
        return stage_term(self, name)

    def cap(self, name: str, value: int) -> None:
        """``term <= value`` (a counting term of an earlier stage)."""
        x = self.term(name)
        self.m.Add(sum(a * v for a, v in zip(x.coefs, x.variables)) <= value)

    def minimize(self, weights: dict[str, int]) -> None:
        """Minimise ``Σ weight * term`` (:func:`cost_objective`); :meth:`cap_objective` caps
        it afterwards, ``timed`` and ``rounded`` say how it was scaled."""
        self.objective, self.timed, self.rounded = cost_objective(self, weights)
        self.m.Minimize(self.objective)

    def cap_objective(self, value: int) -> None:
        """The last objective at most ``value`` (model units) from now on."""
        self.m.Add(self.objective <= value)

    def hint(self, sol: Solution) -> bool:
        """:func:`hint`."""
        return hint(self, sol)

    def decode(self, solver) -> Solution:
        """:func:`answer`."""
        return answer(self, solver)

    # -- variables and structure -----------------------------------------------------------
    def _nodes(self) -> None:
        p, m = self.p, self.m
        self.ni = [None] * p.n
        share = {}          # without slots, colocated nodes share their instance literals
        if not self.K:
            for group in p.colocation:
                for v in group:
                    share[v] = group
        for v in range(p.n):
            if self.ni[v] is not None:
                continue
            members = share.get(v, [v])
            row = {g: m.NewBoolVar("") for g, (d, _) in enumerate(self.G)
                   if all(d in p.allowed[u] for u in members)}
            m.AddExactlyOne(row.values())
            for u in members:
                self.ni[u] = row
        for group in ([] if not self.K else p.colocation):
            first = self.ni[group[0]]
            for v in group[1:]:
                for g in set(first) | set(self.ni[v]):
                    if g in first and g in self.ni[v]:
                        m.Add(first[g] == self.ni[v][g])
                    else:
                        m.Add((first[g] if g in first else self.ni[v][g]) == 0)
        if not self.K:
            self._break_symmetry()

    @property
    def zero(self):
        """The constant 0 (a slot outside a node's window), made when first needed."""
        if self._zero is None:
            self._zero = self.m.NewConstant(0)
        return self._zero

    def free(self, v: int, j: int) -> bool:
        """Node ``v`` may be in slot ``j`` (inside its window)."""
        return self.lo[v] <= j <= self.hi[v]

    def dv(self, v: int, d: int):
        """Node ``v`` on device ``d``: an expression (0 or 1)."""
        return sum(x for g, x in self.ni[v].items() if self.G[g][0] == d)

    def _slots(self) -> None:
        p, m, K = self.p, self.m, self.K
        one = self.one = m.NewConstant(1)
        self.ge = [None] * p.n
        self.x = [None] * p.n
        for v in range(p.n):
            lo, hi = self.lo[v], self.hi[v]
            ge = self.ge[v] = [one] + [one if j <= lo else self.zero if j > hi else
                                       m.NewBoolVar("") for j in range(1, K)]
            for j in range(max(1, lo + 1), min(K - 1, hi)):
                m.AddImplication(ge[j + 1], ge[j])
            xs = []
            for j in range(K):
                if not lo <= j <= hi:
                    xs.append(self.zero)
                    continue
                xj = m.NewBoolVar("")
                m.Add(xj == ge[j] - (ge[j + 1] if j + 1 < K else 0))
                xs.append(xj)
            self.x[v] = xs
        for u in range(p.n):
            for v in p.succ[u]:
                for j in range(1, K):
                    self._imply(self.ge[u][j], self.ge[v][j])
        self.b = [{g: m.NewBoolVar("") for g in range(len(self.G))} for _ in range(K)]
        self.used = [m.NewBoolVar("") for _ in range(K)]
        for j in range(K):
            m.Add(sum(self.b[j].values()) == self.used[j])
            m.Add(sum(self.x[v][j] for v in range(p.n) if self.free(v, j)) >= self.used[j])
            if j + 1 < K:
                m.AddImplication(self.used[j + 1], self.used[j])
        for v in range(p.n):
            for j in range(self.lo[v], self.hi[v] + 1):
                m.AddBoolOr([self.x[v][j].Not()] + [self.b[j][g] for g in self.ni[v]])
                for g, lit in self.ni[v].items():
                    m.AddBoolOr([self.x[v][j].Not(), self.b[j][g].Not(), lit])
        if self.stages:
            for g, (d, _) in enumerate(self.G):
                m.Add(sum(self.b[j][g] for j in range(K)) <= p.devices[d].instances)
        self._value_edges()

    def _value_edges(self) -> None:
        p, m, K = self.p, self.m, self.K
        for v, us in enumerate(p.value_pred):
            enforcing = [g for g in self.ni[v] if p.devices[self.G[g][0]].enforce_values]
            if not us or not enforcing:
                continue
            on = m.NewBoolVar("")
            m.Add(sum(self.ni[v][g] for g in enforcing) == on)
            for u in us:
                if K and self.ge[u][K - 1] is not self._zero:
                    m.AddImplication(self.ge[u][K - 1], on.Not())
                for j in range(K - 1):
                    if self.ge[u][j] is not self._zero and self.ge[v][j + 1] is not self.one:
                        m.AddBoolOr([self.ge[u][j].Not(), self.ge[v][j + 1], on.Not()])

    def _break_symmetry(self) -> None:
        """Without slots, identical instances of a device are interchangeable: number them
        by first use (value precedence): a node may open instance ``i + 1`` of a device only
        when a node before it (in node order) is on instance ``i``."""
        m, p = self.m, self.p
        rows, known = [], set()          # distinct instance rows, in node order
        for v in range(p.n):
            if id(self.ni[v]) not in known:
                known.add(id(self.ni[v]))
                rows.append(self.ni[v])
        for g in range(1, len(self.G)):
            if self.G[g][0] != self.G[g - 1][0]:
                continue
            seen = None                  # some earlier row is on instance g - 1
            for row in rows:
                if g in row:
                    m.AddImplication(row[g], seen) if seen is not None else m.Add(row[g] == 0)
                if g - 1 in row:
                    now = m.NewBoolVar("")
                    m.AddBoolOr([row[g - 1].Not(), now])
                    if seen is not None:
                        m.AddImplication(seen, now)
                        m.AddBoolOr([now.Not(), seen, row[g - 1]])
                    else:
                        m.Add(now == row[g - 1])
                    seen = now

    # -- memory (docs/exact.md) -------------------------------------------------------------
    def _memory(self) -> None:
        limited = binding_devices(self.p, self.p.allowed)
        if not limited:
            return
        if not self.K:
            raise ValueError("memory that can bind needs the slot model")
        p, m, K = self.p, self.m, self.K
        terms = [[] for _ in range(K)]
        items = [list(slot_items(p, v)) for v in range(p.n)]
        for j in range(K):     # the items of floors.slot_items, each once per slot
            lits: dict = {}
            for v in range(p.n):
                if not self.free(v, j):
                    continue
                for kind, i, nbytes in items[v]:
                    if not nbytes:
                        continue
                    key = (kind, i)
                    if kind == "c":       # held when a reader is in the slot
                        if key not in lits:
                            lits[key] = m.NewBoolVar("")
                            terms[j].append((nbytes, lits[key]))
                        m.AddImplication(self.x[v][j], lits[key])
                    elif key not in lits:
                        lits[key] = self.enter(i, j) if kind == "in" else self.leave(i, j)
                        if lits[key] is not self._zero:
                            terms[j].append((nbytes, lits[key]))
        for d in limited:
            cap = p.devices[d].memory
            for g, (dd, _) in enumerate(self.G):
                if dd != d:
                    continue
                loads = []
                for j in range(K):
                    mj = m.NewIntVar(0, cap, "")
                    m.Add(mj >= sum(b * lit for b, lit in terms[j])).OnlyEnforceIf(self.b[j][g])
                    loads.append(mj)
                if self.stages:      # each slot its own instance
                    for mj in loads:
                        m.Add(mj <= cap)
                else:
                    m.Add(sum(loads) <= cap)

    def may_enter(self, t: int, j: int) -> bool:
        """Some reader of tensor ``t`` may be in slot ``j`` (or it has none): :meth:`enter`
        is a literal, not the constant 0."""
        consumers = self.p.tensor_consumers[t]
        return not consumers or any(self.free(c, j) for c in consumers)

    def enter(self, t: int, j: int):
        """A literal bounded from below: tensor ``t`` is read in slot ``j`` and made elsewhere
        (or is a graph input); :attr:`zero` when no reader may be in slot ``j``."""
        if not self.may_enter(t, j):
            return self.zero
        readers = [c for c in self.p.tensor_consumers[t] if self.free(c, j)]

        def build(lit):
            u = self.p.tensor_producer[t]
            for c in readers:
                self.m.Add(lit >= self.x[c][j] - (self.x[u][j] if u >= 0 else 0))
        return self.literal(("in", t, j), build)

    def leave(self, t: int, j: int):
        """A literal bounded from below: tensor ``t`` is made in slot ``j`` and read elsewhere
        (or is a graph output); :attr:`zero` when its producer may not be in slot ``j``."""
        u = self.p.tensor_producer[t]
        if u >= 0 and not self.free(u, j):
            return self.zero

        def build(lit):
            p, m = self.p, self.m
            if u >= 0:
                for c in p.tensor_consumers[t]:
                    m.Add(lit >= self.x[u][j] - self.x[c][j])
                if p.tensor_is_output[t]:
                    m.AddImplication(self.x[u][j], lit)
            else:
                m.Add(lit == 0)
        return self.literal(("out", t, j), build)

    def _imply(self, a, b) -> None:
        """``a -> b``, either side possibly a constant of a window."""
        if a is self._zero or b is self.one:
            return
        if b is self._zero:
            self.m.Add(a == 0)
        elif a is self.one:
            self.m.Add(b == 1)
        else:
            self.m.AddImplication(a, b)

    def literal(self, key: tuple, build):
        """The derived literal ``key``, made (and bounded by ``build(lit)``) the first time."""
        if key not in self.lits:
            lit = self.lits[key] = self.m.NewBoolVar("")
            build(lit)
        return self.lits[key]


def hint(model, sol: Solution) -> bool:
    """Hint a valid answer (slots: its parts in topological order)."""
    p, m = model.p, model.m
    sol = normalize(p, sol)
    if model.K and sol.num_parts > model.K:
        return False
    m.ClearHints()
    hinted: set[int] = set()
    g_of = {gg: g for g, gg in enumerate(model.G)}
    if model.stages:
        g_of = {(sol.part_device[q], sol.part_instance[q]): sol.part_device[q]
                for q in range(sol.num_parts)}
    for v in range(p.n):
        q = sol.part_of[v]
        here = g_of[(sol.part_device[q], sol.part_instance[q])]
        if id(model.ni[v]) not in hinted:           # colocated nodes may share a row
            hinted.add(id(model.ni[v]))
            for g, lit in model.ni[v].items():
                m.AddHint(lit, g == here)
        if model.K:
            for j in range(1, model.K):
                if model.free(v, j) and j > model.lo[v]:
                    m.AddHint(model.ge[v][j], q >= j)
    for j in range(model.K):
        here = g_of[(sol.part_device[j], sol.part_instance[j])] if j < sol.num_parts else -1
        for g, lit in model.b[j].items():
            m.AddHint(lit, g == here)
    return True

def answer(model, solver) -> Solution:
    """The solver's assignment as a normalized solution."""
    p = model.p
    if not model.K:
        return _parts_of_instances(model, [next(g for g, x in model.ni[v].items()
                                              if solver.Value(x)) for v in range(p.n)])
    part_of = [sum(solver.Value(x) for x in model.ge[v][1:]) for v in range(p.n)]
    k = max(part_of, default=-1) + 1
    where = [next(g for g, x in model.b[j].items() if solver.Value(x)) for j in range(k)]
    devices = [model.G[g][0] for g in where]
    instances = ([devices[:j].count(d) for j, d in enumerate(devices)] if model.stages
                 else [model.G[g][1] for g in where])
    return normalize(p, Solution(part_of, devices, instances, algorithm="cpsat-costs"))

def _parts_of_instances(model, inst: list[int]) -> Solution:
    """An acyclic partition whose parts have the given node instances (few parts: the
    greedy's maximal closures, one device per instance)."""
    from dataclasses import replace
    from ..algorithms.greedy import greedy
    from ..problem import Device, Objective
    p = model.p
    devs = [Device(f"{p.devices[d].name}.{i}", None, 1, p.devices[d].enforce_values)
            for d, i in model.G]
    q = replace(p, devices=devs, allowed=[(g,) for g in inst], pinned=[-1] * p.n,
                refusals={}, costs=None, colocation=[], objective=Objective(), arrays=None,
                fold_options=[])
    s = greedy(q, devices=list(inst))
    return normalize(p, Solution(s.part_of, [model.G[g][0] for g in s.part_device],
                                 [model.G[g][1] for g in s.part_device],
                                 algorithm="cpsat-costs"))


def slots(problem: Problem, start: Solution | None) -> tuple[int, bool]:
    """How many slots the model needs (module doc), and whether that many is complete."""
    p, c = problem, problem.costs
    n = p.n
    if c.contiguous:
        return min(n, sum(d.instances for d in p.devices)), True
    if (set(p.objective.terms()) <= {"throughput"} and not any(c.part_cost)
            and not binding_devices(p, p.allowed)):
        return 0, True
    if n <= MAX_SLOTS:
        return n, True
    parts = start.num_parts if start is not None else 1
    return min(n, parts + len(p.devices)), False


def cost_objective(model: CostModelCP, weights: dict[str, int]):
    """The stage objective ``Σ weight * term`` as one expression; whether it is timed, and how
    many coefficients were rounded down (weighted)."""
    terms = {t: stage_term(model, t) for t in weights}
    timed = any(x.timed for x in terms.values())
    coefs, variables, rounded = [], [], 0
    for t, x in terms.items():
        factor = weights[t] * (1 if x.timed or not timed else model.scale)
        coefs += [a * factor for a in x.coefs]
        variables += x.variables
        rounded += x.rounded * weights[t]
    return sum(a * v for a, v in zip(coefs, variables)), timed, rounded


def simple_bound(problem: Problem, term: str) -> float | None:
    """A lower bound on ``term`` that needs no solver and no slot count (docs/costs.md,
    "Bounds without a solver").

    Every answer uses some set ``U`` of devices, each at least once, so the bound is the
    smallest over every such set of what any answer on exactly ``U`` must pay:

    * latency: every node at its cheapest on ``U``, plus one part cost per device of ``U``;
    * throughput: one instance holds each node, with its device's part cost (the largest such
      node); and the nodes' times spread fractionally over ``U``'s instances, each instance
      first paying its device's part cost (exact for one or two devices: the best fractional
      split of each node by its ratio of times; for more, the cheapest times spread evenly).

    With one device in ``U`` both are that device's answer without transfers, so a one-device
    answer (the usual one when a part cost outweighs what a split saves) is proven by them.
    """
    if term not in COST_TERMS:
        return None
    c = problem.costs
    n = problem.n
    used = sorted({d for a in problem.allowed for d in a})
    times = np.array([[c.time(v, d) if d in problem.allowed[v] else math.inf for d in used]
                      for v in range(n)], dtype=float).reshape(n, len(used))
    best = math.inf
    for U in _device_sets(len(used), n):
        on = times[:, list(U)]
        cheapest = on.min(axis=1)
        if np.isinf(cheapest).any():
            continue            # a node no device of U takes
        if term == "latency":
            value = float(cheapest.sum()) + sum(c.part_cost[used[k]] for k in U)
        else:
            value = _throughput_on(problem, [used[k] for k in U], on)
        best = min(best, value)
    return 0.0 if best == math.inf else best


def _device_sets(D: int, n: int) -> list[tuple[int, ...]]:
    """Every nonempty set of ``D`` devices (as indices), or only the set of all of them when
    there are too many sets to try at ``n`` nodes (the bound is then the one over all)."""
    if (2 ** D) * max(n, 1) > 4_000_000:
        return [tuple(range(D))]
    return [U for r in range(1, D + 1) for U in itertools.combinations(range(D), r)]


def _throughput_on(problem: Problem, devices: list[int], times: np.ndarray) -> float:
    """The throughput bound of :func:`simple_bound` for answers on exactly ``devices``
    (``times``: node x device, ``inf`` where a device does not take the node)."""
    c = problem.costs
    pc = np.array([c.part_cost[d] for d in devices], dtype=float)
    inst = [problem.devices[d].instances for d in devices]
    node = float((times + pc).min(axis=1).max()) if len(times) else 0.0
    if len(devices) == 1:
        spread = float(times[:, 0].sum()) / inst[0] + float(pc[0])
    elif len(devices) == 2:
        spread = _two_device_split(times, pc, inst)
    else:   # the cheapest times, and every device's part cost once, over every instance
        spread = (float(times.min(axis=1).sum()) + float(pc.sum())) / sum(inst)
    return max(node, spread)


def _two_device_split(times: np.ndarray, pc: np.ndarray, inst: list[int]) -> float:
    """The smallest ``T`` at which the nodes split fractionally between two devices fit
    ``inst[k] * (T - pc[k])`` on each (a fractional knapsack: the nodes of smallest time ratio
    go to the first device); bisected, the last infeasible ``T`` kept, so it never exceeds the
    true value."""
    a_all, b_all = times[:, 0], times[:, 1]
    only_a, only_b = np.isinf(b_all), np.isinf(a_all)
    only = [float(a_all[only_a].sum()), float(b_all[only_b].sum())]
    flexible = ~(only_a | only_b)
    a, b = a_all[flexible], b_all[flexible]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.inf)
    by_ratio = np.argsort(ratio, kind="stable")
    a, b = a[by_ratio], b[by_ratio]
    pre_a = np.concatenate([[0.0], np.cumsum(a)])
    suf_b = np.concatenate([np.cumsum(b[::-1])[::-1], [0.0]])

    def fits(T: float) -> bool:
        cap_a = inst[0] * (T - pc[0]) - only[0]
        cap_b = inst[1] * (T - pc[1]) - only[1]
        if cap_a < 0 or cap_b < 0:
            return False
        k = int(np.searchsorted(pre_a, cap_a, side="right")) - 1   # nodes 0..k-1 on the first
        if k >= len(a):
            return True
        part = (cap_a - pre_a[k]) / a[k] if a[k] > 0 else 1.0
        return suf_b[k + 1] + (1.0 - part) * b[k] <= cap_b

    lo = 0.0
    hi = float(pc.max()) + float(np.maximum(a, b).sum()) + sum(only) + 1.0
    if not fits(hi):
        return lo
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return lo


LITERALS_PER_SECOND = 10_000   # literals built per deterministic second (charged to the budget)


@dataclass
class Slots:
    """The plan of the slot model (:class:`CostModelCP`) the cost stages share, for the
    runner (:mod:`.runner`): ``problem`` (colocation groups merged for contiguous stages:
    ``nmap`` maps it back), ``K`` slots (``complete``: enough for every answer), the counting
    terms of the stages before it capped (``caps``).  Built once, by the first stage that runs
    it; each stage then minimises its term on it and caps it for the next."""

    problem: Problem
    nmap: NodeMap | None
    K: int
    complete: bool
    caps: dict[str, int] = field(default_factory=dict)
    engines: tuple[str, ...] = ("cpsat",)
    model: CostModelCP | None = None
    tried: bool = False             # a stage asked for the model (built or refused)
    window: tuple[list[int], list[int]] | None = None   # each node's slots, when narrowed
    restricted: bool = False        # a neighbourhood: improves, proves nothing

    def size(self, terms=()) -> int:
        if self.window is None:
            return CostModelCP.estimate(self.problem, self.K)
        lo, hi = self.window
        width = sum(h - low + 1 for low, h in zip(lo, hi)) / max(1, self.problem.n)
        return CostModelCP.estimate(self.problem, self.K, width)

    def near(self, hint: Solution | None, terms, limit: int) -> tuple[Slots, int] | None:
        """The model shared by the stages narrowed to a neighbourhood of ``hint``: each node
        within ``delta`` slots of its part (the widest that fits ``limit``).  It narrows
        itself, so every later stage searches the same neighbourhood, and proves nothing."""
        n, K = self.problem.n, self.K
        if hint is None or not K or len(hint.part_of) != n:
            return None
        sol = normalize(self.problem, hint)
        if sol.num_parts > K:
            return None
        for delta in (16, 8, 4, 2, 1):
            self.window = ([max(0, q - delta) for q in sol.part_of],
                           [min(K - 1, q + delta) for q in sol.part_of])
            if self.size() <= limit:
                self.restricted = True
                return self, delta
        self.window = None
        return None

    def build(self, terms, budget: Budget) -> CostModelCP:
        """The model, its build charged to ``budget``, the earlier stages' caps on it."""
        model = CostModelCP(self.problem, self.K, self.window)
        budget.charge(self.size() / LITERALS_PER_SECOND)
        for term, cap in self.caps.items():
            model.cap(term, cap)
        self.model = model
        return model

    def run(self, engine: str, model: CostModelCP, weights, caps, hint, budget: Budget, ctx,
            label: str) -> EngineResult:
        """CP-SAT on the model: ``weights`` minimised, from ``hint`` (on :attr:`problem`).
        ``value`` and ``bound`` are in model units (times scaled: :attr:`CostModelCP.scale`
        when :attr:`CostModelCP.timed`)."""
        from ortools.sat.python import cp_model
        model.minimize(weights)
        if hint is not None:
            model.hint(hint)
        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.random_seed, prm.num_workers = ctx.seed, max(1, ctx.workers)
        if ctx.workers > 1:
            prm.interleave_search = True
        # cpsat.run: deterministic work within the budget and its deadline, CP-SAT's own SIGINT
        # handler off, and the presolve that certifies wrong optima off (or-tools#5293: on
        # ResNet-50's contiguous stages it proved 4477.7 where 124.35 is feasible)
        status, stats = cpsat.run(solver, model.m, budget)      # charged there
        stats = {"status": solver.StatusName(status), **stats}
        if status == cp_model.INFEASIBLE:
            return EngineResult(None, None, None, False, infeasible=True, stats=stats)
        bound = solver.BestObjectiveBound()
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return EngineResult(model.decode(solver), round(solver.ObjectiveValue()), bound,
                                status == cp_model.OPTIMAL, stats=stats)
        return EngineResult(None, None, bound, False, stats=stats)

    def entry(self, engine: str) -> dict:
        return {"engine": f"{engine} (costs)", "slots": self.K}

