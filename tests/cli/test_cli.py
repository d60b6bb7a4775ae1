"""The command line: exit codes, one-line errors, nothing half-written, summary on stdout."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import EXAMPLES, ROOT, RULES


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_solve_writes_everything_and_prints_a_summary(tmp_path):
    out = tmp_path / "out"
    r = run(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", "-o", out, "--engine", "heuristic")
    assert r.returncode == 0, r.stderr
    assert "seed000.onnx: 3 part(s)" in r.stdout and "status:" in r.stdout
    assert r.stderr == ""           # stderr is not a terminal: no progress lines
    manifest = json.loads((out / "partition.json").read_text())
    assert manifest["objective"]["partitions"] == 3
    assert sorted(p.name for p in out.glob("part*.onnx")) == ["part0_ACCEL.onnx", "part1_CPU.onnx",
                                                             "part2_ACCEL.onnx"]


def test_default_output_dir_is_next_to_the_model(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes((EXAMPLES / "seed000.onnx").read_bytes())
    r = run(model, RULES / "seed000.yaml", "-q", "--engine", "heuristic")
    assert r.returncode == 0 and (tmp_path / "m.hetero" / "partition.json").exists()
    assert r.stderr == ""


def _one_line_error(r):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.startswith("hetero-solve: error:")]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_bad_rule_file_exits_2_and_writes_nothing(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: NPU\n    memory: lots\n    ops: {supported: all}\n")
    out = tmp_path / "out"
    line = _one_line_error(run(EXAMPLES / "seed000.onnx", rules, "-o", out))
    assert f"{rules}: devices[0].memory: cannot parse memory 'lots'" in line
    assert not out.exists() and list(tmp_path.iterdir()) == [rules]


def test_missing_model_and_bad_dim_exit_2(tmp_path):
    line = _one_line_error(run(tmp_path / "nope.onnx", RULES / "seed000.yaml"))
    assert "nope.onnx: no such file" in line
    line = _one_line_error(run(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", "--dim", "batch"))
    assert "expected NAME=VALUE" in line


def test_a_node_no_device_takes_is_named_with_each_reason(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: ACCEL\n    ops: {supported: [Relu, Add]}\n"
                     "  - name: DSP\n    ops: {supported: all, unsupported: [Erf]}\n")
    line = _one_line_error(run(EXAMPLES / "seed000.onnx", rules, "-o", tmp_path / "out"))
    assert ("node '4' (Erf) fits no device: ACCEL: Erf is not in ACCEL's ops.supported; "
            "DSP: Erf is listed in DSP's ops.unsupported") in line
    assert not (tmp_path / "out").exists()


def test_a_failed_run_leaves_the_previous_result_alone(tmp_path):
    out = tmp_path / "out"
    assert run(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", "-o", out, "-q",
               "--engine", "heuristic").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\n")
    _one_line_error(run(EXAMPLES / "seed000.onnx", bad, "-o", out))
    assert sorted(p.name for p in out.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_help_teaches():
    r = run("--help")
    assert r.returncode == 0 and "hetero-solve MODEL.onnx RULES.yaml" in r.stdout
    r = run("solve", "--help")
    assert "--dim" in r.stdout and "--time-limit" in r.stdout and "partition.json" in r.stdout
