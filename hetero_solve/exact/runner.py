"""The engine runner: which engine each stage uses, in one place, and one stage model solved
by them in turn (docs/exact.md, "Stages").

:func:`engines` and :func:`transfer_engines` say which engines run and in which order;
:func:`solve` builds the stage's :class:`.encoding.Encoding` (or, when the full model is too
large for the budget, a neighbourhood of the best answer: an improvement, never a proof) and
runs them, warm-starting each from the best answer so far; :func:`window_search` is the
large-neighbourhood search by windows of parts.  Every run gets a part of the
:class:`.search.Search` budget (:meth:`~hetero_solve.budget.Budget.allot`), charges its work to
it, and is noted in the stage's ``runs``.
"""

from __future__ import annotations

from dataclasses import replace

from ..budget import CLAUSES_PER_SECOND
from ..problem import Problem
from ..solution import Solution
from . import cpsat, sat
from .bounds import Bounds
from .encoding import Encoding
from .reductions import Reduced
from .search import Search

MAX_VARIABLES = 200_000    # larger models are not built (the stage stays unproven): on this
VARIABLES_PER_SECOND = 10_000   # machine they spent tens of seconds per deterministic second,
                                # and building one costs wall time no budget accounts for
NEIGHBOURHOOD_VARIABLES = 60_000   # size of the improvement model when the full one is too big
WINDOW_NODES = 160         # nodes freed per window of the window search (about)
WINDOW_SECONDS = 0.5       # deterministic seconds per window at most


def engines(engine: str, stage: str = "partitions") -> tuple[str, ...]:
    """Engines to run, in order.  ``auto``: CP-SAT then SAT to close a gap; for transfer
    SAT first (a sum of byte-weighted literals: CP-SAT's relaxation is weak there, while
    Glucose's descending bound proved 90-200-node cases several times faster)."""
    if engine != "auto":
        return (engine,)
    return ("sat", "cpsat") if stage == "transfer" else ("cpsat", "sat")


def transfer_engines(engine: str, mem) -> tuple[str, ...]:
    """With memory limits the adder-encoded capacities slow Glucose down (a 1,000-node CNN:
    no proof in 400,000 conflicts, CP-SAT proved it in 5 deterministic seconds)."""
    if engine == "auto" and mem:
        return ("cpsat", "sat")
    return engines(engine, "transfer")


def model_size(prob: Problem, K: int, bounds: Bounds, weights, caps, mem) -> int:
    """About how many variables the encoding will have (before building it)."""
    order = sum(max(0, K - 1 - bounds.bottom[v] - bounds.top[v]) for v in range(prob.n))
    size = order + K * len(prob.devices)
    if "transfer" in weights or "transfer" in caps:
        size += order                   # one crossing literal per tensor and slot, about
    if mem:
        items = sum(len(prob.node_consts[v]) + len(prob.node_inputs[v])
                    + len(prob.node_outputs[v]) for v in range(prob.n)) / max(1, prob.n)
        size += int(order * items)
    return size


def neighbourhood(prob: Problem, K: int, bounds: Bounds, hint: Solution | None, weights, caps,
                  mem, limit: int) -> tuple[Bounds, int] | None:
    """Windows narrowed to ``delta`` slots either side of the best answer's part of each
    node (the widest that fits ``limit``): a large-neighbourhood search around it, which
    can improve the answer (its hint is inside) but proves nothing."""
    if hint is None or len(hint.part_of) != prob.n:
        return None
    p = hint.part_of
    for delta in (16, 8, 4, 2, 1):
        top = [max(bounds.top[v], p[v] - delta) for v in range(prob.n)]
        bottom = [max(bounds.bottom[v], K - 1 - p[v] - delta) for v in range(prob.n)]
        if any(t > K - 1 - b for t, b in zip(top, bottom)):
            return None     # the answer is outside the proven windows: not expected
        near = replace(bounds, top=top, bottom=bottom)
        if model_size(prob, K, near, weights, caps, mem) <= limit:
            return near, delta
    return None


