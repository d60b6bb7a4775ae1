"""Pins move nodes; memory limits force a second instance or a fallback, and the result fits."""

from __future__ import annotations

import numpy as np
import pytest

import hetero_solve as hs
from hetero_solve.export import affinity_map
from hetero_solve.measures import part_memory

from conftest import EXAMPLES, chain_model
from hetero_solve.budget import Budget

KIB = 1024


def _devices_of(result: hs.Result) -> dict[str, str]:
    return affinity_map(result.problem, result.solution)


def test_exact_pin_moves_a_node_and_costs_no_fallback():
    rules = {"version": 1, "devices": [{"name": "ACCEL", "ops": {"supported": ["Relu", "Add"]}},
                                       {"name": "CPU", "ops": {"supported": "all"}}],
             "affinity": {"6": "CPU"}}
    r = hs.solve(EXAMPLES / "seed000.onnx", rules, engine="heuristic")
    aff = _devices_of(r)
    assert aff["6"] == "CPU" and aff["5"] == "ACCEL" and aff["7"] == "ACCEL"
    assert r.metrics.fallback == 0          # a pinned node's preferred device is its pin
    assert hs.validate(r.problem, r.solution) == []


def test_exact_pin_beats_globs_and_the_first_glob_wins():
    rules = {"version": 1, "devices": [{"name": "A", "ops": {"supported": "all"}},
                                       {"name": "B", "ops": {"supported": "all"}},
                                       {"name": "C", "ops": {"supported": "all"}}],
             "affinity": {"[3-5]": "B", "[5-7]": "C", "5": "A"}}
    r = hs.solve(EXAMPLES / "seed000.onnx", rules, engine="heuristic")
    aff = _devices_of(r)
    assert [aff[str(i)] for i in range(1, 8)] == ["A", "A", "B", "B", "A", "C", "C"]
    assert hs.validate(r.problem, r.solution) == []


def test_a_glob_also_matches_slashes():
    rules = {"version": 1, "devices": [{"name": "NPU", "ops": {"supported": "all"}},
                                       {"name": "CPU", "ops": {"supported": "all"}}],
             "affinity": {"layer3*": "CPU"}}
    r = hs.solve(EXAMPLES / "resnet_like.onnx", rules, dims={"batch": 1}, engine="heuristic")
    aff = _devices_of(r)
    layer3 = [n for n in aff if n.startswith("layer3")]
    assert layer3 and all(aff[n] == "CPU" for n in layer3)
    assert all(d == "NPU" for n, d in aff.items() if not n.startswith("layer3"))
    assert r.metrics.partitions == 3   # NPU stem..layer2, CPU layer3, NPU head


def test_pin_to_a_device_that_refuses_the_node_is_an_error():
    rules = {"version": 1, "devices": [{"name": "ACCEL", "ops": {"supported": ["Relu", "Add"]}},
                                       {"name": "CPU", "ops": {"supported": "all"}}],
             "affinity": {"4": "ACCEL"}}
    with pytest.raises(hs.InfeasibleError, match=r"'4' \(Erf\) is pinned to ACCEL.*not in ACCEL's ops.supported"):
        hs.solve(EXAMPLES / "seed000.onnx", rules, engine="heuristic")


# -- memory ------------------------------------------------------------------------------------

def add_chain(k: int = 6, width: int = 256):
    """x -> Add(w0) -> ... -> Add(w{k-1}) -> y; each weight is width floats (1 KiB at 256)."""
    ops = [("Add", ["x" if i == 0 else f"t{i - 1}", f"w{i}"], f"t{i}" if i < k - 1 else "y") for i in range(k)]
    inits = {f"w{i}": np.full(width, i, np.float32) for i in range(k)}
    return chain_model(ops, {"x": [width]}, {"y": [width]}, inits)


def _mem_rules(memory: str, instances: int) -> dict:
    return {"version": 1, "devices": [
        {"name": "ACC", "memory": memory, "instances": instances, "ops": {"supported": "all"}},
        {"name": "CPU", "ops": {"supported": "all"}}]}


def _check_fits(r: hs.Result) -> None:
    assert hs.validate(r.problem, r.solution) == []
    for (d, _inst), used in r.metrics.instance_memory.items():
        cap = r.problem.devices[d].memory
        assert cap is None or used <= cap
    for k, nodes in enumerate(r.parts()):
        assert r.metrics.part_memory[k] == part_memory(r.problem, nodes)


def test_without_a_limit_the_chain_is_one_part():
    r = hs.solve(add_chain(), _mem_rules("1MiB", 1), engine="heuristic")
    assert r.metrics.partitions == 1
    assert r.metrics.part_memory == [8 * KIB]   # 6 weights + input + output


def test_memory_limit_uses_a_second_instance():
    # 5 KiB per instance holds 3 weights + the part's input and output (1 KiB each).
    r = hs.solve(add_chain(), _mem_rules("5KiB", 2), engine="heuristic")
    _check_fits(r)
    assert r.metrics.partitions == 2 and r.metrics.fallback == 0
    assert sorted(r.solution.part_instance) == [0, 1]
    assert r.metrics.part_memory == [5 * KIB, 5 * KIB]


def test_memory_limit_with_one_instance_falls_back_to_the_cpu():
    r = hs.solve(add_chain(), _mem_rules("5KiB", 1), engine="heuristic")
    _check_fits(r)
    aff = affinity_map(r.problem, r.solution)
    # three weights fit beside the part's input and output: either end of the chain
    assert [aff[f"n{i}"] for i in range(6)] in (["ACC"] * 3 + ["CPU"] * 3, ["CPU"] * 3 + ["ACC"] * 3)
    assert r.metrics.fallback == 3 and r.metrics.partitions == 2


