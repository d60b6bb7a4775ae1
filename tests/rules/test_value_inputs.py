"""Value-dependent inputs (docs/problem.md): Reshape's shape must be known when its part is
compiled: a constant, a folded value, a graph input, or made in another part."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs

from conftest import ROOT

CATALOG = {"Reshape": [1]}


def _acc(value_inputs: str = "enforce") -> list[dict]:
    return [{"name": "ACC", "value_inputs": value_inputs, "ops": {"supported": "all"}},
            {"name": "CPU", "ops": {"supported": "all"}}]


def _rules(value_inputs: str = "enforce") -> dict:
    return {"version": 1, "devices": _acc(value_inputs), "value_inputs": CATALOG}


def computed_shape_model() -> onnx.ModelProto:
    """a = Relu(x); s = Add(shape_in, zeros) (computed at run time); y = Reshape(a, s); z = Relu(y)."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu_in"),
             h.make_node("Add", ["shape_in", "zeros"], ["s"], name="make_shape"),
             h.make_node("Reshape", ["a", "s"], ["y"], name="reshape"),
             h.make_node("Relu", ["y"], ["z"], name="relu_out")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]),
                                      h.make_tensor_value_info("shape_in", T.INT64, [2])],
                         [h.make_tensor_value_info("z", T.FLOAT, ["d0", "d1"])],
                         initializer=[onnx.numpy_helper.from_array(np.zeros(2, np.int64), "zeros")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def shape_of_model(static: bool) -> onnx.ModelProto:
    """y = Reshape(Relu(x), Concat(Gather(Shape(x), 0), [-1])): torch's view(x.size(0), -1)."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu_in"),
             h.make_node("Shape", ["x"], ["sh"], name="shape"),
             h.make_node("Gather", ["sh", "zero"], ["b"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["b", "axes"], ["b1"], name="unsqueeze"),
             h.make_node("Concat", ["b1", "minus1"], ["s"], name="concat", axis=0),
             h.make_node("Reshape", ["a", "s"], ["y"], name="reshape"),
             h.make_node("Relu", ["y"], ["z"], name="relu_out")]
    inits = [onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"),
             onnx.numpy_helper.from_array(np.array([0], np.int64), "axes"),
             onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    shape = [2, 3, 4] if static else ["batch", 3, 4]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("z", T.FLOAT, ["d0", "d1"])], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _part_of(result: hs.Result, name: str) -> int:
    v = result.problem.names.index(name)
    return result.solution.part_of[v]


def test_reshape_split_from_the_node_computing_its_shape_on_the_same_device():
    r = hs.solve(computed_shape_model(), _rules(), engine="heuristic")
    assert r.metrics.partitions == 2
    assert _part_of(r, "make_shape") != _part_of(r, "reshape")
    assert {r.problem.devices[d].name for d in r.solution.part_device} == {"ACC"}
    assert hs.validate(r.problem, r.solution) == []


def test_the_validator_catches_a_reshape_sharing_a_part_with_its_shape():
    r = hs.solve(computed_shape_model(), _rules(), engine="heuristic")
    one_part = hs.Solution([0] * r.problem.n, [0], [0])
    kinds = [v.kind for v in hs.validate(r.problem, one_part)]
    assert kinds == ["value"]
    assert "reshape" in hs.validate(r.problem, one_part)[0].message


def test_constant_shape_causes_no_split():
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu_in"),
             h.make_node("Reshape", ["a", "shape"], ["y"], name="reshape"),
             h.make_node("Relu", ["y"], ["z"], name="relu_out")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                         [h.make_tensor_value_info("z", T.FLOAT, ["d0", "d1"])],
                         initializer=[onnx.numpy_helper.from_array(np.array([2, 12], np.int64), "shape")])
    r = hs.solve(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), _rules(), engine="heuristic")
    assert r.metrics.partitions == 1
    assert r.problem.value_pred == [[], [], []]


def test_folded_shape_chain_causes_no_split():
    r = hs.solve(shape_of_model(static=True), _rules(), engine="heuristic")
    folded = {r.model_graph.names[i] for i in r.problem.info.folded}
    assert folded == {"shape", "gather", "unsqueeze", "concat"}
    assert r.problem.names == ["relu_in", "reshape", "relu_out"]
    assert r.metrics.partitions == 1


def test_same_chain_with_a_symbolic_dim_does_not_fold_and_splits():
    r = hs.solve(shape_of_model(static=False), _rules(), engine="heuristic")
    assert r.problem.info.folded == []
    assert r.metrics.partitions == 2
    assert _part_of(r, "concat") != _part_of(r, "reshape")


def test_dims_make_the_chain_fold_again():
    r = hs.solve(shape_of_model(static=False), _rules(), dims={"batch": 2}, engine="heuristic")
    assert len(r.problem.info.folded) == 4
    assert r.metrics.partitions == 1


@pytest.mark.parametrize("model", [computed_shape_model(), shape_of_model(static=False)])
def test_value_inputs_ignore_on_the_device_causes_no_split(model):
    r = hs.solve(model, _rules("ignore"), engine="heuristic")
    assert r.metrics.partitions == 1
    assert hs.validate(r.problem, r.solution) == []


def test_shape_made_on_another_device_needs_no_extra_split():
    rules = _rules()
    rules["devices"][0]["ops"] = {"supported": ["Relu", "Reshape"]}   # Add goes to CPU
    r = hs.solve(computed_shape_model(), rules, engine="heuristic")
    assert r.metrics.partitions == 2
    assert r.problem.devices[r.solution.part_device[_part_of(r, "make_shape")]].name == "CPU"
    assert _part_of(r, "relu_in") == _part_of(r, "reshape") == _part_of(r, "relu_out")


def test_catalog_is_opset_aware():
    """Unsqueeze's axes became an input in opset 13: before that there is nothing to enforce."""
    rules = hs.load_rules({"version": 1, "devices": _acc(),
                           "include": ["constraints/onnx-value-inputs.yaml"]}, base_dir=ROOT)
    assert rules.value_input_indices("Unsqueeze", 11) == ()
    assert rules.value_input_indices("Unsqueeze", 13) == (1,)
    assert rules.value_input_indices("Reshape", 5) == (1,)
