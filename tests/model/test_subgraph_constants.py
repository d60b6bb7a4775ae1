"""Constants held inside ``If``/``Loop``/``Scan`` bodies are constants of the node that owns
the body (docs/problem.md): they count in its part's memory, and a device too small for them
refuses the part."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_solve as hs
from hetero_solve.export import affinity_map, write_result

BRANCH_ELEMENTS = 256 * 1024          # 1 MiB of float32 per branch


def _if_with_heavy_branches() -> onnx.ModelProto:
    """``y = If(sum(x) > 0, x @ W_then, x @ W_else)``: each branch holds its own 1 MiB
    weight, one as an initializer of the body, one as a ``Constant`` node in it."""
    rng = np.random.default_rng(0)
    w_then = rng.standard_normal((512, 512)).astype(np.float32)
    w_else = rng.standard_normal((512, 512)).astype(np.float32)
    then_g = h.make_graph([h.make_node("MatMul", ["x", "W_then"], ["t_out"], name="then/mm")],
                          "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, [1, 512])],
                          initializer=[nh.from_array(w_then, "W_then")])
    else_g = h.make_graph([h.make_node("Constant", [], ["W_else"], name="else/w",
                                       value=nh.from_array(w_else, "W_else")),
                           h.make_node("MatMul", ["x", "W_else"], ["e_out"], name="else/mm")],
                          "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, [1, 512])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             h.make_node("If", ["c"], ["b"], name="branch", then_branch=then_g, else_branch=else_g),
             h.make_node("Relu", ["b"], ["y"], name="relu")]
    g = h.make_graph(nodes, "heavy_if", [h.make_tensor_value_info("x", T.FLOAT, [1, 512])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 512])],
                     initializer=[nh.from_array(np.array(0.0, np.float32), "zero")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _rules(npu_memory: str) -> dict:
    return {"version": 1, "devices": [
        {"name": "NPU", "memory": npu_memory, "ops": {"supported": "all"}},
        {"name": "CPU", "ops": {"supported": "all"}}]}


def test_branch_constants_are_constants_of_the_if_node():
    r = hs.solve(_if_with_heavy_branches(), _rules("64MiB"), engine="heuristic")
    p = r.problem
    v = p.names.index("branch")
    inner = {p.const_names[c]: p.const_bytes[c] for c in p.node_consts[v]}
    assert inner == {"branch/then_branch/W_then": 4 * BRANCH_ELEMENTS,
                     "branch/else_branch/W_else": 4 * BRANCH_ELEMENTS}
    assert r.metrics.partitions == 1
    assert r.metrics.part_memory[0] >= 8 * BRANCH_ELEMENTS


def test_a_device_too_small_for_the_branch_constants_refuses_the_if(tmp_path):
    # 1 MiB holds the If's boundary tensors (a few KiB) but not its 2 MiB of branch weights.
    r = hs.solve(_if_with_heavy_branches(), _rules("1MiB"), engine="heuristic")
    aff = affinity_map(r.problem, r.solution)
    assert aff["branch"] == "CPU"
    assert aff["relu"] == "NPU" and aff["sum"] == "NPU"
    assert hs.validate(r.problem, r.solution) == []
    assert all(m <= 1024 * 1024 for m, k in zip(r.metrics.part_memory, r.solution.part_device)
               if r.problem.devices[k].name == "NPU")
    out = write_result(r, tmp_path / "out")
    for f in out.glob("part*.onnx"):
        onnx.checker.check_model(onnx.load(str(f)), full_check=True)
    model_path = tmp_path / "m.onnx"
    onnx.save(_if_with_heavy_branches(), str(model_path))
    assert hs.verify(model_path, out).ok
