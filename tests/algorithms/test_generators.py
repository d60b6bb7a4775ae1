"""Generators: reproducible, the requested size, always solvable; the traps trap the greedy."""

from __future__ import annotations

import pytest

from hetero_solve.algorithms.greedy import heuristic
from support.generators import (GREEDY_TRAPS, cnn_like, greedy_trap, random_dag,
                                     random_layered, random_small, transformer_like, wide)
from hetero_solve.validate import validate

LARGE = [cnn_like, transformer_like, random_layered, wide]


@pytest.mark.parametrize("gen", LARGE)
def test_large_generators_are_reproducible_and_solvable(gen):
    a, b, c = gen(600, seed=1), gen(600, seed=1), gen(600, seed=2)
    assert a.succ == b.succ and a.allowed == b.allowed and a.value_pred == b.value_pred
    assert (a.succ, a.allowed) != (c.succ, c.allowed)
    assert a.n == 600
    assert validate(a, heuristic(a)) == []
    mem = gen(600, seed=1, memory=2 * 1024 * 1024, instances=2, devices=3)
    assert [d.name for d in mem.devices] == ["NPU", "GPU", "CPU"]
    assert validate(mem, heuristic(mem)) == []


def test_transformer_like_has_value_dependent_splits():
    p = transformer_like(300, seed=0)
    reshapes = [v for v in range(p.n) if p.op_types[v] == "Reshape"]
    assert reshapes and all(p.value_pred[v] for v in reshapes)
    assert all(p.allowed[u] == (1,) for v in reshapes for u in p.value_pred[v])   # CPU chains


@pytest.mark.parametrize("seed", range(30))
def test_random_problems_are_solvable(seed):
    p = random_small(seed)
    assert 2 <= p.n <= 8
    assert validate(p, heuristic(p)) == []
    q = random_dag(60, seed)
    assert validate(q, heuristic(q)) == []


def test_traps_are_documented():
    for name, (make, why) in GREEDY_TRAPS.items():
        assert make.__doc__ and why
        assert greedy_trap(name, 2).n > 0
    with pytest.raises(ValueError):
        greedy_trap("nope")