def solve(ctx: Search, runs: list[dict], prob: Problem, R, K: int, bounds: Bounds,
          weights: dict[str, int], caps: dict[str, int], hint: Solution | None, mem,
          budget: float, label: str, names: tuple[str, ...]) -> cpsat.EngineResult | None:
    """Minimise ``weights`` under ``caps`` with ``K`` slots, trying the engines ``names`` in
    turn within ``budget`` deterministic seconds.  ``None`` when nothing ran (the guard, or a
    model too large with no neighbourhood); else the best solution found, the best bound, and
    whether it is proven optimal (never within a neighbourhood)."""
    if ctx.guard():
        runs.append({"engine": "none", "skipped": "time limit"})
        return None
    size = model_size(prob, K, bounds, weights, caps, mem)
    limit = min(MAX_VARIABLES, max(20_000, VARIABLES_PER_SECOND * budget))
    restricted = False
    if size > limit:
        near = neighbourhood(prob, K, bounds, hint, weights, caps, mem,
                             min(limit, NEIGHBOURHOOD_VARIABLES))
        if near is None:
            ctx.say(f"{label}: model too large (about {size:,} variables), skipped")
            runs.append({"engine": "none", "skipped": f"about {size:,} variables"})
            return None
        bounds, delta = near
        restricted = True
        budget /= 2         # an improvement step only: leave time for the next stages
        names = ("cpsat",) if "cpsat" in names else names
        ctx.say(f"{label}: the full model is too large (about {size:,} variables); "
                f"improving within {delta} slot(s) of the best answer, no proof")
        runs.append({"engine": "neighbourhood", "slots": delta, "full_size": size})
    if ctx.guard():         # no model is built past the deadline
        runs.append({"engine": "none", "skipped": "time limit"})
        return None
    terms = tuple(sorted(set(weights) | set(caps)))
    enc = Encoding(prob, R, K, bounds, terms=terms, memory_devices=tuple(mem))
    best, bound, proven = _run_engines(ctx, runs, enc, weights, caps, hint, budget, label,
                                       names)
    if restricted:      # optimal within the neighbourhood only: no proof, no bound
        bound, proven = None, False
    if best is None:
        return cpsat.EngineResult(None, None, bound, False)
    return cpsat.EngineResult(best.solution, best.value, bound, proven,
                              stats={"engine": runs[-1].get("engine")})


def _run_engines(ctx: Search, runs: list[dict], enc: Encoding, weights, caps, hint, budget,
                 label: str, names: tuple[str, ...]):
    """The engine loop of :func:`solve`: each engine gets two thirds of what is left (the
    last one all of it), starts from the best solution so far, and the loop stops at a
    proof.  Returns (best result or None, best bound or None, proven)."""
    best: cpsat.EngineResult | None = None
    bound = None
    spent0 = ctx.spent
    for i, name in enumerate(names):
        if ctx.guard():
            break
        rest = max(0.0, budget - (ctx.spent - spent0))
        if i > 0 and rest < 0.01:
            break       # the stage's budget is spent (deterministically)
        b = rest * 2 / 3 if i < len(names) - 1 else rest   # CP-SAT first, SAT closes gaps
        if name == "sat":   # its adder networks are built in Python: the budget pays
            cost = sat.build_cost(enc, weights, caps) / CLAUSES_PER_SECOND
            if cost >= b / 2:
                runs.append({"engine": name, "skipped": f"building it would cost "
                             f"{cost:.2f} of the {b:.2f} deterministic s left"})
                continue
            b -= cost
        ctx.say(f"{label}: {name} on {enc.problem.n} node(s), {enc.K} slot(s), "
                f"{enc.nv:,} variables")
        mod = cpsat if name == "cpsat" else sat
        kw = {"workers": ctx.workers} if name == "cpsat" else {}
        start = best.solution if best is not None and best.solution is not None else hint
        try:
            r = mod.solve(enc, weights, caps=caps, hint=start, budget=ctx.allot(b),
                          seed=ctx.seed, progress=ctx.say, label=f"{label} ({name})", **kw)
        except ValueError as e:     # e.g. negative byte counts from an unknown dim
            runs.append({"engine": name, "skipped": str(e)})
            continue
        r.stats["engine"] = name
        runs.append({"engine": name, **{
            k: r.stats[k] for k in ("status", "variables", "wall", "deterministic_time",
                                    "conflicts") if k in r.stats}})
        if r.infeasible:   # the best answer fits the model: this would be a modelling bug
            runs[-1]["model_infeasible"] = True
            break
        if r.bound is not None:
            bound = r.bound if bound is None else max(bound, r.bound)
        if r.solution is not None and (best is None or best.solution is None
                                       or r.value < best.value):
            best = r
        if r.optimal:
            runs[-1]["proved"] = True
            return best, bound, True
    return best, bound, False


