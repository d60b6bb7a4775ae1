"""The numpy evaluator for folded nodes agrees with onnxruntime op by op, and folding at scale
computes only what is asked for."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.model.evaluate import NATIVE, evaluate_nodes, run_onnxruntime

i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

CASES = [
    ("Gather", [i64(5, 6, 7), np.array(-1, np.int64)], {"axis": 0}, 17),
    ("Gather", [X, i64(2, 0)], {"axis": 2}, 17),
    ("Unsqueeze", [np.array(3, np.int64), i64(0)], {}, 17),
    ("Unsqueeze", [X, i64(-1, 1)], {}, 17),
    ("Unsqueeze", [X], {"axes": [0, 4]}, 11),
    ("Squeeze", [X[:1], i64(0)], {}, 17),
    ("Squeeze", [X[:1, :1]], {}, 17),
    ("Concat", [i64(1), i64(2, 3), i64(4)], {"axis": 0}, 17),
    ("Slice", [X, i64(0, -1), i64(2, 100), i64(0, 2)], {}, 17),
    ("Slice", [X, i64(-1), i64(-(2**63)), i64(2), i64(-2)], {}, 17),
    ("Slice", [X], {"starts": [1], "ends": [3], "axes": [1]}, 9),
    ("Reshape", [X, i64(0, -1)], {}, 17),
    ("Reshape", [X, i64(4, 0, 2)], {}, 17),
    ("Cast", [i64(1, 2)], {"to": T.FLOAT}, 17),
    ("Add", [i64(1, 2), np.array(3, np.int64)], {}, 17),
    ("Sub", [i64(1, 2), i64(5, 5)], {}, 17),
    ("Mul", [i64(2, 3), i64(4, -1)], {}, 17),
    ("Div", [i64(7, -7, 7, -7), i64(2, 2, -2, -2)], {}, 17),
    ("Div", [np.array([1.0, 3.0], np.float32), np.array([2.0, 4.0], np.float32)], {}, 17),
    ("Equal", [i64(1, 2), i64(1, 3)], {}, 17),
    ("Less", [i64(1, 2), i64(2, 2)], {}, 17),
    ("Greater", [i64(1, 2), i64(0, 2)], {}, 17),
    ("Neg", [i64(1, -2)], {}, 17),
    ("Where", [np.array([True, False]), i64(1, 2), i64(3, 4)], {}, 17),
    ("Range", [np.array(0, np.int64), np.array(7, np.int64), np.array(2, np.int64)], {}, 17),
    ("Range", [np.array(1.0, np.float32), np.array(0.0, np.float32), np.array(-0.25, np.float32)], {}, 17),
    ("ConstantOfShape", [i64(2, 3)], {"value": onnx.numpy_helper.from_array(np.array([7], np.int64))}, 17),
    ("ConstantOfShape", [i64(2)], {}, 17),
    ("Expand", [i64(1, 2), i64(3, 1)], {}, 17),
    ("Transpose", [X], {"perm": [2, 0, 1]}, 17),
    ("Identity", [X], {}, 17),
]


@pytest.mark.parametrize("op,inputs,attrs,opset", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_native_matches_onnxruntime(op, inputs, attrs, opset):
    names = [f"i{k}" for k in range(len(inputs))]
    node = h.make_node(op, names, ["y"], **attrs)
    native = np.asarray(NATIVE[op](node, list(inputs), opset))
    graph = h.make_graph([node], "g", [], [h.make_tensor_value_info("y", T.UNDEFINED, None)],
                         initializer=[onnx.numpy_helper.from_array(v, n) for n, v in zip(names, inputs)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    want = run_onnxruntime(model, ["y"])["y"]
    assert native.dtype == want.dtype and native.shape == want.shape
    np.testing.assert_array_equal(native, want)


def test_other_ops_and_what_follows_them_go_to_onnxruntime():
    """Erf is not native: it and the Add after it run in one onnxruntime session."""
    nodes = [h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("Erf", ["m"], ["e"]),
             h.make_node("Add", ["e", "b"], ["y"])]
    known = {"a": np.array([0.5], np.float32), "b": np.array([2.0], np.float32)}
    built = []

    def model_of(ns, ins, outs):
        built.append([n.op_type for n in ns])
        g = h.make_graph(ns, "g", [], [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs],
                         initializer=[onnx.numpy_helper.from_array(v, k) for k, v in ins.items()])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    values = evaluate_nodes(nodes, known, 17, model_of)
    assert built == [["Erf", "Add"]]
    np.testing.assert_allclose(values["y"], np.array([0.8427007 + 2.0], np.float32), rtol=1e-6)


def test_folding_computes_only_what_is_asked(tmp_path):
    """The transformer's folded shape chains are computed lazily: loading computes only the
    position-embedding Slice (inference leaves its shape open) and what it depends on; the
    export computes the values parts read."""
    r = hs.solve("examples/transformer_encoder.onnx", "rules/gpu-cpu.yaml",
                 dims={"batch": 1, "seq": 16}, engine="heuristic")
    mg = r.model_graph
    assert len(mg.folded) == 52
    assert set(mg.folded_values.computed()) == {"embeddings/Shape_out", "embeddings/Gather_out",
                                      "embeddings/Unsqueeze_out", "embeddings/Slice_out"}
    assert mg.tensor_type("embeddings/Slice_out").shape == (16, 32)
    write_result(r, tmp_path / "out")
    read_by_parts = {x for x in r.problem.const_names if x in {o for i in mg.folded for o in mg.outputs[i]}}
    assert read_by_parts and read_by_parts <= set(mg.folded_values.computed())


def test_shape_of_an_initializer_declared_as_an_input_with_open_dims_folds_to_its_dims(tmp_path):
    """IR >= 4: an initializer may also be a graph input, declared with a symbolic dim.  The
    tool takes initializers as constants, so its Shape folds, to the initializer's own dims
    (loading crashed reading the open declared dim; found by review)."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from hetero_solve.model import load_model
    nodes = [h.make_node("Shape", ["c"], ["s"], name="shape"),
             h.make_node("Cast", ["s"], ["sf"], name="cast", to=T.FLOAT),
             h.make_node("ReduceSum", ["sf"], ["r"], name="sum", keepdims=0),
             h.make_node("Mul", ["x", "r"], ["y"], name="mul")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2]),
                                      h.make_tensor_value_info("c", T.FLOAT, ["k", 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])],
                         initializer=[nh.from_array(np.ones((4, 3), np.float32), "c")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mg = load_model(path)
    assert [mg.names[i] for i in mg.folded] == ["shape", "cast", "sum"]
    assert mg.constant_value("s").tolist() == [4, 3]
    assert float(mg.constant_value("r")) == 7.0


def test_equal_nodes_share_a_value_and_different_attributes_do_not():
    """A node equal to an earlier one (op, attributes, input values) takes its value; an
    attribute or an input value that differs gives its own."""
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    known = {"x": x, "y": x.copy(), "i": np.array(1, dtype=np.int64)}
    nodes = [h.make_node("Gather", ["x", "i"], ["a"], axis=0),
             h.make_node("Gather", ["y", "i"], ["b"], axis=0),   # same values: shared
             h.make_node("Gather", ["x", "i"], ["c"], axis=1),   # another axis
             h.make_node("Gather", ["a", "i"], ["d"], axis=0)]   # another input value
    got = evaluate_nodes(nodes, known, 13, lambda *a: pytest.fail("no onnxruntime needed"))
    np.testing.assert_array_equal(got["a"], [3, 4, 5])
    assert got["b"] is got["a"]
    np.testing.assert_array_equal(got["c"], [1, 4])
    np.testing.assert_array_equal(got["d"], 4)
