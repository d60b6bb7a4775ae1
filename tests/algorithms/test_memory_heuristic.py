"""The heuristic under memory limits (docs/problem.md): parts grow over tensors that stay inside,
nodes leave a device only when its memory cannot hold them, and the answer is never worse than
a baseline's or the all-on-preferred map when those are valid."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import hetero_solve as hs
from hetero_solve.fitting.network import MemoryNetwork, placeable_nodes, standalone_memory
from support.brute import brute_force
from hetero_solve.measures import part_memory
from hetero_solve.problem import Device, make_problem
from hetero_solve.solution import evaluate, objective_key

from conftest import EXAMPLES, chain_model
from support.problems import rivals
from make_examples import EXAMPLE_DIMS

ROOT = Path(__file__).resolve().parents[2]
KIB = 1024


# -- big activations inside a part cost nothing --------------------------------------------------

def wide_inside_model():
    """x[1,64] -> Tile to [1024,64] (256 KiB) -> Relu -> Mul(w) -> Relu -> ReduceSum -> y[1,64]:
    every activation inside is 256 KiB, the input and output 256 B, the constants < 1 KiB."""
    ops = [("Tile", ["x", "reps"], "t0"), ("Relu", ["t0"], "t1"), ("Mul", ["t1", "w"], "t2"),
           ("Relu", ["t2"], "t3"), ("ReduceSum", ["t3", "axes"], "y")]
    inits = {"reps": np.array([1024, 1], np.int64), "w": np.full(64, 0.5, np.float32),
             "axes": np.array([0], np.int64)}
    return chain_model(ops, {"x": [1, 64]}, {"y": [1, 64]}, inits)


@pytest.mark.parametrize("instances", [1, 3])
def test_big_internal_activations_fit_one_instance_in_one_part(instances):
    """No node fits a 64 KiB card on its own (each reads or writes 256 KiB), yet the whole
    model as one part holds only its input, output and constants: 1 part, 0 fallback."""
    rules = {"version": 1, "devices": [
        {"name": "CARD", "memory": "64KiB", "instances": instances, "ops": {"supported": "all"}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    r = hs.solve(wide_inside_model(), rules, engine="heuristic")
    p = r.problem
    assert all(standalone_memory(p, v) > 64 * KIB for v in range(p.n))
    assert r.metrics.as_dict() == {"fallback": 0, "partitions": 1, "transfer": 0}
    assert r.metrics.part_memory[0] < 2 * KIB
    assert hs.validate(p, r.solution) == []


def test_a_chain_of_big_activations_on_hand_built_problems():
    # 0 -> 1 -> ... -> 5, each tensor 100 bytes except the last (a graph output of 1 byte)
    n = 6
    p = make_problem(n, [(v, v + 1) for v in range(n - 1)], [[0, 1]] * n,
                     [Device("ACC", memory=20), "CPU"], tensor_bytes=[100] * (n - 1) + [1],
                     const_bytes=1)
    sol = hs.heuristic(p)
    assert (sol.num_parts, evaluate(p, sol).fallback) == (1, 0)
    assert brute_force(p).num_parts == 1


# -- which nodes can ever be on a device --------------------------------------------------------

def test_placeable_nodes_is_the_exact_test_on_small_problems():
    """A node is refused by a device exactly when no set of its candidates holding it fits one
    instance (brute force over every set)."""
    from itertools import combinations
    rng = random.Random(5)
    checked = 0
    for _ in range(120):
        n = rng.randint(2, 7)
        edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.4]
        p = make_problem(n, edges, [[0, 1]] * n, [Device("ACC", memory=rng.randint(5, 60)), "CPU"],
                         tensor_bytes=[rng.choice([1, 5, 30, 80]) for _ in range(n)],
                         const_bytes=[rng.choice([0, 3, 20]) for _ in range(n)])
        cap = p.devices[0].memory
        kept, refused = placeable_nodes(p, 0)
        # fixed point by brute force: drop nodes no set (of nodes still in) holding them fits
        inside = list(range(n))
        while True:
            drop = [v for v in inside
                    if min(part_memory(p, S) for r in range(1, len(inside) + 1)
                           for S in combinations(inside, r) if v in S) > cap]
            if not drop:
                break
            inside = [v for v in inside if v not in drop]
        assert kept == inside
        checked += len(refused)
    assert checked > 10


def test_min_memory_containing_equals_brute_force():
    from itertools import combinations
    rng = random.Random(8)
    for _ in range(60):
        n = rng.randint(1, 7)
        edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.4]
        p = make_problem(n, edges, [[0]] * n, [Device("ACC", memory=10)],
                         tensor_bytes=[rng.randint(1, 50) for _ in range(n)],
                         const_bytes=[rng.choice([0, 7]) for _ in range(n)],
                         outputs=[v for v in range(n) if rng.random() < 0.3])
        net = MemoryNetwork(p, range(n))
        for v in range(n):
            assert net.min_memory_containing(v) == min(
                part_memory(p, S) for r in range(1, n + 1) for S in combinations(range(n), r) if v in S)


# -- never worse than the obvious ---------------------------------------------------------------


CASES = [(m, r) for m in sorted(EXAMPLES.glob("*.onnx")) for r in sorted((ROOT / "rules").glob("*.yaml"))]


@pytest.mark.parametrize("model,rules", CASES, ids=[f"{m.stem}-{r.stem}" for m, r in CASES])
def test_the_heuristic_is_never_worse_than_a_baseline_or_the_preferred_map(model, rules):
    r = hs.solve(model, rules, dims=EXAMPLE_DIMS[model.stem], engine="heuristic")
    p, sol = r.problem, r.solution
    assert hs.validate(p, sol) == []
    mine = objective_key(p, sol)
    for name, other in rivals(p).items():
        assert mine <= objective_key(p, other), name


@pytest.mark.parametrize("seed", range(40))
def test_never_worse_than_a_valid_rival_on_random_memory_problems(seed):
    rng = random.Random(seed)
    n = rng.randint(4, 40)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.12]
    allowed = [[0, 1] if rng.random() < 0.85 else [1] for _ in range(n)]
    big = [rng.choice([4, 4, 4, 200]) for _ in range(n)]
    p = make_problem(n, edges, allowed,
                     [Device("ACC", memory=rng.choice([60, 150, 400]), instances=rng.choice([1, 2, 3])),
                      "CPU"], tensor_bytes=big, const_bytes=[rng.choice([0, 10, 40]) for _ in range(n)])
    sol = hs.heuristic(p)
    assert hs.validate(p, sol) == []
    mine = objective_key(p, sol)
    for name, other in rivals(p).items():
        assert mine <= objective_key(p, other), (name, mine, objective_key(p, other))
