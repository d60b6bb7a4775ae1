"""exact.costs.simple_bound: the solver-free bound of the cost terms (docs/costs.md, "Bounds
without a solver"), held to brute force: never above the optimum, at least the bound it
replaced, and tight where one device's part cost outweighs any split."""

from __future__ import annotations

import pytest
from support.brute import cost_brute_force
from support.problems import costed

from hetero_solve.costs import CostModel, Link
from hetero_solve.exact.costs import simple_bound
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import objective_term


def spread_bound(p, term):
    """The bound before issue 38: every node at its cheapest (and the cheapest part cost for
    latency; the largest node and the total over every instance for throughput)."""
    c = p.costs
    cheapest = [min(c.time(v, d) for d in p.allowed[v]) for v in range(p.n)]
    if term == "latency":
        used = {d for a in p.allowed for d in a}
        return sum(cheapest) + min(c.part_cost[d] for d in used)
    return max(max(cheapest), sum(cheapest) / sum(d.instances for d in p.devices))


@pytest.mark.parametrize("seed", range(300))
def test_never_above_the_optimum_and_never_below_the_spread(seed):
    p = costed(seed)
    if sum(d.instances for d in p.devices) ** p.n > 40_000:
        p.devices = [Device(d.name, d.memory, 1, d.enforce_values) for d in p.devices]
    for term in ("latency", "throughput"):
        p.objective = Objective(order=(term,))
        best, _ = cost_brute_force(p)
        bound = simple_bound(p, term)
        assert bound >= spread_bound(p, term) - 1e-12
        if best is not None:
            optimum = objective_term(p, best, term)
            assert bound <= optimum + 1e-9 * max(1.0, optimum), (term, bound, optimum)


def test_a_part_cost_that_outweighs_any_split_proves_the_one_device_answer():
    """An NPU 4x faster than the CPU but paying 100 per part, on nodes of 2-8 time units: any
    answer using the NPU pays 100, the CPU alone 40: both terms' bound is the CPU's 40."""
    p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0, 1]] * 4, tensor_bytes=1)
    p.costs = CostModel(node_time=[[0.5, 2.0], [1.0, 4.0], [2.0, 8.0], [6.5, 26.0]],
                        part_cost=[100.0, 0.0], links=[Link(bandwidth=1.0), None])
    assert simple_bound(p, "latency") == pytest.approx(40.0)
    assert simple_bound(p, "throughput") == pytest.approx(40.0)
    assert spread_bound(p, "throughput") == pytest.approx(6.5)    # the largest node


def test_two_devices_split_fractionally_by_their_ratio():
    """Two nodes, each 2x faster on its own device, no part costs: the best split puts each
    on its fast device (load 1 each); the bound is that, not the spread of 1."""
    p = make_problem(2, [], [[0, 1], [0, 1]], tensor_bytes=0)
    p.costs = CostModel(node_time=[[1.0, 2.0], [2.0, 1.0]], part_cost=[0.0, 0.0],
                        links=[None, None])
    assert simple_bound(p, "throughput") == pytest.approx(1.0, rel=1e-9)
    p.costs = CostModel(node_time=[[1.0, 3.0], [1.0, 3.0]], part_cost=[0.0, 0.0],
                        links=[None, None])
    # both faster on device 0: fractionally 3/4 of the work there, T = 1.5 (an answer: 2)
    assert simple_bound(p, "throughput") == pytest.approx(1.5, rel=1e-9)
