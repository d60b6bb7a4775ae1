"""``hetero-solve check``: user-defined maps validated like Glow validates user-defined
partitions.  One crafted map per violation kind, valid maps accepted and exported, bad input
rejected with the name of what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

import hetero_solve as hs
from hetero_solve.cli import app
from hetero_solve.export import write_result
from hetero_solve.user_partition import AffinityError, check_affinity
from hetero_solve.run.verify import verify

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "seed000.onnx"          # 1->2, 2->3, 2->4, 3->5, 4->5, 5->6, 6->7
SEED_RULES = ROOT / "rules" / "seed000.yaml"        # ACCEL takes Relu/Add; "4" (Erf) -> CPU
ACC = ["1", "2", "3", "5", "6", "7"]
VALID_PARTS = {"1": 0, "2": 0, "4": 1, "3": 2, "5": 2, "6": 2, "7": 2}
runner = CliRunner()


def seed_rules(**accel) -> dict:
    return {"version": 1, "devices": [
        {"name": "ACCEL", "ops": {"supported": ["Relu", "Add"]}, **accel},
        {"name": "CPU", "ops": {"supported": "all"}}]}


def check(model, rules, amap, **kw):
    return check_affinity(model, rules, amap, engine="heuristic", **kw)


def kinds(report) -> list[str]:
    return [v.kind for v in report.violations]


# -- one crafted map per violation kind -------------------------------------------------------

def test_check_compiles_the_problem_once_for_the_map_and_the_optimum(monkeypatch):
    """``check`` judges the map and solves for the optimum on one compiled problem: compile
    runs once, and the optimum is the one ``solve`` finds on its own."""
    import hetero_solve.compile as compile_module
    calls = []
    check_sizes = compile_module._check_sizes       # once per compile_problem, whoever calls
    monkeypatch.setattr(compile_module, "_check_sizes",
                        lambda *a: calls.append(1) or check_sizes(*a))
    rep = check_affinity(SEED, SEED_RULES, VALID_PARTS, engine="auto", optimum=True)
    assert len(calls) == 1
    alone = hs.solve(SEED, SEED_RULES)
    assert len(calls) == 2
    assert rep.valid and rep.optimum.metrics.partitions == alone.metrics.partitions
    assert rep.optimum.solution.part_of == alone.solution.part_of


def test_support_names_the_node_and_the_reason():
    report = check(SEED, SEED_RULES, {n: "ACCEL" for n in ACC + ["4"]})
    assert kinds(report) == ["support"]
    v = report.violations[0]
    assert v.nodes == ["4"] and "Erf" in v.message and "ACCEL" in v.message
    assert "not in ACCEL's ops.supported" in v.message
    assert report.device_partitions is None        # no split can keep a refused device


def test_support_names_the_failing_condition(tmp_path):
    w = nh.from_array(np.ones((4, 2, 3, 3), np.float32), "w")
    graph = h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["c"], name="grouped", group=2, pads=[1, 1, 1, 1]),
         h.make_node("Relu", ["c"], ["y"], name="relu")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], initializer=[w])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    rules = {"version": 1, "devices": [
        {"name": "NPU", "ops": {"supported": ["Conv", "Relu"],
                                "when": {"Conv": {"attributes": {"group": 1}}}}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    report = check(model, rules, {"grouped": "NPU", "relu": "NPU"})
    assert kinds(report) == ["support"]
    assert report.violations[0].nodes == ["grouped"]
    assert "group" in report.violations[0].message


def test_pin_broken_by_a_hand_edited_partition_json():
    rules = seed_rules()
    rules["affinity"] = {"6": "CPU"}
    amap = {"partitions": [
        {"id": 0, "device": "ACCEL", "node_names": ["1", "2"]},
        {"id": 1, "device": "CPU", "node_names": ["4"]},
        {"id": 2, "device": "ACCEL", "node_names": ["3", "5", "6", "7"]}]}
    report = check(SEED, rules, amap)
    assert kinds(report) == ["pin"]
    assert report.violations[0].nodes == ["6"] and "pinned to CPU" in report.violations[0].message


def test_cycle_of_device_regions_with_the_closing_path():
    """OpenVINO-style regions: all ACCEL nodes are connected, so they form one part, and the
    CPU part {4} sits between it and itself."""
    amap = {**{n: "ACCEL" for n in ACC}, "4": "CPU"}
    report = check(SEED, SEED_RULES, amap, split="regions")
    assert kinds(report) == ["cycle"]
    v = report.violations[0]
    assert sorted(v.parts) == [0, 1]
    assert "'2' -> '4'" in v.message and "'4' -> '5'" in v.message
    assert report.partitions == 2
    # the same devices split into the fewest valid parts: 3 (seed 000's answer)
    assert report.device_partitions == 3
    fixed = check(SEED, SEED_RULES, amap, split="fewest")
    assert fixed.valid and fixed.partitions == 3


def test_cycle_of_a_part_map():
    amap = {"1": 0, "2": 0, "3": 0, "5": 0, "6": 0, "7": 0, "4": 1}
    report = check(SEED, SEED_RULES, amap)
    assert kinds(report) == ["cycle"]
    assert "form a cycle" in report.violations[0].message


def test_value_input_made_in_the_same_part():
    graph = h.make_graph(
        [h.make_node("Relu", ["x"], ["r"], name="relu"),
         h.make_node("Abs", ["s"], ["shape"], name="shape_of"),
         h.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 8]),
         h.make_tensor_value_info("s", T.INT64, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    rules = {"version": 1, "value_inputs": {"Reshape": [1]}, "devices": [
        {"name": "NPU", "value_inputs": "enforce", "ops": {"supported": ["Relu", "Abs", "Reshape"]}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    report = check(model, rules, {"relu": "NPU", "shape_of": "NPU", "reshape": "NPU"})
    assert kinds(report) == ["value"]
    v = report.violations[0]
    assert v.nodes == ["shape_of", "reshape"] and "Reshape" in v.message
    assert report.device_partitions == 2            # the shape must come from an earlier part


def test_memory_over_by_the_exact_bytes():
    """Parts 0 ({1,2}: x in, 2_out out) and 2 ({3,5,6,7}: 2_out and 4_out in, y out) are on the
    one ACCEL instance: 5 tensors of 1x16 float32 = 320 bytes, 20 over 300."""
    report = check(SEED, seed_rules(memory=300), VALID_PARTS)
    assert kinds(report) == ["memory"]
    v = report.violations[0]
    assert "over its 300 B by 20 B" in v.message and sorted(v.parts) == [0, 2]


def test_two_instances_take_the_parts_memory_would_refuse_one():
    rules = seed_rules(memory=200, instances=2)
    report = check(SEED, rules, VALID_PARTS)
    assert report.valid
    acc = [k for k, d in enumerate(report.solution.part_device) if d == 0]
    assert sorted(report.solution.part_instance[k] for k in acc) == [0, 1]
    # both ACCEL parts put on instance 1 by hand: over again
    pinned = {n: {"part": p, "device": "CPU" if n == "4" else "ACCEL"} for n, p in VALID_PARTS.items()}
    pinned["1"]["instance"] = pinned["3"]["instance"] = 1
    report = check(SEED, rules, pinned)
    assert kinds(report) == ["memory"] and "ACCEL instance 1" in report.violations[0].message
    # OpenVINO's "GPU.1" spelling names an instance in a node -> device map; regions of
    # different instances are different parts
    named = {"1": "ACCEL.0", "2": "ACCEL.0", "4": "CPU",
             **{n: "ACCEL.1" for n in ("3", "5", "6", "7")}}
    report = check(SEED, rules, named)
    assert report.valid and report.partitions == 3
    assert report.solution.part_instance == [0, 0, 1]
    with pytest.raises(AffinityError, match="instances need --split acyclic or regions"):
        check(SEED, rules, named, split="fewest")


# -- valid maps -------------------------------------------------------------------------------

def test_valid_part_map_is_exported_like_a_solved_one(tmp_path):
    report = check(SEED, SEED_RULES, VALID_PARTS)
    assert report.valid and report.partitions == 3 and report.optimum_partitions == 3
    out = report.write(tmp_path / "out")
    manifest = json.loads((out / "partition.json").read_text())
    assert [p["device"] for p in manifest["partitions"]] == ["ACCEL", "CPU", "ACCEL"]
    assert [p["node_names"] for p in manifest["partitions"]] == [["1", "2"], ["4"], ["3", "5", "6", "7"]]
    assert all(a < b for a, b in manifest["edges"])
    assert manifest["solver"]["algorithm"] == "user"
    assert manifest["solver"]["optimum_partitions"] == 3
    for name in ("affinity.json", "model.annotated.onnx", "partitions.dot", "part0_ACCEL.onnx"):
        assert (out / name).is_file()
    assert verify(SEED, out).ok


def test_part_ids_are_renumbered_topologically():
    amap = {"1": 7, "2": 7, "4": 3, "3": 0, "5": 0, "6": 0, "7": 0}
    report = check(SEED, SEED_RULES, amap)
    assert report.valid
    assert report.solution.part_of == [0, 0, 2, 1, 2, 2, 2]     # nodes 1,2,3,4,5,6,7


def test_solved_outputs_check_back_as_valid(tmp_path):
    model, rules = ROOT / "examples/transformer_encoder.onnx", ROOT / "rules/npu-static.yaml"
    solved = hs.solve(model, rules, dims={"seq": 16}, engine="heuristic")
    out = write_result(solved, tmp_path / "solved")
    again = check(model, rules, out / "partition.json", dims={"seq": 16})
    assert again.valid and again.partitions == solved.metrics.partitions
    assert again.solution.part_of == solved.solution.part_of
    by_device = check(model, rules, out / "affinity.json", dims={"seq": 16}, split="fewest")
    assert by_device.valid and by_device.metrics.fallback == 0


def _nothing_to_place(path: Path) -> Path:
    """A valid model whose outputs are a constant and its input passed through: no node to
    place, so every map of it is empty."""
    const = h.make_node("Constant", [], ["c"], value=nh.from_array(np.ones(2, np.float32), "v"))
    graph = h.make_graph([const], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("c", T.FLOAT, [2]),
                          h.make_tensor_value_info("x", T.FLOAT, [2])])
    # IR version 8: one the onnxruntime in use reads (verify runs the original too).
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return path


def test_a_model_with_nothing_to_place_checks_back_its_own_empty_maps(tmp_path):
    model = _nothing_to_place(tmp_path / "zero.onnx")
    rules = ROOT / "rules/gpu-cpu.yaml"
    out = write_result(hs.solve(model, rules, engine="heuristic"), tmp_path / "solved")
    assert json.loads((out / "affinity.json").read_text()) == {}
    for amap in ("affinity.json", "partition.json"):
        again = check(model, rules, out / amap)
        assert again.valid and again.partitions == 0, amap
    res = runner.invoke(app, ["check", str(model), str(rules), "--affinity",
                              str(out / "partition.json"), "-o", str(tmp_path / "back"), "-q"])
    assert res.exit_code == 0, res.output
    report = verify(model, tmp_path / "back")
    assert report.ok and {o.name for o in report.outputs} == {"c", "x"}
    assert all(o.max_abs == 0.0 for o in report.outputs)


def test_an_empty_map_of_a_model_with_nodes_names_what_it_misses():
    with pytest.raises(AffinityError, match=r"7 node\(s\) missing from the map"):
        check(SEED, SEED_RULES, {})
    with pytest.raises(AffinityError, match=r"7 node\(s\) missing from the map"):
        check(SEED, SEED_RULES, {"partitions": []})


# -- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("amap, message", [
    ({n: "ACCEL" for n in ACC}, r"1 node\(s\) missing from the map: '4'"),
    ({**VALID_PARTS, "nine": 0}, r"no node named 'nine'"),
    ({**{n: "ACCEL" for n in ACC}, "4": "GPU"}, r"\['4'\]: unknown device 'GPU' \(the rules have ACCEL, CPU\)"),
    ({**{n: "ACCEL" for n in ACC}, "4": 1}, r"has a part id but"),
    ({**{n: "ACCEL" for n in ACC}, "4": "ACCEL.3"}, r"ACCEL has 1 instance\(s\)"),
    ({**VALID_PARTS, "4": -1}, r"negative"),
    ([], r"expected a JSON object"),
])
def test_bad_maps_are_named(amap, message):
    with pytest.raises(AffinityError, match=message):
        check(SEED, SEED_RULES, amap)


# -- the command line -------------------------------------------------------------------------

def _write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


def test_cli_check_valid_exports(tmp_path):
    amap = _write(tmp_path, "parts.json", VALID_PARTS)
    out = tmp_path / "out"
    res = runner.invoke(app, ["check", str(SEED), str(SEED_RULES), "--affinity", str(amap),
                              "-o", str(out), "--engine", "heuristic", "-q"])
    assert res.exit_code == 0, res.output
    assert "check: valid" in res.stdout and "hetero-solve: 3 part(s)" in res.stdout
    assert (out / "partition.json").is_file()


def test_cli_check_lists_every_violation_exit_1(tmp_path):
    rules = _write(tmp_path, "r.yaml", seed_rules(memory=100))
    amap = _write(tmp_path, "a.json", {n: "ACCEL" for n in ACC + ["4"]})
    res = runner.invoke(app, ["check", str(SEED), str(rules), "--affinity", str(amap),
                              "--engine", "heuristic", "-q", "-o", str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    assert "violation: support: node '4' (Erf)" in res.stdout
    assert "violation: memory:" in res.stdout and "by 28" in res.stdout   # 128 - 100
    assert "check: INVALID: 2 violation(s)" in res.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["--affinity", "missing.json"], "missing.json: no such file"),
    (["--affinity", "{bad}"], "not valid JSON at line 1"),
    (["--affinity", "ok", "--split", "nope"], "--split 'nope'"),
])
def test_cli_check_bad_input_exit_2(tmp_path, args, message):
    (tmp_path / "{bad}").write_text("{not json")
    (tmp_path / "ok").write_text(json.dumps(VALID_PARTS))
    args = [str(tmp_path / a) if a in ("missing.json", "{bad}", "ok") else a for a in args]
    res = runner.invoke(app, ["check", str(SEED), str(SEED_RULES), *args, "-q",
                              "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetero-solve: error:") and message in lines[0]
    assert not (tmp_path / "out").exists()


def test_console_entry_exit_codes(tmp_path):
    """The real entry point (python -m hetero_solve), not only typer's test runner."""
    import subprocess
    import sys
    amap = _write(tmp_path, "a.json", {**{n: "ACCEL" for n in ACC}, "4": "CPU"})
    base = [sys.executable, "-m", "hetero_solve", "check", str(SEED), str(SEED_RULES),
            "--engine", "heuristic", "-q", "--no-export", "--split", "regions", "--affinity"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    cyc = subprocess.run(base + [str(amap)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert cyc.returncode == 1, cyc.stderr
    assert "violation: cycle: parts 0 -> 1 -> 0" in cyc.stdout
    bad = subprocess.run(base + [str(tmp_path / "none.json")], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f"hetero-solve: error: {tmp_path / 'none.json'}: no such file"]


def test_check_draws_both_solves_from_one_budget(monkeypatch):
    """The fewest parts for the map's devices gets half of the one budget, the optimum the
    rest: nothing is spent twice (issue 29)."""
    import hetero_solve.user_partition as up
    seen = {}
    real_fewest, real_solve = up.fewest_for_devices, up.solve_prepared

    def fewest(*a, budget, **k):
        seen["fewest"] = budget
        return real_fewest(*a, budget=budget, **k)

    def solve(*a, budget, **k):
        seen["optimum"] = budget
        return real_solve(*a, budget=budget, **k)

    monkeypatch.setattr(up, "fewest_for_devices", fewest)
    monkeypatch.setattr(up, "solve_prepared", solve)
    rep = check_affinity(SEED, SEED_RULES, VALID_PARTS, engine="auto", work_limit=1.0)
    assert rep.valid
    assert seen["fewest"].parent is seen["optimum"] and seen["optimum"].parent is None
    assert seen["fewest"].work == 0.5 and seen["optimum"].work_limit == 1.0
    assert seen["optimum"].spent <= 1.0 + 0.2   # a run's last step may pass a little
