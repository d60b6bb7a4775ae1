"""CP-SAT engine: solve one stage of the objective on an :class:`~.encoding.Encoding`.

The model is the encoding's clauses (``AddBoolOr``), one-device-per-slot groups
(``AddAtMostOne``), and, for memory (docs/exact.md), per device instance ``i`` an integer
``m[j, i] >= memory of slot j`` enforced only when slot ``j`` sits on ``i``, with
``sum_j m[j, i] <= capacity``.  Earlier stages of a lexicographic objective become caps
(``term <= its optimum``), the stage's objective is minimised, and the redundant bounds
``sum used >= lb`` (a prefix of used slots, fixed in the encoding) and
``slots on device c >= c's run bound`` help the proof.

Determinism (same input and seed, same answer): the search runs with ``num_workers`` workers
and ``interleave_search`` when more than one (CP-SAT's deterministic parallel mode), and stops
on *deterministic time* (``max_deterministic_time`` = the work its
:class:`~hetero_solve.budget.Budget` has left): wall-clock limits make the stopping point depend
on the machine's load.  The budget's deadline (``--time-limit``) is CP-SAT's wall-clock limit
too, and a watch stops the search at it; when the clock, not the work, ended the search the
result says ``deterministic: False`` in its stats and the budget says ``stopped_by``.  The run
charges its work (search and build) to the budget it was given.  Ctrl-C stops the search and
raises :class:`KeyboardInterrupt` (:func:`run`).

>>> from hetero_solve.problem import make_problem
>>> from hetero_solve.exact.bounds import lower_bounds
>>> from hetero_solve.exact.encoding import Encoding
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
>>> R = [(a[0],) for a in p.allowed]
>>> r = solve(Encoding(p, R, 4, lower_bounds(p, R)), {"partitions": 1})
>>> r.value, r.optimal
(3, True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..budget import BUILD_ITEMS_PER_SECOND, Budget
from ..interrupt import run_stoppable
from ..solution import Solution, objective_term
from .encoding import Encoding, decode, hint_values


@dataclass
class EngineResult:
    solution: Solution | None       # best found (on the encoding's problem), not normalized
    value: int | None               # its stage objective (integer weights)
    bound: int | None               # proven lower bound on the stage objective
    optimal: bool
    infeasible: bool = False        # no solution within the caps and slots
    stats: dict = field(default_factory=dict)


def stage_value(enc: Encoding, weights: dict[str, int], sol: Solution) -> int:
    """The stage objective of a decoded solution, computed from the problem (not the model)."""
    return sum(w * objective_term(enc.problem, sol, t) for t, w in weights.items())


def _progress(say: Callable[[str], None] | None, label: str):
    """A solution callback that reports the best value and bound (at most twice a second)."""
    from ortools.sat.python import cp_model

    class Progress(cp_model.CpSolverSolutionCallback):
        def __init__(self):
            super().__init__()
            self.last = 0.0

        def on_solution_callback(self) -> None:
            now = time.perf_counter()
            if say is not None and now - self.last > 0.5:
                self.last = now
                say(f"{label}: best {self.ObjectiveValue():g}, "
                    f"bound {self.BestObjectiveBound():g}")

    return Progress()


def run(solver, model, budget: Budget, callback=None) -> tuple[int, dict]:
    """``solver.Solve(model)`` within the deterministic seconds ``budget`` has left (at least
    0.05) and its deadline (CP-SAT's wall-clock limit, and a watch), stoppable by Ctrl-C
    (:func:`~hetero_solve.interrupt.run_stoppable`; CP-SAT's own SIGINT handler is off, or it
    would end the search as if its time were up and the run would go on).  The search's
    deterministic time is charged to ``budget`` (a build's is the caller's to charge).

    Returns
    -------
    (status, stats)
        CP-SAT's status and ``wall``, ``deterministic_time``, ``deterministic`` (False when
        the clock, not the work, stopped the search).

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C during the search (after CP-SAT has stopped).
    """
    from ortools.sat.python import cp_model
    prm = solver.parameters
    prm.max_deterministic_time = max(0.05, budget.left())
    prm.max_time_in_seconds = max(0.01, min(budget.wall_left(), 1e7))
    prm.catch_sigint_signal = False
    # CP-SAT 9.15's inclusion presolve (ProcessAtMostOneAndLinear: at-most-one groups beside
    # linear memory sums, as every model here has) certifies wrong optima
    # (google/or-tools#5293); with it off the rest of presolve stays on.
    prm.presolve_inclusion_work_limit = 0
    t0 = time.perf_counter()
    status = run_stoppable(lambda: solver.Solve(model, callback), solver.stop_search,
                           watch=budget.past_deadline)
    wall = time.perf_counter() - t0
    done = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE, cp_model.MODEL_INVALID)
    budget_spent = solver.deterministic_time >= prm.max_deterministic_time * 0.999
    stats = {"wall": round(wall, 3), "deterministic_time": round(solver.deterministic_time, 3),
             "deterministic": done or budget_spent or not budget.past_deadline()}
    budget.charge_run(stats)
    return status, stats


def solve(enc: Encoding, weights: dict[str, int], *, caps: dict[str, int] | None = None,
          hint: Solution | None = None, budget: Budget | None = None, seed: int = 0,
          workers: int = 1, progress: Callable[[str], None] | None = None,
          label: str = "cp-sat") -> EngineResult:
    """Minimise ``sum weights[t] * term t`` subject to ``term t <= caps[t]`` within ``budget``
    (default: :meth:`~hetero_solve.budget.Budget.default`), which is charged the build and the
    search."""
    budget = budget if budget is not None else Budget.default()
    if budget.out_of_time():        # nothing is built past the deadline
        return EngineResult(None, None, None, False, stats={"skipped": "time limit"})
    if enc.infeasible:
        return EngineResult(None, None, None, False, infeasible=True)
    # Imported here: ortools' CP-SAT module imports pandas (0.13 s), which a command whose
    # answer needs no solver (one part, or proven by a bound) never uses.
    from ortools.sat.python import cp_model
    m = cp_model.CpModel()
    b = [None] + [m.NewBoolVar("") for _ in range(enc.nv)]

    def lit(x):
        return b[x] if x > 0 else b[-x].Not()

    # 1. clauses and one device per slot
    for c in enc.clauses:
        m.AddBoolOr([lit(x) for x in c])
    for g in enc.amo:
        m.AddAtMostOne([lit(x) for x in g])
    # 2. memory capacity per device instance
    load_defs, built = _capacities(m, enc, lit)
    built += enc.nv + len(enc.clauses) + sum(map(len, enc.amo))   # the build's work (.budget)
    # 3. redundant bounds: slots per device
    for c, k in enumerate(enc.per_device_lb):
        ys = [yj[c] for yj in enc.y if c in yj]
        if k > 0 and ys:
            m.Add(sum(lit(x) for x in ys) >= k)
    # 4. caps from earlier stages, then the objective
    for t, cap in (caps or {}).items():
        lits, const = enc.term(t)
        m.Add(sum(w * lit(x) for w, x in lits) + const <= cap)
    obj = []
    const = 0
    for t, w in weights.items():
        lits, c = enc.term(t)
        obj += [(w * a, x) for a, x in lits]
        const += w * c
    m.Minimize(sum(a * lit(x) for a, x in obj) + const)
    # 5. complete hint
    hinted = _hint(m, enc, b, load_defs, hint)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = max(1, workers)
    if workers > 1:
        prm.interleave_search = True
    prm.random_seed = seed
    prm.log_search_progress = False
    status, run_stats = run(solver, m, budget, _progress(progress, label))
    build_time = round(built / BUILD_ITEMS_PER_SECOND, 3)
    budget.charge(build_time)      # after: the search had the whole allotment (as measured)
    stats = {"variables": enc.nv, "clauses": len(enc.clauses), "hinted": hinted,
             "build_items": built, "build_time": build_time,
             "status": solver.StatusName(status), **run_stats}
    if status == cp_model.INFEASIBLE:
        return EngineResult(None, None, None, True, infeasible=True, stats=stats)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return EngineResult(None, None, None, False, stats=stats)
    sol = decode(enc, lambda x: solver.BooleanValue(b[x]))
    value = stage_value(enc, weights, sol)
    optimal = status == cp_model.OPTIMAL
    bound = value if optimal else int(-(-solver.BestObjectiveBound() // 1))
    return EngineResult(sol, value, bound, optimal, stats=stats)


def _capacities(m, enc: Encoding, lit) -> tuple[list, int]:
    """Per device instance, the loads of the slots on it at most the device's memory: a load
    per slot and instance, at least the slot's items when the slot is on the instance.
    Returns ``(load variable, instance literal, items)`` per load (for the hint) and the
    memory items counted (the build's work)."""
    p = enc.problem
    load_defs = []
    built = 0
    for d, per_slot in enc.inst.items():
        cap = p.devices[d].memory
        count = p.devices[d].instances
        loads: list[list] = [[] for _ in range(count)]
        for j, a in enumerate(per_slot):
            items = enc.items[j]
            if not a or not items:
                continue
            total = sum(size for size, _ in items.values())
            expr = sum(size * lit(x) for size, x in items.values())
            for i, ai in enumerate(a):
                load = m.NewIntVar(0, min(cap, total), "")
                m.Add(load >= expr).OnlyEnforceIf(lit(ai))
                loads[i].append(load)
                load_defs.append((load, ai, list(items.values())))
                built += len(items)
        for i in range(count):
            if loads[i]:
                m.Add(sum(loads[i]) <= cap)
    return load_defs, built


def _hint(m, enc: Encoding, b: list, load_defs: list, hint: Solution | None) -> bool:
    """Hint every variable, the loads too, from ``hint`` (True when it fits the encoding)."""
    if hint is None:
        return False
    val = hint_values(enc, hint)
    if val is None:
        return False
    for x in range(1, enc.nv + 1):
        m.AddHint(b[x], val[x])

    def truth(x) -> bool:
        return val[x] if x > 0 else not val[-x]

    for load, ai, items in load_defs:    # complete: the integers too
        m.AddHint(load, sum(size for size, x in items if truth(x)) if truth(ai) else 0)
    return True
