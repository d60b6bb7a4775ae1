"""The algorithms a study can run, by name, all with one signature:
``run(problem, *, budget, seed) -> Solution`` (``budget``: the run's
:class:`~hetero_solve.budget.Budget`, made by the study from ``--time-limit`` or
``--work-limit`` once the problem is compiled).

Baselines and the heuristic ignore ``budget`` and ``seed`` (they are deterministic and run
to completion); ``cpsat`` and ``sat`` start from the heuristic's answer and refine it through
:func:`hetero_solve.pipeline.refine`, so their seconds include the heuristic; with optional
folds their status and lower bound hold over every fold choice (as ``solve``'s do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..algorithms.baselines import BASELINES
from ..algorithms.greedy import heuristic
from ..budget import Budget
from ..engines import ENGINES
from ..exact.folds import over_every_choice
from ..problem import Problem
from ..solution import Solution
from ..pipeline import refine

Runner = Callable[..., Solution]


class AlgorithmUnavailable(RuntimeError):
    """The algorithm is not part of this build (e.g. the exact engines); not a failure."""


@dataclass(frozen=True)
class Algorithm:
    name: str
    run: Runner
    uses_limit: bool           # the limit is part of the resume key only when the answer
                               # depends on it
    description: str


def _plain(fn: Callable[[Problem], Solution]) -> Runner:
    def run(problem: Problem, *, budget: Budget | None = None, seed: int = 0) -> Solution:
        return fn(problem)
    run.__name__ = f"run_{fn.__name__}"
    return run


def _exact(engine: str) -> Runner:
    def run(problem: Problem, *, budget: Budget | None = None, seed: int = 0) -> Solution:
        budget = budget if budget is not None else Budget.default()
        start = heuristic(problem)
        # With optional folds the row answers the problem as compiled, and its status and
        # bound are certified over every fold choice, as solve's are (docs/exact.md,
        # "Bounds over every fold choice"): a third of the budget is kept for that.
        folds = bool(problem.fold_options)
        try:
            sol = refine(problem, start, engine=engine,
                         budget=budget.allot(budget.share(2, 3)) if folds else budget,
                         seed=seed)
            if folds:
                sol = over_every_choice(problem, problem, sol, budget=budget, engine=engine,
                                        seed=seed)
        except ValueError as e:
            if "not available" in str(e):
                raise AlgorithmUnavailable(str(e)) from None
            raise
        if sol.algorithm in ("", "heuristic"):
            sol.algorithm = engine
        return sol
    run.__name__ = f"run_{engine}"
    return run


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("heuristic", _plain(heuristic), False,
              "ours: greedy closure, best of forward and backward passes"),
    # the engines that pick one solver (``auto`` mixes them), then every baseline
    *(Algorithm(e.name, _exact(e.name), True, f"ours: heuristic, then {e.description}")
      for e in ENGINES.values() if e.name in ("cpsat", "sat")),
    *(Algorithm(b.name, _plain(b.run), False, b.description) for b in BASELINES.values()),
]}

