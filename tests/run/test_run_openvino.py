"""The OpenVINO backend of ``hetero_solve.run``: every part file compiled by OpenVINO on its
device and run in order reproduces the original model's outputs (the hand-off that keeps our
parts, where HETERO regroups them).  Skipped where OpenVINO is not installed."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

import hetero_solve as hs
from conftest import EXAMPLES, ROOT, RULES, random_feeds
from hetero_solve.errors import HeteroSolveWarning
from hetero_solve.export import write_result
from hetero_solve.run.backend import PartRunner, PartSpec, RunOptions, load_backend
from openvino_quiet import import_openvino

pytestmark = pytest.mark.runtime

if import_openvino() is None:
    pytest.skip("OpenVINO is not installed: pip install 'hetero-solve[openvino]'",
                allow_module_level=True)

CASES = [  # (model, rules, dims): a multi-output Loop and an If; SE gate; LSTM (corpus)
    (EXAMPLES / "control_flow.onnx", "npu-gpu-cpu.yaml", {"seq": 5, "batch": 2}),
    (EXAMPLES / "resnet_like.onnx", "npu-static.yaml", {"batch": 1}),
    (ROOT / "corpus" / "models" / "silero-vad-v6-fw.onnx", "npu-static.yaml", {"seq_len": 4}),
]


def _run_parts(out, feeds, options):
    """The parts of ``out`` loaded by the OpenVINO backend and run in id order."""
    manifest = json.loads((out / "partition.json").read_text())
    load = load_backend("openvino")
    env = dict(feeds)
    runners = []
    for p in sorted(manifest["partitions"], key=lambda p: p["id"]):
        spec = PartSpec(p["id"], p["device"], out / p["file"], tuple(p["inputs"]),
                        tuple(p["outputs"]))
        runner = load(spec, options)
        assert isinstance(runner, PartRunner)
        env.update(runner.run({i.name: env[i.name] for i in runner.inputs}))
        runners.append(runner)
    return manifest, {x: env[x] for x in manifest["graph_outputs"]}, runners


@pytest.mark.parametrize("model,rules,dims", CASES, ids=lambda c: getattr(c, "stem", None))
def test_the_parts_on_openvino_reproduce_the_original(model, rules, dims, tmp_path):
    result = hs.solve(model, RULES / rules, dims=dims)
    assert result.metrics.partitions >= 3
    out = write_result(result, tmp_path / "answer")
    feeds = random_feeds(model, dims)
    options = RunOptions(backend_options={"device_map": {"NPU": "AUTO", "GPU": "AUTO"}})
    manifest, got, runners = _run_parts(out, feeds, options)
    assert {r.providers[0] for r in runners} == {"AUTO", "CPU"}
    names = manifest["graph_outputs"]
    want = ort.InferenceSession(str(model)).run(names, feeds)
    for name, value in zip(names, want):
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_device_openvino_lacks_falls_back_to_cpu_with_a_warning(tmp_path):
    model = EXAMPLES / "resnet_like.onnx"
    out = write_result(hs.solve(model, RULES / "npu-static.yaml", dims={"batch": 1}),
                       tmp_path / "a")
    feeds = random_feeds(model, {"batch": 1})
    _, got, runners = _run_parts(out, feeds, RunOptions(profile=True))
    assert all(r.providers == ["CPU"] for r in runners)
    assert "OpenVINO has no such device" in runners[0].warnings[0]
    want = ort.InferenceSession(str(model)).run(["probs"], feeds)[0]
    np.testing.assert_allclose(got["probs"], want, rtol=1e-4, atol=1e-6)
    # profiling: per-node times from OpenVINO's counters, on the part that ran them
    times = runners[1].node_times()
    assert times and all(t.part == 1 and t.calls == 1 for t in times)
    assert runners[0].inputs[0].type == "tensor(float)"
    assert runners[0].inputs[0].shape[1:] == (3, 32, 32)


def test_session_runs_the_parts_on_openvino(tmp_path):
    from hetero_solve.run.session import Session
    model = EXAMPLES / "control_flow.onnx"
    dims = {"seq": 5, "batch": 2}
    out = write_result(hs.solve(model, RULES / "npu-gpu-cpu.yaml", dims=dims), tmp_path / "a")
    feeds = random_feeds(model, dims)
    with pytest.warns(HeteroSolveWarning, match="OpenVINO has no such device"):
        session = Session(out, backend="openvino")
    names = [o.name for o in session.get_outputs()]
    got = session.run(names, feeds)
    want = ort.InferenceSession(str(model)).run(names, feeds)
    for name, a, b in zip(names, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
