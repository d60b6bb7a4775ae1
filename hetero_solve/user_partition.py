"""Check a user-defined partition (hand-set affinities, another tool's answer), as Glow
validates user-defined partitions, and export it when it is valid.

The maps accepted and how a node -> device map becomes parts (``split``):
:mod:`hetero_solve.user_map`, which reads and judges them.

Either way the report also gives the fewest parts the user's device assignment allows and the
optimum hetero-solve finds with a free hand.  Violations come from the one validator,
:func:`hetero_solve.validate.validate`; a valid map is renumbered topologically and becomes a
:class:`~hetero_solve.result.Result`, exported like a solved one.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import onnx

from .budget import Budget, Limit
from .engines import check_engine
from .export.writer import write_result
from .errors import HeteroSolveError
from .model import ModelGraph
from .pipeline import initial_solution, prepare, refine, solve_prepared
from .problem import Objective, Problem
from .result import Result
from .rules import Rules
from .solution import Metrics, Solution, evaluate, normalize, objective_key
from .user_map import (AffinityError, Entry, UserMap, judge, judge_answer, place_folds,
                       read_affinity, user_solution)
from .validate import Violation, validate

__all__ = ["SPLITS", "AffinityError", "CheckReport", "Entry", "UserMap", "check_affinity",
           "fewest_for_devices", "judge", "judge_answer", "place_folds", "read_affinity",
           "user_solution"]

SPLITS = ("acyclic", "regions", "fewest")
Progress = Callable[[str], None]


@dataclass
class CheckReport:
    """The verdict on a user map.

    ``solution`` is the user's partition (as validated; renumbered topologically when valid),
    ``violations`` every violation found, ``result`` the exportable result when valid.
    ``device_partitions``: the fewest parts keeping the user's devices (None when a node is on
    a device that refuses it, or that search failed); ``optimum``: what ``hetero_solve.solve``
    finds (None when not asked for)."""
    source: str
    mode: str
    split: str
    problem: Problem
    solution: Solution
    metrics: Metrics
    violations: list[Violation]
    result: Result | None = None
    device_partitions: int | None = None
    device_status: str | None = None
    optimum: Result | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.violations

    @property
    def partitions(self) -> int:
        return self.metrics.partitions

    @property
    def optimum_partitions(self) -> int | None:
        return None if self.optimum is None else self.optimum.metrics.partitions

    def write(self, out_dir: str | os.PathLike, **kw) -> Path:
        """Export a valid map like a solved one (``partition.json``, part models, ...)."""
        if self.result is None:
            raise AffinityError(self.source, "the map is not valid: nothing to export")
        return write_result(self.result, out_dir, **kw)

    def as_dict(self) -> dict:
        opt = self.optimum
        return {
            "source": self.source, "mode": self.mode, "split": self.split, "valid": self.valid,
            "partitions": self.partitions, "objective": self.metrics.as_dict(),
            "violations": [v.as_dict() for v in self.violations],
            "device_partitions": self.device_partitions, "device_status": self.device_status,
            "optimum": None if opt is None else {"partitions": opt.metrics.partitions,
                                                 "status": opt.solution.status,
                                                 "objective": opt.metrics.as_dict()},
            "warnings": list(self.warnings)}


def fewest_for_devices(problem: Problem, node_device: list[int], *, engine: str = "auto",
                       budget: Budget | None = None, seed: int = 0,
                       progress: Progress | None = None) -> Solution:
    """The fewest parts that keep node ``v`` on ``node_device[v]`` (the solver with allowed
    devices restricted to those), within ``budget``.  Raises
    :class:`~hetero_solve.errors.InfeasibleError` when memory cannot hold them."""
    restricted = dataclasses.replace(problem, allowed=[(d,) for d in node_device])
    sol = initial_solution(restricted, engine=engine, budget=budget, seed=seed,
                           progress=progress)
    sol = refine(restricted, sol, engine=engine, budget=budget, seed=seed, progress=progress)
    return normalize(problem, sol)


def _fewest_for_map(problem: Problem, node_device: list[int], *, engine: str, budget: Budget,
                    seed: int, say: Progress, warnings: list[str]) -> Solution | None:
    """The fewest parts keeping every node on the map's device (``None``, with a warning,
    when no split does)."""
    say("searching the fewest parts for these devices")
    try:
        return fewest_for_devices(problem, node_device, engine=engine, budget=budget,
                                  seed=seed, progress=say)
    except HeteroSolveError as e:
        warnings.append(f"no split keeps every node on its device: {e}")
        return None


def _against_optimum(problem: Problem, sol: Solution, best: Result | None) -> Solution:
    """A valid map with the optimum's lower bound and part count, ``optimal`` when the
    optimum is proven and the map is as good."""
    if best is not None:
        sol.lower_bound = best.solution.lower_bound
        sol.stats["optimum_partitions"] = best.metrics.partitions
        if (best.solution.status == "optimal"   # over every fold choice (its problem)
                and objective_key(problem, sol) <= objective_key(best.problem, best.solution)):
            sol.status = "optimal"
    return sol


def check_affinity(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
                   rules: str | os.PathLike | dict | Rules,
                   affinity: str | os.PathLike | Mapping, *, dims: Mapping[str, int] | None = None,
                   shapes: Mapping[str, list[int]] | None = None, split: str = "acyclic", optimum: bool = True, engine: str = "auto",
                   time_limit: float | None = None, work_limit: float | None = None,
                   seed: int = 0, progress: Progress | None = None,
                   objective: Objective | None = None, costs=None) -> CheckReport:
    """Validate a user-defined map against ``model`` and ``rules`` (``hetero-solve check``).
    ``objective`` overrides the rule file's (the comparison's ranking); ``costs``: measured
    times, as :func:`hetero_solve.solve` takes them.

    Bad input (unreadable files, unknown or missing nodes, unknown devices) raises a
    :class:`~hetero_solve.errors.HeteroSolveError`; violations of the five conditions are
    listed in the report.  ``optimum``: also run ``hetero_solve.solve`` for comparison.
    Nothing is written; :meth:`CheckReport.write` exports a valid map.  ``time_limit`` or
    ``work_limit`` (as :func:`hetero_solve.solve`'s) is one budget for both solves (the
    fewest parts for the map's devices, then the optimum), made once the model is prepared.

    >>> rep = check_affinity("examples/seed000.onnx", "rules/seed000.yaml",
    ...                      {"1": 0, "2": 0, "4": 1, "3": 2, "5": 2, "6": 2, "7": 2})  # doctest: +SKIP
    >>> rep.valid, rep.partitions, rep.optimum_partitions                                # doctest: +SKIP
    (True, 3, 3)
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    check_engine(engine)
    limit = Limit.of(time_limit, work_limit)    # a bad limit fails before any work
    say = progress or (lambda _msg: None)
    umap = read_affinity(affinity)
    prepared = prepare(model, rules, dims=dims, shapes=shapes, progress=say, objective=objective,
                       costs=costs)
    budget = limit.start()          # the model is prepared: the clock starts
    mg, rule_set, base = prepared.model_graph, prepared.rules, prepared.problem
    warnings = list(base.info.warnings)
    say("validating the map")
    problem, resolved, sol, violations = judge(mg, base, umap, split, warnings)
    node_device = sol.node_device()
    refused = any(node_device[v] not in problem.allowed[v] for v in range(problem.n))

    device_sol = None
    if not refused:
        device_sol = _fewest_for_map(problem, node_device, engine=engine,
                                     budget=budget.split(2) if optimum else budget, seed=seed,
                                     say=say, warnings=warnings)
    device_status = None if device_sol is None else device_sol.status
    if umap.mode == "device" and split == "fewest":
        named = next((problem.names[v] for v, r in enumerate(resolved) if r[2] is not None), None)
        if named is not None:
            raise AffinityError(umap.source, f"[{named!r}] names a device instance: instances "
                                             "need --split acyclic or regions (the fewest-parts "
                                             "search places instances itself)")
        if device_sol is not None:
            sol = device_sol
            sol.algorithm = "user"
            sol.stats = {"user_map": umap.source, "mode": umap.mode, "split": split}
            violations = validate(problem, sol, require_order=False)
    else:
        split = "given" if umap.mode == "part" else split

    best = None
    if optimum:
        say("solving for the optimum")
        try:
            best = solve_prepared(prepared, engine=engine, budget=budget, seed=seed,
                                  progress=say)
        except HeteroSolveError as e:
            warnings.append(f"hetero-solve found no partition to compare with: {e}")

    result = None
    if not violations:
        sol = _against_optimum(problem, normalize(problem, sol), best)
        metrics = evaluate(problem, sol)
        result = Result(mg, rule_set, problem, sol, metrics, {}, list(warnings))
    else:
        metrics = evaluate(problem, sol)
    return CheckReport(umap.source, umap.mode, split, problem, sol, metrics, violations, result,
                       None if device_sol is None else device_sol.num_parts, device_status,
                       best, warnings)
