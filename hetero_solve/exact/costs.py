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
bound then bounds nothing, and only :func:`simple_bound` (every node at its cheapest) can
prove an answer.
A throughput-only objective without part costs and whose memory cannot depend on the parts
(no limit can bind) is solved without slots, over instance assignments alone, and the parts
are built afterwards (any assignment is the instances of an acyclic partition).
"""

from __future__ import annotations

import math
import time

from ..budget import Budget
from ..problem import COST_TERMS, Problem
from ..solution import Solution, normalize, objective_term
from .cost_terms import TOTAL_BITS, stage_term
from .cpsat import run

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


def binding(p: Problem, d: int) -> bool:
    """Whether device ``d``'s memory limit can bind: the most any set of parts could need
    (each constant once per reader, each tensor once per reader and once more) exceeds it."""
    cap = p.devices[d].memory
    if cap is None:
        return False
    readers: dict[int, int] = {}
    for cs in p.node_consts:
        for w in cs:
            readers[w] = readers.get(w, 0) + 1
    most = sum(p.const_bytes[w] * r for w, r in readers.items())
    most += sum(b * (1 + len(cs)) for b, cs in zip(p.tensor_bytes, p.tensor_consumers))
    return most > cap


class CostModelCP:
    """The CP-SAT model of module doc for one problem and ``K`` slots (``K = 0``: no slots,
    instance assignment only)."""

    def __init__(self, problem: Problem, K: int):
        from ortools.sat.python import cp_model
        self.p, self.K, self.m = problem, K, cp_model.CpModel()
        self.c = problem.costs
        self.scale = choose_scale(problem)
        # Contiguous stages: a slot is a device instance, so a slot needs only a device (the
        # instances of a device are interchangeable: they are numbered in slot order when
        # the answer is read); otherwise every instance is a choice of its own.
        self.stages = bool(K) and self.c.contiguous
        self.G = ([(d, 0) for d in range(len(problem.devices))] if self.stages else
                  [(d, i) for d, dev in enumerate(problem.devices) for i in range(dev.instances)])
        self.lits: dict = {}     # derived literals made once, by key (enter, leave, sent)
        self._nodes()
        if K:
            self._slots()
        self._memory()

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

    def dv(self, v: int, d: int):
        """Node ``v`` on device ``d``: an expression (0 or 1)."""
        return sum(x for g, x in self.ni[v].items() if self.G[g][0] == d)

    def _slots(self) -> None:
        p, m, K = self.p, self.m, self.K
        one = m.NewConstant(1)
        self.ge = [None] * p.n
        self.x = [None] * p.n
        for v in range(p.n):
            ge = self.ge[v] = [one] + [m.NewBoolVar("") for _ in range(K - 1)]
            for j in range(1, K - 1):
                m.AddImplication(ge[j + 1], ge[j])
            xs = []
            for j in range(K):
                xj = m.NewBoolVar("")
                m.Add(xj == ge[j] - (ge[j + 1] if j + 1 < K else 0))
                xs.append(xj)
            self.x[v] = xs
        for u in range(p.n):
            for v in p.succ[u]:
                for j in range(1, K):
                    m.AddImplication(self.ge[u][j], self.ge[v][j])
        self.b = [{g: m.NewBoolVar("") for g in range(len(self.G))} for _ in range(K)]
        self.used = [m.NewBoolVar("") for _ in range(K)]
        for j in range(K):
            m.Add(sum(self.b[j].values()) == self.used[j])
            m.Add(sum(self.x[v][j] for v in range(p.n)) >= self.used[j])
            if j + 1 < K:
                m.AddImplication(self.used[j + 1], self.used[j])
        for v in range(p.n):
            for j in range(K):
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
                m.AddImplication(self.ge[u][K - 1], on.Not()) if K else None
                for j in range(K - 1):
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
        limited = [d for d in range(len(self.p.devices)) if binding(self.p, d)]
        if not limited:
            return
        if not self.K:
            raise ValueError("memory that can bind needs the slot model")
        p, m, K = self.p, self.m, self.K
        terms = [[] for _ in range(K)]
        for w in range(len(p.const_bytes)):
            readers = [v for v in range(p.n) if w in p.node_consts[v]]
            for j in range(K):
                lit = m.NewBoolVar("")
                for v in readers:
                    m.AddImplication(self.x[v][j], lit)
                terms[j].append((p.const_bytes[w], lit))
        for t in range(len(p.tensor_bytes)):
            for j in range(K):
                if p.tensor_bytes[t]:
                    terms[j] += [(p.tensor_bytes[t], self.enter(t, j)),
                                 (p.tensor_bytes[t], self.leave(t, j))]
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

    def enter(self, t: int, j: int):
        """A literal bounded from below: tensor ``t`` is read in slot ``j`` and made elsewhere
        (or is a graph input)."""
        def build(lit):
            u = self.p.tensor_producer[t]
            for c in self.p.tensor_consumers[t]:
                self.m.Add(lit >= self.x[c][j] - (self.x[u][j] if u >= 0 else 0))
        return self.literal(("in", t, j), build)

    def leave(self, t: int, j: int):
        """A literal bounded from below: tensor ``t`` is made in slot ``j`` and read elsewhere
        (or is a graph output)."""
        def build(lit):
            p, m = self.p, self.m
            u = p.tensor_producer[t]
            if u >= 0:
                for c in p.tensor_consumers[t]:
                    m.Add(lit >= self.x[u][j] - self.x[c][j])
                if p.tensor_is_output[t]:
                    m.AddImplication(self.x[u][j], lit)
            else:
                m.Add(lit == 0)
        return self.literal(("out", t, j), build)

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
            and not any(binding(p, d) for d in range(len(p.devices)))):
        return 0, True
    if n <= MAX_SLOTS:
        return n, True
    parts = start.num_parts if start is not None else 1
    return min(n, parts + len(p.devices)), False


def refine_costs(problem: Problem, start: Solution | None, *, budget: Budget | None = None,
                 seed: int = 0, progress=None, workers: int = 1) -> Solution:
    """The best answer under an objective with ``latency`` or ``throughput`` terms, with what
    is proven (module doc).

    Parameters
    ----------
    problem : Problem
        With ``costs`` set.
    start : Solution or None
        A valid answer to hint and to keep when the solver finds nothing better.
    budget : Budget, optional
        What is left of it is shared equally by the stages (default: 10 deterministic
        seconds, no clock; :class:`~hetero_solve.budget.Budget`).
    seed, workers : int
    progress : callable or None
        Called with one line per stage.

    Returns
    -------
    Solution
        Normalized; ``status`` ``"optimal"`` when every stage is proven (and the slots are
        complete); ``stats["cost_bounds"]`` the proven lower bound of each cost term (the
        weighted sum's under ``"weighted"``), ``stats["cost_resolution"]``.

    Raises
    ------
    InfeasibleError
        No answer exists (colocation, contiguity, memory) and none was given.
    """
    from ..validate import validate
    from .stages.weighted import integer_weights
    t0 = time.perf_counter()
    if start is not None and validate(problem, start):
        start = None
    if problem.costs.contiguous and problem.colocation and "fallback" not in problem.objective.terms():
        return _contracted(problem, start, budget=budget, seed=seed, progress=progress,
                           workers=workers)
    K, complete = slots(problem, start)
    model = CostModelCP(problem, K)
    obj = problem.objective
    if obj.lexicographic:
        stages = [({t: 1}, t) for t in obj.order]
    else:
        stages = [(integer_weights(obj.weights)[0], "weighted")]
    hinted = start is not None and hint(model, start)
    budget = budget if budget is not None else Budget(10.0)
    total = budget.left()
    best, proven, records, bounds, resolution = None, True, [], {}, {}
    for i, (weights, label) in enumerate(stages):
        share = budget.allot(max(0.05, total / len(stages)))    # deterministic work per stage
        best, ok, bound, slack, record = _solve_stage(
            problem, model, weights, label, best, first=i == 0, complete=complete,
            budget=share, seed=seed, workers=workers, start=start)
        if bound is not None:
            bounds[label], resolution[label] = bound, slack
        proven = proven and ok
        records.append(record)
        if progress:
            progress(f"cost stage {label}: {record['status'].lower()}")
    return _finish(problem, start, best, proven and best is not None, bounds, resolution,
                   records, hinted, model.scale, time.perf_counter() - t0)


def _objective(model: CostModelCP, weights: dict[str, int]):
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


def _solve_stage(problem: Problem, model: CostModelCP, weights: dict[str, int], label: str,
                 best: Solution | None, *, first: bool, complete: bool, budget: Budget, seed: int, workers: int,
                 start: Solution | None):
    """Minimise one stage, then cap it at the value found for the next stages.

    Returns the best answer so far (this stage's, else ``best``, the earlier stages'), whether
    the stage is proven, its proven lower
    bound (``None`` when nothing is proven) and the rounding slack, and the stage's record.
    """
    from ortools.sat.python import cp_model

    from ..errors import InfeasibleError
    expr, timed, rounded = _objective(model, weights)
    model.m.Minimize(expr)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.random_seed, prm.num_workers = seed, max(1, workers)
    if workers > 1:
        prm.interleave_search = True
    # through cpsat.run: deterministic work and the deadline, CP-SAT's own SIGINT
    # handler off, and the presolve that certifies wrong optima off (or-tools#5293: on
    # ResNet-50's contiguous stages it proved 4477.7 where 124.35 is feasible)
    status, _ = run(solver, model.m, budget)
    ok = status == cp_model.OPTIMAL
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        best = answer(model, solver)
        model.m.Add(expr <= round(solver.ObjectiveValue()))
        hint(model, best)
    elif status == cp_model.INFEASIBLE and start is None:
        raise InfeasibleError("no partition meets the colocation, contiguous-stage and "
                              "memory constraints")
    else:
        ok = False
    scale = model.scale if timed else 1
    bound = solver.BestObjectiveBound() / scale if status != cp_model.INFEASIBLE else None
    if not complete:        # a bound of the model with fewer slots bounds nothing else
        bound = None
    slack = rounded / scale if timed else 0
    if best is not None:
        exact = (objective_term(problem, best, label) if label != "weighted" else
                 sum(w * objective_term(problem, best, t) for t, w in weights.items()))
        ok = ok and complete and bound is not None and exact - bound <= slack + 1e-12 * max(1.0, abs(exact))
        plain = simple_bound(problem, label) if first else None
        if plain is not None:
            bound = plain if bound is None else max(bound, plain)
            ok = ok or exact - plain <= 1e-9 * max(1.0, abs(exact))
        if bound is not None:
            bound = min(bound, exact)
    else:
        bound = None        # nothing to bound: no answer yet
    record = {"stage": label, "status": solver.StatusName(status), "proven": ok,
              "bound": bound, "slots": model.K, "seconds": round(solver.wall_time, 3),
              "deterministic_time": round(solver.deterministic_time, 3)}
    return best, ok, bound, slack, record


def simple_bound(problem: Problem, term: str) -> float | None:
    """A lower bound on ``term`` that needs no solver and no slot count: every node at its
    cheapest, at least one part (latency); the largest cheapest node, and the cheapest total
    spread over every instance (throughput)."""
    if term not in COST_TERMS:
        return None
    c = problem.costs
    cheapest = [min(c.time(v, d) for d in problem.allowed[v]) for v in range(problem.n)]
    if term == "latency":
        used = {d for a in problem.allowed for d in a}
        return sum(cheapest) + min((c.part_cost[d] for d in used), default=0.0)
    slots = sum(d.instances for d in problem.devices)
    return max(max(cheapest, default=0.0), sum(cheapest) / slots)


def _contracted(problem: Problem, start: Solution | None, **kw) -> Solution:
    """:func:`refine_costs` on the problem with colocation groups merged (contiguous stages:
    :mod:`.colocate`), its answer mapped back."""
    from .colocate import contract_groups, contract_solution, expand
    q, comp = contract_groups(problem)
    small = contract_solution(start, comp, q.n) if start is not None else None
    sol = refine_costs(q, small, **kw)
    out = normalize(problem, expand(sol, comp))
    out.stats["contracted_units"] = q.n
    return out


def _finish(problem, start, best, proven, bounds, resolution, records, hinted, scale,
            seconds) -> Solution:
    """The better of the solver's answer and the start, with the stages' record."""
    from ..solution import objective_key
    if best is None or (start is not None and
                        objective_key(problem, start) < objective_key(problem, best)):
        best, proven = normalize(problem, start), False
    best.status = "optimal" if proven else "feasible"
    best.stats.update({"cost_bounds": bounds, "cost_resolution": resolution,
                       "cost_scale": scale, "cost_unit": problem.costs.unit,
                       "hinted": hinted, "exact_seconds": round(seconds, 3),
                       "stages": records})
    return best
