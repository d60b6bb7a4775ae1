"""Lower bounds and windows: valid against brute force, tight where they should be, and
explained by a chain of forced breaks."""

from __future__ import annotations

import json

import pytest

from hetero_solve.exact.analysis import device_sets
from hetero_solve.fitting.floors import binding_devices
from hetero_solve.exact.bounds import lower_bounds, path_chain
from support.brute import brute_force
from hetero_solve.exact.explain import explain, explain_text
from hetero_solve.exact.sequence import search
from support.generators import cnn_like, random_small, transformer_like
from hetero_solve.problem import Device, Objective, make_problem


@pytest.mark.parametrize("seed", range(60))
def test_bounds_and_windows_hold_for_the_optimum(seed):
    """Over all solutions within R(v) (any objective): the fewest parts found by brute force is
    at least the bound, and that optimum's part numbers lie in the windows."""
    p = random_small(seed, objective=Objective(order=("partitions",)))
    for fixed in (False, True):
        if fixed:
            p.objective = Objective(order=("fallback", "partitions"))
        best = brute_force(p)
        if fixed and best is not None and any(
                best.part_device[best.part_of[v]] != p.allowed[v][0] for v in range(p.n)):
            continue      # memory forces a fallback: the fixed view does not apply
        R = device_sets(p, fixed=fixed)
        b = lower_bounds(p, R, binding_devices(p, R))
        k = best.num_parts
        assert 1 <= b.lb <= k
        for v in range(p.n):
            lo, hi = b.window(v, k)
            assert lo <= best.part_of[v] <= hi


def test_alternating_chain_needs_one_part_per_node():
    p = make_problem(6, [(v, v + 1) for v in range(5)], [[v % 2] for v in range(6)])
    b = lower_bounds(p, device_sets(p, fixed=True))
    assert b.lb == 6 and b.top == list(range(6)) and b.bottom == list(range(5, -1, -1))


def test_value_edges_break_only_on_enforcing_devices():
    enforce = make_problem(3, [], [[0], [0], [0]], value_edges=[(0, 1), (1, 2)])
    ignore = make_problem(3, [], [[0], [0], [0]], [Device("ACC", enforce_values=False), "CPU"],
                          value_edges=[(0, 1), (1, 2)])
    assert lower_bounds(enforce, device_sets(enforce, fixed=True)).lb == 3
    assert lower_bounds(ignore, device_sets(ignore, fixed=True)).lb == 1


def test_memory_splits_runs():
    """Four NPU nodes in a chain, each with a 40-byte weight, on a 100-byte NPU: at most two
    weights per part, so at least two parts."""
    p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4,
                     [Device("NPU", memory=100), "CPU"], tensor_bytes=1, const_bytes=40)
    R = device_sets(p, fixed=False)
    assert binding_devices(p, R) == [0]
    assert lower_bounds(p, R, [0]).lb == 2
    assert lower_bounds(p, R).lb == 1           # without memory: one part


def test_flexible_nodes_join_runs_but_value_edges_between_them_count():
    # NPU-only -> either -> CPU-only: two devices must both appear
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [0, 1], [1]])
    assert lower_bounds(p, device_sets(p, fixed=False)).lb == 2
    # a chain of flexible nodes linked by value edges (both devices enforce): one part each
    q = make_problem(3, [], [[0, 1]] * 3, value_edges=[(0, 1), (1, 2)])
    assert lower_bounds(q, device_sets(q, fixed=False)).lb == 3


@pytest.mark.parametrize("gen", [cnn_like, transformer_like])
def test_bound_is_below_the_exact_optimum_on_dnn_like_graphs(gen):
    p = gen(1500, seed=4)
    R = device_sets(p, fixed=True)
    b = lower_bounds(p, R)
    r = search(p, R)
    assert r.exact and b.lb <= r.parts


def test_explanation_chain_names_each_break():
    # CPU-only Shape feeds an NPU Reshape's value input, then an Erf only the CPU runs
    p = make_problem(4, [(1, 2), (2, 3)], [[1], [0], [0], [1]], ["NPU", "CPU"],
                     value_edges=[(0, 2)], names=["shape", "mm", "reshape", "erf"],
                     op_types=["Shape", "MatMul", "Reshape", "Erf"])
    p.refusals[(0, 0)] = "Shape is not in NPU's ops.supported"
    p.refusals[(3, 0)] = "Erf is not in NPU's ops.supported"
    R = device_sets(p, fixed=True)
    b = lower_bounds(p, R)
    assert b.lb == 3
    assert [p.names[v] for v in path_chain(p, R, b)] == ["shape", "reshape", "erf"]
    ex = explain(p, R, b, 3, proof="bound", fixed=True)
    json.dumps(ex)
    assert [br["reason"] for br in ex["breaks"]] == ["device", "device"]
    assert "Erf is not in NPU's ops.supported" in ex["breaks"][1]["detail"]
    assert ex["text"][0].startswith("at least 3 part(s)")
    assert any("erf" in line for line in explain_text(ex, limit=5))


def test_explanation_reports_value_breaks():
    p = make_problem(3, [(1, 2)], [[0], [0], [0]], value_edges=[(0, 1)],
                     names=["concat", "reshape", "relu"])
    R = device_sets(p, fixed=True)
    b = lower_bounds(p, R)
    ex = explain(p, R, b, 2, proof="bound", fixed=True)
    assert b.lb == 2 and ex["breaks"][0]["reason"] == "value"
    assert "needs the value of 'concat'" in ex["breaks"][0]["detail"]


def test_explanation_reports_memory_breaks():
    p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4,
                     [Device("NPU", memory=100), "CPU"], tensor_bytes=1, const_bytes=40)
    R = device_sets(p, fixed=False)
    b = lower_bounds(p, R, [0])
    ex = explain(p, R, b, 2, proof="bound", fixed=False)
    reasons = [br["reason"] for r in ex["runs"] for br in r["breaks"]]
    assert b.kind == "segments" and "memory" in reasons
