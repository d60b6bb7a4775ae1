"""Model loading for any model onnx.checker accepts."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.model import load_model
from hetero_solve.run.onnxruntime import run_original
from hetero_solve.run.session import run_partitioned

from conftest import EXAMPLES, random_feeds

TWO = [{"name": "ACC", "ops": {"supported": ["Relu", "Add", "MatMul", "Mul", "Gemm"]}},
       {"name": "CPU", "ops": {"supported": "all"}}]


def test_unnamed_and_duplicate_nodes_get_stable_unique_names():
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["a"], ["b"], name="dup"),
             h.make_node("Relu", ["b"], ["c"], name="dup"), h.make_node("Relu", ["c"], ["d"]),
             h.make_node("Relu", ["d"], ["y"], name="Relu_0")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    names = load_model(model).names
    assert len(set(names)) == 5
    assert names[1] == "dup" and names[4] == "Relu_0"      # given names are kept
    assert names[0] == "Relu_0_" and names[2] == "dup_2" and names[3] == "Relu_3"
    assert load_model(model).names == names                # stable


def test_external_data_model_loads_solves_and_runs(tmp_path):
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "w"], ["a"], name="mm"), h.make_node("Erf", ["a"], ["b"], name="erf"),
             h.make_node("MatMul", ["b", "w"], ["y"], name="mm2")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 64])],
                     initializer=[onnx.numpy_helper.from_array(w, "w")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").stat().st_size == w.nbytes
    r = hs.solve(path, {"version": 1, "devices": TWO}, engine="heuristic")
    assert r.metrics.partitions == 3
    assert r.metrics.part_memory[0] == w.nbytes + 256 + 256     # the weight is counted
    out = write_result(r, tmp_path / "out")
    feeds = random_feeds(path, {})
    got = run_partitioned(out, feeds).outputs["y"]
    np.testing.assert_allclose(got, run_original(path, feeds)["y"], atol=1e-5)


def test_loop_reads_outer_scope_tensors_as_inputs():
    mg = load_model(EXAMPLES / "control_flow.onnx", dims={"seq": 5, "batch": 2})
    loop = mg.op_types.index("Loop")
    assert set(mg.outer_inputs[loop]) == {"input/scale_out", "rnn.wx", "rnn.wh", "rnn.b"}
    p = hs.compile_problem(mg, hs.load_rules({"version": 1, "devices": TWO}))
    v = p.graph_index.index(loop)
    assert p.names[p.pred[v][0]] == "input/scale"            # the data edge from outer scope
    # trip count and initial state are folded (static shapes), so they are constants too
    assert {p.const_names[c] for c in p.node_consts[v]} == {"rnn.wx", "rnn.wh", "rnn.b", "rnn/steps_out",
                                                            "rnn/h0_out"}
    If = p.graph_index.index(mg.op_types.index("If"))
    assert p.names[If] == "gate/If" and "proj/MatMul" in [p.names[u] for u in p.pred[If]]


def test_control_flow_nodes_are_atomic():
    """ACC takes every op of the main graph but not Tanh, which only the Loop body and the If's
    else branch use: so ACC must refuse both, and say why."""
    rules = hs.load_rules({"version": 1, "devices": [
        {"name": "ACC", "ops": {"supported": "all", "unsupported": ["Tanh"]}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    mg = load_model(EXAMPLES / "control_flow.onnx", dims={"seq": 5, "batch": 2})
    p = hs.compile_problem(mg, rules)
    loop = p.names.index("rnn/Loop")
    gate = p.names.index("gate/If")
    assert p.allowed[loop] == (1,) and p.allowed[gate] == (1,)
    assert "Loop body (body) node 'body/tanh': Tanh is listed in ACC's ops.unsupported" in p.refusals[(loop, 0)]
    assert "else/tanh" in p.refusals[(gate, 0)]
    assert all(p.allowed[v] == (0, 1) for v in range(p.n) if v not in (loop, gate))


@pytest.mark.parametrize("opset", range(7, onnx.defs.onnx_opset_version() + 1))
def test_every_opset_from_7_loads_and_partitions(opset):
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"), h.make_node("Add", ["a", "bias"], ["b"], name="add"),
             h.make_node("Sigmoid", ["b"], ["c"], name="sigmoid"), h.make_node("Reshape", ["c", "shape"], ["d"], name="reshape"),
             h.make_node("Relu", ["d"], ["y"], name="relu2")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [3, 2])],
                     initializer=[onnx.numpy_helper.from_array(np.ones(3, np.float32), "bias"),
                                  onnx.numpy_helper.from_array(np.array([3, 2], np.int64), "shape")])
    ops = [h.make_opsetid("", opset)]
    model = h.make_model(g, opset_imports=ops)
    model.ir_version = onnx.helper.find_min_ir_version_for(ops)
    if model.ir_version < 4:   # old IR: initializers must also be graph inputs (then constants)
        model.graph.input.extend([h.make_tensor_value_info("bias", T.FLOAT, [3]),
                                  h.make_tensor_value_info("shape", T.INT64, [2])])
    onnx.checker.check_model(model)
    mg = load_model(model)
    assert mg.opset == opset and mg.tensor_type("d").shape == (3, 2)
    rules = hs.load_rules({"version": 1, "include": ["constraints/onnx-value-inputs.yaml"],
                           "devices": [{"name": "ACC", "ops": {"supported": ["Relu", "Add", "Reshape"]}},
                                       {"name": "CPU", "ops": {"supported": "all"}}]}, base_dir=EXAMPLES.parent)
    r = hs.solve(mg, rules, engine="heuristic")
    assert r.metrics.partitions == 3 and hs.validate(r.problem, r.solution) == []


def test_unreadable_and_invalid_models_are_model_errors(tmp_path):
    with pytest.raises(hs.ModelError, match="no such file"):
        load_model(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all")
    with pytest.raises(hs.ModelError, match="cannot read ONNX model"):
        load_model(bad)
    g = h.make_graph([h.make_node("Relu", ["nowhere"], ["y"])], "g", [],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    path = tmp_path / "invalid.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    with pytest.raises(hs.ModelError, match="not a valid ONNX model"):
        load_model(path)


@pytest.mark.parametrize("example", ["transformer_encoder", "resnet_like", "control_flow"])
@pytest.mark.parametrize("dims", [{}, {"batch": 1, "seq": 16}])
def test_sizes_in_bulk_equal_sizes_one_by_one(example, dims):
    """bytes_of (what compile sizes every tensor and constant with) against the definition
    name by name (element count x element size, an open dim counting 1); open_sizes lists
    exactly the tensors whose type is not static."""
    from hetero_solve.model.graph import size_of
    from hetero_solve.units import element_bits
    mg = load_model(EXAMPLES / f"{example}.onnx", dims)
    structure = hs.model.structure.structure(mg, mg.placeable())
    tensors, consts = structure["tensor_names"], structure["const_names"]
    assert consts and tensors
    one_by_one = [size_of(mg.tensor_type(x)) for x in tensors + consts]
    assert mg.bytes_of(tensors + consts) == one_by_one
    for name in consts:
        if name in mg.initializers:
            t = mg.initializers[name]
            count = int(np.prod(t.dims)) if t.dims else 1
            assert mg.tensor_bytes(name) == (count * element_bits(t.data_type) + 7) // 8
    unknown = set(mg.open_sizes(tensors + consts))
    assert unknown == {x for x in tensors + consts if not mg.tensor_type(x).static}
    assert bool(unknown) == (not dims or example == "control_flow")
