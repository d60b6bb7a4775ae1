"""Issue 13: shapes equal to the runtime's (docs/rules.md).  One tiny model per defect found
on real exports, each compared tensor by tensor with onnxruntime: every shape hetero-solve
calls static is the runtime's, and every tensor whose shape does not depend on input values
is static."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_solve as hs
from hetero_solve.export import build_manifest, write_result
from corpus import truth as TR


def _model(nodes, inputs, outputs, inits=(), value_info=(), opsets=(("", 17),)):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits),
                     value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _i64(name, value):
    return nh.from_array(np.array(value, np.int64), name)


def _vi(name, dims, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, dims)


def _runtime_shapes(model, dims=None, shapes=None):
    """Every main-graph tensor's shape in onnxruntime (graph optimisations off)."""
    entry = {"dims": dims or {}, "shapes": shapes or {}}
    feeds = TR.random_feeds(model, entry, seed=0)
    return TR.observe_shapes(TR.exposing_all(model), feeds, TR.main_graph_tensors(model))


def _disagreements(model, dims=None, shapes=None):
    """Tensors whose shape hetero-solve does not give as the runtime's static one."""
    real = _runtime_shapes(model, dims, shapes)
    mg = hs.load_model(model, dims=dims, **({"shapes": shapes} if shapes else {}))
    ours = {x: mg.tensor_type(x).shape for x in real}
    return {x: (ours[x], real[x]) for x in real
            if ours[x] is None or list(ours[x]) != real[x]}


def test_a_shape_chain_that_needs_three_fold_rounds():
    """Each Reshape's target comes from a ReduceProd of the previous tensor's Shape (no data
    propagation through ReduceProd): a round of folding fixes one Reshape, whose Shape then
    folds in the next.  Every round must keep what the earlier ones knew."""
    nodes, prev = [], "x"
    for k in range(3):
        nodes += [h.make_node("Shape", [prev], [f"s{k}"]),
                  h.make_node("ReduceProd", [f"s{k}"], [f"p{k}"], keepdims=1),
                  h.make_node("Concat", [f"p{k}", "one"], [f"c{k}"], axis=0),
                  h.make_node("Reshape", [prev, f"c{k}"], [f"y{k}"]),
                  h.make_node("Relu", [f"y{k}"], [f"r{k}"])]
        prev = f"r{k}"
    m = _model(nodes, [_vi("x", ["batch", 4])], [_vi(prev, ["n"])], [_i64("one", [1])])
    assert _disagreements(m, {"batch": 2}) == {}


def test_a_stale_value_info_never_overrides_inference():
    """The exporter declared the folded index and the GatherND after it as
    [past+sequence, ...]; the runtime's is [32, ...] once batch and sequence are given."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("ReduceProd", ["s"], ["n"], keepdims=0),
             h.make_node("Range", ["zero", "n", "step"], ["r"]),
             h.make_node("Unsqueeze", ["r", "ax"], ["idx"]),
             h.make_node("GatherND", ["data", "idx"], ["g"]),
             h.make_node("Relu", ["g"], ["y"])]
    m = _model(nodes, [_vi("x", ["batch", "sequence"]), _vi("data", [64, 8])], [_vi("y", ["m", 8])],
               [_i64("zero", 0), _i64("step", 1), _i64("ax", [1])],
               [_vi("idx", ["past+sequence", 1], T.INT64), _vi("g", ["past+sequence", 8])])
    assert _disagreements(m, {"batch": 4, "sequence": 8}) == {}


def test_dims_fill_only_the_graph_inputs():
    """The output is declared with exporter-internal names, one of them also an input's dim
    name: the user's value for the input must not become the output's dim (Paddle2ONNX's
    p2o.DynamicDimension.N)."""
    nodes = [h.make_node("ReduceSum", ["x", "ax"], ["t"], keepdims=1),
             h.make_node("Relu", ["t"], ["y"])]
    m = _model(nodes, [_vi("x", ["p2o.DynamicDimension.0", "p2o.DynamicDimension.1"])],
               [_vi("y", ["p2o.DynamicDimension.1", "p2o.DynamicDimension.2"])], [_i64("ax", [1])])
    assert _disagreements(m, {"p2o.DynamicDimension.0": 1, "p2o.DynamicDimension.1": 640}) == {}


def test_an_intermediate_declared_with_an_exporter_expression():
    """``t`` is declared [batch*sequence, 16]; its shape comes from a folded chain, and a
    second chain folds from its shape: the declaration must not survive the later rounds."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Slice", ["s", "z1", "two"], ["bs"]),
             h.make_node("ReduceProd", ["bs"], ["n"], keepdims=1),
             h.make_node("Concat", ["n", "sixteen"], ["c"], axis=0),
             h.make_node("Reshape", ["x", "c"], ["t"]),
             h.make_node("Shape", ["t"], ["s2"]),
             h.make_node("ReduceProd", ["s2"], ["n2"], keepdims=1),
             h.make_node("Reshape", ["t", "n2"], ["u"]),
             h.make_node("Relu", ["u"], ["y"])]
    m = _model(nodes, [_vi("x", ["batch", "sequence", 16])], [_vi("y", ["batch*sequence*16"])],
               [_i64("z1", [0]), _i64("two", [2]), _i64("sixteen", [16])],
               [_vi("t", ["batch*sequence", 16])])
    assert _disagreements(m, {"batch": 2, "sequence": 3}) == {}