def test_the_validator_reports_memory_over_by_how_many_bytes():
    r = hs.solve(add_chain(), _mem_rules("5KiB", 1), engine="heuristic")
    everything_on_acc = hs.Solution([0] * 6, [0], [0])
    (v,) = hs.validate(r.problem, everything_on_acc)
    assert v.kind == "memory" and "over its 5.0 KiB by 3.0 KiB" in v.message


def test_a_node_that_fits_nowhere_is_a_clear_error():
    rules = {"version": 1, "devices": [{"name": "ACC", "memory": "2KiB", "ops": {"supported": "all"}}]}
    # n0 reads the 1 KiB input and its 1 KiB weight whatever its part; alone it also holds
    # its 1 KiB output, and every larger part holds more weights: 3 KiB at least.
    with pytest.raises(hs.InfeasibleError,
                       match=r"memory: node 'n0' \(Add\) fits no device: ACC needs at least 3072 "
                             r"bytes \(3.0 KiB\) in any part holding it, over its 2.0 KiB"):
        hs.solve(add_chain(), rules, engine="heuristic")


def test_the_heuristic_fits_memory_on_random_problems():
    """Every answer of the heuristic on random memory-limited problems is valid."""
    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(5, 40))
        edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.15]
        allowed = [[0, 1] if rng.random() < 0.8 else [1] for _ in range(n)]
        tb = [int(x) for x in rng.integers(1, 50, n)]
        cb = [int(x) for x in rng.integers(0, 80, n)]
        cap = int(rng.integers(150, 400))
        p = hs.make_problem(n, edges, allowed, [hs.Device("ACC", cap, 2), hs.Device("CPU")],
                            tensor_bytes=tb, const_bytes=cb)
        sol = hs.heuristic(p)        # the CPU takes every node: always feasible
        assert hs.validate(p, sol) == [], trial


def test_independent_weights_are_packed_first_fit_decreasing():
    """Independent weights 4, 5, 5, 6 on two 10-byte instances: {4, 6} + {5, 5}."""
    p = hs.make_problem(4, [], [[0]] * 4, [hs.Device("ACC", 10, 2)], tensor_bytes=0,
                        const_bytes=[4, 5, 5, 6])
    sol = hs.heuristic(p)
    assert hs.validate(p, sol) == []
    assert sorted(map(sorted, sol.parts())) == [[0, 3], [1, 2]]


def test_when_the_greedy_cannot_pack_memory_the_exact_solver_does():
    """Independent weights 5, 4, 3, 3, 3, 2 on two 10-byte instances: first-fit decreasing
    packs {5, 4} and {3, 3, 3} and has no room for 2; {5, 3, 2} + {4, 3, 3} fits.  The
    heuristic says it is not a proof (PackingFailed); the pipeline asks the exact solver;
    with the heuristic alone, the error stands and says the solver was not asked."""
    from hetero_solve.algorithms.greedy import PackingFailed
    from hetero_solve.pipeline import initial_solution
    p = hs.make_problem(6, [], [[0]] * 6, [hs.Device("ACC", 10, 2)], tensor_bytes=0,
                        const_bytes=[5, 4, 3, 3, 3, 2])
    with pytest.raises(PackingFailed, match="not a proof"):
        hs.heuristic(p)
    sol = initial_solution(p, engine="auto", budget=Budget.of(work_limit=2.5))
    assert hs.validate(p, sol) == []
    assert sorted(sorted(p.const_bytes[v] for v in part) for part in sol.parts()) == [[2, 3, 5], [3, 3, 4]]
    assert "could not fit the memory limits" in p.info.warnings[-1]
    with pytest.raises(hs.InfeasibleError, match="the exact solver was not asked"):
        initial_solution(p, engine="heuristic")


def test_a_node_memory_refuses_is_refused_at_once_with_its_bytes():
    """Proven refusals (no part holding the node fits) are not handed to the exact solver."""
    from hetero_solve.algorithms.greedy import PackingFailed
    from hetero_solve.pipeline import initial_solution
    p = hs.make_problem(2, [(0, 1)], [[0], [0]], [hs.Device("ACC", 10)], tensor_bytes=1,
                        const_bytes=[50, 0])
    with pytest.raises(hs.InfeasibleError, match=r"node 'n0' \(Op\) fits no device: ACC needs "
                                                 r"at least 51 bytes") as e:
        initial_solution(p, engine="auto", budget=Budget.of(work_limit=2.5))
    assert not isinstance(e.value, PackingFailed)


def test_memory_that_cannot_hold_what_must_be_placed_is_named():
    """Two nodes only the 10-byte ACC takes, each reading 6 bytes of weights: no partition
    fits, and the error names the device and the bytes missing (proven, no solver run)."""
    from hetero_solve.algorithms.greedy import PackingFailed
    from hetero_solve.pipeline import initial_solution
    p = hs.make_problem(2, [], [[0], [0]], [hs.Device("ACC", 10)], tensor_bytes=0,
                        const_bytes=[6, 6])
    with pytest.raises(hs.InfeasibleError, match=r"2 node\(s\) can only run on ACC \('n0', 'n1'\); "
                       r"their constants and graph inputs/outputs alone need 12 bytes .* "
                       r"2 bytes missing") as e:
        initial_solution(p, engine="auto", budget=Budget.of(work_limit=2.5))
    assert not isinstance(e.value, PackingFailed)
    # with a second instance it fits: one node on each
    p2 = hs.make_problem(2, [], [[0], [0]], [hs.Device("ACC", 10, 2)], tensor_bytes=0,
                         const_bytes=[6, 6])
    assert hs.validate(p2, hs.heuristic(p2)) == []
