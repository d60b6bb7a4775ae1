"""The model runner: one stage model, built once it is known to fit the budget, solved by its
engines in turn (docs/exact.md, "Stages").

Both CP models answer one protocol.  A *plan* says, before anything is built, how large the
model will be (``size``), which neighbourhood of an answer would fit a smaller limit
(``near``), which engines solve it (``engines``), and builds it (``build``); the model built
states an objective term (``term``), caps an earlier one (``cap``), takes an answer as a hint
(``hint``) and reads an answer back (``decode``):

* :class:`Ordinal`: the ordinal model in order encoding (:class:`.encoding.Encoding`), built
  for one stage and solved by CP-SAT (:mod:`.cpsat`) and Glucose (:mod:`.sat`);
* :class:`.costs.Slots`: the slot model with device instances and times
  (:class:`.costs.CostModelCP`), built once and shared by every stage from the first cost term
  on, solved by CP-SAT.

:func:`solve` is the one runner: the one size guard (:func:`size_limit`: a model larger than
the stage's budget builds is not built), then, when the model is too large, a neighbourhood of
the best answer (an improvement, never a proof), then the engines, each warm-started from the
best answer so far, each on a child of the stage's :class:`~hetero_solve.budget.Budget`
(what it spends, the stage spends), each noted in the stage's ``runs``.
:func:`engines` and :func:`transfer_engines` say which engines run, in which order;
:func:`window_search` is the large-neighbourhood search by windows of parts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..budget import CLAUSES_PER_SECOND, Budget
from ..problem import Problem
from ..solution import Solution
from . import cpsat, sat
from .bounds import Bounds
from .cpsat import EngineResult
from .encoding import Encoding
from .reductions import Reduced
from .search import Search

MAX_VARIABLES = 200_000    # larger models are not built (the stage stays unproven): on this
MIN_VARIABLES = 20_000     # machine they spent tens of seconds per deterministic second, and
VARIABLES_PER_SECOND = 10_000   # building one costs wall time no budget accounts for
NEIGHBOURHOOD_VARIABLES = 60_000   # size of the improvement model when the full one is too big
WINDOW_NODES = 160         # nodes freed per window of the window search (about)
WINDOW_SECONDS = 0.5       # deterministic seconds per window at most


class Plan(Protocol):
    """What the runner asks of a model before and while it is built (module doc)."""

    engines: tuple[str, ...]
    model: object | None            # a model built earlier and shared (else None)
    restricted: bool                # a neighbourhood: it improves, it proves nothing

    def size(self, terms: tuple[str, ...]) -> int: ...

    def near(self, hint: Solution | None, terms: tuple[str, ...],
             limit: int) -> tuple[Plan, int] | None: ...

    def build(self, terms: tuple[str, ...], budget: Budget): ...

    def run(self, engine: str, model, weights: dict[str, int], caps: dict[str, int],
            hint: Solution | None, budget: Budget, ctx: Search, label: str) -> EngineResult: ...

    def entry(self, engine: str) -> dict: ...


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


def size_limit(budget: Budget) -> int:
    """The one size guard: the most variables a model built for ``budget`` may have."""
    return int(min(MAX_VARIABLES, max(MIN_VARIABLES, VARIABLES_PER_SECOND * budget.left())))


def model_size(prob: Problem, K: int, bounds: Bounds, terms, mem) -> int:
    """About how many variables the ordinal encoding will have (before building it)."""
    order = sum(max(0, K - 1 - bounds.bottom[v] - bounds.top[v]) for v in range(prob.n))
    size = order + K * len(prob.devices)
    if "transfer" in terms:
        size += order                   # one crossing literal per tensor and slot, about
    if mem:
        items = sum(len(prob.node_consts[v]) + len(prob.node_inputs[v])
                    + len(prob.node_outputs[v]) for v in range(prob.n)) / max(1, prob.n)
        size += int(order * items)
    return size


@dataclass
class Ordinal:
    """The plan of the ordinal model (:class:`.encoding.Encoding`) of one stage: ``K`` slots,
    each node's window from ``bounds``, the memory of the devices ``mem``."""

    problem: Problem
    R: list[tuple[int, ...]]
    K: int
    bounds: Bounds
    mem: tuple[int, ...] | list[int]
    engines: tuple[str, ...]
    model: object | None = None
    restricted: bool = False

    def size(self, terms) -> int:
        return model_size(self.problem, self.K, self.bounds, terms, self.mem)

    def near(self, hint: Solution | None, terms, limit: int) -> tuple[Ordinal, int] | None:
        """Windows narrowed to ``delta`` slots either side of ``hint``'s part of each node
        (the widest that fits ``limit``): a large-neighbourhood search around it, which can
        improve the answer (its hint is inside) but proves nothing; CP-SAT alone."""
        if hint is None or len(hint.part_of) != self.problem.n:
            return None
        p, K, b = hint.part_of, self.K, self.bounds
        for delta in (16, 8, 4, 2, 1):
            top = [max(b.top[v], p[v] - delta) for v in range(self.problem.n)]
            bottom = [max(b.bottom[v], K - 1 - p[v] - delta) for v in range(self.problem.n)]
            if any(t > K - 1 - bo for t, bo in zip(top, bottom)):
                return None     # the answer is outside the proven windows: not expected
            plan = replace(self, bounds=replace(b, top=top, bottom=bottom), restricted=True,
                           engines=("cpsat",) if "cpsat" in self.engines else self.engines)
            if plan.size(terms) <= limit:
                return plan, delta
        return None

    def build(self, terms, budget: Budget) -> Encoding:
        """The encoding (its build is charged by the engine that solves it)."""
        return Encoding(self.problem, self.R, self.K, self.bounds, terms=terms,
                        memory_devices=tuple(self.mem))

    def run(self, engine: str, model: Encoding, weights, caps, hint, budget: Budget,
            ctx: Search, label: str) -> EngineResult | None:
        if engine == "sat":     # its adder networks are built in Python: the budget pays
            cost = sat.build_cost(model, weights, caps) / CLAUSES_PER_SECOND
            if cost >= budget.left() / 2:
                return EngineResult(None, None, None, False, stats={
                    "skipped": f"building it would cost {cost:.2f} of the "
                               f"{budget.left():.2f} deterministic s left"})
            return sat.solve(model, weights, caps=caps, hint=hint,
                             budget=budget.allot(budget.left() - cost), seed=ctx.seed,
                             progress=ctx.say, label=f"{label} (sat)")
        return cpsat.solve(model, weights, caps=caps, hint=hint, budget=budget, seed=ctx.seed,
                           progress=ctx.say, label=f"{label} (cpsat)", workers=ctx.workers)

    def entry(self, engine: str) -> dict:
        return {"engine": engine}


