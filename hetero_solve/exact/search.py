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
from ..solution import Solution, evaluate, normalize, objective_key
from ..validate import validate
from ..fitting.bounds import MemoryBounds, memory_bounds
from ..fitting.floors import binding_devices
from .analysis import device_sets
from .bounds import Bounds, lower_bounds

FULL_K_NODES = 100         # up to this many nodes, stages that may need more parts use K = n
STAGE_WEIGHT = {"fallback": 1, "partitions": 2, "transfer": 1}   # shares of the time budget
MEMORY_STAGE_WEIGHT = {"fallback": 2, "partitions": 2, "transfer": 1}   # ... when memory binds

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
    """What one stage tried, proved and found (docs/exact.md, "Stages").

    ``proven``: the stage's term is optimal (for a lexicographic objective, given that every
    earlier term is); ``method``: how it was settled (``"bound"``, ``"relaxation"``,
    ``"sequence"``, an engine's name, ``"unproven"``, ``"skipped"``); ``before``/``after``:
    the term's value on the best answer before and after the stage (``after`` is ``None`` when
    no valid answer exists yet: then the stage caps nothing).  The proofs it adds:
    ``parts_bound`` (a lower bound on the parts of every answer as good on the earlier terms,
    0 for none), ``fallback_bound`` (no answer as good on the earlier terms has less
    fallback), ``parts_view`` (the device sets and bounds the parts bound was computed in),
    ``parts_proof`` (how the number of parts was proven), ``units`` (nodes after contracting
    chains, when it did).  ``runs``: one JSON-able entry per solver run or construction, in
    order."""

    stage: str
    proven: bool = False
    method: str = ""
    before: int | None = None
    after: int | None = None
    seconds: float = 0.0
    runs: list[dict] = field(default_factory=list)
    parts_bound: int = 0
    fallback_bound: int = 0
    parts_view: PartsView | None = None
    parts_proof: str | None = None
    units: int | None = None
    listed: bool = True            # False: no valid answer yet after it (it capped nothing)

    def settle(self, proven: bool, method: str) -> StageRecord:
        """Say how the stage ended (returns the record, for ``return rec.settle(...)``)."""
        self.proven, self.method = proven, method
        return self

    def as_dict(self) -> dict:
        """The entry of ``stats["stages"]`` (``partition.json``'s ``solver.stages``)."""
        out: dict = {"stage": self.stage}
        if self.stage != "weighted":
            out |= {"before": self.before, "after": self.after}
        return out | {"proven": self.proven, "method": self.method, "seconds": self.seconds,
                      "runs": self.runs}


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
    _sets: dict = field(default_factory=dict)
    _bounds: dict = field(default_factory=dict)
    _memory_bounds: MemoryBounds | None = None

    @classmethod
    def begin(cls, problem: Problem, start: Solution, engine: str, budget: Budget,
              seed: int, progress, workers: int,
              R: list[tuple[int, ...]] | None = None) -> Search:
        """The context before any stage: ``start`` is the best answer (an invalid start is
        only a hint: it loses to any valid answer); ``budget``: this refinement's (a child of
        the call's, :meth:`~hetero_solve.budget.Budget.allot`: what it spends, the call
        spends).  ``R``: the device sets (``fixed=False``) when the caller computed them."""
        t0 = time.perf_counter()
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

    def share(self, stages_left: int) -> float:
        """This stage's share of the budget left (deterministic seconds): the number of
        parts gets twice the share of the other terms."""
        order = list(self.p.objective.order) if self.p.objective.lexicographic else ["weighted"]
        rest = order[len(order) - stages_left:]
        weight = MEMORY_STAGE_WEIGHT if self.sets(fixed=False)[1] else STAGE_WEIGHT
        w = [weight.get(t, 1) for t in rest]
        return self.budget.share(w[0], max(1, sum(w)))

    def allot(self, work: float) -> Budget:
        """A child of the budget with at most ``work`` deterministic seconds (one run's)."""
        return self.budget.allot(work)

    def charge(self, stats: dict) -> None:
        """Count a run's deterministic work (its solver's and its build's) against the
        budget, and whether the clock stopped it (an engine given :meth:`allot` charges
        its own)."""
        self.budget.charge_run(stats)

    def counted(self, build, *args, **kw):
        """``build(*args, **kw)`` (:func:`~hetero_solve.fitting.realize.realize`,
        :func:`~hetero_solve.fitting.realize.fit_by_runs`) with its
        steps counted against the budget (:class:`~hetero_solve.budget.Steps`)."""
        steps = Steps()
        try:
            return build(*args, steps=steps, **kw)
        finally:
            self.budget.charge(steps.seconds)

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
