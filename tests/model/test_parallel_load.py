"""Loading with the checker and shape inference in forked processes gives exactly what the
sequential path gives, reports invalid models the same way, and survives a failed child."""

from __future__ import annotations

import sys

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from hetero_solve.errors import ModelError
from hetero_solve.export import build_manifest, write_result
from hetero_solve.model import load_model
from hetero_solve.model import parallel

from conftest import EXAMPLE_DIMS, ROOT, example_models

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is Linux-only here")


@pytest.fixture
def forking(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_NODES", 0)
    assert parallel.fork_pays(1)


def _summary(mg):
    tensors = sorted({x for ts in mg.inputs + mg.outputs for x in ts if x})
    return (mg.names, mg.folded, sorted(mg.constant_tensors),
            [tuple(mg.tensor_type(o).shape or ()) for outs in mg.outputs for o in outs if o],
            [mg.value_info_proto(x) for x in tensors],     # what part models declare
            [mg.inferred_node(i) for i, sub in enumerate(mg.has_subgraph) if sub])


@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_forked_load_equals_sequential(model, forking, monkeypatch):
    dims = EXAMPLE_DIMS[model.stem]
    forked = load_model(model, dims=dims)
    monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
    assert not parallel.fork_pays(10**6)
    assert _summary(forked) == _summary(load_model(model, dims=dims))


def test_forked_check_reports_an_invalid_model(tmp_path, forking):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], alpha=1.0)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])
    path = tmp_path / "bad.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelError, match="Unrecognized attribute: alpha for operator Relu"):
        load_model(path)


def test_a_child_that_fails_falls_back_to_the_parent(forking, monkeypatch):
    import hetero_solve.model.shapes as shapes

    def broken(model, dims, shapes):
        raise RuntimeError("child failed")

    monkeypatch.setattr(shapes, "forked_inference", broken)
    model = example_models()[0]
    mg = load_model(model, dims=EXAMPLE_DIMS[model.stem])
    assert all(mg.tensor_type(o).elem_type for outs in mg.outputs for o in outs if o)


def test_forked_result_and_error():
    assert parallel.Forked(sum, [1, 2, 3]).result() == ("ok", 6)
    kind, message = parallel.Forked(int, "x").result()
    assert kind == "error" and "ValueError" in message


@pytest.mark.parametrize("op", ["Resize", "Range"])
def test_forked_inference_keeps_the_float_values_shapes_depend_on(op, forking, tmp_path):
    """The forked inference drops weights' data; Resize scales and Range bounds (float
    constants whose values decide a shape) must stay, or the shapes after them are lost."""
    import numpy as np
    from onnx import numpy_helper as nh
    weights = nh.from_array(np.ones((8, 8, 3, 3), np.float32), "w")   # dropped: 576 floats
    if op == "Resize":
        nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 h.make_node("Resize", ["c", "", "scales"], ["y"], name="resize", mode="nearest")]
        inits = [weights, nh.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
        want = (1, 8, 8, 8)
    else:
        nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 h.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                 h.make_node("Mul", ["r", "two"], ["y"], name="mul")]
        inits = [weights, nh.from_array(np.array(0, np.float32), "start"),
                 nh.from_array(np.array(6, np.float32), "limit"),
                 nh.from_array(np.array(1.5, np.float32), "delta"),
                 nh.from_array(np.array(2, np.float32), "two")]
        want = (4,)
    graph = h.make_graph(nodes, op, [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [None] * len(want)),
                          h.make_tensor_value_info("c", T.FLOAT, [None] * 4)], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mg = load_model(path)
    assert mg.tensor_type("y").shape == want
    assert mg.tensor_type("c").shape == (1, 8, 4, 4)


