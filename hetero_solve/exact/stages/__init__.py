"""The stages of the exact refinement, one module each, and the one loop that runs them
(docs/exact.md, "Stages").

Each stage is a function of the shared :class:`..search.Search` and a :class:`..search.Task`
(its weights, its :class:`~hetero_solve.budget.Budget`, the caps the earlier stages set) that
returns a :class:`..search.StageRecord`: what it tried, proved and found.  :func:`plan` says
which stage minimises which term: ``STAGES`` for the counting terms, and, from the first cost
term on (every term, on problems with colocation or contiguous stages, which only the slot
model states), :func:`.costs.stage_costs` on the slot model; a weighted objective is one stage
(:func:`.weighted.stage_weighted`, or on the slot model when it has a cost term).
"""

from __future__ import annotations

import time
from typing import Callable

from ...problem import COST_TERMS, Problem
from ..search import Search, StageRecord, Task
from .costs import stage_costs
from .fallback import stage_fallback
from .partitions import stage_partitions
from .transfer import stage_transfer
from .weighted import integer_weights, stage_weighted

__all__ = ["STAGES", "plan", "run_stages", "integer_weights"]

Stage = Callable[[Search, Task], StageRecord]

STAGES: dict[str, Stage] = {"fallback": stage_fallback, "partitions": stage_partitions,
                            "transfer": stage_transfer, "latency": stage_costs,
                            "throughput": stage_costs}


def plan(p: Problem) -> list[tuple[str, dict[str, int], Stage]]:
    """The stages of ``p``'s objective, in order: ``(label, weights, stage)``."""
    obj = p.objective
    if not obj.lexicographic:
        weights, _ = integer_weights(obj.weights or {})
        return [("weighted", weights, stage_costs if obj.uses_costs() else stage_weighted)]
    order = list(obj.order)
    first_cost = len(order) if not obj.uses_costs() else (
        0 if p.colocation or p.costs.contiguous else
        next(i for i, t in enumerate(order) if t in COST_TERMS))
    return [(t, {t: 1}, stage_costs if i >= first_cost else STAGES[t])
            for i, t in enumerate(order)]


def run_stages(ctx: Search) -> list[StageRecord]:
    """Run the objective's stages in order and return their records.

    Each stage gets its share of the budget left (:meth:`..search.Search.stage_budget`) and
    the earlier terms capped at their best values; a term is proven only when its stage proves
    it, every earlier one is proven and a valid answer exists (``proven`` in each record is
    that chained value)."""
    if ctx.p.n == 0:
        return []
    stages = plan(ctx.p)
    records: list[StageRecord] = []
    caps: dict[str, int] = {}
    chain = True
    for i, (label, weights, stage) in enumerate(stages):
        t = time.perf_counter()
        before = ctx.value(weights) if ctx.valid else None
        task = Task(label, weights, ctx.stage_budget(label, len(stages) - i), dict(caps), chain)
        rec = stage(ctx, task)
        rec.proven = chain and rec.proven and ctx.valid
        chain = rec.proven
        rec.seconds = round(time.perf_counter() - t, 3)
        records.append(rec)
        if not ctx.valid:      # nothing valid found yet: no cap, nothing proven
            rec.listed = False
            continue
        caps[label] = ctx.value(weights)
        rec.before, rec.after = before, caps[label]
    return records
