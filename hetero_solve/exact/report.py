"""The report step: the answer's status, bounds and explanation, derived from the stages'
records alone (docs/exact.md, "What it returns").

* ``status`` is ``"optimal"`` when every stage's record says its term is proven;
* ``lower_bound`` (on the parts) is the best ``bound`` of the partitions records, or the bound of
  :mod:`.bounds` in the device sets every answer as good on the earlier terms may use, never
  above the answer's parts (equal to them when ``partitions`` is proven);
* ``stats["explain"]`` is :func:`.explain.explain` on the device sets and bounds behind that
  bound, with how the parts were proven; under a cost objective, with where the time goes
  (:func:`.explain.explain_time`).
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..problem import COST_TERMS
from ..solution import Solution
from .explain import explain, explain_time
from .search import PartsView, Search, StageRecord


def report(ctx: Search, records: list[StageRecord]) -> Solution:
    """The best answer of ``ctx`` with its status, ``lower_bound`` and ``stats`` (the
    solver's details, each stage's record, the explanation)."""
    sol = ctx.best
    if ctx.p.n == 0:
        sol.status, sol.lower_bound = "optimal", 0
        sol.stats["heuristic_partitions"] = ctx.heuristic_parts
        return sol
    proven = {r.stage: r.proven for r in records}
    view = next((r.view for r in records if r.view is not None), None) \
        or _default_view(ctx, proven)
    bv = view.bounds
    lb = max(_bound(records, "partitions"), bv.lb if bv is not None else 1)
    lb = min(lb, sol.num_parts)
    if ctx.p.objective.lexicographic and proven.get("partitions"):
        lb = sol.num_parts
    status = "optimal" if proven and all(proven.values()) else "feasible"
    out = Solution(sol.part_of, sol.part_device, sol.part_instance,
                   algorithm=sol.algorithm if sol is not ctx.start else ctx.start.algorithm,
                   status=status, lower_bound=lb, stats=dict(ctx.start.stats))
    out.stats.update(sol.stats)
    out.stats["heuristic_partitions"] = ctx.heuristic_parts
    out.stats.update(_solver_stats(ctx, records, proven, view))
    if ctx.p.costs is not None and ctx.p.objective.uses_costs():
        out.stats.update(_cost_stats(ctx, records))
    units = [r.units for r in records if r.units is not None]
    if units:
        out.stats["contracted_units"] = units[-1]
    mb = None
    if ctx.sets(fixed=False)[1]:   # the stronger fallback bound: the relaxed model's
        mb = ctx.memory_bounds_in_time()
        if mb is not None:
            mb = replace(mb, fallback=max(mb.fallback, out.stats["bounds"]["fallback"]))
    out.stats["explain"] = explain(ctx.p, view.R, bv, sol.num_parts,
                                   proof=_proof(ctx, records, proven, view),
                                   fixed=view.fixed, solution=sol, memory=mb,
                                   memory_sets=ctx.sets(fixed=False)[0], lower_bound=lb)
    if ctx.p.costs is not None and ctx.p.objective.uses_costs():
        out.stats["explain"]["time"] = explain_time(ctx.p, sol)
    return out


def _default_view(ctx: Search, proven: dict[str, bool]) -> PartsView:
    """The device sets of the parts bound when no stage computed them: with fallback 0
    proven before partitions only fallback-0 answers are as good, and the bound within their
    device sets is the one that applies.  One part needs no bound: every answer of a problem
    with a node has a part."""
    obj = ctx.p.objective
    if obj.uses_costs() and (not obj.lexicographic or obj.order[0] in COST_TERMS):
        # a cost term first: an answer as good may have any number of parts, one at least
        return PartsView(ctx.sets(False)[0], None, False)
    fixed = bool(obj.lexicographic and "fallback" in obj.order and "partitions" in obj.order
                 and obj.order.index("fallback") < obj.order.index("partitions")
                 and proven.get("fallback") and ctx.metrics()["fallback"] == 0)
    return PartsView(ctx.sets(fixed)[0],
                     ctx.bounds_in_time(fixed) if ctx.best.num_parts > 1 else None, fixed)


def _proof(ctx: Search, records: list[StageRecord], proven: dict[str, bool],
           view: PartsView) -> str | None:
    """How the number of parts is proven (a key of :data:`.explain.PROOFS`), or None."""
    if view.bounds is None:     # one part, a cost term first (no parts bound), or no time left
        return "bound" if ctx.best.num_parts <= 1 else None
    if ctx.best.num_parts <= view.bounds.lb:
        return "bound"
    if ctx.p.objective.lexicographic:
        if not proven.get("partitions"):
            return None
        return next(r.method for r in records if r.stage == "partitions")
    return "weighted" if proven.get("weighted") else None


def _solver_stats(ctx: Search, records: list[StageRecord], proven: dict[str, bool],
                  view: PartsView) -> dict:
    """The solver's part of ``stats`` (``partition.json``'s ``solver``)."""
    bv = view.bounds
    out = {
        "engine": ctx.engine, "proven": [t for t, ok in proven.items() if ok],
        "seed": ctx.seed, **ctx.budget.stats(),
        "deterministic_seconds": round(ctx.spent, 3),
        "exact_seconds": round(time.perf_counter() - ctx.t0, 3),
        "bounds": ({"path": bv.lb_path, "segments": bv.lb_segments, "through": bv.lb_through}
                   if bv is not None else {"nonempty": 1}) | {"devices_fixed": view.fixed},
        "stages": [r.as_dict() for r in records if r.listed],
    }
    if ctx.sets(fixed=False)[1]:       # memory can bind: fallback has a bound of its own
        fallback = ctx.metrics()["fallback"]
        fb = fallback if proven.get("fallback") else _bound(records, "fallback")
        out["bounds"]["fallback"] = min(fb, fallback)
    return out


def _cost_stats(ctx: Search, records: list[StageRecord]) -> dict:
    """What the cost stages proved (``partition.json``'s ``lower_bound`` of each cost term, or
    of the weighted sum under ``"weighted"``) and in which unit."""
    slots = [r for r in records if r.model == "slots" and r.bound is not None]
    return {"cost_bounds": {r.stage: r.bound for r in slots},
            "cost_resolution": {r.stage: r.resolution for r in slots},
            "cost_unit": ctx.p.costs.unit}


def _bound(records: list[StageRecord], term: str) -> int:
    """The best bound the ordinal stages of ``term`` proved (0: none)."""
    return max((r.bound for r in records
                if r.stage == term and r.model != "slots" and r.bound is not None), default=0)