def test_forked_inference_keeps_big_integer_tables_like_the_sequential_path(forking, tmp_path,
                                                                              monkeypatch):
    """Data propagation reads integer initializers of any size (Gather from a 5,000-entry
    table): the forked child keeps them, as the sequential inference does."""
    import numpy as np
    from onnx import numpy_helper as nh
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["table", "s"], ["g"], name="gather"),   # a graph output: kept
             h.make_node("Reshape", ["z", "g"], ["y"], name="reshape")]
    graph = h.make_graph(nodes, "table", [h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                                          h.make_tensor_value_info("z", T.FLOAT, [6])],
                         [h.make_tensor_value_info("y", T.FLOAT, [None, None]),
                          h.make_tensor_value_info("g", T.INT64, [None])],
                         initializer=[nh.from_array(np.arange(5000, dtype=np.int64), "table")])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    forked = load_model(path).tensor_type("y").shape
    monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
    assert forked == load_model(path).tensor_type("y").shape == (2, 3)


@pytest.mark.parametrize("dims", ["given", "open"])
@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_structure_computed_during_inference_equals_the_one_after_shapes(model, dims, forking,
                                                                         monkeypatch):
    """On large models the graph's structure is computed while the forked inference runs,
    before folding is known; compiling must give the same problem as the sequential path,
    whether folding then removed nodes (the transformer with its dims) or not."""
    import dataclasses

    from hetero_solve.compile import compile_problem
    from hetero_solve.rules import load_rules

    given = EXAMPLE_DIMS[model.stem] if dims == "given" else {}
    rules = load_rules(ROOT / "rules" / "gpu-cpu.yaml")
    forked_mg = load_model(model, dims=given)
    assert forked_mg.refs is not None
    forked = compile_problem(forked_mg, rules)
    monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
    sequential_mg = load_model(model, dims=given)
    assert sequential_mg.refs is None
    sequential = compile_problem(sequential_mg, rules)
    for f in dataclasses.fields(sequential):
        if f.name != "arrays":
            assert getattr(forked, f.name) == getattr(sequential, f.name), f.name


def test_forked_inference_strips_exactly_the_float_tensors_above_64_elements():
    """Weights are stripped by their raw byte length (no dims product): the boundary must be
    the element count's, whatever the element size, and tensors held in typed fields
    (float_data) go by their dims."""
    import numpy as np
    from onnx import numpy_helper as nh
    from hetero_solve.model.shapes import SMALL_FLOAT_ELEMENTS, forked_inference

    inits = []
    for dtype in (np.float32, np.float16, np.float64):
        for n in (SMALL_FLOAT_ELEMENTS, SMALL_FLOAT_ELEMENTS + 1):
            inits.append(nh.from_array(np.ones(n, dtype), f"{np.dtype(dtype).name}_{n}"))
    for n in (SMALL_FLOAT_ELEMENTS, SMALL_FLOAT_ELEMENTS + 1):   # typed field, not raw bytes
        inits.append(h.make_tensor(f"typed_{n}", T.FLOAT, [n], [1.0] * n, raw=False))
    inits.append(nh.from_array(np.arange(5000, dtype=np.int64), "ints"))   # integers stay
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    out = onnx.ModelProto.FromString(forked_inference(model, {}, {}))
    kept = {t.name: bool(t.raw_data or t.float_data or t.int64_data) for t in out.graph.initializer}
    want = {t.name: not t.name.endswith(str(SMALL_FLOAT_ELEMENTS + 1)) for t in inits}
    assert kept == want


def _invalid_model(tmp_path):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], alpha=1.0)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])
    path = tmp_path / "bad.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_a_deferred_check_still_rejects_an_invalid_model(tmp_path, forking):
    """solve() does not wait for the forked checker after loading, but must still refuse an
    invalid model before returning (and so before anything is written)."""
    import hetero_solve
    path = _invalid_model(tmp_path)
    mg = load_model(path, defer_check=True)          # returns while the checker may run
    with pytest.raises(ModelError, match="Unrecognized attribute: alpha"):
        mg.ensure_valid()
    mg.ensure_valid()                                 # answered once; no second wait
    with pytest.raises(ModelError, match="Unrecognized attribute: alpha"):
        hetero_solve.solve(path, ROOT / "rules" / "gpu-cpu.yaml", engine="heuristic")


