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