def test_a_negative_declared_dim_is_unknown_and_a_whole_shape_fixes_it():
    """Paddle writes "any batch" as dim_value -1 and leaves height and width anonymous:
    nothing is static until the whole input shape is given."""
    nodes = [h.make_node("Relu", ["x"], ["a"]),
             h.make_node("GlobalAveragePool", ["a"], ["y"])]
    m = _model(nodes, [_vi("x", [-1, 3, "?", "?"])], [_vi("y", [-1, 3, 1, 1])])
    mg = hs.load_model(m)
    assert not mg.tensor_type("y").static and not isinstance(mg.tensor_type("y").shape[0], int)
    assert _disagreements(m, shapes={"x": [1, 3, 8, 8]}) == {}


def test_an_if_on_a_folded_condition_has_its_taken_branch_shapes():
    """An exporter's rank check (If on Equal(Size(Shape(x)), 2)) picks a branch of another
    rank: ONNX inference merges both and loses the rank, the runtime runs one."""
    then_g = h.make_graph([h.make_node("Unsqueeze", ["x", "ax0"], ["t"])], "then", [],
                          [_vi("t", ["a", "b", "c"])])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e", ["a", "b"])])
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Size", ["s"], ["r"]),
             h.make_node("Equal", ["r", "two"], ["cond"]),
             h.make_node("If", ["cond"], ["b"], then_branch=then_g, else_branch=else_g),
             h.make_node("Relu", ["b"], ["y"])]
    m = _model(nodes, [_vi("x", ["batch", 8])], [_vi("y", ["d0", "d1", "d2"])],
               [_i64("two", 2), _i64("ax0", [0])])
    assert _disagreements(m, {"batch": 3}) == {}


def _gelu_model():
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu1"),
             h.make_node("Gelu", ["a"], ["b"], name="gelu", domain="com.microsoft"),
             h.make_node("Relu", ["b"], ["y"], name="relu2")]
    return _model(nodes, [_vi("x", [1, 8])], [_vi("y", [1, 8])],
                  opsets=(("", 17), ("com.microsoft", 1)))


def test_a_boundary_tensor_of_unknown_rank_gets_a_valid_part_file(tmp_path):
    """ONNX has no shape inference for com.microsoft.Gelu: its output has no rank or type.
    Cut at it, the part files must still pass onnx.checker and reproduce the outputs."""
    m = _gelu_model()
    mg = hs.load_model(m)
    assert mg.tensor_type("b").rank == 2 and mg.tensor_type("b").elem_type == T.FLOAT
    rules = {"version": 1, "devices": [{"name": "NPU", "ops": {"supported": ["Relu"]}},
                                       {"name": "CPU", "ops": {"supported": "all"}}]}
    r = hs.solve(m, rules, engine="heuristic")
    assert r.metrics.partitions == 3 and "b" in build_manifest(r)["partitions"][1]["outputs"]
    out = write_result(r, tmp_path / "out")
    for f in sorted(out.glob("part*.onnx")):
        onnx.checker.check_model(onnx.load(str(f)), full_check=True)
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert hs.verify(tmp_path / "m.onnx", out).ok
