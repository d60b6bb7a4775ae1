"""The obvious answer a split must beat: the whole model on one device (docs/costs.md, "Never
slower than one device").

A device qualifies when it takes every node (pins included) and the whole model, one part on
one instance, fits its memory and breaks no other condition (the validator judges it).  Among
those, the best is the one with the smallest predicted latency (ties: priority order).  The
pipeline reports it beside every answer that has a cost model, and keeps it instead of an
answer the objective ranks below it.

>>> from hetero_solve.costs import CostModel
>>> from hetero_solve.problem import make_problem
>>> p = make_problem(2, [(0, 1)], [[0, 1], [0, 1]])
>>> p.costs = CostModel(node_time=[[1.0, 2.0], [1.0, 2.0]], part_cost=[0.5, 0.0],
...                     links=[None, None])
>>> best = best_single_device(p)
>>> best.device, best.latency
(0, 2.5)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..measures.costs import latency, time_per_sample
from ..problem import Problem
from ..solution import Solution
from ..validate import validate


@dataclass(frozen=True)
class SingleDevice:
    """The whole model on ``device`` (index): its predicted ``latency`` and time per sample
    (``throughput``), in the cost model's unit, and the answer itself."""

    device: int
    latency: float
    throughput: float
    solution: Solution

    def as_dict(self, problem: Problem) -> dict:
        """What ``partition.json`` says (``single_device``)."""
        return {"device": problem.devices[self.device].name, "latency": self.latency,
                "throughput": self.throughput}


def single_device(problem: Problem, d: int) -> Solution | None:
    """The whole model as one part on instance 0 of device ``d``, or ``None`` when ``d``
    refuses a node or the answer breaks a condition (memory)."""
    if problem.n == 0 or any(d not in allowed for allowed in problem.allowed):
        return None
    sol = Solution(part_of=[0] * problem.n, part_device=[d], part_instance=[0],
                   algorithm=f"single device ({problem.devices[d].name})", status="feasible")
    return None if validate(problem, sol) else sol


def best_single_device(problem: Problem) -> SingleDevice | None:
    """The qualifying device with the smallest predicted latency (module doc); ``None``
    without a cost model or when no device qualifies."""
    if problem.costs is None:
        return None
    best: SingleDevice | None = None
    for d in range(len(problem.devices)):
        sol = single_device(problem, d)
        if sol is None:
            continue
        t = latency(problem, sol.part_of, sol.part_device)
        if best is None or t < best.latency:
            best = SingleDevice(d, t, time_per_sample(problem, sol.part_of, sol.part_device,
                                                      sol.part_instance), sol)
    return best


__all__ = ["SingleDevice", "best_single_device", "single_device"]
