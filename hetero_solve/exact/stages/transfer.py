"""The transfer stage: the fewest bytes between parts, the earlier terms capped
(docs/exact.md, "Stages").  A tie-breaker: at most a third of the work budget."""

from __future__ import annotations

from ..runner import solve, take, transfer_engines
from ..search import Search, StageRecord, unbounded_K

TRANSFER_SHARE = 1 / 3     # at most this share of the work budget goes to the transfer stage


def stage_transfer(ctx: Search, caps: dict[str, int], left: int,
                   earlier_proven: bool) -> StageRecord:
    """Minimise transfer with ``caps`` on the earlier terms; proven only when the engine
    proves it with complete slots (docs/exact.md, "Slots")."""
    rec = StageRecord("transfer")
    if ctx.valid and ctx.metrics()["transfer"] == 0:
        return rec.settle(True, "bound")
    fixed = caps.get("fallback") == 0
    R, mem, bounds = ctx.view(fixed)
    other = {t: v for t, v in caps.items() if not (t == "fallback" and fixed)}
    if "partitions" in caps:
        K, complete = ctx.best.num_parts, True
    else:
        K, complete = unbounded_K(ctx.p.n, ctx.best.num_parts)
    budget = min(ctx.share(left), ctx.work * TRANSFER_SHARE)
    r = solve(ctx, rec.runs, ctx.p, R, K, bounds, {"transfer": 1}, other, ctx.best, mem,
              budget, "transfer", transfer_engines(ctx.engine, mem))
    take(ctx, rec.runs, r, None)
    ok = bool(r and r.optimal and complete)
    return rec.settle(ok, (r.stats.get("engine") if ok else "unproven") if r else "skipped")
