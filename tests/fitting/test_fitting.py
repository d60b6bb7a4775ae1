"""The fitting package (one home for fitting parts into memory): its doctests, the one
first-fit packing against exhaustive search, and the one run order.

(The fits themselves are held by tests/algorithms/test_memory_heuristic.py, test_exact_memory.py,
test_exact_runs.py, test_packing_bound.py and test_memory_bounds.py.)"""

from __future__ import annotations

import doctest
import importlib
import itertools
import random

import pytest

from hetero_solve.fitting.order import branch_order
from hetero_solve.fitting.packing import bin_packing_bound, first_fit
from hetero_solve.problem import make_problem

MODULES = ["order", "packing", "floors", "network", "cuts", "bounds", "placement", "fit",
           "realize"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    res = doctest.testmod(importlib.import_module(f"hetero_solve.fitting.{name}"))
    assert res.failed == 0 and res.attempted > 0


def _fits_somehow(sizes: list[int], cap: int, bins: int) -> bool:
    """Exhaustive: can the items be packed at all?"""
    for where in itertools.product(range(bins), repeat=len(sizes)):
        load = [0] * bins
        for s, b in zip(sizes, where):
            load[b] += s
        if max(load) <= cap:
            return True
    return False


@pytest.mark.parametrize("seed", range(60))
def test_first_fit_places_only_where_there_is_room_and_counts_what_it_leaves(seed):
    rng = random.Random(seed)
    bins, cap = rng.randint(1, 3), rng.randint(5, 20)
    sizes = [rng.randint(0, cap + 3) for _ in range(rng.randint(0, 6))]
    loads = [rng.randint(0, cap // 2) for _ in range(bins)]
    for into in ("first", "roomiest"):
        for decreasing in (True, False):
            where, left = first_fit(sizes, cap, bins, into=into, decreasing=decreasing,
                                    loads=loads)
            load = list(loads)
            for s, b in zip(sizes, where):
                if b >= 0:
                    load[b] += s
            assert max(load) <= cap                      # placed only where there was room
            assert left == sum(s for s, b in zip(sizes, where) if b < 0)
            # an item left out had no room anywhere when it came (loads only grow)
            assert all(x + s > cap for s, b in zip(sizes, where) if b < 0 for x in load)
        # the overflow policies place everything, and only overflow where nothing had room
        for full in ("first", "least"):
            where, left = first_fit(sizes, cap, bins, full=full, loads=loads)
            assert left == 0 and all(0 <= b < bins for b in where)
            skipped, _ = first_fit(sizes, cap, bins, loads=loads)
            if -1 not in skipped:                        # nothing overflowed: the same answer
                assert where == skipped
    # with no loads, whatever first-fit decreasing packs can be packed (a sanity check of the
    # exhaustive search), and items no larger than a bin fit a bin each when bins suffice
    where, left = first_fit(sizes, cap, bins)
    if left == 0:
        assert _fits_somehow(sizes, cap, bins)
    if len(sizes) <= bins and all(s <= cap for s in sizes):
        assert left == 0


@pytest.mark.parametrize("seed", range(40))
def test_first_fit_never_uses_fewer_bins_than_the_bin_packing_bound(seed):
    rng = random.Random(seed)
    cap = rng.randint(5, 20)
    sizes = [rng.randint(1, cap) for _ in range(rng.randint(1, 7))]
    bins = len(sizes)
    where, left = first_fit(sizes, cap, bins)
    assert left == 0
    assert len(set(where)) >= bin_packing_bound(sizes, cap)


@pytest.mark.parametrize("seed", range(40))
def test_branch_order_is_topological_and_finishes_a_branch_first(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 14)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.25]
    rng.shuffle(edges)                       # successor lists out of index order
    p = make_problem(n, edges, [[0]] * n)
    for ties in ("index", "edges"):
        order = branch_order(p, ties=ties)
        pos = {v: k for k, v in enumerate(order)}
        assert sorted(order) == list(range(n))
        assert all(pos[u] < pos[v] for u, v in edges)
        part = sorted(rng.sample(range(n), rng.randint(0, n)))
        sub = branch_order(p, part, ties=ties)
        assert sorted(sub) == part
        assert all(pos_u < pos_v for u, v in edges if u in part and v in part
                   for pos_u, pos_v in [(sub.index(u), sub.index(v))])
    # a chain out of the first node is followed to its end before its sibling starts
    chain = make_problem(4, [(0, 2), (0, 1), (1, 3)], [[0]] * 4)
    assert branch_order(chain) == [0, 1, 3, 2]
    assert branch_order(chain, ties="edges") == [0, 2, 1, 3]


def test_branch_order_refuses_a_cycle():
    p = make_problem(2, [(0, 1)], [[0]] * 2)
    p.pred[0].append(1)
    p.succ[1].append(0)
    with pytest.raises(ValueError):
        branch_order(p)
