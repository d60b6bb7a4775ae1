"""The cost stages: an objective with ``latency`` or ``throughput`` (docs/costs.md), every term
on the slot model of :mod:`..costs` (docs/exact.md, "Cost terms").

One stage per term of a lexicographic objective (one for a weighted one), each capping its
term at the value found for the next, as the other stages do; each returns a
:class:`..search.StageRecord` whose proof is term-neutral: ``bound`` (a true lower bound on the
term among the answers as good on the earlier terms) and ``resolution`` (the rounding the model
can hide).  Every answer goes through :meth:`..search.Search.accept` (valid and strictly
better), so the answer is never worse than the start; before any model, the best single
device (every node in one part on it) is tried.  Problems too large for the slot model
(:data:`MAX_COST_VARIABLES`) keep the better of those answers and prove what the solver-free
bound (:func:`..costs.simple_bound`) proves.  The SAT engine has no cost terms: with
``engine="sat"`` the stages say so in one line and prove only what the bound proves.
"""

from __future__ import annotations

import time

from ...errors import InfeasibleError
from ...nodemap import NodeMap
from ...problem import COST_TERMS
from ...solution import Solution, objective_term
from ..colocate import contract_groups, contract_solution, expand
from ..cost_terms import stage_term
from ..costs import CostModelCP, answer, cost_objective, hint, simple_bound, slots
from .. import cpsat
from ..search import Search, StageRecord
from .weighted import integer_weights

MAX_COST_VARIABLES = 200_000   # about this many literals at most in the slot model (else bounds)
MIN_COST_VARIABLES = 20_000    # ... and at least this many whatever the budget
COST_ITEMS_PER_SECOND = 10_000   # literals built per deterministic second (charged to the budget)
SAT_LINE = ("--engine sat has no cost terms (latency, throughput): the cost stages keep the "
            "best single-device or start answer and prove only the solver-free bound; use "
            "--engine cpsat or auto")


def cost_model_size(problem, K: int) -> int:
    """About how many literals :class:`..costs.CostModelCP` makes with ``K`` slots."""
    G = sum(d.instances for d in problem.devices)
    k = max(K, 1)
    edges = sum(len(s) for s in problem.succ)
    return problem.n * (G + 2 * k) + edges * k + len(problem.tensor_bytes) * k * (2 + G)


def run_cost_stages(ctx: Search, terms: list[str], caps: dict[str, int],
                    chain: bool) -> list[StageRecord]:
    """The stages of ``terms`` (the rest of a lexicographic objective from its first cost term
    on, or the terms of a weighted one), in order, every earlier term capped (``caps``, from
    the stages before); ``chain``: every earlier term is proven.  ``proven`` in each record is
    chained as :func:`.run_stages` chains it (module doc)."""
    obj = ctx.p.objective
    plan = ([({t: 1}, t) for t in terms] if obj.lexicographic else
            [(integer_weights(obj.weights)[0], "weighted")])
    first = StageRecord(plan[0][1])
    t = time.perf_counter()
    single_devices(ctx, first.runs)
    model, nmap, complete = _model(ctx, first.runs)
    if model is not None:
        for term, cap in caps.items():
            x = stage_term(model, term)
            model.m.Add(sum(a * v for a, v in zip(x.coefs, x.variables)) <= cap)
    records = []
    for i, (weights, label) in enumerate(plan):
        if i:
            t = time.perf_counter()
        rec = first if i == 0 else StageRecord(label)
        rec.before = _value(ctx, weights, label) if ctx.valid else None
        _stage(ctx, rec, model, nmap, complete, weights, label, left=len(plan) - i,
               first=i == 0)
        rec.proven = chain and rec.proven and ctx.valid
        chain = rec.proven
        if ctx.valid:
            rec.after = _value(ctx, weights, label)
        else:
            rec.listed = False
        rec.seconds = round(time.perf_counter() - t, 3)
        records.append(rec)
    if not ctx.valid and records[0].method == "infeasible" and not caps:
        raise InfeasibleError("no partition meets the colocation, contiguous-stage and "
                              "memory constraints")
    return records


def single_devices(ctx: Search, runs: list[dict]) -> None:
    """Every node in one part on one device, for each device every node may use: the answer
    a cost objective must never be worse than (docs/costs.md)."""
    p = ctx.p
    for d in range(len(p.devices)):
        if p.n and all(d in a for a in p.allowed):
            kept = ctx.accept(Solution([0] * p.n, [d], [0]), f"one part on {p.devices[d].name}",
                              runs)
            runs.append({"engine": "single device", "device": p.devices[d].name, "kept": kept})


