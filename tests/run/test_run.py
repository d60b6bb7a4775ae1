"""``hetero-solve run`` and ``hetero_solve.run``: parts in id order, per-part counters,
inputs given or generated, outputs saved; control flow and tensors of several dtypes crossing
between parts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

import hetero_solve as hs
from hetero_solve.cli import app
from hetero_solve.errors import ModelError
from hetero_solve.export import write_result
from hetero_solve.run.common import RunError
from hetero_solve.run.inputs import random_inputs, InputSpec
from hetero_solve.run.onnxruntime import run_original
from hetero_solve.run.report import output_file_names
from hetero_solve.run.session import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _solve_to(model, rules, out: Path, **kw) -> Path:
    write_result(hs.solve(model, rules, engine="heuristic", **kw), out)
    return out


# -- a model whose parts pass float32, float16, int64 and bool tensors ------------------------

MIXED_RULES = {"version": 1, "devices": [
    {"name": "ACC", "ops": {"supported": ["Relu", "Add", "Cast", "Greater"]}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def mixed_dtype_model() -> onnx.ModelProto:
    """ACC takes Relu/Add/Cast/Greater, CPU the rest, so every arrow below crosses parts:
    float32 r -> Erf, float32 e -> Cast(f16), float16 c -> Identity, int64 am -> Add,
    bool g -> Not."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),                       # ACC
        h.make_node("Erf", ["r"], ["e"], name="erf"),                         # CPU
        h.make_node("Cast", ["e"], ["c"], name="to_half", to=T.FLOAT16),      # ACC
        h.make_node("Identity", ["c"], ["half_out"], name="half_id"),         # CPU
        h.make_node("ArgMax", ["e"], ["am"], name="argmax", axis=1, keepdims=0),  # CPU
        h.make_node("Add", ["am", "one"], ["idx_out"], name="add_idx"),      # ACC
        h.make_node("Greater", ["r", "half"], ["g"], name="greater"),        # ACC
        h.make_node("Not", ["g"], ["mask_out"], name="not"),                 # CPU
    ]
    graph = h.make_graph(
        nodes, "mixed", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
        [h.make_tensor_value_info("half_out", T.FLOAT16, [2, 4]),
         h.make_tensor_value_info("idx_out", T.INT64, [2]),
         h.make_tensor_value_info("mask_out", T.BOOL, [2, 4])],
        initializer=[nh.from_array(np.array(1, np.int64), "one"),
                     nh.from_array(np.array(0.5, np.float32), "half")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("mixed")
    path = d / "mixed.onnx"
    onnx.save(mixed_dtype_model(), str(path))
    return path, _solve_to(path, MIXED_RULES, d / "out")


@pytest.fixture(scope="module")
def control_flow(tmp_path_factory) -> Path:
    """examples/control_flow.onnx (a Loop, then an If) split GPU/CPU: the GPU refuses Loop and
    If, so they run in CPU parts between GPU parts."""
    out = tmp_path_factory.mktemp("cf") / "out"
    return _solve_to(EXAMPLES / "control_flow.onnx", ROOT / "rules" / "gpu-cpu.yaml", out,
                     dims={"seq": 5, "batch": 2})


def _crossing_dtypes(out_dir: Path) -> set[int]:
    """Element types of the tensors that pass from one part to another."""
    manifest = json.loads((out_dir / "partition.json").read_text())
    found = set()
    for part in manifest["partitions"]:
        model = onnx.load(str(out_dir / part["file"]))
        for vi in model.graph.input:
            if vi.name not in manifest["graph_inputs"]:
                found.add(vi.type.tensor_type.elem_type)
    return found


def test_mixed_dtypes_cross_parts_and_match_the_original(mixed):
    model, out = mixed
    assert {T.FLOAT, T.FLOAT16, T.INT64, T.BOOL} <= _crossing_dtypes(out)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    result = run(out, {"x": x})
    expected = run_original(model, {"x": x})
    assert set(result.outputs) == {"half_out", "idx_out", "mask_out"}
    for name, want in expected.items():
        got = result.outputs[name]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert result.random == []
    manifest = json.loads((out / "partition.json").read_text())
    assert [p.id for p in result.parts] == sorted(p["id"] for p in manifest["partitions"])
    assert len(result.parts) >= 3
    # bytes in/out are the tensors each part reads and writes
    first = result.parts[0]
    assert first.bytes_in == x.nbytes and first.bytes_out > 0
    assert result.bytes_in == sum(p.bytes_in for p in result.parts)


def test_control_flow_loop_and_if_run_in_their_parts(control_flow):
    manifest = json.loads((control_flow / "partition.json").read_text())
    ops_by_part = {}
    for part in manifest["partitions"]:
        m = onnx.load(str(control_flow / part["file"]))
        ops_by_part[part["id"]] = {n.op_type for n in m.graph.node}
    loop_parts = [p for p, ops in ops_by_part.items() if "Loop" in ops]
    if_parts = [p for p, ops in ops_by_part.items() if "If" in ops]
    assert loop_parts and if_parts
    assert all(manifest["partitions"][p]["device"] == "CPU" for p in loop_parts + if_parts)
    x = np.random.default_rng(2).standard_normal((5, 2, 8)).astype(np.float32)
    result = run(control_flow, {"x": x})
    expected = run_original(EXAMPLES / "control_flow.onnx", {"x": x})
    for name, want in expected.items():
        np.testing.assert_allclose(result.outputs[name], want, rtol=1e-6, atol=1e-6)
    # The GPU asks for CUDA first: without it, CPU runs its parts and a warning says so.
    gpu = [p for p in result.parts if p.device == "GPU"]
    assert gpu and all(p.providers[-1] == "CPUExecutionProvider" for p in gpu)
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert any("CUDAExecutionProvider" in w and "GPU" in w for w in result.warnings)


def test_random_inputs_follow_dtype_shape_and_dims():
    specs = [InputSpec("ids", T.INT64, ("batch", "seq")), InputSpec("mask", T.BOOL, (2, 3)),
             InputSpec("x", T.FLOAT16, (4,))]
    feeds = random_inputs(specs, {"batch": 1, "seq": 7}, seed=3)
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].shape == (1, 7)
    assert feeds["ids"].min() >= 0 and feeds["ids"].max() < 10
    assert feeds["mask"].dtype == np.bool_ and feeds["mask"].shape == (2, 3)
    assert feeds["x"].dtype == np.float16
    again = random_inputs(specs, {"batch": 1, "seq": 7}, seed=3)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)
    with pytest.raises(RunError, match=r"'seq'.*--dim seq=VALUE"):
        random_inputs(specs, {"batch": 1})


