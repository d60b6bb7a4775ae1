"""The measures package: doctests, the one quotient order, and the one memory tracker.

(The numpy versions against the readable definitions: tests/measures/test_arrays.py.)"""

from __future__ import annotations

import doctest
import importlib
import itertools
import random

import networkx as nx
import pytest

from hetero_solve.measures import (MemoryTracker, crossings, find_cycle, part_memory, part_order,
                                   quotient_edges)
from hetero_solve.problem import make_problem

MODULES = ["hetero_solve.measures.definitions", "hetero_solve.measures.order",
           "hetero_solve.measures.tracker", "hetero_solve.measures.costs",
           "hetero_solve.problem", "hetero_solve.solution",
           "hetero_solve.validate", "hetero_solve.algorithms.greedy",
           "hetero_solve.algorithms.baselines.glow"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    res = doctest.testmod(importlib.import_module(name))
    assert res.failed == 0 and res.attempted > 0


def _random_dag(rng: random.Random, n: int):
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.2]
    return make_problem(n, edges, [[0]] * n)


def _random_partition(seed: int):
    """A random DAG of 1-12 nodes, a part count of 1-5 and a random node -> part map."""
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    p = _random_dag(rng, n)
    k = rng.randint(1, 5)
    return p, k, [rng.randrange(k) for _ in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_part_order_is_a_topological_order_of_the_quotient_or_none_on_a_cycle(seed):
    p, k, part_of = _random_partition(seed)
    edges = quotient_edges(p, part_of)
    g = nx.DiGraph(list(edges))
    g.add_nodes_from(range(k))
    order = part_order(p, part_of, k)
    if not nx.is_directed_acyclic_graph(g):
        assert order is None
        cycle = find_cycle(edges, k)
        assert cycle and all((a, b) in edges for a, b in zip(cycle, cycle[1:] + cycle[:1]))
        return
    assert sorted(order) == list(range(k)) and find_cycle(edges, k) == []
    pos = {q: i for i, q in enumerate(order)}
    assert all(pos[a] < pos[b] for a, b in edges)
    # ties: among the parts ready at each step, the one holding the smallest node
    n = p.n
    first = {q: min((v for v in range(n) if part_of[v] == q), default=n) for q in range(k)}
    done: set[int] = set()
    for q in order:
        ready = [r for r in range(k) if r not in done
                 and all(a in done for a, b in edges if b == r)]
        assert first[q] == min(first[r] for r in ready)
        done.add(q)


@pytest.mark.parametrize("seed", range(30))
def test_the_tracker_holds_the_definition_after_every_step_in_any_order(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 14)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.3]
    p = make_problem(n, edges, [[0]] * n, tensor_bytes=[rng.randint(1, 90) for _ in range(n)],
                     const_bytes=[rng.choice([0, 0, 7, 40]) for _ in range(n)],
                     outputs=[v for v in range(n) if rng.random() < 0.3])
    # shared constants and a node reading one constant twice
    p.node_consts[0] = p.node_consts[0] + [0, 0] if p.const_bytes else p.node_consts[0]
    if len(p.const_bytes) > 1:
        p.node_consts[n - 1] = sorted(set(p.node_consts[n - 1]) | {1})
    nodes = rng.sample(range(n), rng.randint(1, n))
    m = MemoryTracker(p)
    for i, v in enumerate(nodes):
        before = m.used
        d = m.delta(v)
        m.add(v)
        assert m.used == before + d == part_memory(p, nodes[:i + 1])


def test_every_set_partition_of_a_small_dag_agrees_with_networkx():
    p = make_problem(5, [(0, 1), (1, 2), (0, 3), (3, 4), (2, 4)], [[0]] * 5)
    for part_of in itertools.product(range(3), repeat=5):
        part_of = list(part_of)
        g = nx.DiGraph(list(quotient_edges(p, part_of)))
        g.add_nodes_from(range(3))
        assert (part_order(p, part_of, 3) is None) == (not nx.is_directed_acyclic_graph(g))


# -- the runs of an order that fit a room ------------------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_fitting_runs_measure_each_run_and_stop_only_when_none_longer_fits(seed):
    """Against the readable definition: every run grown from ``start`` has the memory
    ``part_memory`` gives, and where the growth stops, no longer run fits the room."""
    from support.generators import random_memory
    from hetero_solve.measures import fitting_runs, topological_order
    p = random_memory(seed)
    order = topological_order(p.succ, p.pred)
    total = part_memory(p, order)
    for cap in (1, 4, 9, total // 2, total):
        for start in range(p.n):
            grown = list(fitting_runs(p, order, start, cap))
            for end, used in grown:
                assert used == part_memory(p, order[start:end])
            assert [e for e, _ in grown] == list(range(start + 1, start + 1 + len(grown)))
            for end in range(start + len(grown) + 1, p.n + 1):
                assert part_memory(p, order[start:end]) > cap


def test_a_constant_read_twice_by_one_node_counts_once():
    """``Mul(x, w, w)``: the room a run needs holds ``w`` once.  (Tensor inputs are distinct
    per node: a ``Problem`` invariant.)"""
    import dataclasses
    from hetero_solve.measures import fitting_runs
    p = make_problem(2, [(0, 1)], [[0]] * 2, tensor_bytes=[10, 1], const_bytes=[0, 5])
    node_consts = [list(c) for c in p.node_consts]
    node_consts[1] = node_consts[1] * 2
    twice = dataclasses.replace(p, node_consts=node_consts, arrays=None)
    assert part_memory(twice, [1]) == 10 + 5 + 1
    assert list(fitting_runs(twice, [0, 1], 1, 16)) == [(2, 16)]
    assert list(fitting_runs(twice, [0, 1], 1, 14)) == []      # x and w alone are 15


@pytest.mark.parametrize("seed", range(30))
def test_crossings_list_every_tensor_read_outside_its_place_once_with_its_readers(seed):
    p, k, part_of = _random_partition(seed)
    by_part = {t: (part_of[u], sorted({part_of[r] for r in p.tensor_consumers[t]} - {part_of[u]}))
               for t, u in enumerate(p.tensor_producer) if u >= 0}
    assert [(t, h, r) for t, (h, r) in by_part.items() if r] == list(crossings(p, part_of))
    group = [q % 2 for q in range(k)]       # two places: parts by parity
    by_group = {t: (group[part_of[u]],
                    sorted({group[part_of[r]] for r in p.tensor_consumers[t]} - {group[part_of[u]]}))
                for t, u in enumerate(p.tensor_producer) if u >= 0}
    assert [(t, h, r) for t, (h, r) in by_group.items() if r] == \
        list(crossings(p, part_of, group.__getitem__))
