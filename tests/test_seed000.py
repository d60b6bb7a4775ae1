"""Seed 000's worked example: 7 nodes, node 4 unsupported on the first device.

Expected (the seed's final result): [1,2] and [3,5,6,7] on the first device, [4] on the second.
Three parts is also the optimum: node 4 must be alone on the second device, and 1 -> 2 -> 4 -> 5
is a path that leaves and re-enters the first device, so it needs two parts there.
"""

from __future__ import annotations

import itertools

import hetero_solve as hs
from hetero_solve.export import build_manifest
from hetero_solve.problem import make_problem

from conftest import EXAMPLES, RULES

EDGES = [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6), (6, 7)]


def _by_name(result: hs.Result) -> list[tuple[str, list[str]]]:
    return [(p["device"], p["node_names"]) for p in build_manifest(result)["partitions"]]


def test_seed000_model_gives_the_seeds_three_parts():
    result = hs.solve(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", engine="heuristic")
    parts = _by_name(result)
    assert sorted(parts) == sorted([("ACCEL", ["1", "2"]), ("ACCEL", ["3", "5", "6", "7"]), ("CPU", ["4"])])
    assert result.metrics.partitions == 3
    assert hs.validate(result.problem, result.solution) == []


def test_seed000_problem_three_parts_is_the_optimum_by_enumeration():
    """Brute force over all device-respecting block assignments of the 7 nodes."""
    p = make_problem(7, [(a - 1, b - 1) for a, b in EDGES], [[1] if v == 3 else [0] for v in range(7)])
    best = None
    for k in range(1, 8):
        for assign in itertools.product(range(k), repeat=7):
            if set(assign) != set(range(k)):
                continue
            devices = {}
            ok = True
            for v, part in enumerate(assign):
                d = p.allowed[v][0]
                if devices.setdefault(part, d) != d:
                    ok = False
                    break
            if not ok:
                continue
            sol = hs.Solution(list(assign), [devices[q] for q in range(k)], [0] * k)
            if not hs.validate(p, sol, require_order=False):
                best = k
                break
        if best:
            break
    assert best == 3
    assert hs.heuristic(p).num_parts == best
