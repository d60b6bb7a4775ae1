"""``check MODEL RULES --affinity OUT/affinity.json`` accepts the tool's own answer (issue 15,
item 6): the default split of a node -> device map never forms a cycle."""

from __future__ import annotations

import random

import pytest

import hetero_solve as hs
from conftest import EXAMPLE_DIMS, EXAMPLES, RULES, example_models, rule_profiles
from support.generators import random_dag
from hetero_solve.export import affinity_map
from hetero_solve.measures import part_order
from hetero_solve.algorithms.regions import acyclic_regions, regions

CASES = [(m, r) for m in example_models() for r in rule_profiles()]


@pytest.mark.parametrize("model,rules", CASES, ids=[f"{m.stem}-{r.stem}" for m, r in CASES])
def test_the_tools_own_affinity_map_is_valid_with_the_default_split(model, rules):
    dims = EXAMPLE_DIMS[model.stem]
    result = hs.solve(model, rules, dims=dims, engine="heuristic")
    own = affinity_map(result.problem, result.solution)
    report = hs.check_affinity(model, rules, own, dims=dims, optimum=False, engine="heuristic")
    cycles = [v for v in report.violations if v.kind == "cycle"]
    assert not cycles, cycles
    if not any(d.memory is not None for d in result.problem.devices):
        assert report.valid, report.violations          # memory aside, the answer itself


def test_seed000_map_that_regions_make_cyclic_is_split_into_three_parts():
    amap = {**{n: "ACCEL" for n in ("1", "2", "3", "5", "6", "7")}, "4": "CPU"}
    report = hs.check_affinity(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", amap,
                               optimum=False, engine="heuristic")
    assert report.valid and report.partitions == 3 and report.split == "acyclic"


@pytest.mark.parametrize("seed", range(40))
def test_the_acyclic_split_never_forms_a_cycle_and_keeps_acyclic_regions(seed):
    problem = random_dag(30, seed, devices=3)
    rng = random.Random(seed)
    keys = [(rng.randrange(3), 0) for _ in range(problem.n)]
    part_of = acyclic_regions(problem, keys)
    k = max(part_of) + 1
    assert part_order(problem, part_of, k) is not None          # a DAG
    for u, succ in enumerate(problem.succ):                     # parts keep one device each
        for v in succ:
            if part_of[u] == part_of[v]:
                assert keys[u] == keys[v]
    plain = regions(problem, keys)
    if part_order(problem, plain, max(plain) + 1) is not None:
        assert part_of == plain                                 # OpenVINO's answer when valid
