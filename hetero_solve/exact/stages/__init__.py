"""The stages of the exact refinement, one module each, and the loop that runs them
(docs/exact.md, "Stages").

Each stage is a function of the shared :class:`..search.Search` (and of the caps the earlier
stages set) that returns a :class:`..search.StageRecord`: what it tried, proved and found.
``STAGES`` names the stage of each term of a lexicographic objective; a weighted objective is
one stage (:func:`.weighted.stage_weighted`).
"""

from __future__ import annotations

import time

from ..search import Search, StageRecord
from .fallback import stage_fallback
from .partitions import stage_partitions
from .transfer import stage_transfer
from .weighted import integer_weights, stage_weighted

__all__ = ["STAGES", "run_stages", "integer_weights"]

STAGES = {"fallback": stage_fallback, "partitions": stage_partitions,
          "transfer": stage_transfer}


def run_stages(ctx: Search) -> list[StageRecord]:
    """Run the objective's stages in order and return their records.

    Lexicographic: term by term, each term capped at its best value once its stage ran; a
    term is proven only when its stage proves it, every earlier one is proven and a valid
    answer exists (``proven`` in each record is that chained value)."""
    if ctx.p.n == 0:
        return []
    obj = ctx.p.objective
    if not obj.lexicographic:
        t = time.perf_counter()
        rec = StageRecord("weighted").settle(False, "skipped") if ctx.guard() \
            else stage_weighted(ctx)
        rec.seconds = round(time.perf_counter() - t, 3)
        return [rec]
    records: list[StageRecord] = []
    caps: dict[str, int] = {}
    chain = True
    order = list(obj.order)
    for i, term in enumerate(order):
        t = time.perf_counter()
        before = ctx.metrics()[term]
        if ctx.guard():     # the deadline passed: nothing more runs (not even bounds)
            rec = StageRecord(term).settle(False, "skipped")
        else:
            rec = STAGES[term](ctx, dict(caps), len(order) - i, chain)
        rec.proven = chain and rec.proven and ctx.valid
        chain = rec.proven
        records.append(rec)
        if not ctx.valid:      # nothing valid found yet: no cap, nothing proven
            rec.listed = False
            continue
        caps[term] = ctx.metrics()[term]
        rec.before, rec.after = before, caps[term]
        rec.seconds = round(time.perf_counter() - t, 3)
    return records
