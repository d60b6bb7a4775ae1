"""The transfer stage: the fewest bytes between parts, the earlier terms capped
(docs/exact.md, "Stages").  A tie-breaker: its budget is at most a third of the refinement's
work (:data:`..search.TRANSFER_SHARE`)."""

from __future__ import annotations

from ..runner import Ordinal, solve, take, transfer_engines
from ..search import Search, StageRecord, Task, unbounded_K


def stage_transfer(ctx: Search, task: Task) -> StageRecord:
    """Minimise transfer with ``task.caps`` on the earlier terms; proven only when the engine
    proves it with complete slots (docs/exact.md, "Slots")."""
    rec = StageRecord("transfer")
    if ctx.guard():     # the deadline passed: nothing more runs (not even bounds)
        return rec.settle(False, "skipped")
    if ctx.valid and ctx.metrics()["transfer"] == 0:
        return rec.settle(True, "bound")
    fixed = task.caps.get("fallback") == 0
    R, mem, bounds = ctx.view(fixed)
    other = {t: v for t, v in task.caps.items() if not (t == "fallback" and fixed)}
    if "partitions" in task.caps:
        K, complete = ctx.best.num_parts, True
    else:
        K, complete = unbounded_K(ctx.p.n, ctx.best.num_parts)
    r = solve(ctx, rec.runs, Ordinal(ctx.p, R, K, bounds, mem, transfer_engines(ctx.engine, mem)),
              {"transfer": 1}, other, ctx.best, task.budget, "transfer")
    take(ctx, rec.runs, r, None)
    ok = bool(r and r.optimal and complete)
    return rec.settle(ok, (r.stats.get("engine") if ok else "unproven") if r else "skipped")
