"""rules/runtimes/two-runtimes-cpu.yaml: one device on OpenVINO's CPU plugin, one on onnxruntime's CPU
provider; ``Session`` runs each part of an answer on its device's runtime (``runtime:``) and the
outputs are the original's."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import hetero_solve as hs
from conftest import EXAMPLES, RULES, random_feeds
from hetero_solve.export import write_result
from hetero_solve.run.common import RunError
from hetero_solve.run.onnxruntime import run_original
from openvino_quiet import import_openvino

pytestmark = pytest.mark.runtime

if import_openvino() is None:
    pytest.skip("OpenVINO is not installed", allow_module_level=True)

TWO = RULES / "runtimes" / "two-runtimes-cpu.yaml"


def test_an_answer_over_both_runtimes_runs_each_part_on_its_own(tmp_path):
    rules = yaml.safe_load(TWO.read_text())
    rules["affinity"] = {"layer2/*": "ORT_CPU"}          # the middle of the model on onnxruntime
    model = EXAMPLES / "resnet_like.onnx"
    result = hs.solve(model, rules, dims={"batch": 1}, engine="heuristic")
    out = write_result(result, tmp_path / "out")
    devices = [result.problem.devices[d].name for d in result.solution.part_device]
    assert devices[0] == "OV_CPU" and "ORT_CPU" in devices and len(devices) >= 3
    sess = hs.Session(out)
    assert [p.location[0] for p in sess.parts] == [
        {"OV_CPU": "openvino", "ORT_CPU": "onnxruntime"}[d] for d in devices]
    feeds = random_feeds(model, {"batch": 1})
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    want = run_original(model, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-4, rtol=0)
    assert [p.device for p in sess.last_run] == devices
    # backend="onnxruntime" still runs every part on onnxruntime
    assert {p.location[0] for p in hs.Session(out, backend="onnxruntime").parts} == {"onnxruntime"}
    # under backend auto a device map places the parts that run on OpenVINO, and refuses a
    # device whose parts run on onnxruntime (issue 39 item 1: it was ignored)
    ran = hs.run(out, feeds, device_map=["OV_CPU=AUTO"])
    assert [p.providers for p in ran.parts if p.device == "OV_CPU"][0] == ["AUTO"]
    with pytest.raises(RunError, match=r"device map ORT_CPU=AUTO: ORT_CPU's parts run on "
                                          r"onnxruntime \(backend auto: its rule-file runtime"):
        hs.run(out, feeds, device_map=["ORT_CPU=AUTO"])
    assert hs.run(out, feeds, device_map=["ORT_CPU=AUTO"], backend="openvino").parts


# -- execution settings: what the times were measured with is what runs -----------------------

def _answer_with_execution(tmp_path, execution: dict):
    """An answer over both runtimes priced with a profile that records ``execution``."""
    from hetero_solve.model import load_model
    from hetero_solve.times import DeviceProfile, Profile, model_info
    model = EXAMPLES / "resnet_like.onnx"
    mg = load_model(str(model), dims={"batch": 1})
    times = {n: (1e-4 if n.startswith("layer2") else 1e-3) for n in mg.names}
    other = {n: (1e-3 if n.startswith("layer2") else 1e-4) for n in mg.names}
    profile = Profile(model_info(mg, model),
                      {"OV_CPU": DeviceProfile(other, part_cost=1e-6),
                       "ORT_CPU": DeviceProfile(times, part_cost=1e-6)},
                      execution=execution)
    rules = yaml.safe_load(TWO.read_text())
    rules["affinity"] = {"layer2/*": "ORT_CPU"}          # a split over both runtimes
    result = hs.solve(model, rules, dims={"batch": 1}, costs=profile, engine="heuristic",
                      objective=hs.Objective(order=("latency",)))
    return write_result(result, tmp_path / "out"), model


def test_an_answer_records_and_runs_with_its_profiles_execution_settings(tmp_path):
    from hetero_solve.run.backend import RunOptions
    recorded = RunOptions(intra_op_threads=1).execution()
    out, _ = _answer_with_execution(tmp_path, recorded)
    manifest = yaml.safe_load((out / "partition.json").read_text())
    assert manifest["execution"] == recorded
    sess = hs.Session(out)
    assert sess.options.intra_op_threads == 1 and sess.options.spinning == "stop"
    assert not sess.warnings
    devices = [p.location[0] for p in sess.parts]
    assert {"openvino", "onnxruntime"} <= set(devices)
    for runner in sess.parts:
        if runner.location[0] == "onnxruntime":
            opts = runner.session.get_session_options()
            assert opts.intra_op_num_threads == 1
            assert opts.get_session_config_entry("session.force_spinning_stop") == "1"
        else:
            assert str(runner.compiled.get_property("PERFORMANCE_HINT")) == "LATENCY"
            assert int(runner.compiled.get_property("NUM_STREAMS")) == 1
            assert runner.compiled.get_property("INFERENCE_NUM_THREADS") == 1


def test_a_run_with_other_settings_than_the_profiles_is_one_warning_naming_both(tmp_path):
    from hetero_solve.errors import HeteroSolveWarning
    from hetero_solve.run.backend import RunOptions
    out, _ = _answer_with_execution(tmp_path, RunOptions(intra_op_threads=1).execution())
    with pytest.warns(HeteroSolveWarning) as caught:
        sess = hs.Session(out, options=RunOptions(intra_op_threads=2, spinning="on"))
    lines = [str(w.message) for w in caught if "measured with" in str(w.message)]
    assert len(lines) == 1 and sess.warnings == lines
    assert "threads 1, spinning stop" in lines[0] and "threads 2, spinning on" in lines[0]
    # run(threads=...) overrides the answer's, with the same warning; without it, none
    with pytest.warns(HeteroSolveWarning, match="threads 1; this run uses threads 2"):
        r = hs.run(out, threads=2)
    assert r.settings["execution"]["threads"] == 2
    import warnings as w
    with w.catch_warnings():
        w.simplefilter("error", HeteroSolveWarning)
        assert hs.run(out).settings["execution"]["threads"] == 1


def test_an_answer_without_a_profile_records_no_settings_and_warns_of_none(tmp_path):
    import warnings as w
    from hetero_solve.errors import HeteroSolveWarning
    from hetero_solve.run.backend import RunOptions
    result = hs.solve(EXAMPLES / "resnet_like.onnx", TWO, dims={"batch": 1},
                      engine="heuristic")
    out = write_result(result, tmp_path / "out")
    assert "execution" not in yaml.safe_load((out / "partition.json").read_text())
    with w.catch_warnings():
        w.simplefilter("error", HeteroSolveWarning)
        sess = hs.Session(out, options=RunOptions(intra_op_threads=1))
    assert sess.options.intra_op_threads == 1


def test_the_command_shows_each_part_s_runtime_and_where_the_fallback_runs(tmp_path, capsys):
    """Issue 39 item 2: ``run``'s table has a runtime column (``providers`` read CPU for both
    runtimes' parts) and ``solve``'s summary says on which device the fallback nodes run (in a
    two-runtime answer, "fallback" means "on ORT_CPU")."""
    import json
    from hetero_solve.cli import main
    (tmp_path / "small.yaml").write_text(     # the NPU cannot hold the whole model
        "version: 1\ndevices:\n  - {name: NPU, memory: 64KiB, ops: {supported: all}}\n"
        "  - {name: CPU, ops: {supported: all}}\n")
    with pytest.raises(SystemExit) as e:
        main([str(EXAMPLES / "resnet_like.onnx"), str(tmp_path / "small.yaml"), "--dim",
              "batch=1", "--engine", "heuristic", "-o", str(tmp_path / "seed")])
    assert e.value.code == 0
    summary = capsys.readouterr().out
    fallback = json.loads((tmp_path / "seed" / "partition.json").read_text())["objective"]
    assert fallback["fallback"] > 0
    assert f"fallback: {fallback['fallback']} node(s) on CPU   " in summary
    rules = yaml.safe_load(TWO.read_text())
    rules["affinity"] = {"layer2/*": "ORT_CPU"}
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(rules))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main([str(EXAMPLES / "resnet_like.onnx"), str(tmp_path / "two.yaml"), "--dim",
              "batch=1", "--engine", "heuristic", "-o", str(out)])
    assert e.value.code == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["run", str(out), "--no-save"])
    assert e.value.code == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if "_CPU" in r]
    assert rows and all(("OV_CPU" in r) == (" openvino " in r) for r in rows)
    assert all(("ORT_CPU" in r) == (" onnxruntime " in r) for r in rows)
    with pytest.raises(SystemExit):
        main(["run", str(out), "--no-save", "--json"])
    parts = json.loads(capsys.readouterr().out)["parts"]
    assert {(p["device"], p["runtime"]) for p in parts} == \
        {("OV_CPU", "openvino"), ("ORT_CPU", "onnxruntime")}