def test_given_inputs_are_checked(control_flow):
    with pytest.raises(RunError, match=r"unknown input 'nope'.*'x'"):
        run(control_flow, {"nope": np.zeros(1, np.float32)})
    with pytest.raises(RunError, match=r"'x' is int64, the partition expects float32"):
        run(control_flow, {"x": np.zeros((5, 2, 8), np.int64)})
    with pytest.raises(RunError, match=r"dimension 0 is 5"):
        run(control_flow, {"x": np.zeros((3, 2, 8), np.float32)})
    with pytest.raises(RunError, match=r"built for seq=5"):
        run(control_flow, dims={"seq": 3})


def test_output_file_names_are_safe_and_distinct():
    files = output_file_names(["a/b:c", "a_b_c", "A_B_C", "..", "y"])
    assert files["a/b:c"] == "a_b_c.npy"
    assert len(set(f.lower() for f in files.values())) == 5
    assert all("/" not in f and not f.startswith(".") for f in files.values())


# -- the command line -------------------------------------------------------------------------

runner = CliRunner()


def test_cli_run_prints_counters_and_saves_outputs(mixed, tmp_path):
    model, out = mixed
    x = np.random.default_rng(4).standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    save = tmp_path / "saved"
    res = runner.invoke(app, ["run", str(out), "--input", f"x={tmp_path / 'x.npy'}",
                              "--save", str(save)])
    assert res.exit_code == 0, res.output
    for col in ("device", "providers", "run ms", "data in", "data out", "total"):
        assert col in res.stdout
    assert re.search(r"\b\d+ B\b", res.stdout)      # sizes as solve prints them, not raw bytes
    index = json.loads((save / "outputs.json").read_text())
    assert set(index) == {"half_out", "idx_out", "mask_out"}
    expected = run_original(model, {"x": x})
    for name, file in index.items():
        np.testing.assert_array_equal(np.load(save / file), expected[name])
    assert "random inputs" not in res.stderr


