"""The numpy measures (hetero_solve.measures.arrays) give the readable definitions' answers
(hetero_solve.measures.definitions).

Problems that carry arrays (compile builds them for large models) are measured by numpy
passes; these tests build them for small random problems so that both paths run, with graph
inputs, tensors read by several parts, graph outputs, unread outputs and constants shared
between nodes.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

import hetero_solve as hs
from hetero_solve.measures import (fallback_count, part_boundaries, part_memories, part_memory,
                                   problem_arrays, quotient_edges, transfer_bytes)
from hetero_solve.measures.arrays import distinct, flat_pairs
from hetero_solve.model.structure import _first_appearance
from hetero_solve.problem import Device, Problem
from hetero_solve.solution import Solution, evaluate, objective_term

ROOT = Path(__file__).resolve().parents[2]


def random_tensor_problem(rng: random.Random, n: int, devices: int = 3) -> Problem:
    """Nodes in topological order reading distinct earlier tensors; a few graph inputs, one
    or two outputs per node, random graph outputs, constants shared between nodes."""
    producer = [-1] * rng.randint(1, 3)                       # graph inputs
    node_inputs, node_outputs = [], []
    for v in range(n):
        k = min(len(producer), rng.randint(0, 3))
        node_inputs.append(sorted(rng.sample(range(len(producer)), k)))
        outs = []
        for _ in range(rng.randint(1, 2)):
            outs.append(len(producer))
            producer.append(v)
        node_outputs.append(outs)
    T = len(producer)
    consumers: list[list[int]] = [[] for _ in range(T)]
    for v, ins in enumerate(node_inputs):
        for t in ins:
            consumers[t].append(v)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for v, ins in enumerate(node_inputs):
        for u in sorted({producer[t] for t in ins if producer[t] >= 0}):
            succ[u].append(v)
            pred[v].append(u)
    C = rng.randint(0, 6)
    allowed = [tuple(rng.sample(range(devices), rng.randint(1, devices))) for _ in range(n)]
    value_pred = [[u for u in pred[v] if rng.random() < 0.3] for v in range(n)]
    return Problem(
        devices=[Device(f"D{d}", enforce_values=d != 1) for d in range(devices)],
        names=[f"n{v}" for v in range(n)],
        op_types=["Op"] * n, allowed=allowed, succ=succ, pred=pred,
        value_pred=value_pred, tensor_names=[f"t{t}" for t in range(T)],
        tensor_bytes=[rng.randint(1, 1000) for _ in range(T)], tensor_producer=producer,
        tensor_consumers=consumers, tensor_is_output=[rng.random() < 0.2 for _ in range(T)],
        node_inputs=node_inputs, node_outputs=node_outputs,
        const_names=[f"c{c}" for c in range(C)], const_bytes=[rng.randint(1, 50) for _ in range(C)],
        node_consts=[sorted(rng.sample(range(C), rng.randint(0, min(C, 2)))) for _ in range(n)])


def measures(p: Problem, sol: Solution) -> tuple:
    return (evaluate(p, sol).as_dict(), evaluate(p, sol).part_memory,
            transfer_bytes(p, sol.part_of), quotient_edges(p, sol.part_of),
            objective_term(p, sol, "fallback"), part_boundaries(p, sol.part_of))


def with_arrays(p: Problem) -> Problem:
    """``p`` measured by numpy from now on."""
    p.arrays = problem_arrays(p, min_nodes=0)
    return p


@pytest.mark.parametrize("seed", range(30))
def test_numpy_measures_equal_the_definitions(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 80)
    p = random_tensor_problem(rng, n)
    k = rng.randint(1, 6)
    part_of = [rng.randrange(k) for _ in range(n)]
    used = sorted(set(part_of))
    part_of = [used.index(q) for q in part_of]          # parts 0..k-1, none empty
    k = len(used)
    sol = Solution(part_of, [rng.randrange(3) for _ in range(k)], [0] * k)

    assert p.arrays is None
    python = measures(p, sol)
    with_arrays(p)
    assert p.arrays is not None
    numpy = measures(p, sol)
    assert numpy == python
    # ... and both are docs/problem.md's definitions, applied part by part.
    mem, transfer = part_memories(p, part_of, k)
    assert mem == [part_memory(p, [v for v in range(n) if part_of[v] == q]) for q in range(k)]
    expected_transfer = sum(p.tensor_bytes[t] * len({part_of[c] for c in p.tensor_consumers[t]}
                                                    - {part_of[p.tensor_producer[t]]})
                            for t in range(len(p.tensor_names)) if p.tensor_producer[t] >= 0)
    assert transfer == expected_transfer
    assert numpy[4] == sum(1 for v in range(n) if sol.node_device()[v] != p.allowed[v][0])
    assert numpy[3] == {(part_of[u], part_of[v]) for u in range(n) for v in p.succ[u]
                        if part_of[u] != part_of[v]}
    # Boundaries: each part alone (the Python walk over its own nodes).
    assert numpy[5] == {q: part_boundaries(p, part_of, [v for v in range(n) if part_of[v] == q])[q]
                        for q in range(k)}


def test_one_part_and_every_node_alone():
    rng = random.Random(7)
    p = with_arrays(random_tensor_problem(rng, 40))
    for part_of in ([0] * 40, list(range(40))):
        k = max(part_of) + 1
        sol = Solution(part_of, [0] * k, [0] * k)
        mem, transfer = part_memories(p, part_of, k)
        assert mem == [part_memory(p, [v for v in range(40) if part_of[v] == q]) for q in range(k)]
        assert quotient_edges(p, part_of) == ({(u, v) for u in range(40) for v in p.succ[u]}
                                              if k > 1 else set())
        assert (transfer == 0) == (k == 1)
        assert objective_term(p, sol, "fallback") == sum(1 for a in p.allowed if a[0] != 0)


def test_compile_hands_over_the_pairs_it_found(monkeypatch):
    """The flat pairs compile hands to the arrays are the problem's own lists, flattened (as
    sets); small models get no arrays."""
    from hetero_solve.measures import arrays
    rules = hs.load_rules(ROOT / "rules" / "npu-gpu-cpu.yaml")
    mg = hs.load_model(ROOT / "examples" / "transformer_encoder.onnx")
    assert hs.compile_problem(mg, rules).arrays is None
    monkeypatch.setattr(arrays, "MIN_NODES", 0)
    p = hs.compile_problem(mg, rules)
    got = p.arrays
    kept = {"const_node": got.const_node, "const_id": got.const_id, "edge_from": got.edge_from,
            "edge_to": got.edge_to, "read_node": got.read_node, "read_tensor": got.read_tensor,
            "write_node": got.write_node, "write_tensor": got.write_tensor}
    read = flat_pairs(p)
    for a, b in (("const_node", "const_id"), ("edge_from", "edge_to")):
        assert set(zip(kept[a].tolist(), kept[b].tolist())) == set(zip(read[a].tolist(), read[b].tolist()))
        assert len(kept[a]) == len(read[a])                       # no pair twice
    for a, b in (("read_node", "read_tensor"), ("write_node", "write_tensor")):   # same order
        assert kept[a].tolist() == read[a].tolist() and kept[b].tolist() == read[b].tolist()


def test_a_solved_example_measures_the_same_both_ways():
    rules = hs.load_rules(ROOT / "rules" / "npu-static.yaml")
    mg = hs.load_model(ROOT / "examples" / "transformer_encoder.onnx", {**rules.dims, "seq": 16})
    p = hs.compile_problem(mg, rules)
    sol = hs.heuristic(p)
    python = measures(p, sol)
    numpy = measures(with_arrays(p), sol)
    assert python == numpy
    assert numpy[0]["partitions"] == sol.num_parts > 1


def test_a_problem_is_plain_data():
    """No hidden state: the fields are all a problem holds, a pickled problem equals the
    original and measures the same, and a problem copied with other ``allowed`` lists counts
    fallback against its own lists even when it shares the original's arrays."""
    import dataclasses
    p = with_arrays(random_tensor_problem(random.Random(3), 30))
    assert set(vars(p)) == {f.name for f in dataclasses.fields(p)}
    part_of = [v % 4 for v in range(30)]
    before = transfer_bytes(p, part_of)
    q = pickle.loads(pickle.dumps(p))
    assert q == p and transfer_bytes(q, part_of) == before and q.arrays is not None
    moved = dataclasses.replace(p, allowed=[(2,) + tuple(a) for a in p.allowed])
    assert moved.arrays is p.arrays
    assert fallback_count(moved, part_of, [2] * 4) == 0
    assert fallback_count(moved, part_of, [0] * 4) == 30
    assert fallback_count(p, part_of, [0] * 4) == sum(a[0] != 0 for a in p.allowed)


