"""``hetero-solve rules check RULES [MODEL]`` and the library behind it (rules/check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetero_solve as hs
from hetero_solve.cli import main
from hetero_solve.export import affinity_map
from hetero_solve.model import load_model
from hetero_solve.rules.check import format_query, query, summary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules"
EXAMPLES = ROOT / "examples"
EXAMPLE_DIMS = {"resnet_like": {"batch": 1}, "transformer_encoder": {"batch": 1, "seq": 16},
                "control_flow": {"seq": 5, "batch": 2}, "seed000": {}}


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return e.value.code or 0, out, err


# -- without a model ------------------------------------------------------------------------

def test_check_alone_validates_and_summarises(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "multi-card.yaml")
    assert code == 0
    assert "multi-card.yaml: valid, 2 device(s) in priority order" in out
    assert "CARD (memory 97.7 KiB per instance, 4 instances, value inputs enforce, static shapes)" in out
    assert "unsupported: AveragePool, GlobalAveragePool, If, Loop, Scan" in out
    assert "value inputs: 39 op(s) in the catalog" in out
    assert "dims: batch=1" in out


def test_check_alone_lists_conditions_and_pins(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "fpga-cpu.yaml")
    assert code == 0
    assert "when Conv: group=1, auto_pad=NOTSET, dtypes float32|float16, rank <= 4" in out
    code, out, _ = run(capsys, "rules", "check", RULES / "npu-gpu-cpu.yaml")
    assert 'affinity["head/*"] -> CPU (glob)' in out


def test_a_bad_rule_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndevices:\n  - name: NPU\n    memroy: 8MiB\n    ops: {supported: all}\n")
    code, out, err = run(capsys, "rules", "check", bad)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert f"{bad}: devices[0].memroy: unknown key (did you mean 'memory'?)" in err


def test_a_when_on_a_missing_attribute_is_rejected(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndevices:\n  - name: FPGA\n    ops:\n      supported: [Conv]\n"
                   "      when: {Conv: {attributes: {groups: 1}}}\n")
    code, _, err = run(capsys, "rules", "check", bad, EXAMPLES / "seed000.onnx")
    assert code == 2
    assert "devices[0].ops.when.Conv.attributes.groups: op Conv has no attribute 'groups'" in err


# -- with a model ---------------------------------------------------------------------------

def test_check_reports_a_refused_node_with_the_condition_that_refused_it(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "seed000.yaml", EXAMPLES / "seed000.onnx")
    assert code == 0
    assert "takes 6 node(s), preferred device of 6: Relu×5, Add" in out
    assert "Erf×1: Erf is not in ACCEL's ops.supported [4]" in out
    lines = out.splitlines()
    assert any(line.split() == ["4", "Erf", "CPU", "(ACCEL:", "Erf", "is", "not", "in",
                                "ACCEL's", "ops.supported)"] for line in lines)
    assert any(line.split() == ["5", "Add", "ACCEL"] for line in lines)


def test_check_reports_attribute_and_rank_conditions(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "fpga-cpu.yaml",
                       EXAMPLES / "transformer_encoder.onnx", "--dim", "seq=16", "--no-nodes")
    assert code == 0
    assert ("Softmax×2: attribute axis=-1, FPGA needs 1 (ops.when.Softmax) "
            "[encoder/layer.0/attention/Softmax, encoder/layer.1/attention/Softmax]") in out
    assert ("MatMul×4: input 0 '…' has rank 4, FPGA takes at most 2 "
            "(ops.when.MatMul.max_rank)") in out
    assert "preferred device per node" not in out


def test_dims_from_the_command_line_decide_static_shapes(capsys):
    args = ("rules", "check", RULES / "npu-static.yaml", EXAMPLES / "transformer_encoder.onnx",
            "--no-nodes")
    _, out, _ = run(capsys, *args)
    npu = out.split("\n\nCPU")[0]
    assert "takes no node" in npu and "(NPU needs static shapes)" in npu
    # shape chains are value inputs computed in the model: they bind on the NPU
    assert "value inputs computed in the model" in out
    assert ("encoder/layer.0/attention/q/Reshape (Reshape) input 1 "
            "'encoder/layer.0/attention/q/Concat_out' <- encoder/layer.0/attention/q/Concat") in out
    _, out, _ = run(capsys, *args, "--dim", "seq=16")
    assert "takes 68 node(s), preferred device of 68" in out
    assert "value inputs computed in the model" not in out        # all folded


def test_pins_are_reported(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "npu-gpu-cpu.yaml",
                       EXAMPLES / "resnet_like.onnx")
    assert code == 0
    assert ('affinity["head/*"] -> CPU: 4 node(s) [head/pool, head/flatten, head/fc, '
            'head/softmax]') in out
    assert any(line.split()[:3] == ["head/fc", "Gemm", "CPU"] and "pinned" in line
               for line in out.splitlines())


def test_a_node_no_device_takes_exits_1(tmp_path, capsys):
    rules = tmp_path / "only-relu.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: NPU\n    ops: {supported: [Relu, Add]}\n")
    code, out, _ = run(capsys, "rules", "check", rules, EXAMPLES / "seed000.onnx")
    assert code == 1
    assert "NO DEVICE takes 4 (Erf): NPU: Erf is not in NPU's ops.supported" in out


def test_a_pin_to_a_refusing_device_exits_1(tmp_path, capsys):
    rules = tmp_path / "pinned.yaml"
    rules.write_text("version: 1\ndevices:\n  - {name: NPU, ops: {supported: [Relu, Add]}}\n"
                     "  - {name: CPU, ops: {supported: all}}\naffinity: {'4': NPU}\n")
    code, out, _ = run(capsys, "rules", "check", rules, EXAMPLES / "seed000.onnx")
    assert code == 1
    assert ("PIN CONFLICT: 4 (Erf) is pinned to NPU by affinity[\"4\"], which refuses it: "
            "Erf is not in NPU's ops.supported") in out


def test_a_pin_naming_no_node_exits_2(tmp_path, capsys):
    rules = tmp_path / "pinned.yaml"
    rules.write_text("version: 1\ndevices:\n  - {name: CPU, ops: {supported: all}}\n"
                     "affinity: {decoder: CPU}\n")
    code, _, err = run(capsys, "rules", "check", rules, EXAMPLES / "seed000.onnx")
    assert code == 2
    assert 'affinity["decoder"]: no node is named \'decoder\'' in err


def test_json_output(capsys):
    code, out, _ = run(capsys, "rules", "check", RULES / "seed000.yaml",
                       EXAMPLES / "seed000.onnx", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["affinity"] == {"1": "ACCEL", "2": "ACCEL", "3": "ACCEL", "4": "CPU",
                                "5": "ACCEL", "6": "ACCEL", "7": "ACCEL"}
    assert data["homeless"] == [] and data["devices"][0]["name"] == "ACCEL"
    code, out, _ = run(capsys, "rules", "check", RULES / "seed000.yaml", "--json")
    assert json.loads(out)["devices"][1]["supported"] == "all"


# -- the library ----------------------------------------------------------------------------

@pytest.mark.parametrize("example", sorted(EXAMPLE_DIMS))
@pytest.mark.parametrize("profile", sorted(p.name for p in RULES.glob("*.yaml")))
def test_query_map_is_where_a_solve_puts_each_node(profile, example):
    """With no fallback, a solve puts every node on its preferred device: the QueryNetwork
    map of query() is the solve's affinity."""
    rules = hs.load_rules(RULES / profile)
    mg = load_model(EXAMPLES / f"{example}.onnx", dims={**rules.dims, **EXAMPLE_DIMS[example]})
    report = query(rules, mg)
    assert report.ok
    result = hs.solve(mg, rules, engine="heuristic")
    if result.metrics.fallback == 0:
        assert report.affinity() == affinity_map(result.problem, result.solution)
    assert sum(d.preferred for d in report.devices) == result.problem.n
    format_query(report)                                   # renders


def test_summary_is_plain_data():
    s = summary(hs.load_rules(RULES / "npu-static.yaml"))
    json.dumps(s)
    npu = s["devices"][0]
    assert (npu["name"], npu["memory"], npu["instances"], npu["value_inputs"]) == (
        "NPU", 8 * 2**20, 1, "enforce")
    assert npu["when"]["Conv"] == "dtypes float32|float16, rank <= 4"
