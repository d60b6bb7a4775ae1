"""The partitions stage: the fewest parts, the earlier terms capped (docs/exact.md, "Stages").

Cheapest proof first: one part (every problem with a node needs one), or the lower bound of
:mod:`..bounds`.  With binding memory the best answer's devices are regrouped into runs
(:func:`~hetero_solve.fitting.realize.realize`) and, the earlier terms proven, the segment model bounds the parts
(:func:`.segments.segment_devices`).  Without memory or other caps, the search over device
sequences on the chain-contracted graph (:mod:`..sequence`, :mod:`..reductions`).  Then the
full model (:func:`..runner.solve`).

A bound on the parts counts only when every earlier term is proven (``earlier_proven``): it
bounds every answer as good on them (``lower_bound`` in ``partition.json``).
"""

from __future__ import annotations

from ...solution import Solution
from .. import sequence
from ..bounds import Bounds, lower_bounds
from ..reductions import Reduced, contract_chains
from ...budget import Budget
from ..runner import Ordinal, engines, solve, take
from ...algorithms.greedy import parts_without_memory
from ...fitting.realize import realize
from ..search import PartsView, Search, StageRecord, Task
from .segments import segment_devices

SEQUENCE_STATES = 64       # placed sets kept per depth by the beam
SEQUENCE_EXACT_STATES = 4096   # ... by the branch and bound that follows
SEQUENCE_RATE = 40_000_000  # work units (see sequence.search) per budget second: measured
                            # 40-70 million here, i.e. 4,000-10,000 extensions on 4k-15k units


def stage_partitions(ctx: Search, task: Task) -> StageRecord:
    """Minimise the number of parts with ``task.caps`` on the earlier terms within
    ``task.budget``.  The record's ``bound`` and ``view`` are set only when every earlier
    term is proven."""
    rec = StageRecord("partitions")
    if ctx.guard():     # the deadline passed: nothing more runs (not even bounds)
        return rec.settle(False, "skipped")
    fixed = task.caps.get("fallback") == 0
    proven = task.earlier_proven
    if ctx.valid and ctx.best.num_parts <= 1:
        # A problem with a node needs a part: one part is optimal, whatever bound the
        # graph would give (computing it costs more than a second at 100,000 nodes).
        if proven:
            rec.view = PartsView(ctx.sets(fixed)[0], None, fixed)
            rec.bound = 1
        return rec.settle(True, "bound")
    R, mem, bounds = ctx.view(fixed)
    if proven:
        rec.view = PartsView(R, bounds, fixed)
        rec.bound = bounds.lb
    if ctx.valid and ctx.best.num_parts <= bounds.lb:
        return rec.settle(True, "bound")
    if mem and ctx.valid and ctx.engine in ("auto", "cpsat"):
        _regroup(ctx, rec, task.budget)
        if proven and ctx.best.num_parts <= bounds.lb:
            return rec.settle(True, "bound")
        if proven and _relaxed_parts_bound(ctx, rec, task.caps, R, mem,
                                           task.budget.allot(task.budget.left() * 2 / 3)):
            return rec.settle(True, "relaxation")
    return _search(ctx, rec, task, R, mem, bounds, fixed)


def _search(ctx: Search, rec: StageRecord, task: Task, R, mem, bounds: Bounds,
            fixed: bool) -> StageRecord:
    """The exact searches: over device sequences when nothing else constrains, then the
    full model with an engine."""
    # fallback 0 is built into R when fixed; other caps need the full model
    other = {t: v for t, v in task.caps.items() if not (t == "fallback" and fixed)}
    proven = task.earlier_proven
    red, b2 = (None, bounds)
    if not mem and not other:
        red = contract_chains(ctx.p, R)
        rec.units = red.problem.n
        b2 = lower_bounds(red.problem, red.R)
        if ctx.engine == "auto" and _sequence_search(ctx, rec, red, b2, bounds.lb,
                                                     task.budget, proven):
            if proven:
                rec.bound = ctx.best.num_parts
            return rec.settle(True, "sequence")
    prob, R2 = (red.problem, red.R) if red is not None else (ctx.p, R)
    r = solve(ctx, rec.runs, Ordinal(prob, R2, ctx.best.num_parts, b2, mem, engines(ctx.engine)),
              {"partitions": 1}, other, unit_hint(ctx.best, red), task.budget, "partitions")
    take(ctx, rec.runs, r, red)
    if r is None:
        return rec.settle(False, "skipped")
    if proven and r.bound is not None:
        rec.raise_bound(min(r.bound, ctx.best.num_parts))
    if r.optimal:
        if proven:
            rec.bound = ctx.best.num_parts
        return rec.settle(True, r.stats.get("engine", "cpsat"))
    return rec.settle(False, "unproven")