def test_the_cli_writes_nothing_for_an_invalid_model_checked_late(tmp_path, forking, capsys):
    from hetero_solve.cli import main
    path = _invalid_model(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main([str(path), str(ROOT / "rules" / "gpu-cpu.yaml"), "--out", str(out), "-q"])
    assert exit_.value.code == 2
    assert "Unrecognized attribute: alpha" in capsys.readouterr().err
    assert not out.exists()


def _missing_dims_answer(r):
    return (r.problem.info.missing_dims, r.warnings, build_manifest(r, files=False)["warnings"])


@pytest.mark.parametrize("dims", [{}, {"seq": 16}], ids=["seq-open", "seq-given"])
def test_missing_dims_found_forked_beside_the_solve_equal_the_inline_ones(dims, forking,
                                                                           monkeypatch):
    """The counterfactual analysis of unset dims (compile.missing_dims) forked right after
    loading gives the same entries and the same warnings, in the same place, as found inline."""
    import warnings

    import hetero_solve as hs
    from hetero_solve import compile as compile_module

    model = ROOT / "examples" / "transformer_encoder.onnx"
    rules = ROOT / "rules" / "npu-static.yaml"      # static shapes; dims: {batch: 1}
    started = []
    real = compile_module.missing_dims_ahead
    monkeypatch.setattr(compile_module, "missing_dims_ahead",
                        lambda *a: started.append(real(*a)) or started[-1])
    import hetero_solve.pipeline as pipeline
    monkeypatch.setattr(pipeline, "missing_dims_ahead", compile_module.missing_dims_ahead)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forked = hs.solve(model, rules, dims=dims, engine="heuristic")
        assert started and (started[0] is not None) == (not dims)
        monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
        inline = hs.solve(model, rules, dims=dims, engine="heuristic")
    assert _missing_dims_answer(forked) == _missing_dims_answer(inline)
    assert bool(forked.problem.info.missing_dims) == (not dims)


@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_part_models_written_by_a_forked_process_are_the_same_files(model, forking, tmp_path,
                                                                     monkeypatch):
    """On large models the part models are written by a forked process beside the annotated
    model: every file of the answer is byte for byte what one process writes."""
    import warnings

    import hetero_solve as hs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = hs.solve(model, ROOT / "rules" / "gpu-cpu.yaml", dims=EXAMPLE_DIMS[model.stem],
                     engine="heuristic")
    forked = write_result(r, tmp_path / "forked")
    monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
    alone = write_result(r, tmp_path / "alone")
    files = sorted(p.name for p in forked.iterdir())
    assert files == sorted(p.name for p in alone.iterdir()) and any(
        f.startswith("part") for f in files)
    for f in files:
        assert (forked / f).read_bytes() == (alone / f).read_bytes(), f


def test_a_failed_forked_part_writer_leaves_the_parts_to_the_parent(forking, tmp_path,
                                                                    monkeypatch):
    import os

    import hetero_solve as hs
    from hetero_solve.export import writer

    model = example_models()[0]
    r = hs.solve(model, ROOT / "rules" / "gpu-cpu.yaml", dims=EXAMPLE_DIMS[model.stem],
                 engine="heuristic")
    real, parent = writer._write_parts, os.getpid()

    def parts_but_not_in_the_child(*args):
        if os.getpid() != parent:
            raise RuntimeError("child failed")
        return real(*args)

    monkeypatch.setattr(writer, "_write_parts", parts_but_not_in_the_child)
    out = write_result(r, tmp_path / "out")
    assert any(p.name.startswith("part") for p in out.iterdir())
    assert (out / "partition.json").exists()