def test_byte_counts_too_large_for_int64_use_python_integers():
    p = random_tensor_problem(random.Random(5), 20)
    p.tensor_bytes = [2 ** 62 + t for t in range(len(p.tensor_names))]
    assert problem_arrays(p, min_nodes=0) is None
    part_of = [v % 3 for v in range(20)]
    mem, transfer = part_memories(p, part_of, 3)
    assert mem == [part_memory(p, [v for v in range(20) if part_of[v] == q]) for q in range(3)]
    assert max(mem) > 2 ** 63            # exact, no wrap-around


@pytest.mark.parametrize("seed", range(5))
def test_distinct_and_first_appearance(seed):
    rng = np.random.default_rng(seed)
    for size in (0, 1, 2, 50, 5000):
        keys = rng.integers(0, max(1, size // 3), size)
        assert np.array_equal(distinct(keys), np.unique(keys))
        expected = list(dict.fromkeys(keys.tolist()))
        assert _first_appearance(keys).tolist() == expected


@pytest.mark.parametrize("seed", range(40))
def test_the_validator_finds_the_same_violations_both_ways(seed):
    """The validator's numpy pre-checks (nodes off their preferred device, a backward edge,
    a value edge inside an enforcing part) never hide a violation the Python walks find."""
    rng = random.Random(seed)
    n = rng.randint(2, 60)
    p = random_tensor_problem(rng, n)
    cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, 5))))
    part_of = [sum(v >= c for c in cuts) for v in range(n)]     # contiguous: acyclic, ordered
    k = len(cuts) + 1
    style = seed % 4
    if style == 1:      # renumbered: acyclic, ids not topological
        perm = list(range(k))
        rng.shuffle(perm)
        part_of = [perm[q] for q in part_of]
    elif style == 2:    # anything: cycles too
        part_of = [rng.randrange(k) for _ in range(n)]
    if style == 3:      # every node on its preferred device when the parts allow it
        part_device = [p.allowed[min(v for v in range(n) if part_of[v] == q)][0]
                       if q in part_of else 0 for q in range(k)]
    else:
        part_device = [rng.randrange(3) for _ in range(k)]
    sol = Solution(part_of, part_device, [0] * k)
    python = [v.as_dict() for v in hs.validate(p, sol)]
    numpy = [v.as_dict() for v in hs.validate(with_arrays(p), sol)]
    assert numpy == python


