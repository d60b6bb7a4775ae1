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
from hetero_solve.export import build_manifest, write_result  # noqa: E402
from hetero_solve.export.openvino import (ExportError, apply_affinity,  # noqa: E402
                                          export_openvino)

pytestmark = pytest.mark.runtime


def _answer(tmp_path, model, rules, dims):
    out = tmp_path / f"{model}.hetero"
    write_result(hs.solve(EXAMPLES / f"{model}.onnx", RULES / rules, dims=dims), out)
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


# -- device instances (issue 31) ---------------------------------------------------------------

ACC3 = """version: 1
devices:
  - name: ACC
    memory: 20KB
    instances: 3
    ops: {supported: all}
"""


@pytest.fixture(scope="module")
def three_instances(tmp_path_factory):
    """A chain of three 16 KiB MatMuls on ACC with three 20 KB instances: one part on each of
    ACC.0, ACC.1, ACC.2 (proven optimal)."""
    from conftest import chain_model
    tmp = tmp_path_factory.mktemp("acc3")
    rng = np.random.default_rng(0)
    weights = {f"w{i}": (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
               for i in range(3)}
    model = chain_model([("MatMul", ["x", "w0"], "a"), ("Relu", ["a"], "b"),
                         ("MatMul", ["b", "w1"], "c"), ("Relu", ["c"], "d"),
                         ("MatMul", ["d", "w2"], "y")], {"x": [1, 64]}, {"y": [1, 64]}, weights)
    onnx.save(model, str(tmp / "chain3.onnx"))
    (tmp / "acc3.yaml").write_text(ACC3)
    result = hs.solve(tmp / "chain3.onnx", tmp / "acc3.yaml")
    assert [(p["device"], p["instance"]) for p in build_manifest(result)["partitions"]] \
        == [("ACC", 0), ("ACC", 1), ("ACC", 2)]
    return write_result(result, tmp / "chain3.hetero")


def _matmuls_by_device(out):
    """The exported model's MatMul ops (output tensor names), grouped by their affinity."""
    model = ov.Core().read_model(str(out / "openvino" / "model.xml"))
    affinity = apply_affinity(model)
    groups: dict[str, set] = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() == "MatMul":
            names = {n for o in op.outputs() for n in o.get_names()}
            groups.setdefault(affinity[op.get_friendly_name()], set()).update(names)
    return groups


def test_each_instance_gets_its_own_openvino_device(three_instances):
    """ACC=GPU: instance i on GPU.i (OpenVINO's per-instance names); each instance's MatMul
    has its instance's device."""
    result = export_openvino(three_instances, ["ACC=GPU"], compile=False)
    assert result.device_map == {"ACC.0": "GPU.0", "ACC.1": "GPU.1", "ACC.2": "GPU.2"}
    assert result.priorities == ["GPU.0", "GPU.1", "GPU.2"]
    groups = _matmuls_by_device(three_instances)
    manifest = json.loads((three_instances / "partition.json").read_text())
    made = {"n0": "a", "n2": "c", "n4": "y"}            # MatMul node -> its output
    for part in manifest["partitions"]:
        (matmul,) = [n for n in part["node_names"] if n in made]
        assert made[matmul] in groups[f"GPU.{part['instance']}"], groups


def test_instances_mapped_one_by_one_keep_hetero_submodels_equal_to_the_parts(three_instances):
    """On this CPU-only machine OpenVINO takes two device names, CPU and AUTO: ACC.1 on AUTO
    between two on CPU makes HETERO compile our three parts as three submodels; ACC=AUTO (one
    device for all three instances) joins them into one, and says so."""
    kept = export_openvino(three_instances, ["ACC.0=CPU", "ACC.1=AUTO", "ACC.2=CPU"])
    assert kept.device_map == {"ACC.0": "CPU", "ACC.1": "AUTO", "ACC.2": "CPU"}
    assert kept.submodels == kept.parts == 3
    # ACC.0 and ACC.2 share CPU but their parts do not touch: nothing to join, no note
    # (issue 39 item 5: it advised mapping the instances one by one, as the user had)
    assert not any("one OpenVINO device" in w for w in kept.warnings), kept.warnings
    joined = export_openvino(three_instances, ["ACC=AUTO"])
    assert joined.submodels == 1
    assert any("ACC.0, ACC.1, ACC.2 run on one OpenVINO device, AUTO, and their parts exchange "
               "tensors" in w and "ACC=AUTO maps every instance of ACC there" in w
               for w in joined.warnings), joined.warnings


def test_instances_mapped_one_by_one_to_one_device_are_told_to_use_different_ones(
        three_instances, capsys):
    """``export openvino --device-map ACC.0=CPU --device-map ACC.1=CPU --device-map
    ACC.2=AUTO``: ACC.0 and ACC.1 touch on CPU, HETERO joins them (2 submodels for 3 parts),
    and the note says to map them to different devices, not to map them one by one."""
    with pytest.raises(SystemExit) as e:
        main(["export", "openvino", str(three_instances), "--device-map", "ACC.0=CPU",
              "--device-map", "ACC.1=CPU", "--device-map", "ACC.2=AUTO"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "3 (hetero-solve)   2 OpenVINO HETERO submodel(s)" in out
    (note,) = [x for x in out.splitlines() if "one OpenVINO device" in x]
    assert note == ("note: ACC.0, ACC.1 run on one OpenVINO device, CPU, and their parts "
                    "exchange tensors: HETERO joins those parts into one submodel; map them to "
                    "different OpenVINO devices (ACC.0=..., ACC.1=...) to keep them apart, or "
                    "run each part on its own (run --backend openvino)")


def test_a_device_map_names_instances_and_refuses_others(three_instances, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", "openvino", str(three_instances), "--device-map", "ACC.3=CPU"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no device 'ACC.3'" in err and "ACC (ACC.0 to ACC.2)" in err
    with pytest.raises(SystemExit) as e:
        main(["export", "openvino", str(three_instances), "--device-map", "ACC.1=AUTO",
              "--device-map", "ACC=CPU"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "ACC.0 -> CPU" in out and "ACC.1 -> AUTO" in out and "ACC.2 -> CPU" in out


def test_run_on_openvino_with_a_device_map_per_instance(three_instances, capsys):
    """``run --backend openvino --device-map``: each part on its instance's device, shown as
    ACC.0, ACC.1, ACC.2, the outputs those of the original."""
    with pytest.raises(SystemExit) as e:
        main(["run", str(three_instances), "--backend", "openvino", "--no-save", "--json",
              "--device-map", "ACC=CPU", "--device-map", "ACC.1=AUTO"])
    assert e.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert [(p["device_instance"], p["providers"]) for p in report["parts"]] == \
        [("ACC.0", ["CPU"]), ("ACC.1", ["AUTO"]), ("ACC.2", ["CPU"])]
    with pytest.raises(SystemExit) as e:
        main(["run", str(three_instances), "--backend", "openvino", "--no-save",
              "--device-map", "ACC.1=AUTO", "--device-map", "ACC=CPU"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert all(f"ACC.{i}" in out for i in range(3)), out
    r = hs.run(three_instances, {"x": np.ones((1, 64), np.float32)}, backend="openvino",
               device_map={"ACC": "CPU"})
    want = ort.InferenceSession(str(three_instances.parent / "chain3.onnx")).run(
        None, {"x": np.ones((1, 64), np.float32)})[0]
    np.testing.assert_allclose(r.outputs["y"], want, rtol=1e-4, atol=1e-5)
    with pytest.raises(SystemExit) as e:
        main(["run", str(three_instances), "--backend", "onnxruntime", "--no-save",
              "--device-map", "ACC=CPU"])
    assert e.value.code == 2 and "openvino backend" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["run", str(three_instances), "--backend", "openvino", "--no-save",
              "--device-map", "NPU=CPU"])
    assert e.value.code == 2 and "no device 'NPU'" in capsys.readouterr().err


def test_a_one_part_answer_exports_from_its_part_file_when_the_model_is_gone(tmp_path):
    """A one-part answer has no model.annotated.onnx (its part file is the model, written
    once): with the original model moved away, the export reads the part file, every op on
    the answer's one device, and the result computes what the original does."""
    src = tmp_path / "resnet_like.onnx"
    src.write_bytes((EXAMPLES / "resnet_like.onnx").read_bytes())
    out = tmp_path / "one.hetero"
    write_result(hs.solve(src, RULES / "gpu-cpu.yaml", dims={"batch": 1}), out)
    manifest = json.loads((out / "partition.json").read_text())
    assert len(manifest["partitions"]) == 1
    assert "model.annotated.onnx" not in manifest["files"] and "onnxruntime" not in manifest
    assert not (out / "model.annotated.onnx").exists()
    src.unlink()
    result = export_openvino(out, ["GPU=CPU"])
    assert result.model == str(out / manifest["partitions"][0]["file"])
    model = _read(out)
    assert {op.get_rt_info()["affinity"].astype(str) for op in model.get_ordered_ops()} == {"CPU"}
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    feeds = random_feeds(EXAMPLES / "resnet_like.onnx", {"batch": 1})
    got = _ov_run(core.compile_model(model, "CPU"), feeds)
    want = ort.InferenceSession(str(EXAMPLES / "resnet_like.onnx")).run(None, feeds)[0]
    np.testing.assert_allclose(got["probs"], want, rtol=1e-4, atol=1e-5)