def solve(ctx: Search, runs: list[dict], plan: Plan, weights: dict[str, int],
          caps: dict[str, int], hint: Solution | None, budget: Budget,
          label: str) -> EngineResult | None:
    """Minimise ``weights`` under ``caps`` on the model of ``plan`` within ``budget`` (a child
    of the stage's), trying its engines in turn.  ``None`` when nothing ran (the deadline, or
    a model too large with no neighbourhood); else the best solution found, the best bound,
    and whether it is proven optimal (never within a neighbourhood)."""
    if ctx.guard():
        runs.append({"engine": "none", "skipped": "time limit"})
        return None
    terms = tuple(sorted(set(weights) | set(caps)))
    model = plan.model
    if model is None:
        size, limit = plan.size(terms), size_limit(budget)
        if size > limit:
            near = plan.near(hint, terms, min(limit, NEIGHBOURHOOD_VARIABLES))
            if near is None:
                ctx.say(f"{label}: model too large (about {size:,} variables), skipped")
                runs.append({"engine": "none", "skipped": f"about {size:,} variables"})
                return None
            plan, delta = near
            ctx.say(f"{label}: the full model is too large (about {size:,} variables); "
                    f"improving within {delta} slot(s) of the best answer, no proof")
            runs.append({"engine": "neighbourhood", "slots": delta, "full_size": size})
        if ctx.guard():         # no model is built past the deadline
            runs.append({"engine": "none", "skipped": "time limit"})
            return None
        model = plan.build(terms, budget)
    if plan.restricted:
        budget = budget.split(2)   # an improvement step only: leave time for the next stages
    best, bound, proven, infeasible = _run_engines(ctx, runs, plan, model, weights, caps, hint,
                                                   budget, label)
    if plan.restricted:     # optimal within the neighbourhood only: no proof, no bound
        bound, proven = None, False
    last = {"engine": runs[-1].get("engine")} if runs else {}
    if best is None:
        return EngineResult(None, None, bound, False, infeasible=infeasible, stats=last)
    return EngineResult(best.solution, best.value, bound, proven, stats=last)