def test_every_kind_of_violation_is_found_on_the_numpy_path():
    p = with_arrays(random_tensor_problem(random.Random(11), 50))
    kinds = set()
    for seed in range(200):
        rng = random.Random(seed)
        k = rng.randint(1, 4)
        cuts = sorted(rng.sample(range(1, 50), k - 1))
        part_of = [sum(v >= c for c in cuts) for v in range(50)]
        if seed % 2:
            part_of = [k - 1 - q for q in part_of]
        sol = Solution(part_of, [rng.randrange(3) for _ in range(k)], [0] * k)
        kinds |= {v.kind for v in hs.validate(p, sol)}
    assert {"support", "order", "value"} <= kinds


@pytest.mark.parametrize("ascending", [True, False])
def test_the_heuristic_gives_the_same_answer_on_both_paths(ascending):
    """With the arrays the greedy takes the node ids as its topological order when every
    edge ascends (compiled models), and Kahn's order otherwise: the answer is the same."""
    rng = random.Random(4)
    n = 60
    relabel = list(range(n)) if ascending else list(reversed(range(n)))
    edges = [(relabel[u], relabel[v]) for v in range(n) for u in range(v) if rng.random() < 0.08]
    value = [e for e in edges if rng.random() < 0.2]
    allowed = [[rng.randrange(2)] if rng.random() < 0.7 else [0, 1] for _ in range(n)]
    p = hs.make_problem(n, edges, allowed, value_edges=value)
    python = hs.heuristic(p)
    assert with_arrays(p).arrays.edges_ascend() == ascending
    numpy = hs.heuristic(p)
    assert (numpy.part_of, numpy.part_device) == (python.part_of, python.part_device)
    assert python.num_parts > 2


def test_a_pickled_compiled_problem_holds_no_onnx_model():
    import pickletools
    rules = hs.load_rules(ROOT / "rules" / "npu-static.yaml")
    mg = hs.load_model(ROOT / "examples" / "transformer_encoder.onnx", {**rules.dims, "seq": 16})
    p = hs.compile_problem(mg, rules)
    p.arrays = problem_arrays(p, min_nodes=0)
    data = pickle.dumps(p)
    modules = {arg.split()[0] for op, arg, _ in pickletools.genops(data)
               if op.name in ("GLOBAL", "STACK_GLOBAL") and isinstance(arg, str)}
    strings = [arg for op, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
    assert not any(m.startswith("onnx") for m in modules)
    assert not any(s.startswith("onnx") for s in strings)
    assert pickle.loads(data) == p
