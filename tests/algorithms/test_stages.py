"""hetero_solve.algorithms.stages: the best split of one order into pipeline stages, held to an
enumeration of every split of that order, to the problem's own load measure and validator, and
to brute force (a heuristic never claims below the optimum)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from hetero_solve.algorithms import stages as st
from hetero_solve.costs import CostModel, Link
from hetero_solve.measures.costs import time_per_sample
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import Solution
from hetero_solve.validate import validate
from support.brute import cost_brute_force
from support.generators import random_small

THROUGHPUT = Objective(order=("throughput",))


def staged_problem(seed: int):
    """A small random problem with throughput costs, links, instances, sometimes memory
    limits, a colocation pair and contiguous stages."""
    rng = random.Random(seed)
    p = random_small(seed, n=rng.randint(3, 7))
    D = len(p.devices)
    p.devices = [Device(d.name, memory=d.memory, instances=rng.randint(1, 3),
                        enforce_values=d.enforce_values) for d in p.devices]
    p.costs = CostModel(
        node_time=[[round(rng.uniform(0.1, 3.0), 3) for _ in range(D)] for _ in range(p.n)],
        part_cost=[round(rng.uniform(0, 0.5), 2) for _ in range(D)],
        links=[None if d == D - 1 else Link(bandwidth=rng.choice([1.0, 4.0]),
                                            latency=round(rng.uniform(0, 0.3), 2))
               for d in range(D)],
        contiguous=True)
    if seed % 2:
        a, b = rng.sample(range(p.n), 2)
        if set(p.allowed[a]) & set(p.allowed[b]):
            p.colocation = [[a, b]]
    p.objective = THROUGHPUT
    return p


def every_split_of_the_order(p) -> float:
    """The smallest time per sample over every split of the programme's order into segments,
    each on any device, instances used at most as many as each device has: plain enumeration,
    loads by the problem's own measure."""
    group, m = st._groups(p)
    order = st._group_order(p, group, m)
    at = {g: k for k, g in enumerate(order)}
    pos = [at[g] for g in group]
    D = len(p.devices)
    best = float("inf")
    for cuts in itertools.chain.from_iterable(
            itertools.combinations(range(1, m), r) for r in range(m)):
        bounds = [0, *cuts, m]
        k = len(bounds) - 1
        part_of = [next(q for q in range(k) if bounds[q] <= x < bounds[q + 1]) for x in pos]
        for devices in itertools.product(range(D), repeat=k):
            if any(devices.count(d) > p.devices[d].instances for d in range(D)):
                continue
            used: dict[int, int] = {}
            inst = []
            for d in devices:
                inst.append(used.get(d, 0))
                used[d] = inst[-1] + 1
            sol = Solution(part_of, list(devices), inst)
            if validate(p, sol):
                continue
            best = min(best, time_per_sample(p, part_of, list(devices), inst))
    return best


@pytest.mark.parametrize("seed", range(60))
def test_the_best_split_of_the_order_found_and_measured_exactly(seed):
    p = staged_problem(seed)
    sol = st.pipeline_stages(p)
    group, m = st._groups(p)
    if st._group_order(p, group, m) is None:    # the colocation pair closes a cycle
        assert sol is None
        return
    enumerated = every_split_of_the_order(p)
    if sol is None:
        # the programme's memory figure is an upper bound, so it may miss a tight fit; it
        # never misses when nothing is limited
        assert any(d.memory is not None for d in p.devices) or enumerated == float("inf")
        return
    assert validate(p, sol) == []
    value = time_per_sample(p, sol.part_of, sol.part_device, sol.part_instance)
    if all(d.memory is None for d in p.devices):
        assert value == pytest.approx(enumerated, abs=1e-9)
    else:
        assert value >= enumerated - 1e-9
    if sum(d.instances for d in p.devices) ** p.n <= 40_000:
        optimum, _ = cost_brute_force(p)
        best = time_per_sample(p, optimum.part_of, optimum.part_device, optimum.part_instance)
        assert value >= best - 1e-9          # a heuristic: never below the optimum


def test_the_crossing_table_equals_the_walk():
    """Every segment's link time from the rectangles equals the tensors counted one by one."""
    for seed in range(20):
        p = staged_problem(seed)
        group, m = st._groups(p)
        order = st._group_order(p, group, m)
        if order is None:
            continue
        at = {g: k for k, g in enumerate(order)}
        pos = np.array([at[g] for g in group])
        for d, link in enumerate(p.costs.links):
            if link is None:
                continue
            table = st._crossing(p, pos, m, d)
            for i in range(m):
                for j in range(i + 1, m + 1):
                    inside = {v for v in range(p.n) if i <= pos[v] < j}
                    walked = sum(p.costs.tensor_time(d, t, p.tensor_bytes)
                                 for t, u in enumerate(p.tensor_producer)
                                 if u >= 0 and p.tensor_consumers[t]
                                 and 0 < len(inside & {u, *p.tensor_consumers[t]})
                                 < len({u, *p.tensor_consumers[t]}))
                    assert table[i, j] == pytest.approx(walked, abs=1e-9), (seed, d, i, j)


def test_no_answer_without_costs_or_when_groups_close_a_cycle():
    p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, objective=THROUGHPUT)
    assert st.pipeline_stages(p) is None                      # no cost model
    p.costs = CostModel(node_time=[[1.0, 2.0]] * 3, part_cost=[0.0, 0.0],
                        links=[Link(bandwidth=1.0), None], contiguous=True)
    assert st.pipeline_stages(p) is not None
    p.colocation = [[0, 2]]        # 0 and 2 together, 1 between them: no order of stages
    assert st.pipeline_stages(p) is None


def test_the_start_keeps_the_fewest_parts_count_it_reports():
    """When the stages are the better start, the summary's "heuristic: N part(s)" still reads
    the fewest-parts heuristic's count (it read "None")."""
    from hetero_solve.pipeline import initial_solution
    chosen = 0
    for seed in range(60):
        p = staged_problem(seed)
        sol = initial_solution(p)
        if sol.algorithm == "pipeline stages":
            chosen += 1
            assert isinstance(sol.stats["heuristic_partitions"], int), seed
    assert chosen
