"""Solve an instance file (a problem without an ONNX model) and write its answer.

``hetero-solve INSTANCE.json --objective throughput|latency [--contiguous] -o OUT`` runs
:func:`solve_instance` then :func:`write_instance`: ``OUT/partition.json`` holds the parts
(device, instance, nodes by the instance's ids, each instance's load), ``objective`` the
values (``throughput`` = time per sample, ``latency``, and the counting terms), ``lower_bound``
what is proven about the objective, and ``status`` ``optimal`` when it is proven.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..budget import Budget
from ..measures import quotient_edges
from ..measures.costs import instance_loads
from ..problem import Objective, Problem
from ..solution import Metrics, Solution, evaluate
from ..validate import check, validate
from .tarnawski import load_instance

OBJECTIVES = ("throughput", "latency")


@dataclass
class InstanceResult:
    """A solved instance: the problem, the answer, its measures and the seconds spent."""
    path: str
    problem: Problem
    solution: Solution
    metrics: Metrics
    seconds: float


def start_solution(problem: Problem) -> Solution | None:
    """Everything in one part on the last device (the CPU: it takes every node), when that
    is a valid answer."""
    d = len(problem.devices) - 1
    if problem.n == 0 or any(d not in a for a in problem.allowed):
        return None
    sol = Solution([0] * problem.n, [d], [0], algorithm="one part on " + problem.devices[d].name)
    return None if validate(problem, sol) else sol


def solve_instance(path: str | os.PathLike, objective: str = "throughput", *,
                   contiguous: bool = False, time_limit: float | None = None,
                   work_limit: float | None = None, seed: int = 0,
                   progress=None) -> InstanceResult:
    """Read an instance, minimise ``objective`` with CP-SAT, validate the answer.

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
    progress : callable or None

    Returns
    -------
    InstanceResult
    """
    from ..exact.costs import refine_costs
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    Budget.of(time_limit, work_limit)   # bad limits fail before any work
    t0 = time.perf_counter()
    problem = load_instance(path, Objective(order=(objective,)), contiguous=contiguous)
    budget = Budget.of(time_limit, work_limit)
    start = start_solution(problem)
    if not contiguous and objective == "throughput":
        # contiguous stages are answers too, and proven fast: the free search starts there
        staged = load_instance(path, problem.objective, contiguous=True)
        start = refine_costs(staged, start, budget=budget.split(4), seed=seed,
                             progress=progress)
    sol = refine_costs(problem, start, budget=budget, seed=seed, progress=progress)
    check(problem, sol)
    return InstanceResult(str(path), problem, sol, evaluate(problem, sol),
                          time.perf_counter() - t0)


def instance_manifest(result: InstanceResult) -> dict:
    """The content of ``partition.json`` for an instance (module doc)."""
    p, sol, m = result.problem, result.solution, result.metrics
    loads = instance_loads(p, sol.part_of, sol.part_device, sol.part_instance)
    parts = []
    for k, nodes in enumerate(sol.parts()):
        d, i = sol.part_device[k], sol.part_instance[k]
        parts.append({"id": k, "device": p.devices[d].name, "instance": i,
                      "nodes": sorted(p.graph_index[v] for v in nodes),
                      "node_names": [p.names[v] for v in nodes],
                      "memory": m.part_memory[k], "instance_load": loads[(d, i)]})
    stats = dict(sol.stats)
    return {
        "version": 1, "instance": result.path, "format": p.info.format,
        "status": sol.status,
        "objective": m.as_dict(),
        "objective_spec": p.objective.describe(),
        "lower_bound": stats.pop("cost_bounds", {}),
        "time_unit": p.costs.unit or "as in the instance",
        "contiguous": p.costs.contiguous,
        "partitions": parts,
        "edges": [list(e) for e in sorted(quotient_edges(p, sol.part_of))],
        "devices": [{"name": d.name, "memory": d.memory, "instances": d.instances}
                    for d in p.devices],
        "solver": {"algorithm": sol.algorithm, "seconds": round(result.seconds, 4), **stats},
    }


def write_instance(result: InstanceResult, out_dir: str | os.PathLike) -> Path:
    """Write ``partition.json`` into ``out_dir`` (new, empty or a previous answer; whole or
    not at all)."""
    from ..export.writer import MANIFEST, write_json, write_answer
    manifest = instance_manifest(result)
    manifest["files"] = [MANIFEST]
    return write_answer(out_dir, lambda tmp: write_json(tmp / MANIFEST, manifest),
                        protected=[result.path])
