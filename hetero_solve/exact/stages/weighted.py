"""The weighted stage: one stage for a weighted objective, weights scaled to integers
(docs/exact.md, "Stages")."""

from __future__ import annotations

from fractions import Fraction

from ..reductions import contract_chains
from ..bounds import lower_bounds
from ..runner import MAX_VARIABLES, Ordinal, engines, model_size, solve, take
from ..search import Search, StageRecord, Task, unbounded_K
from .partitions import unit_hint


def stage_weighted(ctx: Search, task: Task) -> StageRecord:
    """Minimise the weighted sum; proven only when the weights are exact as integers and the
    engine proves it with complete slots (with a partitions weight ``wp``,
    ``K = cost // wp`` slots are complete)."""
    rec = StageRecord("weighted")
    if ctx.guard():     # the deadline passed: nothing more runs (not even bounds)
        return rec.settle(False, "skipped")
    weights, exact = integer_weights(ctx.p.objective.weights or {})
    m = ctx.metrics()
    cost = sum(w * m[t] for t, w in weights.items())
    wp = weights.get("partitions", 0)
    if ctx.valid and cost == wp:   # one part, nothing else costs: no bound needed
        return rec.settle(exact, "bound")
    R, mem, bounds = ctx.view(fixed=False)
    if ctx.valid and cost == wp * bounds.lb:   # parts at the bound, nothing else costs
        return rec.settle(exact, "bound")
    red, b2 = (None, bounds)
    if not mem and not weights.get("transfer"):
        red = contract_chains(ctx.p, R)
        rec.units = red.problem.n
        b2 = lower_bounds(red.problem, red.R)
    prob, R2 = (red.problem, red.R) if red is not None else (ctx.p, R)
    if wp > 0 and ctx.valid:   # cost >= wp * parts for every solution at least as good
        K, complete = max(b2.lb, min(prob.n, cost // wp)), True
    else:
        K, complete = unbounded_K(prob.n, ctx.best.num_parts)
    if model_size(prob, K, b2, tuple(weights), mem) > MAX_VARIABLES:
        K, complete = max(b2.lb, ctx.best.num_parts), False
    r = solve(ctx, rec.runs, Ordinal(prob, R2, K, b2, mem, engines(ctx.engine)), weights, {},
              unit_hint(ctx.best, red), task.budget, "weighted")
    take(ctx, rec.runs, r, red)
    ok = bool(r and r.optimal and complete and exact)
    return rec.settle(ok, (r.stats.get("engine") if ok else "unproven") if r else "skipped")


def integer_weights(weights) -> tuple[dict[str, int], bool]:
    """Weights as integers with the same ratios (``exact``) or a close approximation."""
    fr = {t: Fraction(w).limit_denominator(10 ** 6) for t, w in weights.items() if w}
    exact = all(float(f) == float(weights[t]) for t, f in fr.items())
    den = 1
    for f in fr.values():
        den = den * f.denominator // _gcd(den, f.denominator)
    out = {t: int(f * den) for t, f in fr.items()}
    g = 0
    for w in out.values():
        g = _gcd(g, w)
    return ({t: w // g for t, w in out.items()} if g > 1 else out), exact


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
