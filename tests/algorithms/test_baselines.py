"""The baselines: seed 000's worked trace, and what each source guarantees (or does not) on
the examples and on random graphs, always judged by the one validator."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import pytest

from hetero_solve.algorithms.baselines import BASELINES, BaselineSkipped, openvino
from hetero_solve.algorithms.baselines.glow import glow
from hetero_solve.algorithms.baselines.graphcycles import GraphCycles, graphcycles
from hetero_solve.algorithms.baselines.longest_path import longest_path, longest_path_levels
from hetero_solve.algorithms.baselines.openvino import Step
from hetero_solve.compile import compile_problem
from hetero_solve.model import load_model
from hetero_solve.measures import MemoryTracker, part_memory, quotient_edges
from hetero_solve.problem import Device, make_problem
from hetero_solve.rules import load_rules
from hetero_solve.solution import Solution, evaluate, normalize
from hetero_solve.validate import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.onnx"))
RULES = sorted((ROOT / "rules").glob("*.yaml"))


def seed000_problem():
    rules = load_rules(ROOT / "rules" / "seed000.yaml")
    return compile_problem(load_model(ROOT / "examples" / "seed000.onnx", dims=rules.dims), rules)


# -- seed 000: the worked trace -----------------------------------------------------------------

# The seed's steps, transcribed: (action, node, subgraph, rejected, global condition, through).
# "possible" is the seed's "possible self-references through node [4] but we do not know yet, ok".
SEED_ROUND_1 = [
    ("root", "1", ["1"], [], "ok", []),
    ("merge", "2", ["1", "2"], [], "ok", []),
    ("merge", "3", ["1", "2", "3"], [], "ok", []),
    ("merge", "5", ["1", "2", "3", "5"], [], "possible", ["4"]),
    ("merge", "6", ["1", "2", "3", "5", "6"], [], "possible", ["4"]),
    ("merge", "7", ["1", "2", "3", "5", "6", "7"], [], "possible", ["4"]),
    ("failed", "4", ["1", "2", "3", "5", "6", "7"], ["4"], "reject", ["4"]),
    ("rollback", "7", ["1", "2", "3", "5", "6"], ["4", "7"], "reject", ["4"]),
    ("rollback", "6", ["1", "2", "3", "5"], ["4", "6", "7"], "reject", ["4"]),
    ("rollback", "5", ["1", "2", "3"], ["4", "5", "6", "7"], "ok", []),
    ("end", None, ["1", "2", "3"], ["4", "5", "6", "7"], "ok", []),
]
SEED_ROUND_2 = [
    ("root", "5", ["5"], [], "ok", []),
    ("merge", "6", ["5", "6"], [], "ok", []),
    ("merge", "7", ["5", "6", "7"], [], "ok", []),
    ("merge", "3", ["3", "5", "6", "7"], [], "ok", []),
    ("merge", "2", ["2", "3", "5", "6", "7"], [], "possible", ["4"]),
    ("failed", "4", ["2", "3", "5", "6", "7"], ["4"], "reject", ["4"]),
    ("rollback", "2", ["3", "5", "6", "7"], ["2", "4"], "ok", []),
    ("end", None, ["3", "5", "6", "7"], ["2", "4"], "ok", []),
]


def _grow_steps(trace: list[Step]) -> list[tuple]:
    return [(s.action, s.node, s.subgraph, s.rejected, s.check, s.through) for s in trace
            if s.action in ("root", "merge", "failed", "rollback", "end")]


@pytest.mark.parametrize("source", ["onnx", "make_problem"])
def test_openvino_reproduces_seed000_trace(source):
    if source == "onnx":
        p = seed000_problem()
    else:
        p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
                         [[0, 1], [0, 1], [0, 1], [1], [0, 1], [0, 1], [0, 1]],
                         devices=("ACCEL", "CPU"), names=[str(i) for i in range(1, 8)])
    assert [p.names[v] for v in range(p.n)] == ["1", "2", "3", "4", "5", "6", "7"]
    trace: list[Step] = []
    sol = openvino(p, trace=trace)

    # The first plugin's first pass: two subgraphs grown from roots 1 and 5, exactly as the seed.
    first = [s for s in trace if s.device == "ACCEL"]
    roots = [s.subgraph for s in first if s.action == "roots"]
    assert roots[:3] == [["1", "2", "3", "5", "6", "7"], ["5", "6", "7"], []]
    steps = _grow_steps(first)
    assert steps[:len(SEED_ROUND_1)] == SEED_ROUND_1
    assert steps[len(SEED_ROUND_1):len(SEED_ROUND_1) + len(SEED_ROUND_2)] == SEED_ROUND_2
    subgraphs = next(s for s in first if s.action == "subgraphs")
    assert subgraphs.groups == [["1", "2", "3"], ["3", "5", "6", "7"]]
    selects = [s.subgraph for s in first if s.action == "select"]
    assert selects == [["3", "5", "6", "7"], ["1", "2"]]      # largest first, then the rest
    remaining = [s.subgraph for s in first if s.action == "remaining"]
    assert remaining == [["1", "2"]]

    # The final result: [3,5,6,7], [1,2] on the first plugin, [4] on the second.
    got = sorted((p.devices[sol.part_device[k]].name, [p.names[v] for v in nodes])
                 for k, nodes in enumerate(sol.parts()))
    assert got == [("ACCEL", ["1", "2"]), ("ACCEL", ["3", "5", "6", "7"]), ("CPU", ["4"])]
    assert validate(p, sol) == []


def test_openvino_answer_does_not_depend_on_tracing():
    rng = random.Random(13)
    for _ in range(20):
        p = _random_problem(rng, 15, 3)
        trace: list[Step] = []
        assert openvino(p, trace=trace).part_of == openvino(p).part_of
        assert trace and all(s.device in {d.name for d in p.devices} for s in trace)


def test_openvino_skips_above_node_limit():
    p = make_problem(5, [(i, i + 1) for i in range(4)], [[0]] * 5)
    with pytest.raises(BaselineSkipped, match="too large"):
        openvino(p, max_nodes=4)
    assert openvino(p, max_nodes=5).num_parts == 1


def test_openvino_can_return_a_cycle_through_two_subgraphs():
    # The global condition looks at one subgraph at a time.  x -> y on ACC, c1 -> c2 on CPU,
    # x -> c2 and c1 -> y: both subgraphs are convex, yet ACC -> CPU -> ACC is a cycle (the
    # "Cannot sort subgraphs!" failure of OpenVINO users).  The study must see it as invalid.
    p = make_problem(4, [(0, 2), (0, 3), (1, 2), (1, 3)], [[0, 1], [1], [0, 1], [1]],
                     names=["x", "c1", "y", "c2"])
    sol = openvino(p)
    assert sorted(sorted(p.names[v] for v in nodes) for nodes in sol.parts()) == [
        ["c1", "c2"], ["x", "y"]]
    assert [v.kind for v in validate(p, sol)] == ["cycle"]

    rng = random.Random(7)
    for _ in range(40):
        p = _random_problem(rng, 14, 3)
        sol = openvino(p)
        cyclic = not nx.is_directed_acyclic_graph(nx.DiGraph(list(quotient_edges(p, sol.part_of))))
        kinds = {v.kind for v in validate(p, sol)}
        assert ("cycle" in kinds) == cyclic
        assert kinds <= {"cycle"}                  # support, pins and values are never broken
        for nodes in sol.parts():                  # the global condition: every part is convex
            assert _convex(p, set(nodes))


# -- GraphCycles --------------------------------------------------------------------------------

def test_graphcycles_structure_matches_networkx_under_random_operations():
    rng = random.Random(3)
    for _ in range(30):
        n = 12
        gc = GraphCycles(n)
        ref = nx.DiGraph()
        ref.add_nodes_from(range(n))
        alive = set(range(n))
        for _ in range(60):
            x, y = rng.sample(sorted(alive), 2)
            if rng.random() < 0.7:
                ref.add_edge(x, y)
                cyclic = not nx.is_directed_acyclic_graph(ref)
                if cyclic:
                    ref.remove_edge(x, y)
                assert gc.insert_edge(x, y) == (not cyclic)
            elif ref.has_edge(x, y):
                ref.remove_edge(x, y)
                other = nx.has_path(ref, x, y)
                ref.add_edge(x, y)
                keep = gc.contract_edge(x, y)
                assert (keep is None) == other
                if keep is not None:
                    gone = y if keep == x else x
                    ref = nx.contracted_nodes(ref, keep, gone, self_loops=False)
                    alive.discard(gone)
            for a, b in ref.edges:            # the rank is a topological order
                assert gc.rank[a] < gc.rank[b]
            assert {(a, b) for a in alive for b in gc.out[a]} == set(ref.edges)
            a, b = rng.sample(sorted(alive), 2)
            assert gc.is_reachable(a, b) == nx.has_path(ref, a, b)


def test_graphcycles_seed002_graph1_merges_value_free_pair():
    # graph1 of the seed: A4 -> B0 is an ordinary edge, so they may share a cluster.
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [0], [0]], names=["A0", "A4", "B0"])
    assert graphcycles(p).num_parts == 1


def test_graphcycles_is_valid_and_maximal_on_random_graphs():
    rng = random.Random(11)
    for _ in range(40):
        p = _random_problem(rng, 16, 3, value_prob=0.15)
        sol = graphcycles(p)
        assert validate(p, sol) == []
        # Maximal: merging any two adjacent clusters of one device breaks a condition.
        for a, b in quotient_edges(p, sol.part_of):
            if sol.part_device[a] != sol.part_device[b]:
                continue
            merged = Solution([a if q == b else q for q in sol.part_of], sol.part_device,
                              sol.part_instance)
            kinds = {v.kind for v in validate(p, normalize(p, merged))}
            assert kinds & {"cycle", "value"}, (a, b)


# -- longest path -------------------------------------------------------------------------------

def test_longest_path_levels_follow_the_seed_weights():
    # 0 -> 1 value input on an enforcing device: weight 1; 1 -> 2 device change: weight 1.
    p = make_problem(4, [(1, 2), (0, 3)], [[0], [0], [1], [0]], value_edges=[(0, 1)])
    assert longest_path_levels(p, [0, 0, 1, 0]) == [0, 1, 2, 0]
    ignore = make_problem(4, [(1, 2), (0, 3)], [[0], [0], [1], [0]], value_edges=[(0, 1)],
                          devices=(Device("ACC", enforce_values=False), "CPU"))
    assert longest_path_levels(ignore, [0, 0, 1, 0]) == [0, 0, 1, 0]


def test_longest_path_is_always_valid_without_memory_and_groups_independent_regions():
    rng = random.Random(5)
    for _ in range(60):
        p = _random_problem(rng, 18, 3, value_prob=0.2)
        assert validate(p, longest_path(p)) == []
    # Two independent ACC chains split by a CPU node each: level 0 and level 2 parts are shared.
    p = make_problem(6, [(0, 1), (1, 2), (3, 4), (4, 5)], [[0], [1], [0], [0], [1], [0]])
    sol = longest_path(p)
    assert sol.num_parts == 3 and validate(p, sol) == []


# -- Glow ---------------------------------------------------------------------------------------

def test_part_memory_tracker_matches_the_spec_definition():
    rng = random.Random(2)
    for _ in range(30):
        p = _random_problem(rng, 12, 2, bytes_range=(1, 50))
        nodes = rng.sample(range(p.n), rng.randint(1, p.n))
        mem = MemoryTracker(p)
        for v in nodes:
            mem.add(v)
        assert mem.used == part_memory(p, nodes)


def test_glow_backend_slices_are_acyclic_and_memory_cuts_fit():
    rng = random.Random(9)
    for _ in range(40):
        p = _random_problem(rng, 16, 3, bytes_range=(1, 40), memory=(300, 2))
        sol = glow(p)
        kinds = {v.kind for v in validate(p, sol)}
        assert not kinds & {"cycle", "order", "support", "structure"}
        m = evaluate(p, sol)
        for k, mem in enumerate(m.part_memory):
            cap = p.devices[sol.part_device[k]].memory
            if cap is not None and mem > cap:
                # Only a part that cannot be cut further may overflow: a single node.
                assert len(sol.parts()[k]) == 1
                assert "glow_error" in sol.stats
        if "memory" in kinds:
            assert "glow_error" in sol.stats


def test_glow_flags_memory_it_cannot_honour():
    # One node needs 100 bytes on a 64-byte accelerator: Glow's memoryUsageValidation fails,
    # the answer is still returned and the validator reports the overflow.
    p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, tensor_bytes=[10, 10, 10],
                     const_bytes=[0, 100, 0], devices=(Device("ACC", memory=64), "CPU"))
    sol = glow(p)
    assert "glow_error" in sol.stats and "over the device" in sol.stats["glow_error"]
    assert [v.kind for v in validate(p, sol)] == ["memory"]


def test_glow_packs_parts_on_instances_like_assign_logical_device_id():
    # Three parts of 6, 14 and 6 bytes on two 16-byte instances: (6, 6) share one (Glow's
    # comment: node1 and node3 on device 0, node2 on device 1).
    p = make_problem(3, [], [[0]] * 3, tensor_bytes=[0, 0, 0], const_bytes=[6, 14, 6],
                     devices=(Device("ACC", memory=16, instances=2),), outputs=[])
    sol = glow(p)
    assert sol.num_parts == 3 and validate(p, sol) == []
    inst = {tuple(p.names[v] for v in nodes): sol.part_instance[k]
            for k, nodes in enumerate(sol.parts())}
    assert inst[("n0",)] == inst[("n2",)] != inst[("n1",)]


# -- every baseline on every example ------------------------------------------------------------

@pytest.mark.parametrize("rules_path", RULES, ids=lambda p: p.stem)
@pytest.mark.parametrize("model_path", EXAMPLES, ids=lambda p: p.stem)
def test_each_baseline_on_the_examples_is_valid_or_flagged(model_path, rules_path):
    rules = load_rules(rules_path)
    p = compile_problem(load_model(model_path, dims=rules.dims), rules)
    for name, algorithm in BASELINES.items():
        sol = algorithm.run(p)
        assert sorted(set(sol.part_of)) == list(range(sol.num_parts)), name
        violations = validate(p, sol)
        # Every node on its preferred device: the priority policy of every source.
        assert evaluate(p, sol).fallback == 0, name
        for v in violations:                       # a reason the source explains
            assert v.kind in {"cycle", "order", "value", "memory"}, (name, str(v))
        if name in ("graphcycles", "longest-path"):
            assert not [v for v in violations if v.kind in ("cycle", "value")], name


# -- helpers ------------------------------------------------------------------------------------

def _random_problem(rng: random.Random, n: int, n_dev: int, value_prob: float = 0.0,
                    bytes_range=(1, 1), memory=None):
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 2.5 / (v + 1)]
    value = [(u, v) for u, v in edges if rng.random() < value_prob]
    edges = [e for e in edges if e not in value]
    allowed = []
    for _ in range(n):
        first = rng.randrange(n_dev)
        allowed.append([first] + ([n_dev - 1] if first != n_dev - 1 else []))
    devices = [f"D{d}" for d in range(n_dev)]
    if memory is not None:
        cap, inst = memory
        devices = [Device(f"D{d}", memory=cap, instances=inst) if d < n_dev - 1 else Device(f"D{d}")
                   for d in range(n_dev)]
    return make_problem(n, edges, allowed, devices, value_edges=value,
                        tensor_bytes=[rng.randint(*bytes_range) for _ in range(n)],
                        const_bytes=[rng.choice([0, rng.randint(*bytes_range)]) for _ in range(n)])


def _convex(p, nodes: set[int]) -> bool:
    """No path leaves the set and comes back."""
    g = nx.DiGraph([(u, v) for u in range(p.n) for v in p.succ[u]])
    g.add_nodes_from(range(p.n))
    outside_from = set()
    for v in nodes:
        outside_from |= {w for w in nx.descendants(g, v) if w not in nodes}
    return not any(nx.descendants(g, w) & nodes for w in outside_from)


def test_validator_names_a_cycle_when_the_smallest_part_is_downstream_of_it():
    # Regression (spine fix in validate._find_cycle): part 0 = {n3} is fed by the cycle
    # 1 <-> 2 but has no successor; the walk used to start there and run out of edges.
    p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0], [1], [0], [1]])
    sol = Solution([1, 2, 1, 0], [1, 0, 1], [0, 0, 0])
    cycles = [v for v in validate(p, sol) if v.kind == "cycle"]
    assert len(cycles) == 1 and sorted(cycles[0].parts) == [1, 2]
