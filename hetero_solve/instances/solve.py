"""Solve an instance file (a problem without an ONNX model) and write its answer.

``hetero-solve INSTANCE.json --objective throughput|latency [--contiguous] -o OUT`` runs
:func:`solve_instance` then :func:`write_instance`: the problem read from the file goes through
the pipeline every model goes through (:func:`hetero_solve.pipeline.solve_problem`: heuristic,
the exact engine's stages, validation) and its answer through the one writer of
``partition.json`` (:func:`hetero_solve.export.manifest.build_manifest`): the parts (device,
instance, nodes by the instance's ids, each instance's load), ``objective`` the values
(``throughput`` = time per sample, ``latency``, and the counting terms), ``lower_bound`` what
is proven about the objective, and ``status`` ``optimal`` when it is proven.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from ..budget import Limit
from ..export.manifest import build_manifest
from ..export.writer import MANIFEST, write_answer, write_json
from ..pipeline import solve_problem
from ..problem import Objective
from ..result import Result
from ..solution import Solution, evaluate
from .tarnawski import InstanceError, load_instance

OBJECTIVES = ("throughput", "latency")


def solve_instance(path: str | os.PathLike, objective: str = "throughput", *,
                   contiguous: bool = False, time_limit: float | None = None,
                   work_limit: float | None = None, seed: int = 0, engine: str = "auto",
                   progress=None) -> Result:
    """Read an instance and solve it as any problem (module doc).

    Parameters
    ----------
    path : path-like
        An instance file (:mod:`hetero_solve.instances.tarnawski`'s format).
    objective : {"throughput", "latency"}
    contiguous : bool
        At most one part per device instance (pipeline stages).
    time_limit, work_limit : float, optional
        Wall-clock seconds (default 10), or deterministic seconds with no clock
        (:class:`~hetero_solve.budget.Budget`): one budget for the whole solve.
    seed : int
    engine : str
        As :func:`hetero_solve.solve` (``"sat"`` says in one line that it has no cost terms).
    progress : callable or None

    Returns
    -------
    Result
        ``model_graph`` and ``rules`` ``None``, ``instance`` the file; ``seconds`` the
        pipeline's stage times.
    """
    if objective not in OBJECTIVES:
        raise InstanceError(path, "", f"unknown objective {objective!r}: an instance is "
                                      f"solved for {' or '.join(OBJECTIVES)}")
    limit = Limit.of(time_limit, work_limit)    # a bad limit fails before any work
    t0 = time.perf_counter()
    problem = load_instance(path, Objective(order=(objective,)), contiguous=contiguous)
    seconds = {"load": time.perf_counter() - t0}
    budget = limit.start()          # the problem is read: the clock starts
    start = None
    if not contiguous and objective == "throughput" and engine != "heuristic":
        # contiguous stages are answers too, and proven fast: the free search starts there
        staged = load_instance(path, problem.objective, contiguous=True)
        _, start, _, _ = solve_problem(staged, engine=engine, budget=budget.split(4),
                                       seed=seed, progress=progress)
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        seconds[name] = now - clock[0]
        clock[0] = now

    problem, sol, metrics, single = solve_problem(problem, start, engine=engine, budget=budget,
                                                  seed=seed, progress=progress, lap=lap)
    sol = first_instances(sol)
    metrics = evaluate(problem, sol)
    lap("validate")
    warnings = list(problem.info.warnings)
    if budget.warning():     # the clock, not the deterministic budget, ended some work
        sol.stats.update(deterministic=False, stopped_by=budget.stopped_by)
        warnings.append(budget.warning())
    return Result(None, None, problem, sol, metrics, seconds, warnings,
                  explanation=sol.stats.pop("explain", None), instance=str(path),
                  single_device=single)


def first_instances(sol: Solution) -> Solution:
    """``sol`` with each device's instances renumbered in the order its parts come (the
    instances of a device are identical, so the answer is the same): a one-part answer is on
    ``FPGA.0``, not on whichever instance the solver picked."""
    renumbered: dict[tuple[int, int], int] = {}
    used: dict[int, int] = {}
    instances = []
    for d, i in zip(sol.part_device, sol.part_instance):
        if (d, i) not in renumbered:
            renumbered[(d, i)] = used.get(d, 0)
            used[d] = renumbered[(d, i)] + 1
        instances.append(renumbered[(d, i)])
    return replace(sol, part_instance=instances)


def write_instance(result: Result, out_dir: str | os.PathLike) -> Path:
    """Write ``partition.json`` into ``out_dir`` (new, empty or a previous answer; whole or
    not at all)."""
    manifest = build_manifest(result, files=False)
    manifest["files"] = [MANIFEST]
    return write_answer(out_dir, lambda tmp: write_json(tmp / MANIFEST, manifest),
                        protected=[result.instance])
