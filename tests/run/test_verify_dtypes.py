"""``verify`` with a tolerance that follows each output's dtype (issue 21): a correct float16
split of a corpus model passes, a perturbed part fails; bfloat16 and quantised outputs are
compared as numbers with their own tolerance; both sides run with the same onnxruntime
settings."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

import hetero_solve as hs
from hetero_solve.cli import app
from hetero_solve.export import write_result
from hetero_solve.run.verify import TOLERANCES, compare, quantized_outputs

from conftest import RULES
from corpus import truth as C

CORPUS = C.load_corpus()


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float32 weight, input, output and cast target made float16 (what a
    float16 export holds), by onnx and numpy alone."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == T.FLOAT:
            g.initializer[i].CopyFrom(nh.from_array(nh.to_array(t).astype(np.float16), t.name))
    for vi in [*g.input, *g.output]:
        if vi.type.tensor_type.elem_type == T.FLOAT:
            vi.type.tensor_type.elem_type = T.FLOAT16
    del g.value_info[:]
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == T.FLOAT:
                a.i = T.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == T.FLOAT:
                a.t.CopyFrom(nh.from_array(nh.to_array(a.t).astype(np.float16), a.t.name))
    onnx.checker.check_model(m)
    return m


@pytest.fixture(scope="module")
def fp16_split(tmp_path_factory):
    """resnet-tiny-legacy (a torch export) in float16, split over Glow's four cards."""
    tmp = tmp_path_factory.mktemp("fp16")
    model = to_float16(onnx.load(str(C.model_file("resnet-tiny-legacy"))))
    path = tmp / "resnet16.onnx"
    onnx.save(model, str(path))
    entry = CORPUS["resnet-tiny-legacy"]
    result = hs.solve(str(path), str(RULES / "multi-card.yaml"), engine="heuristic",
                      dims=dict(entry.get("dims") or {}))
    out = write_result(result, tmp / "out", annotated=False, dots=False)
    return path, out, result.solution.num_parts


def test_a_correct_float16_split_passes_with_the_float16_tolerance(fp16_split):
    path, out, parts = fp16_split
    assert parts > 1
    report = hs.verify(str(path), out)
    assert report.ok, [o.as_dict() for o in report.outputs]
    assert report.tolerance is None
    for o in report.outputs:
        assert o.dtype == "float16"
        assert o.tolerance == TOLERANCES["float16"] and "float16" in o.rule
    # the split rounds where the original did not: the fixed 1e-5 of before failed it
    assert max(o.max_abs for o in report.outputs) > TOLERANCES["float32"]
    assert report.settings["optimization"] == "all"
    res = CliRunner().invoke(app, ["verify", str(path), str(out), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["outputs"][0]["tolerance_rule"] == "float16 default (10 eps)"


def test_verify_fails_on_a_perturbed_float16_part(fp16_split, tmp_path):
    import shutil
    path, out, _ = fp16_split
    bad = shutil.copytree(out, tmp_path / "bad")
    manifest = json.loads((bad / "partition.json").read_text())
    victim = bad / manifest["partitions"][0]["file"]
    part = onnx.load(str(victim))
    weights = [t for t in part.graph.initializer if t.data_type == T.FLOAT16 and len(t.dims) == 4]
    assert weights, "the first part holds a convolution's weights"
    w = weights[0]
    w.CopyFrom(nh.from_array((nh.to_array(w) * np.float16(1.05)).astype(np.float16), w.name))
    onnx.save(part, str(victim))
    report = hs.verify(str(path), bad)
    assert not report.ok
    res = CliRunner().invoke(app, ["verify", str(path), str(bad)])
    assert res.exit_code == 1 and "FAILED" in res.stdout and "float16 default" in res.stdout


def test_the_same_settings_on_both_sides(fp16_split):
    path, out, _ = fp16_split
    for level in ("disabled", "basic"):
        report = hs.verify(str(path), out, optimization=level)
        assert report.ok and report.settings["optimization"] == level
    res = CliRunner().invoke(app, ["verify", str(path), str(out), "--optimization", "most"])
    assert res.exit_code == 2 and "--optimization 'most'" in res.stderr


def test_compare_holds_each_float_dtype_to_its_own_tolerance():
    want = np.linspace(-3, 3, 50)
    for name, dtype in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)):
        w = want.astype(dtype)
        eps = float(ml_dtypes.finfo(dtype).eps)
        one_ulp = (w.astype(np.float64) * (1 + eps)).astype(dtype)
        ok = compare("y", one_ulp, w)
        assert ok.ok and ok.tolerance == TOLERANCES[name] and ok.max_abs > 0
        far = (w.astype(np.float64) * (1 + 20 * eps) + 20 * eps).astype(dtype)
        assert not compare("y", far, w).ok
    w32 = want.astype(np.float32)
    assert not compare("y", (w32 * (1 + 1e-3)).astype(np.float32), w32).ok
    assert compare("y", (w32 * (1 + 1e-3)).astype(np.float32), w32, tolerance=1e-2).ok