def _model(ctx: Search, runs: list[dict]):
    """The slot model (on the problem with colocation groups merged for contiguous stages,
    :mod:`..colocate`), its :class:`~hetero_solve.nodemap.NodeMap` (or ``None``), and whether
    its slots are complete; no model when the engine is SAT or the model too large."""
    p = ctx.p
    if ctx.engine == "sat":
        ctx.say(SAT_LINE)
        runs.append({"engine": "sat", "skipped": SAT_LINE})
        if SAT_LINE not in p.info.warnings:     # the answer's warnings (as the rescue's)
            p.info.warnings.append(SAT_LINE)
        return None, None, False
    nmap = None
    q = p
    if p.costs.contiguous and p.colocation and "fallback" not in p.objective.terms():
        q, nmap = contract_groups(p)
    start = _on(ctx.best, nmap) if ctx.valid else None
    K, complete = slots(q, start)
    size = cost_model_size(q, K)
    limit = min(MAX_COST_VARIABLES, max(MIN_COST_VARIABLES,
                                        COST_ITEMS_PER_SECOND * ctx.budget.left()))
    if size > limit:     # building it would cost more than the budget (model building is in it)
        ctx.say(f"cost model: about {size:,} literals, more than the budget builds: skipped")
        runs.append({"engine": "cpsat (costs)", "skipped": f"about {size:,} literals",
                     "slots": K})
        return None, nmap, False
    ctx.say(f"cost model: {q.n} node(s), {K} slot(s)")
    model = CostModelCP(q, K)
    ctx.budget.charge(size / COST_ITEMS_PER_SECOND)
    if start is not None:
        hint(model, start)
    return model, nmap, complete


def _on(sol: Solution, nmap: NodeMap | None) -> Solution | None:
    return sol if nmap is None else contract_solution(sol, nmap)


def _value(ctx: Search, weights: dict[str, int], label: str) -> float:
    """The stage's objective on the best answer (exact, not scaled)."""
    if label != "weighted":
        return objective_term(ctx.p, ctx.best, label)
    return sum(w * objective_term(ctx.p, ctx.best, t) for t, w in weights.items())


def _stage(ctx: Search, rec: StageRecord, model, nmap, complete: bool, weights: dict[str, int],
           label: str, *, left: int, first: bool) -> None:
    """Minimise one stage on the slot model, cap it for the next, settle ``rec``."""
    from ortools.sat.python import cp_model
    bound = None
    ok = False
    slack = 0.0
    if model is not None and not ctx.guard():
        expr, timed, rounded = cost_objective(model, weights)
        model.m.Minimize(expr)
        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.random_seed, prm.num_workers = ctx.seed, max(1, ctx.workers)
        if ctx.workers > 1:
            prm.interleave_search = True
        # cpsat.run: deterministic work within the budget and its deadline, CP-SAT's own SIGINT
        # handler off, and the presolve that certifies wrong optima off (or-tools#5293: on
        # ResNet-50's contiguous stages it proved 4477.7 where 124.35 is feasible)
        status, stats = cpsat.run(solver, model.m, ctx.allot(ctx.share(left)))   # charged there
        scale = model.scale if timed else 1
        slack = rounded / scale if timed else 0.0
        run_rec = {"engine": "cpsat (costs)", "status": solver.StatusName(status),
                   "slots": model.K, **stats}
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            sol = answer(model, solver)
            if nmap is not None:
                sol = expand(sol, nmap)
            run_rec["kept"] = ctx.accept(sol, "cpsat-costs", rec.runs)
            model.m.Add(expr <= round(solver.ObjectiveValue()))
            better = _on(ctx.best, nmap) if ctx.valid else None
            if better is not None:
                hint(model, better)
        if status == cp_model.INFEASIBLE:
            rec.method = "infeasible"
        elif complete:       # a bound of a model with fewer slots bounds nothing else
            bound = solver.BestObjectiveBound() / scale
            ok = status == cp_model.OPTIMAL
        rec.runs.append(run_rec)
    if not ctx.valid:
        rec.proven = False
        rec.method = rec.method or "unproven"
        return
    exact = _value(ctx, weights, label)
    tol = 1e-12 * max(1.0, abs(exact))
    ok = ok and bound is not None and exact - bound <= slack + tol
    method = "cpsat" if ok else ""
    plain = simple_bound(ctx.p, label) if label in COST_TERMS else None   # any answer's
    if plain is not None:
        bound = plain if bound is None else max(bound, plain)
        if exact - plain <= 1e-9 * max(1.0, abs(exact)):
            ok, method = True, method or "bound"
    if bound is not None:
        bound = min(bound, exact)
    rec.bound, rec.resolution = bound, slack
    rec.settle(ok, method or "unproven")
