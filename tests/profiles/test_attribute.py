"""A fused kernel's time goes to the node that does its arithmetic (issue 36 item 2): a
convolution or matrix product takes its kernel's time, the ops fused after it only their own
element-wise share, and a kernel named after a partner claims the product it was fused onto."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper, numpy_helper
import numpy as np

from hetero_solve.model import load_model
from hetero_solve.profiles.attribute import RuntimeNode, attribute, claim_fused


def linear_model(tmp_path):
    """x [1, 64, 256] -> MatMul (256x256) -> Add (bias) -> Mul (scale) -> Relu -> y: a
    projection as transformer exports write it."""
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    b = numpy_helper.from_array(np.ones(256, np.float32), "b")
    s = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="proj/MatMul"),
             helper.make_node("Add", ["mm", "b"], ["biased"], name="proj/Add"),
             helper.make_node("Mul", ["biased", "s"], ["scaled"], name="scale/Mul"),
             helper.make_node("Relu", ["scaled"], ["y"], name="act/Relu")]
    graph = helper.make_graph(
        nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 256])], [w, b, s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "linear.onnx"
    path.write_bytes(model.SerializeToString())
    return load_model(str(path))


def test_a_fused_products_time_goes_to_the_product_not_its_partners(tmp_path):
    mg = linear_model(tmp_path)
    idx = {n: v for v, n in enumerate(mg.names)}
    # one kernel for all four (onnxruntime's FusedMatMul-like, or OpenVINO's FullyConnected)
    rec = RuntimeNode("fc", "FullyConnected", 1e-3, [idx[n] for n in mg.names])
    a = attribute(mg, [rec])
    t = a.node_seconds
    assert sum(t.values()) == pytest.approx(1e-3)
    # the product's 2 x 64 x 256 x 256 FLOPs against 64 x 256 elements for each partner
    assert t["proj/MatMul"] > 0.99 * 1e-3
    for partner in ("proj/Add", "scale/Mul", "act/Relu"):
        assert 0 < t[partner] < 0.005 * 1e-3


def test_a_kernel_named_after_a_partner_claims_the_product_it_was_fused_onto(tmp_path):
    mg = linear_model(tmp_path)
    idx = {n: v for v, n in enumerate(mg.names)}
    # OpenVINO names the MatMul + Add + Mul layer after the Mul and lists only it
    fc = RuntimeNode("scale/Mul", "FullyConnected", 1e-3, [idx["scale/Mul"]])
    relu = RuntimeNode("act/Relu", "Eltwise", 1e-5, [idx["act/Relu"]])
    a = attribute(mg, [fc, relu], target=1.01e-3)
    t = a.node_seconds
    assert sorted(fc.members) == sorted(idx[n] for n in ("proj/MatMul", "proj/Add",
                                                         "scale/Mul"))
    assert t["proj/MatMul"] > 0.95 * 1e-3 and t["scale/Mul"] < 0.01 * 1e-3
    assert a.shares["fused"] > 0.9 and a.shares["spread"] == pytest.approx(0, abs=1e-9)
    assert "given to that one" in a.spread


def test_a_product_another_kernel_has_time_for_is_not_claimed(tmp_path):
    mg = linear_model(tmp_path)
    idx = {n: v for v, n in enumerate(mg.names)}
    mm = RuntimeNode("proj/MatMul", "MatMul", 1e-3, [idx["proj/MatMul"]])
    fc = RuntimeNode("scale/Mul", "FullyConnected", 1e-4, [idx["scale/Mul"]])
    assert claim_fused(mg, [mm, fc]) == 0.0
    assert fc.members == [idx["scale/Mul"]]
    # a kernel that is no product claims nothing either
    eltwise = RuntimeNode("scale/Mul", "Eltwise", 1e-4, [idx["scale/Mul"]])
    assert claim_fused(mg, [eltwise]) == 0.0 and eltwise.members == [idx["scale/Mul"]]
