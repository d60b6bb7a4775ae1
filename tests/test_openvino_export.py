"""``hetero-solve export openvino``: the answer as an OpenVINO model for HETERO.

Skipped where OpenVINO is not installed (``pip install 'hetero-solve[openvino]'``; CI installs
it with the test extra).  On a CPU-only machine the answer's devices are mapped to ``CPU`` and
``AUTO``, two device names that both run here."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import hetero_solve as hs
from conftest import EXAMPLES, RULES, random_feeds
from openvino_quiet import import_openvino

ov = import_openvino()
if ov is None:
    pytest.skip("OpenVINO is not installed: pip install 'hetero-solve[openvino]'",
                allow_module_level=True)

from hetero_solve.cli import main  # noqa: E402
from hetero_solve.export.openvino import (ExportError, apply_affinity,  # noqa: E402
                                          export_openvino)


def _answer(tmp_path, model, rules, dims):
    out = tmp_path / f"{model}.hetero"
    hs.solve(EXAMPLES / f"{model}.onnx", RULES / rules, dims=dims).write(out)
    return out


def _read(out):
    """The exported model, read back and its affinities put back (what docs/runtimes.md does)."""
    model = ov.Core().read_model(str(out / "openvino" / "model.xml"))
    apply_affinity(model)
    return model


def _expected_devices(out, mapping):
    """ONNX tensor -> the OpenVINO device of the node making it, from partition.json and the
    ONNX file alone (not from the export's code)."""
    manifest = json.loads((out / "partition.json").read_text())
    graph = onnx.load(manifest["model"], load_external_data=False).graph
    found = {}
    for part in manifest["partitions"]:
        for g in part["nodes"]:
            for t in graph.node[g].output:
                found.setdefault(t, set()).add(mapping[part["device"]])
    return manifest, found


def _ov_run(compiled, feeds):
    request = compiled.create_infer_request()
    values = request.infer(feeds)
    return {next(iter(port.get_names())): np.asarray(v) for port, v in values.items()}


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    return _answer(tmp_path_factory.mktemp("ov"), "resnet_like", "npu-static.yaml", {"batch": 1})


def test_every_op_has_the_device_of_its_onnx_node(resnet):
    mapping = {"NPU": "AUTO", "CPU": "CPU"}
    result = export_openvino(resnet, ["NPU=AUTO"])
    manifest, expected = _expected_devices(resnet, mapping)
    model = _read(resnet)
    checked = set()
    for op in model.get_ordered_ops():
        device = op.get_rt_info()["affinity"].astype(str)
        assert device in ("AUTO", "CPU"), op.get_friendly_name()
        for port in op.outputs():
            for name in port.get_names():
                if name in expected and op.get_type_name() not in ("Constant", "Parameter"):
                    assert device in expected[name], (op.get_friendly_name(), name)
                    checked.add(name)
    placed = sum(len(p["nodes"]) for p in manifest["partitions"])
    assert len(checked) >= 0.9 * placed   # nearly every node keeps a named op after reading
    # the HardSigmoid gate the answer puts on the CPU stays there
    gate = [op for op in model.get_ordered_ops() if op.get_type_name() == "HardSigmoid"]
    assert [op.get_rt_info()["affinity"].astype(str) for op in gate] == ["CPU"]
    assert result.ops["CPU"] >= 1 and result.ops["NPU"] > result.ops["CPU"]


def test_hetero_compiles_it_with_cpu_and_auto_and_reports_its_submodels(resnet):
    result = export_openvino(resnet, {"NPU": "AUTO"})
    assert result.parts == 3 and result.priorities == ["AUTO", "CPU"]
    model = _read(resnet)
    core = ov.Core()
    # OpenVINO's CPU plugin computes in bfloat16 where the CPU has it; compare in float32
    core.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    compiled = core.compile_model(model, "HETERO", {"MULTI_DEVICE_PRIORITIES": "AUTO,CPU"})
    # the count reported is OpenVINO's own for the written model
    assert result.submodels == int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))
    assert result.submodels >= result.parts
    assert result.regrouped == (result.submodels > 3)
    # and the mixed CPU/AUTO model runs (it did not before constants were folded) and agrees
    feeds = random_feeds(EXAMPLES / "resnet_like.onnx", {"batch": 1})
    got = _ov_run(compiled, feeds)
    want = ort.InferenceSession(str(EXAMPLES / "resnet_like.onnx")).run(None, feeds)[0]
    np.testing.assert_allclose(got["probs"], want, rtol=1e-4, atol=1e-5)


def test_a_model_with_if_and_loop_compiles_under_hetero(tmp_path):
    out = _answer(tmp_path, "control_flow", "npu-gpu-cpu.yaml", {"seq": 5, "batch": 2})
    result = export_openvino(out, ["NPU=CPU", "GPU=AUTO"])
    assert result.submodels is not None and result.submodels >= 1
    assert result.reshaped == {"x": [5, 2, 8]}
    model = _read(out)
    kinds = {op.get_type_name(): op.get_rt_info()["affinity"].astype(str)
             for op in model.get_ordered_ops()}
    assert kinds["If"] == "CPU"           # the answer's CPU
    assert "Loop" in kinds or "TensorIterator" in kinds


def test_without_the_device_here_the_export_is_written_and_not_counted(resnet):
    result = export_openvino(resnet)   # NPU: no such device on this machine
    assert result.submodels is None and "NPU" in result.not_compiled
    assert (resnet / "openvino" / "model.xml").is_file()
    info = json.loads((resnet / "openvino" / "export.json").read_text())
    assert info["device_map"] == {"NPU": "NPU", "CPU": "CPU"} and info["parts"] == 3


def test_the_command_line(resnet, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", "openvino", str(resnet), "--device-map", "NPU=AUTO", "--json"])
    assert e.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["parts"] == 3 and report["submodels"] >= 3
    with pytest.raises(SystemExit) as e:
        main(["export", "openvino", str(resnet), "--device-map", "XPU=AUTO"])
    assert e.value.code == 2
    assert "no device 'XPU'" in capsys.readouterr().err
    with pytest.raises(ExportError, match="NAME=DEVICE"):
        export_openvino(resnet, ["NPU"])


def test_a_folder_that_is_no_answer_is_refused(tmp_path):
    with pytest.raises(ExportError, match="no partition.json"):
        export_openvino(tmp_path)


def test_solving_never_imports_openvino():
    code = ("import sys, hetero_solve as hs\n"
            f"r = hs.solve({str(EXAMPLES / 'resnet_like.onnx')!r}, "
            f"{str(RULES / 'npu-static.yaml')!r}, dims={{'batch': 1}})\n"
            "assert r.solution.num_parts == 3\n"
            "import hetero_solve.cli\n"
            "print('openvino' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True)
    assert out.stdout.strip() == "False"
