"""The stages of the exact refinement, one module each, and the loop that runs them
(docs/exact.md, "Stages").

Each stage is a function of the shared :class:`..search.Search` (and of the caps the earlier
stages set) that returns a :class:`..search.StageRecord`: what it tried, proved and found.
``STAGES`` names the stage of each term of a lexicographic objective; a weighted objective is
one stage (:func:`.weighted.stage_weighted`).
"""

from __future__ import annotations

import time

from ...problem import COST_TERMS
from ..search import Search, StageRecord
from .costs import run_cost_stages
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
    if obj.uses_costs() and not obj.lexicographic:   # one stage on the slot model (.costs)
        return run_cost_stages(ctx, list(obj.terms()), {}, True)
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
    # the counting terms before the first cost term have their own stages; from the first
    # cost term on (and on problems with colocation or contiguous stages, which only the
    # slot model states), every term is a cost stage (.costs), capped by the earlier ones
    plain = len(order) if not obj.uses_costs() else (
        0 if ctx.p.colocation or ctx.p.costs.contiguous else
        next(i for i, t in enumerate(order) if t in COST_TERMS))
    for i, term in enumerate(order):
        if i == plain:
            return records + run_cost_stages(ctx, order[i:], dict(caps), chain)
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
