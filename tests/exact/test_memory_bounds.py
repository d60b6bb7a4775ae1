"""Lower bounds that see memory (fallback, parts on a device) and the memory section of
``explain``: the bounds never exceed brute-force optima, and they are tight where the
constants alone decide."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import hetero_solve as hs
from hetero_solve.exact.analysis import device_sets
from hetero_solve.exact.bounds import lower_bounds
from hetero_solve.fitting.bounds import memory_bounds, packing_parts
from hetero_solve.fitting.floors import binding_devices
from support.brute import brute_force
from hetero_solve.exact.explain import explain_memory, memory_text
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import evaluate

from conftest import chain_model


def _random(seed: int):
    rng = random.Random(seed)
    n = rng.randint(3, 8)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.35]
    allowed = [[0, 1] if rng.random() < 0.85 else [1] for _ in range(n)]
    return make_problem(n, edges, allowed,
                        [Device("ACC", memory=rng.choice([30, 60, 100]),
                                instances=rng.choice([1, 2, 3])), "CPU"],
                        tensor_bytes=[rng.choice([2, 2, 5, 40]) for _ in range(n)],
                        const_bytes=[rng.choice([0, 5, 20]) for _ in range(n)])


def test_the_bounds_never_exceed_brute_force_and_are_often_tight():
    positive = tight = 0
    for seed in range(120):
        p = _random(seed)
        best = evaluate(p, brute_force(p)).fallback
        bound = memory_bounds(p).fallback
        assert bound <= best, seed
        positive += bound > 0
        tight += 0 < bound == best
        p.objective = Objective(order=("partitions",))
        fewest = brute_force(p).num_parts
        R = device_sets(p, fixed=False)
        assert lower_bounds(p, R, binding_devices(p, R)).lb <= fewest, seed
    assert positive >= 20 and tight >= 0.8 * positive


def test_weights_for_two_cards_need_two_parts():
    """Six 1 KiB weights on 4 KiB cards: at least two parts on the cards (the path bound
    alone says 1), and the heuristic meets it."""
    n = 6
    p = make_problem(n, [(v, v + 1) for v in range(n - 1)], [[0]] * n,
                     [Device("CARD", memory=4096, instances=2)], tensor_bytes=8,
                     const_bytes=1024)
    R = device_sets(p, fixed=True)
    b = lower_bounds(p, R, binding_devices(p, R))
    assert packing_parts(p, R, [0]) == ([2], [6 * 1024 + 8])
    assert b.lb == 2 and b.lb_path == 1
    assert hs.heuristic(p).num_parts == 2


def test_a_device_too_small_for_its_weights_must_give_up_nodes():
    # 3 nodes of 6, 6 and 2 bytes of constants on a 10-byte NPU: one heavy node leaves.
    p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
                     tensor_bytes=1, const_bytes=[6, 6, 2])
    mb = memory_bounds(p)
    assert mb.fallback == 1
    assert (mb.devices[0].need, mb.devices[0].capacity) == (15, 10)
    assert evaluate(p, hs.heuristic(p)).fallback == 1


def wide_model():
    """x[1,64] -> Tile [1024,64] (256 KiB) -> Relu -> Mul(w, 256 KiB) -> y [1024, 64]."""
    ops = [("Tile", ["x", "reps"], "t0"), ("Relu", ["t0"], "t1"), ("Mul", ["t1", "w"], "y")]
    inits = {"reps": np.array([1024, 1], np.int64), "w": np.full((1024, 64), 0.5, np.float32)}
    return chain_model(ops, {"x": [1, 64]}, {"y": [1024, 64]}, inits)


def test_explain_names_the_overflow_and_the_nodes_moved():
    """On a 400 KiB NPU the Mul can never run: any part holding it holds its 256 KiB weight
    and the 256 KiB graph output.  explain says by how much the NPU's nodes overflow it,
    which node no part can hold (with the bytes), and why each moved node moved."""
    rules = {"version": 1, "devices": [
        {"name": "NPU", "memory": "400KiB", "ops": {"supported": "all"}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    r = hs.solve(wide_model(), rules, work_limit=2.5)
    assert r.metrics.fallback >= 1
    mem = r.explanation["memory"]
    (npu,) = mem["devices"]
    assert npu["device"] == "NPU" and npu["over"] == npu["need"] - 400 * 1024 > 0
    assert {c["node"] for c in npu["cannot_hold"]} >= {"n2"}
    least = {c["node"]: c["least_bytes"] for c in npu["cannot_hold"]}
    assert least["n2"] >= 512 * 1024
    moved = {m["node"]: m for m in mem["moved"]}
    assert moved["n2"]["from"] == "NPU" and moved["n2"]["to"] == "CPU"
    assert "no part on NPU holding it fits" in moved["n2"]["why"]
    assert mem["fallback_bound"] >= 1
    text = "\n".join(memory_text(mem))
    assert "over the 400.0 KiB its instances hold by" in text and "n2" in text
    # the same bound reaches partition.json, whatever the engine
    h = hs.solve(wide_model(), rules, engine="heuristic")
    assert h.solution.stats["bounds"]["fallback"] == mem["fallback_bound"]


def test_no_memory_section_when_memory_cannot_bind():
    p = make_problem(3, [(0, 1), (1, 2)], [[0]] * 3, [Device("NPU", memory=10 ** 6)])
    assert explain_memory(p, hs.heuristic(p)) is None


def test_explain_survives_a_node_that_memory_leaves_without_a_device():
    """Issue 16: the forced-break chain read the first device of an empty device set
    (IndexError: tuple index out of range) when memory leaves a node no device.  The
    explanation now says memory is the reason."""
    from hetero_solve.exact.bounds import lower_bounds
    from hetero_solve.exact.explain import explain
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [0, 1], [0]], [Device("NPU", memory=10), "CPU"],
                     tensor_bytes=1, const_bytes=[0, 50, 0])
    R = [(0,), (), (0,)]            # the rules let node 1 run anywhere; memory leaves it none
    b = lower_bounds(p, R)
    assert b.per_device[0] == 2     # two NPU stretches on the path, split by node 1
    ex = explain(p, R, b, 3, proof=None, fixed=False)
    details = [br["detail"] for r in ex["runs"] for br in r["breaks"]] + \
              [br["detail"] for br in ex["breaks"]]
    assert any("memory: no part on NPU holding it fits" in d or "fits no device" in d
               for d in details), details
