"""The stages on the slot model: ``latency`` and ``throughput`` (docs/costs.md), and every term
after the first of them (docs/exact.md, "Cost terms").

Each is a stage of the one loop (:func:`.run_stages`): it minimises its term (a weighted
objective's sum) on the slot model of :mod:`..costs` through the runner (:func:`..runner.solve`,
the model a :class:`..costs.Slots` plan built once, by the first of these stages, and shared),
caps it for the next, and returns a :class:`..search.StageRecord` whose proof is ``bound`` (a
true lower bound on the term among the answers as good on the earlier terms) and
``resolution`` (the rounding the model can hide).  Every answer goes through
:meth:`..search.Search.accept` (valid and strictly better), so the answer is never worse than
the start; before any model, the best single device (every node in one part on it) is tried.
Problems too large for the slot model (the runner's size guard) keep the better of those
answers and prove what the solver-free bound (:func:`..costs.simple_bound`) proves.  The SAT
engine has no cost terms: with ``engine="sat"`` the stages say so in one line and prove only
what the bound proves.
"""

from __future__ import annotations

from ...errors import InfeasibleError
from ...nodemap import NodeMap
from ...problem import COST_TERMS
from ...solution import Solution
from .. import runner
from ..colocate import contract_groups, contract_solution, expand
from ..costs import Slots, simple_bound, slots
from ..search import Search, StageRecord, Task

SAT_LINE = ("--engine sat has no cost terms (latency, throughput): the cost stages keep the "
            "best single-device or start answer and prove only the solver-free bound; use "
            "--engine cpsat or auto")


def stage_costs(ctx: Search, task: Task) -> StageRecord:
    """Minimise ``task.weights`` on the slot model, cap it for the next stage, settle the
    record (module doc)."""
    rec = StageRecord(task.label, model="slots")
    first = ctx.slots is None
    if first:
        single_devices(ctx, rec.runs)
        ctx.slots = _plan(ctx, task.caps, rec.runs)
    plan: Slots = ctx.slots
    r = None
    if plan.engines and (plan.model is not None or not plan.tried) and not ctx.guard():
        plan.tried = True
        r = runner.solve(ctx, rec.runs, plan, task.weights, {}, _on(ctx, plan.nmap),
                         task.budget, task.label)
    bound, ok, slack = None, False, 0.0
    model = plan.model
    if r is not None and model is not None:
        if r.solution is not None:
            sol = r.solution if plan.nmap is None else expand(r.solution, plan.nmap)
            entry = rec.runs[-1]
            entry["kept"] = ctx.accept(sol, "cpsat-costs", rec.runs)
            model.cap_objective(r.value)
        scale = model.scale if model.timed else 1
        slack = model.rounded / scale if model.timed else 0.0
        if r.infeasible and not plan.restricted:
            rec.method = "infeasible"
        elif plan.complete and r.bound is not None:   # fewer slots bound nothing else
            bound = r.bound / scale
            ok = r.optimal
    if not ctx.valid and rec.method == "infeasible" and first and not task.caps:
        raise InfeasibleError("no partition meets the colocation, contiguous-stage and "
                              "memory constraints")
    return _settle(ctx, rec, task, bound, ok, slack)


def _settle(ctx: Search, rec: StageRecord, task: Task, bound: float | None, ok: bool,
            slack: float) -> StageRecord:
    """Proven when the solver's bound (or, for a cost term, the solver-free one) meets the
    best answer's exact value within the model's rounding."""
    if not ctx.valid:
        rec.proven = False
        rec.method = rec.method or "unproven"
        return rec
    exact = ctx.value(task.weights)
    tol = 1e-12 * max(1.0, abs(exact))
    ok = ok and bound is not None and exact - bound <= slack + tol
    method = "cpsat" if ok else ""
    plain = simple_bound(ctx.p, task.label) if task.label in COST_TERMS else None  # any answer's
    if plain is not None:
        bound = plain if bound is None else max(bound, plain)
        if exact - plain <= 1e-9 * max(1.0, abs(exact)):
            ok, method = True, method or "bound"
    if bound is not None:
        bound = min(bound, exact)
    rec.bound, rec.resolution = bound, slack
    return rec.settle(ok, method or "unproven")


def single_devices(ctx: Search, runs: list[dict]) -> None:
    """Every node in one part on one device, for each device every node may use: the answer
    a cost objective must never be worse than (docs/costs.md)."""
    p = ctx.p
    for d in range(len(p.devices)):
        if p.n and all(d in a for a in p.allowed):
            kept = ctx.accept(Solution([0] * p.n, [d], [0]), f"one part on {p.devices[d].name}",
                              runs)
            runs.append({"engine": "single device", "device": p.devices[d].name, "kept": kept})


def _plan(ctx: Search, caps: dict[str, int], runs: list[dict]) -> Slots:
    """The slot model's plan (on the problem with colocation groups merged for contiguous
    stages, :mod:`..colocate`); no engine when the engine is SAT."""
    p = ctx.p
    if ctx.engine == "sat":
        ctx.say(SAT_LINE)
        runs.append({"engine": "sat", "skipped": SAT_LINE})
        if SAT_LINE not in p.info.warnings:     # the answer's warnings (as the rescue's)
            p.info.warnings.append(SAT_LINE)
        return Slots(p, None, 0, False, engines=())
    nmap = None
    q = p
    if p.costs.contiguous and p.colocation and "fallback" not in p.objective.terms():
        q, nmap = contract_groups(p)
    K, complete = slots(q, _on(ctx, nmap))
    return Slots(q, nmap, K, complete, dict(caps))


def _on(ctx: Search, nmap: NodeMap | None) -> Solution | None:
    """The best answer on the slot model's problem (``None`` while none is valid)."""
    if not ctx.valid:
        return None
    return ctx.best if nmap is None else contract_solution(ctx.best, nmap)
