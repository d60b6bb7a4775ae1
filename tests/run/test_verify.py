"""``hetero-solve verify``: every example model under every rule profile reproduces the
original outputs; a tampered partition is caught; bad input is exit code 2."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh
from typer.testing import CliRunner

import hetero_solve as hs
from hetero_solve.cli import app
from hetero_solve.errors import InfeasibleError
from hetero_solve.export import write_result
from hetero_solve.run.verify import compare, verify

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "examples").glob("*.onnx"))
PROFILES = sorted((ROOT / "rules").glob("*.yaml"))
runner = CliRunner()


def _example_dims() -> dict[str, dict[str, int]]:
    spec = importlib.util.spec_from_file_location("make_examples", ROOT / "examples" / "make_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.EXAMPLE_DIMS


DIMS = _example_dims()


@pytest.mark.parametrize("rules", PROFILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_every_example_under_every_profile_verifies(model, rules, tmp_path):
    try:
        result = hs.solve(model, rules, dims=DIMS.get(model.stem, {}), work_limit=0.5)
    except InfeasibleError as e:       # a profile that cannot hold a model: nothing to run
        pytest.skip(f"{rules.name} cannot partition {model.name}: {e}")
    out = write_result(result, tmp_path / "out")
    report = verify(model, out, seed=1)
    assert report.ok, [o.as_dict() for o in report.outputs]
    assert [o.name for o in report.outputs] == [o.name for o in onnx.load(str(model)).graph.output]
    assert all(o.max_abs <= 1e-5 for o in report.outputs)
    assert len(report.run.parts) == result.metrics.partitions


@pytest.fixture(scope="module")
def resnet(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resnet") / "out"
    write_result(hs.solve(ROOT / "examples/resnet_like.onnx", ROOT / "rules/npu-static.yaml",
                          engine="heuristic"), out)
    return out


def _tamper(out: Path, dest: Path) -> Path:
    """Copy ``out`` and scale the first float initializer of the last part's model."""
    shutil.copytree(out, dest)
    manifest = json.loads((dest / "partition.json").read_text())
    for part in reversed(manifest["partitions"]):
        path = dest / part["file"]
        m = onnx.load(str(path))
        for i, init in enumerate(m.graph.initializer):
            arr = nh.to_array(init)
            if arr.dtype == np.float32 and arr.size > 1:
                m.graph.initializer[i].CopyFrom(nh.from_array(arr * 1.5 + 0.1, init.name))
                onnx.save(m, str(path))
                return dest
    raise AssertionError("no float initializer to tamper with")


def test_a_tampered_partition_fails(resnet, tmp_path):
    bad = _tamper(resnet, tmp_path / "bad")
    report = verify(ROOT / "examples/resnet_like.onnx", bad)
    assert not report.ok
    assert report.outputs[0].max_abs > 1e-3
    res = runner.invoke(app, ["verify", str(ROOT / "examples/resnet_like.onnx"), str(bad)])
    assert res.exit_code == 1
    assert "FAIL" in res.stdout and "verify: FAILED" in res.stdout
    # a loose enough tolerance accepts it
    loose = verify(ROOT / "examples/resnet_like.onnx", bad, tolerance=1e6)
    assert loose.ok


def test_cli_verify_ok_with_given_input(resnet, tmp_path):
    image = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    res = runner.invoke(app, ["verify", str(ROOT / "examples/resnet_like.onnx"), str(resnet),
                              "--input", f"image={tmp_path / 'image.npy'}"])
    assert res.exit_code == 0, res.output
    assert "probs" in res.stdout and "verify: ok" in res.stdout
    assert "max abs" in res.stdout and "max rel" in res.stdout
    assert "random inputs" not in res.stderr