def take(ctx: Search, runs: list[dict], r: cpsat.EngineResult | None,
         red: Reduced | None) -> None:
    """Accept an engine's solution (expanded from units to nodes)."""
    if r is None or r.solution is None:
        return
    sol = r.solution
    if red is not None:
        sol = Solution(red.expand(sol.part_of), sol.part_device, sol.part_instance)
    ctx.accept(sol, "exact", runs)


def window_search(ctx: Search, runs: list[dict], R, mem, bounds: Bounds, term: str,
                  caps: dict[str, int], budget: float) -> None:
    """Large-neighbourhood search by windows of consecutive parts of the best answer: the
    nodes of parts ``a .. b`` may move to any slot in ``a .. b`` and any device they may
    use, every other node keeps its part; CP-SAT minimises ``term`` under ``caps``.  The
    windows slide over the answer (half overlapping) until the budget is spent.  Improves,
    never proves."""
    spent0 = ctx.spent
    k = 0
    while ctx.spent - spent0 < budget and not ctx.guard():
        best = ctx.best
        K = best.num_parts
        width = max(2, min(K, int(WINDOW_NODES / max(1.0, ctx.p.n / max(1, K)))))
        starts = list(range(0, max(1, K - width + 1), max(1, width // 2)))
        if k >= len(starts):
            break
        near = _window(ctx.p.n, bounds, best.part_of, K, starts[k], width)
        if near is None:
            k += 1
            continue
        terms = tuple(sorted({term} | set(caps)))
        enc = Encoding(ctx.p, R, K, near, terms=terms, memory_devices=tuple(mem))
        left = budget - (ctx.spent - spent0)
        r = cpsat.solve(enc, {term: 1}, caps=caps, hint=best,
                        budget=ctx.allot(min(WINDOW_SECONDS, left)), seed=ctx.seed)
        before = ctx.metrics()[term]
        kept = ctx.accept(r.solution, "exact-window", runs) if r.solution is not None else False
        runs.append({"engine": "window", "slots": [starts[k], min(K - 1, starts[k] + width - 1)],
                     "kept": kept, "before": before, "after": ctx.metrics()[term]})
        if not kept:
            k += 1          # improved: search the same place again (parts renumbered)


def _window(n: int, bounds: Bounds, p: list[int], K: int, a: int, width: int) -> Bounds | None:
    """The windows of :func:`window_search` for parts ``a .. a + width - 1``, or ``None``
    when the best answer lies outside them."""
    b = min(K - 1, a + width - 1)
    top, bottom = [], []
    for v in range(n):
        lo, hi = (max(a, bounds.top[v]), min(b, K - 1 - bounds.bottom[v])) \
            if a <= p[v] <= b else (p[v], p[v])
        top.append(lo)
        bottom.append(K - 1 - hi)
    if any(not (top[v] <= p[v] <= K - 1 - bottom[v]) for v in range(n)):
        return None
    return replace(bounds, top=top, bottom=bottom)