def unit_hint(best: Solution, red: Reduced | None) -> Solution | None:
    """The best answer on the contracted problem (None when it splits a unit)."""
    if red is None:
        return best
    unit_part = red.restrict(best.part_of)
    if unit_part is None:
        return None
    return Solution(unit_part, list(best.part_device), list(best.part_instance))


def _regroup(ctx: Search, rec: StageRecord, budget: Budget) -> None:
    """Fewer parts with the same devices: the best answer's device per node, parts
    rebuilt without memory and cut into runs that fit (:func:`~hetero_solve.fitting.realize.realize`); the
    fallback does not change."""
    devices = ctx.best.node_device()
    sol = ctx.counted(budget, realize, ctx.p, devices, parts=parts_without_memory(ctx.p, devices))
    kept = ctx.accept(sol, "exact-runs", rec.runs)
    rec.runs.append({"engine": "runs", "from": "best devices",
                     "parts": sol.num_parts if sol else None, "kept": kept})


def _relaxed_parts_bound(ctx: Search, rec: StageRecord, caps: dict[str, int], R, mem,
                         budget: Budget) -> bool:
    """The parts bound of the relaxed assignment model (:func:`..assign.relaxed_parts`),
    run once the earlier terms are proven (before, the full model's search over both
    fallback and parts is the better use of the budget: it found [3, 3] from [33, 7] on a
    PaddleOCR detector): every answer as good on them has fallback at most the best
    one's, so the bound holds for all of them.  True when the best answer meets it."""
    if budget.left() <= 0.01 or ctx.guard():
        return False
    r = segment_devices(ctx, rec.runs, R, mem, caps.get("fallback", ctx.p.n), budget,
                        "partitions")
    rec.raise_bound(min(r.bound, ctx.best.num_parts))
    return ctx.best.num_parts <= r.bound


def _sequence_search(ctx: Search, rec: StageRecord, red: Reduced, b: Bounds, lb: int,
                     budget: Budget, proven: bool) -> bool:
    """The search over device sequences on the contracted problem: a beam for a good
    answer, then branch and bound within ``budget`` for the proof.  True when the best
    answer is proven to have the fewest parts."""
    # a beam narrow enough to finish within the budget (one extension per device and kept
    # set per depth, at most as many depths as the best answer has parts)
    devices = len({d for r in red.R for d in r})
    per_state = ctx.best.num_parts * max(1, devices) * (red.problem.n + 3000)
    beam = max(1, min(SEQUENCE_STATES, int(budget.left() * SEQUENCE_RATE / per_state)))
    for phase, cap in (("beam", beam), ("branch and bound", SEQUENCE_EXACT_STATES)):
        if budget.left() <= 0:
            break
        ctx.say(f"partitions: search over device sequences ({phase}, {cap} set(s) per "
                f"depth) on {red.problem.n} unit(s)")
        sr = sequence.search(red.problem, red.R, max_states=cap, upper=ctx.best.num_parts,
                             lower=lb, bounds=b, progress=ctx.say,
                             max_work=int(budget.left() * SEQUENCE_RATE),
                             deadline=budget.deadline)
        budget.charge(sr.work / SEQUENCE_RATE)
        if sr.timed_out:
            budget.stop()
        rec.runs.append({"engine": f"sequence ({phase})", "exact": sr.exact,
                         "depth": sr.depth, "widest": sr.max_states,
                         "extensions": sr.expansions})
        if sr.parts is not None:
            ctx.accept(Solution(red.expand(sr.part_of), sr.part_device, [0] * sr.parts),
                       "exact-sequence", rec.runs)
        if sr.exact:
            return True
        if proven:
            rec.raise_bound(sr.lower_bound)
    return False