@pytest.mark.parametrize("args, message", [
    (["examples/seed000.onnx"], "is OUT_DIR from this model?"),
    (["examples/resnet_like.onnx", "--dim", "batch=4"], "built for batch=1"),
    (["examples/resnet_like.onnx", "--input", "image=nowhere.npy"], "no such file"),
    (["examples/nope.onnx"], "no such file"),
])
def test_cli_verify_bad_input_exit_2(resnet, args, message):
    model, *rest = args
    res = runner.invoke(app, ["verify", str(ROOT / model), str(resnet), *rest])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_compare_rules():
    f = np.array([1.0, 1000.0, 0.0], np.float32)
    # 1e-5 * max(1, |b|): an error of 5e-3 on 1000 passes, 5e-5 on 1 does not
    assert compare("y", f + np.array([0, 5e-3, 0], np.float32), f, 1e-5).ok
    assert not compare("y", f + np.array([5e-5, 0, 0], np.float32), f, 1e-5).ok
    d = compare("y", np.array([np.nan, np.inf]), np.array([np.nan, np.inf]), 0.0)
    assert d.ok and d.max_abs == 0
    d = compare("y", np.array([np.nan, 1.0]), np.array([1.0, 1.0]), 1e-5)
    assert not d.ok and "NaN" in d.note and math.isinf(d.max_abs)
    assert not compare("i", np.array([1, 2]), np.array([1, 3]), 10.0).ok   # ints: exact
    assert not compare("s", np.zeros((2, 3)), np.zeros((3, 2)), 1.0).ok
    assert "dtype" in compare("t", np.zeros(2, np.float64), np.zeros(2, np.float32), 1).note
    assert compare("b", np.array([True]), np.array([True]), 0).ok
    assert not compare("m", None, np.zeros(1), 1).ok


# -- the criterion, rtol/atol, timings (issue 31) ---------------------------------------------

def test_the_criterion_is_printed_per_output_and_explains_ok_beside_a_large_rel():
    """A float16 output near zero: max rel 7.9 (|a-b|/|b| where b is tiny) and yet ok: the
    criterion printed says why (|a-b| <= 0.0098*max(1,|b|)), and worst is under 1."""
    b = np.array([0.001, 1.0, -3.0], np.float16)
    a = (b + np.array([0.0079, 0.0, 0.01], np.float16)).astype(np.float16)
    d = compare("logits", a, b)
    assert d.ok and d.max_rel > 7 and d.worst < 1
    assert d.criterion == "|a-b| <= 0.00977*max(1,|b|)" and d.rule == "float16 default (10 eps)"
    assert compare("i", np.array([1, 2]), np.array([1, 2])).criterion == "a == b"


def test_rtol_and_atol_are_numpy_allclose():
    b = np.array([0.0, 100.0], np.float32)
    a = b + np.array([2e-6, 5e-3], np.float32)
    d = compare("y", a, b, rtol=1e-4, atol=1e-5)       # 2e-6 <= 1e-5; 5e-3 <= 1e-5 + 1e-2
    assert d.ok and d.criterion == "|a-b| <= 1e-05 + 0.0001*|b|" and d.rule == "rtol/atol given"
    assert d.ok == bool(np.allclose(a, b, rtol=1e-4, atol=1e-5))
    d = compare("y", a, b, rtol=1e-6, atol=1e-5)
    assert not d.ok and not np.allclose(a, b, rtol=1e-6, atol=1e-5) and d.worst > 1
    d = compare("y", a, b, atol=0.0)                   # rtol: the dtype's tolerance, 1e-5
    assert d.criterion == "|a-b| <= 0 + 1e-05*|b|" and not d.ok     # 2e-6 > 0 at b = 0


def test_cli_verify_shows_the_criterion_rtol_and_warm_times(resnet):
    model = str(ROOT / "examples/resnet_like.onnx")
    res = runner.invoke(app, ["verify", model, str(resnet), "--repeat", "3", "--threads", "1"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "|a-b| <= 1e-05*max(1,|b|)" in res.stdout and "worst" in res.stdout
    assert "median of 3 warm run(s)" in res.stdout and "1 thread(s)" in res.stdout
    res = runner.invoke(app, ["verify", model, str(resnet), "--rtol", "1e-3", "--atol", "1e-6",
                              "--json", "--repeat", "0"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["outputs"][0]["criterion"] == "|a-b| <= 1e-06 + 0.001*|b|"
    assert report["settings"]["timing"] == "one run, the first after loading"
