"""The search context every stage of :func:`hetero_solve.exact.refine` shares, and the record
each stage returns.

:class:`Search` holds what the stages share and nothing else: the problem and the options
(engine, seed, workers), the budget (:class:`~hetero_solve.budget.Budget`: deterministic
work and the deadline), the best answer so far (changed only through :meth:`Search.accept`: valid and
strictly better), and the device sets and bounds computed once.  What a stage tried, proved and
found comes back as a :class:`StageRecord`; the report step (:mod:`.report`) derives the
status, the bounds and the explanation from those records alone (docs/exact.md, "What it
returns").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..budget import Budget, Steps
from ..problem import Problem
from ..solution import Solution, evaluate, normalize, objective_key, objective_term
from ..validate import validate
from ..fitting.bounds import MemoryBounds, memory_bounds
from ..fitting.floors import binding_devices
from .analysis import device_sets
from .bounds import Bounds, lower_bounds

FULL_K_NODES = 100         # up to this many nodes, stages that may need more parts use K = n
STAGE_WEIGHT = {"fallback": 1, "partitions": 2, "transfer": 1}   # shares of the time budget
MEMORY_STAGE_WEIGHT = {"fallback": 2, "partitions": 2, "transfer": 1}   # ... when memory binds
TRANSFER_SHARE = 1 / 3     # at most this share of the work budget goes to the transfer stage

#: Up to this many nodes the report's bounds cost milliseconds: computed even past the
#: deadline (a true lower bound beats "1"); above, they wait for no deadline.
CHEAP_BOUNDS_NODES = 2_000

INVALID = (float("inf"),)  # the objective key of an invalid answer: worse than any valid one


@dataclass
class PartsView:
    """The device sets behind the parts bound: ``R``, their :class:`.bounds.Bounds` (``None``:
    the answer has one part, the least any problem with a node needs, so none was computed),
    and whether fallback 0 was built into ``R`` (``fixed``)."""

    R: list[tuple[int, ...]]
    bounds: Bounds | None
    fixed: bool


@dataclass
class StageRecord:
    """What one stage tried, proved and found (docs/exact.md, "Stages"), the same for every
    term.

    ``proven``: the stage's term is optimal (for a lexicographic objective, given that every
    earlier term is); ``method``: how it was settled (``"bound"``, ``"relaxation"``,
    ``"sequence"``, an engine's name, ``"unproven"``, ``"skipped"``); ``before``/``after``:
    the term's value on the best answer before and after the stage (``after`` is ``None`` when
    no valid answer exists yet: then the stage caps nothing).  ``bound``: a true lower bound
    on the term among the answers as good on the earlier terms (``None``: none known);
    ``resolution``: how much rounding the model that proved it can hide (times are scaled to
    integers on the slot model); ``view``: the device sets and bounds the bound was computed
    in, when the explanation reads them; ``model``: ``"slots"`` when the stage ran on the slot
    model (:mod:`..costs`); ``units``: nodes after contracting chains, when it did.
    ``runs``: one JSON-able entry per solver run or construction, in order."""

    stage: str
    proven: bool = False
    method: str = ""
    before: float | None = None
    after: float | None = None
    seconds: float = 0.0
    runs: list[dict] = field(default_factory=list)
    bound: float | None = None
    resolution: float = 0.0
    view: PartsView | None = None
    model: str = ""
    units: int | None = None
    listed: bool = True            # False: no valid answer yet after it (it capped nothing)

    def settle(self, proven: bool, method: str) -> StageRecord:
        """Say how the stage ended (returns the record, for ``return rec.settle(...)``)."""
        self.proven, self.method = proven, method
        return self

    def raise_bound(self, bound: float) -> None:
        """Keep the larger of the two lower bounds."""
        self.bound = bound if self.bound is None else max(self.bound, bound)

    def as_dict(self) -> dict:
        """The entry of ``stats["stages"]`` (``partition.json``'s ``solver.stages``)."""
        out: dict = {"stage": self.stage}
        if self.stage != "weighted":
            out |= {"before": self.before, "after": self.after}
        out |= {"proven": self.proven, "method": self.method, "seconds": self.seconds}
        if self.bound is not None:
            out |= {"bound": self.bound, "resolution": self.resolution}
        return out | {"runs": self.runs}


@dataclass
class Task:
    """What the loop asks of one stage: minimise ``weights`` (``{term: 1}``, or a weighted
    objective's integer weights; ``label`` names the stage) within ``budget`` (a child of the
    refinement's: what it spends, the refinement spends), the earlier terms capped (``caps``);
    ``earlier_proven``: every earlier term is proven."""

    label: str
    weights: dict[str, int]
    budget: Budget
    caps: dict[str, int]
    earlier_proven: bool


@dataclass
class Search:
    """The shared state of one refinement (module doc): options, budget, best answer, and
    the device sets and bounds computed once.  Build it with :meth:`begin`."""

    p: Problem
    engine: str
    budget: Budget                 # this refinement's (hetero_solve.budget)
    seed: int
    say: Callable[[str], None]
    workers: int
    start: Solution                # normalized
    heuristic_parts: int
    best: Solution
    best_key: tuple
    work: float                    # deterministic seconds for every stage (at the start)
    t0: float = field(default_factory=time.perf_counter)
    slots: object = None           # the slot model the cost stages share (.stages.costs)
    _sets: dict = field(default_factory=dict)
    _bounds: dict = field(default_factory=dict)
    _memory_bounds: MemoryBounds | None = None

    @classmethod
    def begin(cls, problem: Problem, start: Solution | None, engine: str, budget: Budget,
              seed: int, progress, workers: int,
              R: list[tuple[int, ...]] | None = None) -> Search:
        """The context before any stage: ``start`` is the best answer (an invalid start is
        only a hint: it loses to any valid answer); ``budget``: this refinement's (a child of
        the call's, :meth:`~hetero_solve.budget.Budget.allot`: what it spends, the call
        spends).  ``R``: the device sets (``fixed=False``) when the caller computed them."""
        t0 = time.perf_counter()
        if start is None:        # a hint only (invalid when the problem needs more parts)
            start = Solution([0] * problem.n, [problem.allowed[0][0] if problem.n else 0], [0],
                             algorithm="none")
        first = normalize(problem, start)
        key = objective_key(problem, first) if not validate(problem, first) else INVALID
        ctx = cls(problem, engine, budget, seed, progress or (lambda _m: None), workers,
                  start=first,
                  heuristic_parts=start.stats.get("heuristic_partitions", first.num_parts),
                  best=first, best_key=key, work=budget.left(), t0=t0)
        if R is not None:
            ctx._sets[False] = (R, binding_devices(problem, R))
        return ctx

    # -- the best answer ------------------------------------------------------------------
    @property
    def valid(self) -> bool:
        """The best answer so far is valid (an invalid start proves nothing, caps nothing)."""
        return self.best_key != INVALID

    def metrics(self, sol: Solution | None = None) -> dict[str, int]:
        return evaluate(self.p, sol or self.best).as_dict()

    def value(self, weights: dict[str, int]) -> float:
        """A stage's objective, ``Σ weight * term``, on the best answer (exact, not scaled)."""
        return sum(w * objective_term(self.p, self.best, t) for t, w in weights.items())

    def accept(self, sol: Solution | None, algorithm: str, runs: list[dict]) -> bool:
        """Keep ``sol`` when it is valid and strictly better under the objective (a rejected
        invalid one is noted in ``runs``: a bug in a model must never reach the user)."""
        if sol is None:
            return False
        sol = normalize(self.p, sol)
        sol.algorithm = algorithm
        bad = validate(self.p, sol)
        if bad:
            runs.append({"rejected": algorithm, "violations": [str(v) for v in bad[:3]]})
            return False
        key = objective_key(self.p, sol)
        if key < self.best_key:
            self.best, self.best_key = sol, key
            return True
        return False

    # -- the budget (hetero_solve.budget) --------------------------------------------------
    @property
    def spent(self) -> float:
        """Deterministic seconds this refinement has spent so far."""
        return self.budget.spent

    @property
    def deterministic(self) -> bool:
        """No work of this call was cut by the clock."""
        return self.budget.deterministic

    def stage_budget(self, label: str, stages_left: int) -> Budget:
        """The budget of the stage ``label`` with ``stages_left`` stages left (it included): a
        child of the refinement's with the stage's share of what is left (the number of parts
        twice the other terms' share, fallback too when memory binds); transfer, a
        tie-breaker, at most :data:`TRANSFER_SHARE` of the refinement's work."""
        order = list(self.p.objective.order) if self.p.objective.lexicographic else ["weighted"]
        rest = order[len(order) - stages_left:]
        weight = MEMORY_STAGE_WEIGHT if self.sets(fixed=False)[1] else STAGE_WEIGHT
        w = [weight.get(t, 1) for t in rest]
        work = self.budget.share(w[0], max(1, sum(w)))
        if label == "transfer":
            work = min(work, self.work * TRANSFER_SHARE)
        return self.budget.allot(work)

    @staticmethod
    def counted(within: Budget, build, *args, **kw):
        """``build(*args, **kw)`` (:func:`~hetero_solve.fitting.realize.realize`,
        :func:`~hetero_solve.fitting.realize.fit_by_runs`) with its steps counted against
        ``within`` (:class:`~hetero_solve.budget.Steps`)."""
        steps = Steps()
        try:
            return build(*args, steps=steps, **kw)
        finally:
            within.charge(steps.seconds)

    def guard(self) -> bool:
        """True when the deadline has passed (:meth:`~hetero_solve.budget.Budget.out_of_time`):
        the run stops here and is no longer deterministic."""
        return self.budget.out_of_time()

    # -- what is computed once ------------------------------------------------------------
    def sets(self, fixed: bool) -> tuple[list[tuple[int, ...]], list[int]]:
        """Device sets and the devices whose memory can bind (computed once per kind)."""
        if fixed not in self._sets:
            R = device_sets(self.p, fixed=fixed)
            self._sets[fixed] = (R, binding_devices(self.p, R))
        return self._sets[fixed]

    def bounds(self, fixed: bool) -> Bounds:
        """:func:`.bounds.lower_bounds` within :meth:`sets` (computed once per kind, and only
        when a stage needs it: on a 100,000-node graph it costs more than a second)."""
        if fixed not in self._bounds:
            self._bounds[fixed] = lower_bounds(self.p, *self.sets(fixed))
        return self._bounds[fixed]

    def bounds_in_time(self, fixed: bool) -> Bounds | None:
        """:meth:`bounds`, or ``None`` when they are not computed yet and the deadline has
        passed (the report's bounds are inside the budget too), unless the problem is small
        enough for them to cost milliseconds (:data:`CHEAP_BOUNDS_NODES`)."""
        if fixed not in self._bounds and self.p.n > CHEAP_BOUNDS_NODES and self.guard():
            return None
        return self.bounds(fixed)

    def memory_bounds_in_time(self) -> MemoryBounds | None:
        """:meth:`memory_bounds`, or ``None`` when not computed yet and the deadline has
        passed (small problems: as :meth:`bounds_in_time`)."""
        if self._memory_bounds is None and self.p.n > CHEAP_BOUNDS_NODES and self.guard():
            return None
        return self.memory_bounds()

    def view(self, fixed: bool) -> tuple[list[tuple[int, ...]], list[int], Bounds]:
        """:meth:`sets` and :meth:`bounds`."""
        return (*self.sets(fixed), self.bounds(fixed))

    def memory_bounds(self) -> MemoryBounds:
        """:func:`~hetero_solve.fitting.bounds.memory_bounds` for the device sets of every answer (computed once)."""
        if self._memory_bounds is None:
            self._memory_bounds = memory_bounds(self.p, self.sets(fixed=False)[0])
        return self._memory_bounds


def unbounded_K(n: int, parts: int) -> tuple[int, bool]:
    """Slots for a stage whose optimum may use more parts than the best answer, and whether
    they are complete (docs/exact.md, "Slots")."""
    if n <= FULL_K_NODES:
        return max(n, 1), True
    return parts, False
