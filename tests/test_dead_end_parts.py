"""Every part runs, also a part whose nodes' results nobody reads (issue 16).

docs/problem.md gives such a part no outputs (its tensors are neither graph outputs nor read
by another part), and onnxruntime refuses a model without outputs ("At least one output
should be requested").  Its model declares those dead-end tensors as outputs; the manifest's
``outputs`` and ``memory`` stay those docs/problem.md defines."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from conftest import chain_model

import hetero_solve as hs
from hetero_solve.export import write_result

RULES = ("version: 1\ndevices:\n  - name: NPU\n    ops: {supported: [Relu, Add]}\n"
         "  - name: CPU\n    ops: {supported: all}\n")


def _solve_and_verify(tmp_path, model: onnx.ModelProto):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    rules = tmp_path / "r.yaml"
    rules.write_text(RULES)
    result = hs.solve(path, rules, work_limit=1)
    out = write_result(result, tmp_path / "out")
    report = hs.verify(path, out, seed=1)
    assert report.ok, [o.as_dict() for o in report.outputs]
    manifest = json.loads((out / "partition.json").read_text())
    for part in manifest["partitions"]:
        m = onnx.load(str(out / part["file"]))
        onnx.checker.check_model(m, full_check=True)
        assert len(m.graph.output) >= 1, part
    return manifest, out


def test_a_part_of_dead_ends_runs_and_keeps_spec_outputs(tmp_path):
    # x -> Relu -> y -> Relu -> w (graph output); x -> Sigmoid -> z, which nothing reads.
    model = chain_model([("Relu", ["x"], "y"), ("Sigmoid", ["x"], "z"), ("Relu", ["y"], "w")],
                        {"x": [2, 3]}, {"w": [2, 3]})
    manifest, out = _solve_and_verify(tmp_path, model)
    cpu = [p for p in manifest["partitions"] if p["device"] == "CPU"]
    assert len(cpu) == 1 and cpu[0]["outputs"] == []           # docs/problem.md: no outputs
    assert [o.name for o in onnx.load(str(out / cpu[0]["file"])).graph.output] == ["z"]
    assert cpu[0]["memory"] == 2 * 3 * 4                         # x only: z is not counted


def test_several_dead_ends_and_an_unread_optional_output(tmp_path):
    # Two CPU-only branches that nobody reads, one of them a node with two outputs.
    nodes = [h.make_node("Relu", ["x"], ["y"], name="r"),
             h.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             h.make_node("Tanh", ["s"], ["t"], name="tanh"),
             h.make_node("TopK", ["x", "k"], ["vals", "idx"], name="topk", axis=1),
             h.make_node("Add", ["y", "y"], ["out"], name="add")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                         [h.make_tensor_value_info("out", T.FLOAT, [2, 5])],
                         initializer=[onnx.numpy_helper.from_array(np.array([2], np.int64), "k")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    manifest, out = _solve_and_verify(tmp_path, model)
    dead = [p for p in manifest["partitions"] if not p["outputs"]]
    assert dead, manifest["partitions"]
    declared = {o.name for p in dead for o in onnx.load(str(out / p["file"])).graph.output}
    assert declared == {"t", "vals", "idx"}


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_dead_ends_every_part_runs(tmp_path, seed):
    """Random small graphs where about a third of the nodes feed nothing."""
    rng = np.random.default_rng(seed)
    ops = ["Relu", "Sigmoid", "Add", "Tanh", "Neg"]
    names = ["x"]
    nodes = []
    for i in range(10):
        op = ops[rng.integers(len(ops))]
        a = names[rng.integers(len(names))]
        ins = [a, names[rng.integers(len(names))]] if op == "Add" else [a]
        nodes.append(h.make_node(op, ins, [f"t{i}"], name=f"n{i}"))
        if rng.random() < 0.66:   # the others stay dead ends (unless the last one)
            names.append(f"t{i}")
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                         [h.make_tensor_value_info("t9", T.FLOAT, [3, 4])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    _solve_and_verify(tmp_path, model)
