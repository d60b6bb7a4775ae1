"""Per-node data through every transform of one problem into another (hetero_solve/nodemap.py):
node times, devices, pins and colocation survive QDQ contraction, unfold, colocation groups
and chain contraction, on the corpus QDQ model and on random problems with fold choices; a
transform that leaves a field as it was fails the postcondition."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

import hetero_solve as hs
import hetero_solve.compile as compile_module
from hetero_solve.contract import contract
from hetero_solve.costs import CostModel, Link
from hetero_solve.exact.analysis import device_sets
from hetero_solve.exact.colocate import contract_groups
from hetero_solve.exact.folds import unfold
from hetero_solve.exact.reductions import contract_chains
from hetero_solve.nodemap import NodeMap, RemapError, check_remap
from support.problems import choices, folds_problem

ROOT = Path(__file__).resolve().parent.parent
QDQ = ROOT / "corpus" / "models" / "resnet-tiny-qdq.onnx"


def with_times(p, seed: int):
    """``p`` with a random time per node and allowed device (a distinct value each, so a node
    reading another's time is caught), and a volume per tensor."""
    rng = random.Random(seed)
    D = len(p.devices)
    times = [[round(rng.uniform(1, 100), 3) if d in p.allowed[v] else None for d in range(D)]
             for v in range(p.n)]
    p.costs = CostModel(times, [0.5] * D, [Link(100.0, 0.1)] + [None] * (D - 1),
                        volume=[float(b) * 2 for b in p.tensor_bytes])
    return p


def assert_times_summed(old, new, nmap: NodeMap):
    """Each new node takes the sum of its old nodes' times on every device it may use; a node
    added from nothing takes nothing; every old node is a new node's."""
    assert all(nmap.targets[v] for v in range(old.n))
    for u, vs in enumerate(nmap.sources):
        for d in new.allowed[u]:
            want = sum(old.costs.node_time[w][d] for w in vs)
            assert new.costs.node_time[u][d] == pytest.approx(want), (u, d)
    assert len(new.costs.volume) == len(new.tensor_bytes)
    check_remap(old, new, nmap)


@pytest.fixture(scope="module")
def qdq_raw():
    """The QDQ model compiled, before and after its units are contracted."""
    seen = {}
    real = compile_module.contract

    def spy(problem, groups):
        seen["raw"], seen["groups"] = dataclasses.replace(problem), groups
        return real(problem, groups)

    compile_module.contract = spy
    try:
        mg = hs.load_model(str(QDQ), dims={"batch": 1})
        hs.compile_problem(mg, hs.load_rules(str(ROOT / "rules" / "int8-npu.yaml")))
    finally:
        compile_module.contract = real
    return seen["raw"], seen["groups"]


def test_node_times_survive_every_transform_on_a_qdq_model(qdq_raw):
    raw, groups = qdq_raw
    raw = with_times(dataclasses.replace(raw), 1)
    units, m1 = contract(raw, groups)
    assert units.n < raw.n and units.members
    assert_times_summed(raw, units, m1)
    # a unit costs the sum of its members
    u = next(iter(units.members))
    assert len(m1.sources[u]) > 1
    # colocation groups (two adjacent nodes), carried and then merged for contiguous stages
    a = next(v for v in range(units.n) if units.succ[v])
    grouped = dataclasses.replace(units, colocation=[[a, units.succ[a][0]]])
    merged, m2 = contract_groups(grouped)
    assert_times_summed(grouped, merged, m2)
    assert merged.n == units.n - 1 and merged.colocation == []
    # chain contraction within each node's preferred device
    red = contract_chains(units, device_sets(units, fixed=True))
    assert red.problem.n < units.n
    assert_times_summed(units, red.problem, red.map)


@pytest.mark.parametrize("seed", range(12))
def test_node_times_survive_unfold_and_the_transforms_after_it(seed):
    p = with_times(folds_problem(seed), seed)
    p.colocation = [[0, 1]] if p.n > 2 and 1 in p.succ[0] else []
    for ks in choices(p):
        q, m = unfold(p, ks)
        assert_times_summed(p, q, m)
        for u in range(p.n, q.n):           # a placed fold costs nothing
            assert all(q.costs.node_time[u][d] == 0.0 for d in q.allowed[u])
        assert q.colocation == p.colocation
        r, m2 = contract_groups(q)
        assert_times_summed(q, r, m2)
        red = contract_chains(q, device_sets(q, fixed=True))
        assert_times_summed(q, red.problem, red.map)


def test_a_transform_that_keeps_a_field_as_it_was_fails_the_postcondition(qdq_raw):
    raw, groups = qdq_raw
    raw = with_times(dataclasses.replace(raw), 2)
    units, m = contract(raw, groups)
    with pytest.raises(RemapError, match="node times"):     # costs left as they were
        check_remap(raw, dataclasses.replace(units, costs=raw.costs), m)
    shifted = dataclasses.replace(raw.costs, node_time=raw.costs.node_time[1:units.n + 1])
    with pytest.raises(RemapError, match="node times"):     # another node's time
        check_remap(raw, dataclasses.replace(units, costs=shifted), m)
    with pytest.raises(RemapError, match="members"):
        check_remap(raw, dataclasses.replace(units, members={}), m)
    f = next(folds_problem(s) for s in range(40) if (1,) in folds_problem(s).allowed)
    same, m3 = unfold(f, [])
    with pytest.raises(RemapError, match="allowed"):
        check_remap(f, dataclasses.replace(same, allowed=[(0, 1)] * f.n), m3)
    grouped = dataclasses.replace(units, colocation=[[0, 1], [2, 3]])
    q, m2 = unfold(grouped, [])
    with pytest.raises(RemapError, match="colocation"):
        check_remap(grouped, dataclasses.replace(q, colocation=[[0, 1]]), m2)
    with pytest.raises(RemapError, match="no new node"):
        check_remap(raw, units, NodeMap.of_groups(raw.n, m.sources[1:]))