def _quantized_model() -> onnx.ModelProto:
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    outs = [h.make_tensor_value_info("q", T.UINT8, [4]), h.make_tensor_value_info("y", T.FLOAT, [4])]
    inits = [nh.from_array(np.array(0.05, np.float32), "s"),
             nh.from_array(np.array(128, np.uint8), "z")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    return h.make_model(h.make_graph(nodes, "g", [x], outs, inits),
                        opset_imports=[h.make_opsetid("", 17)])


def test_quantised_outputs_allow_one_step():
    steps = quantized_outputs(_quantized_model())
    assert steps == {"q": -1.0, "y": pytest.approx(0.05)}
    y = np.array([0.0, 0.05, 1.0, -2.0], np.float32)
    assert compare("y", y + np.float32(0.05), y, step=steps["y"]).ok
    assert not compare("y", y + np.float32(0.11), y, step=steps["y"]).ok
    q = np.array([0, 10, 128, 255], np.uint8)
    assert compare("q", q + np.array([0, 1, 0, 0], np.uint8), q, step=-1).ok
    assert not compare("q", q + np.array([0, 2, 0, 0], np.uint8), q, step=-1).ok
    assert not compare("q", q + np.array([0, 1, 0, 0], np.uint8), q).ok   # other integers: equal


def test_bfloat16_inputs_and_outputs_cross_parts_and_verify(tmp_path):
    """numpy has no bfloat16: onnx maps it to ``ml_dtypes.bfloat16``, which the session feeds
    through an ``OrtValue`` of the ONNX type and reads back from the tensor's memory."""
    import yaml
    x = h.make_tensor_value_info("x", T.BFLOAT16, [2, 3])
    y = h.make_tensor_value_info("y", T.BFLOAT16, [2, 3])
    nodes = [h.make_node("Cast", ["x"], ["a"], to=T.FLOAT, name="c1"),
             h.make_node("Relu", ["a"], ["b"], name="r"),
             h.make_node("Cast", ["b"], ["y"], to=T.BFLOAT16, name="c2")]
    model = h.make_model(h.make_graph(nodes, "g", [x], [y]), opset_imports=[h.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({"version": 1, "devices": [
        {"name": "ACC", "ops": {"supported": ["Relu"]}}, {"name": "CPU", "ops": {"supported": "all"}}]}))
    out = write_result(hs.solve(str(tmp_path / "m.onnx"), str(tmp_path / "r.yaml"),
                                engine="heuristic"), tmp_path / "out")
    sess = hs.Session(out)
    assert len(sess.parts) == 3 and sess.get_inputs()[0].type == "tensor(bfloat16)"
    v = np.array([[1.5, -2, 3], [0.25, -1, 7]], ml_dtypes.bfloat16)
    y, = sess.run(None, {"x": v})
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), np.maximum(v.astype(np.float32), 0))
    report = hs.verify(str(tmp_path / "m.onnx"), out)
    assert report.ok and report.outputs[0].tolerance == TOLERANCES["bfloat16"]
