"""Chain contraction keeps an optimum (against brute force) and shrinks DNN-like graphs."""

from __future__ import annotations

import pytest

from hetero_solve.exact.analysis import device_sets
from hetero_solve.measures import topological_order
from support.brute import brute_force
from hetero_solve.exact.reductions import contract_chains
from hetero_solve.exact.sequence import search
from support.generators import cnn_like, random_small, transformer_like
from hetero_solve.problem import Objective, make_problem


@pytest.mark.parametrize("seed", range(80))
def test_contraction_keeps_the_optimum(seed):
    for objective, fixed in ((("fallback", "partitions"), True), (("partitions",), False)):
        p = random_small(seed, memory=False, objective=Objective(order=objective))
        best = brute_force(p)
        R = device_sets(p, fixed=fixed)
        red = contract_chains(p, R)
        r = search(red.problem, red.R)
        assert r.exact and r.parts == best.num_parts, objective


@pytest.mark.parametrize("gen", [cnn_like, transformer_like])
def test_contraction_is_sound_and_shrinks(gen):
    p = gen(2000, seed=3)
    R = device_sets(p, fixed=True)
    red = contract_chains(p, R)
    assert red.problem.n * 2 <= p.n                       # at least 2x fewer units
    topological_order(red.problem.succ, red.problem.pred)                        # still a DAG (raises otherwise)
    enforce = [d.enforce_values for d in p.devices]
    for g, members in enumerate(red.groups):
        assert len({R[v] for v in members}) == 1          # one device per unit
        inside = set(members)
        for v in members:
            assert red.unit_of[v] == g
            if enforce[R[v][0]]:
                assert not inside.intersection(p.value_pred[v])
    # restrict/expand round trip
    unit_part = list(range(red.problem.n))
    assert red.restrict(red.expand(unit_part)) == unit_part


def test_value_edge_and_device_change_are_not_contracted():
    p = make_problem(4, [(0, 1), (2, 3)], [[0], [0], [0], [1]], value_edges=[(1, 2)])
    red = contract_chains(p, device_sets(p, fixed=True))
    assert red.groups == [[0, 1], [2], [3]]


def test_flexible_nodes_stay_alone():
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [0, 1], [0]])
    red = contract_chains(p, device_sets(p, fixed=False))
    assert [len(g) for g in red.groups] == [1, 1, 1]