def _run_engines(ctx: Search, runs: list[dict], plan: Plan, model, weights, caps, hint,
                 budget: Budget, label: str):
    """The engine loop of :func:`solve`: each engine gets two thirds of what the stage has
    left (the last one all of it), starts from the best solution so far, and the loop stops
    at a proof.  Returns (best result or None, best bound or None, proven, whether the model
    was proven infeasible)."""
    best: EngineResult | None = None
    bound = None
    names = plan.engines
    for i, name in enumerate(names):
        if ctx.guard():
            break
        rest = budget.left()
        if i > 0 and rest < 0.01:
            break       # the stage's budget is spent (deterministically)
        share = budget.allot(rest * 2 / 3 if i < len(names) - 1 else rest)
        ctx.say(f"{label}: {name} on {_describe(model)}")
        start = best.solution if best is not None and best.solution is not None else hint
        try:
            r = plan.run(name, model, weights, caps, start, share, ctx, label)
        except ValueError as e:     # e.g. negative byte counts from an unknown dim
            runs.append({**plan.entry(name), "skipped": str(e)})
            continue
        if "skipped" in r.stats:
            runs.append({**plan.entry(name), "skipped": r.stats["skipped"]})
            continue
        r.stats["engine"] = name
        runs.append({**plan.entry(name), **{
            k: r.stats[k] for k in ("status", "variables", "wall", "deterministic_time",
                                    "conflicts") if k in r.stats}})
        if r.infeasible:
            runs[-1]["model_infeasible"] = True
            return best, bound, False, True
        if r.bound is not None:
            bound = r.bound if bound is None else max(bound, r.bound)
        if r.solution is not None and (best is None or best.solution is None
                                       or r.value < best.value):
            best = r
        if r.optimal:
            runs[-1]["proved"] = True
            return best, bound, True, False
    return best, bound, False, False


def _describe(model) -> str:
    if isinstance(model, Encoding):
        return f"{model.problem.n} node(s), {model.K} slot(s), {model.nv:,} variables"
    return f"{model.p.n} node(s), {model.K} slot(s)"


def take(ctx: Search, runs: list[dict], r: EngineResult | None, red: Reduced | None) -> None:
    """Accept an engine's solution (expanded from units to nodes)."""
    if r is None or r.solution is None:
        return
    sol = r.solution
    if red is not None:
        sol = Solution(red.expand(sol.part_of), sol.part_device, sol.part_instance)
    ctx.accept(sol, "exact", runs)


def window_search(ctx: Search, runs: list[dict], R, mem, bounds: Bounds, term: str,
                  caps: dict[str, int], budget: Budget) -> None:
    """Large-neighbourhood search by windows of consecutive parts of the best answer: the
    nodes of parts ``a .. b`` may move to any slot in ``a .. b`` and any device they may
    use, every other node keeps its part; CP-SAT minimises ``term`` under ``caps``.  The
    windows slide over the answer (half overlapping) until ``budget`` is spent.  Improves,
    never proves."""
    k = 0
    while budget.left() > 0 and not ctx.guard():
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
        r = cpsat.solve(enc, {term: 1}, caps=caps, hint=best,
                        budget=budget.allot(WINDOW_SECONDS), seed=ctx.seed)
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
