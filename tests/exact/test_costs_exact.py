"""The cost terms (docs/costs.md: latency, throughput) and their exact solver.

Brute force (this file's oracle) enumerates every set partition with an acyclic quotient and
every device instance per part, keeps what the one validator accepts (support, pins, values,
memory, colocation, contiguous stages) and takes the best under the objective; the CP-SAT
model (``exact.costs``) must reach the same value on random graphs of up to 8 nodes with
random times, part costs, links, memory limits and colocation, and call it proven.
"""

from __future__ import annotations

import random

import pytest

from hetero_solve.costs import CostModel, Link
from support.brute import cost_brute_force
from hetero_solve.exact import refine
from hetero_solve.measures.costs import instance_loads, latency, time_per_sample
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import Solution, objective_key
from hetero_solve.validate import validate
from hetero_solve.budget import Budget
from support.problems import costed


def oracle(p):
    """The best valid answer by exhaustive search, or None (support/brute.py)."""
    return cost_brute_force(p)


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in zip(a, b))


@pytest.mark.parametrize("seed", range(60))
def test_cost_optimum_equals_brute_force(seed):
    p = costed(seed)
    if sum(d.instances for d in p.devices) ** p.n > 40_000:
        p.devices = [Device(d.name, d.memory, 1, d.enforce_values) for d in p.devices]
    best, want = oracle(p)
    if best is None:
        with pytest.raises(Exception):
            refine(p, None, budget=Budget.of(work_limit=5))
        return
    sol = refine(p, None, budget=Budget.of(work_limit=5))
    assert validate(p, sol) == []
    assert close(objective_key(p, sol), want), (p.objective.describe(), objective_key(p, sol), want)
    assert sol.status == "optimal"
    for term, bound in sol.stats["cost_bounds"].items():
        if term != "weighted":
            assert bound <= objective_key(p, sol)[p.objective.order.index(term)] + 1e-9


def test_latency_counts_each_transfer_once_per_reading_part():
    # 0 -> {1, 2}: t0 leaves ACC once (0.5 + 4/2) and is read by two CPU parts (free)
    p = make_problem(3, [(0, 1), (0, 2)], [[0], [1], [1]], ["ACC", "CPU"], tensor_bytes=4)
    p.costs = CostModel([[1.0, 9.0], [9.0, 2.0], [9.0, 3.0]], [0.25, 0.125],
                        [Link(bandwidth=2.0, latency=0.5), None])
    assert latency(p, [0, 1, 2], [0, 1, 1]) == 1 + 2 + 3 + 0.25 + 2 * 0.125 + 2.5
    assert latency(p, [0, 1, 1], [0, 1]) == 1 + 2 + 3 + 0.25 + 0.125 + 2.5
    # reading it on an accelerator costs its link too
    p.costs.links[1] = Link(bandwidth=4.0)
    assert latency(p, [0, 1, 2], [0, 1, 1]) == 1 + 2 + 3 + 0.25 + 2 * 0.125 + 2.5 + 2 * 1.0


def test_throughput_loads_count_in_and_out_per_instance():
    # ACC.0 runs 0 and 2, CPU runs 1: t0 out once, t1 in once on ACC; CPU pays nothing
    p = make_problem(3, [(0, 1), (1, 2), (0, 2)], [[0, 1], [1], [0, 1]],
                     [Device("ACC", instances=2), "CPU"], tensor_bytes=[3, 5, 1])
    p.costs = CostModel([[1.0, 4.0], [None, 2.0], [1.5, 4.0]], [0.0, 0.0], [Link(1.0), None])
    loads = instance_loads(p, [0, 1, 2], [0, 1, 0], [0, 0, 0])
    assert loads == {(0, 0): 1.0 + 1.5 + 3 + 5, (1, 0): 2.0}
    # on two accelerator instances, t0 leaves ACC.0 once (read by CPU and ACC.1)
    loads = instance_loads(p, [0, 1, 2], [0, 1, 0], [0, 0, 1])
    assert loads == {(0, 0): 1.0 + 3, (1, 0): 2.0, (0, 1): 1.5 + 3 + 5}
    assert time_per_sample(p, [0, 1, 2], [0, 1, 0], [0, 0, 1]) == 9.5


def test_contiguous_stages_and_colocation_are_judged():
    p = make_problem(3, [(0, 1), (1, 2)], [[0, 1], [1], [0, 1]], ["ACC", "CPU"])
    p.costs = CostModel([[1.0, 1.0], [None, 1.0], [1.0, 1.0]], [0, 0], [None, None],
                        contiguous=True)
    kinds = [v.kind for v in validate(p, Solution([0, 1, 2], [0, 1, 0], [0, 0, 0]))]
    assert kinds == ["stages"]
    p.costs.contiguous = False
    p.colocation = [[0, 1]]
    kinds = [v.kind for v in validate(p, Solution([0, 1, 2], [0, 1, 0], [0, 0, 0]))]
    assert kinds == ["colocation"]


@pytest.mark.parametrize("seed", range(40))
def test_assignment_model_equals_brute_force(seed):
    """Throughput alone, no part costs, memory that cannot bind: solved over instance
    assignments only (no slots), the parts built afterwards; up to 3 instances a device."""
    p = costed(1000 + seed)
    rng = random.Random(seed)
    p.devices = [Device(d.name, None, rng.choice([1, 2, 3]) if k == 0 else 1, d.enforce_values)
                 for k, d in enumerate(p.devices)]
    if sum(d.instances for d in p.devices) ** p.n > 40_000:
        p.devices = [Device(d.name, None, 1, d.enforce_values) for d in p.devices]
    p.costs.part_cost = [0.0] * len(p.devices)
    p.costs.contiguous = False
    p.objective = Objective(order=("throughput",))
    best, want = oracle(p)
    sol = refine(p, None, budget=Budget.of(work_limit=5))
    model_runs = [r for r in sol.stats["stages"][0]["runs"] if r.get("engine") == "cpsat (costs)"]
    assert model_runs[0]["slots"] == 0                   # the assignment model ran
    assert validate(p, sol) == []
    assert close(objective_key(p, sol), want)
    assert sol.status == "optimal"