def test_cli_run_random_inputs_default_save_dir(control_flow):
    res = runner.invoke(app, ["run", str(control_flow)])
    assert res.exit_code == 0, res.output
    assert "random inputs (seed 0): x" in res.stderr
    assert (control_flow / "outputs" / "y.npy").is_file()
    assert (control_flow / "outputs" / "h_max.npy").is_file()


@pytest.mark.parametrize("args, message", [
    (["--input", "x"], "expected NAME=FILE.npy"),
    (["--input", "x=/nonexistent/x.npy"], "no such file"),
    (["--dim", "seq=oops"], "not a whole number"),
])
def test_cli_run_bad_input_is_one_line_exit_2(control_flow, args, message):
    res = runner.invoke(app, ["run", str(control_flow), "--no-save", *args])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetero-solve: error:") and message in lines[0]


def test_cli_run_not_an_out_dir(tmp_path):
    res = runner.invoke(app, ["run", str(tmp_path)])
    assert res.exit_code == 2
    assert "no partition.json" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "outputs").exists()


def test_a_broken_part_is_named(mixed, tmp_path):
    import shutil
    _model, out = mixed
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    manifest = json.loads((broken / "partition.json").read_text())
    victim = manifest["partitions"][1]["file"]
    (broken / victim).write_bytes(b"not a model")
    with pytest.raises(RunError, match=rf"part 1 \({victim}"):
        run(broken, {"x": np.zeros((2, 4), np.float32)})
    res = runner.invoke(app, ["run", str(broken)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert not (broken / "outputs").exists()



@pytest.mark.parametrize("edited", ["../victim.onnx", "/etc/passwd", "sub/part.onnx", ".."])
def test_a_part_file_outside_out_dir_is_refused(mixed, tmp_path, edited):
    """A manifest edited to point a part at a file outside OUT_DIR is refused before loading."""
    import shutil
    model, out = mixed
    edited_dir = tmp_path / "edited"
    shutil.copytree(out, edited_dir)
    shutil.copy(model, tmp_path / "victim.onnx")    # a loadable model right beside OUT_DIR
    manifest = json.loads((edited_dir / "partition.json").read_text())
    manifest["partitions"][0]["file"] = edited
    (edited_dir / "partition.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match="not a file name inside OUT_DIR"):
        run(edited_dir, {"x": np.zeros((2, 4), np.float32)})
    res = runner.invoke(app, ["run", str(edited_dir)])
    assert res.exit_code == 2 and "not a file name inside OUT_DIR" in res.stderr


# -- graph outputs that no part makes: initializers, Constant outputs, graph inputs ----------

CONST_RULES = {"version": 1, "devices": [
    {"name": "ACC", "ops": {"supported": ["Relu"]}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def constant_outputs_model(with_nodes: bool = True) -> onnx.ModelProto:
    """Outputs: y = Relu(x) (a part makes it), w (an initializer), c (a Constant node), x (the
    graph input itself).  Without nodes, only w, c and x: nothing to place at all."""
    c_value = nh.from_array(np.array([[1, 2], [3, 4]], np.int64), "c")
    nodes = [h.make_node("Constant", [], ["c"], name="const", value=c_value)]
    outputs = [h.make_tensor_value_info("w", T.FLOAT, [3]),
               h.make_tensor_value_info("c", T.INT64, [2, 2]),
               h.make_tensor_value_info("x", T.FLOAT, [2, 3])]
    if with_nodes:
        nodes.append(h.make_node("Relu", ["x"], ["y"], name="relu"))
        outputs.insert(0, h.make_tensor_value_info("y", T.FLOAT, [2, 3]))
    graph = h.make_graph(nodes, "consts", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         outputs, initializer=[nh.from_array(np.array([0.5, -1, 2], np.float32), "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("with_nodes", [True, False])
def test_constant_graph_outputs_are_reproduced(tmp_path, with_nodes):
    path = tmp_path / "consts.onnx"
    onnx.save(constant_outputs_model(with_nodes), path)
    out = _solve_to(path, CONST_RULES, tmp_path / "out")
    manifest = json.loads((out / "partition.json").read_text())
    assert manifest["direct_outputs"] == {"names": ["w", "c", "x"], "inputs": ["x"],
                                          "file": "direct_outputs.onnx"}
    assert len(manifest["partitions"]) == (1 if with_nodes else 0)
    onnx.checker.check_model(onnx.load(out / "direct_outputs.onnx"), full_check=True)
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    got = run(out, {"x": x}).outputs
    want = run_original(path, {"x": x})
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(got[name], want[name])


def test_random_inputs_cover_a_passed_through_input(tmp_path):
    """Without nodes nothing reads x; its type comes from direct_outputs.onnx."""
    path = tmp_path / "consts.onnx"
    onnx.save(constant_outputs_model(with_nodes=False), path)
    r = run(_solve_to(path, CONST_RULES, tmp_path / "out"))
    assert r.random == ["x"] and r.outputs["x"].shape == (2, 3)
    assert r.outputs["x"].dtype == np.float32


def test_no_direct_outputs_key_when_parts_make_every_output(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(mixed_dtype_model(), path)
    out = _solve_to(path, MIXED_RULES, tmp_path / "out")
    assert "direct_outputs" not in json.loads((out / "partition.json").read_text())
    assert not (out / "direct_outputs.onnx").exists()


def test_missing_direct_outputs_file_is_a_clear_error(tmp_path):
    path = tmp_path / "consts.onnx"
    onnx.save(constant_outputs_model(), path)
    out = _solve_to(path, CONST_RULES, tmp_path / "out")
    (out / "direct_outputs.onnx").unlink()
    with pytest.raises(RunError, match=r"direct_outputs\.onnx: no such file"):
        run(out, {"x": np.zeros((2, 3), np.float32)})


def test_an_unused_graph_input_is_accepted_and_ignored(tmp_path):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "unused",
                         [h.make_tensor_value_info("x", T.FLOAT, [2]),
                          h.make_tensor_value_info("unused", T.FLOAT, [3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "unused.onnx"
    onnx.save(model, path)
    out = _solve_to(path, CONST_RULES, tmp_path / "out")
    feeds = {"x": np.array([-1, 2], np.float32), "unused": np.zeros(3, np.float32)}
    r = run(out, feeds)
    np.testing.assert_array_equal(r.outputs["y"], [0, 2])
    assert any("'unused' is read by no node" in w for w in r.warnings)
    with pytest.raises(RunError, match="unknown input 'other'"):
        run(out, {**feeds, "other": np.zeros(1, np.float32)})


def test_an_input_read_only_by_folded_nodes_is_refused_clearly(tmp_path):
    """y = ConstantOfShape(Shape(x)) folds for n=2: no part reads x.  Giving x is refused
    (its size would be silently ignored); leaving it out runs the solved size."""
    graph = h.make_graph([h.make_node("Shape", ["x"], ["s"], name="shape"),
                          h.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
                          h.make_node("Relu", ["c"], ["y"], name="relu")], "folded",
                         [h.make_tensor_value_info("x", T.FLOAT, ["n", 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["n", 3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    out = _solve_to(path, CONST_RULES, tmp_path / "out", dims={"n": 2})
    assert "unused_inputs" not in json.loads((out / "partition.json").read_text())
    with pytest.raises(RunError, match="'x' is read only by nodes folded when solving"):
        run(out, {"x": np.zeros((5, 3), np.float32)})
    assert run(out).outputs["y"].shape == (2, 3)


def test_a_sparse_initializer_output_is_exported(tmp_path):
    """A sparse initializer as a graph output goes to direct_outputs.onnx as it is (onnxruntime
    cannot run such a model, the original included, but solving and exporting must work)."""
    sparse = h.make_sparse_tensor(nh.from_array(np.array([5.0], np.float32), "s"),
                                  nh.from_array(np.array([1], np.int64), "s_idx"), [3])
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "sparse",
                         [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2]),
                          h.make_tensor_value_info("s", T.FLOAT, [3])])
    graph.sparse_initializer.append(sparse)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    out = _solve_to(path, CONST_RULES, tmp_path / "out")
    direct = onnx.load(out / "direct_outputs.onnx")
    onnx.checker.check_model(direct)   # full_check's inference rejects the original too
    assert [t.values.name for t in direct.graph.sparse_initializer] == ["s"]
    assert [o.name for o in direct.graph.output] == ["s"]
