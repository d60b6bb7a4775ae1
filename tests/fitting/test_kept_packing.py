"""Issue 37 item 2: the parts bound for memory-limited devices when the fallback is not 0
(:func:`hetero_solve.fitting.bounds.kept_packing`) is never above the brute-force optimum:
at the optimal fallback, never above the optimum's parts; with every node free to move,
never above the fewest parts of any answer.  And it reaches: on a decoder-shaped chain whose
largest matrices fit no card it counts the cards the rest needs, where the other bounds say 1."""

from __future__ import annotations

import dataclasses

import pytest

from hetero_solve.errors import InfeasibleError
from hetero_solve.exact import lower_bound, refine
from hetero_solve.fitting.bounds import kept_packing
from hetero_solve.fitting.devices import device_sets
from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.budget import Budget
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import evaluate
from support.brute import brute_force
from support.generators import random_memory

SEEDS = range(150)
LEX = Objective(("fallback", "partitions", "transfer"))


@pytest.mark.parametrize("seed", SEEDS)
def test_never_above_the_brute_force_optimum(seed):
    p = dataclasses.replace(random_memory(seed), objective=LEX)
    best = brute_force(p)
    if best is None:
        return
    m = evaluate(p, best)
    R = device_sets(p, fixed=False)
    assert kept_packing(p, R, m.fallback) <= m.partitions, seed
    fewest = brute_force(dataclasses.replace(p, objective=Objective(("partitions", "fallback"))))
    assert kept_packing(p, R, p.n) <= evaluate(p, fewest).partitions, seed


def test_the_bound_is_not_vacuous_on_those_problems():
    """Some of the generated problems get a bound above 1 from it at their optimal fallback."""
    above = 0
    for seed in SEEDS:
        p = dataclasses.replace(random_memory(seed), objective=LEX)
        best = brute_force(p)
        if best is not None and evaluate(p, best).fallback > 0:
            above += kept_packing(p, device_sets(p, fixed=False), evaluate(p, best).fallback) > 1
    assert above >= 5


def decoder(layers: int = 12):
    """A chain: per layer a small projection (3 MiB, fits a card) and a large one (9 MiB, fits
    none of the 8 MiB cards), on three cards and a CPU: the large ones must go to the CPU
    (fallback), the small ones fill ``ceil(3 x layers / 8)`` card parts at least."""
    MIB = 1 << 20
    n = 2 * layers
    p = make_problem(n, [(i, i + 1) for i in range(n - 1)], [[0, 1]] * n,
                     [Device("CARD", memory=8 * MIB, instances=3), "CPU"], tensor_bytes=4096,
                     const_bytes=[(3 if i % 2 == 0 else 9) * MIB for i in range(n)])
    p.objective = LEX
    return p


def test_a_decoder_whose_large_matrices_fit_no_card_needs_its_share_of_cards():
    p = decoder()
    R = device_sets(p, fixed=False)
    # at fallback 12 (only the large projections leave): 12 x 3 MiB on cards of 8 MiB, at
    # least 5 card parts, and the CPU's
    assert kept_packing(p, R, 12) == 6
    # with 6 more allowed to leave, 6 x 3 MiB stay: 3 card parts and the CPU's
    assert kept_packing(p, R, 18) == 4
    sol = heuristic(p)
    F = evaluate(p, sol).fallback
    assert F >= 12                      # every large projection leaves the cards
    assert lower_bound(p, sol) == min(kept_packing(p, R, F), sol.num_parts) > 1
    out = refine(p, sol, budget=Budget.of(work_limit=2))
    assert kept_packing(p, R, evaluate(p, out).fallback) <= out.lower_bound <= out.num_parts
