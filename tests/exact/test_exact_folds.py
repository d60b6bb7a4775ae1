"""Optional folds (docs/problem.md: foldable nodes *may* be folded): a tied embedding whose
``Transpose(W)`` folds to a second copy of ``W`` fits a small card only unfolded."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import hetero_solve as hs
from hetero_solve.compile import compile_problem
from hetero_solve.exact.folds import candidates, unfold
from hetero_solve.export import write_result
from hetero_solve.model.load import load_model
from hetero_solve.rules import load_rules
from hetero_solve.validate import validate

V, H, S = 256, 960, 8            # W: 256 x 960 float32 = 983,040 bytes (< 1 MiB: it folds)


def tied_embedding(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((V, H)).astype(np.float32), "W")
    nodes = [helper.make_node("Gather", ["W", "ids"], ["x"], name="embed"),
             helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Transpose", ["W"], ["WT"], name="tied", perm=[1, 0]),
             helper.make_node("MatMul", ["y", "WT"], ["logits"], name="head")]
    graph = helper.make_graph(
        nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, S])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, S, V])],
        initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


RULES = """version: 1
devices:
  - name: NPU
    memory: 1.5MiB
    ops: {supported: [Gather, Relu, MatMul, Transpose]}
  - name: CPU
    ops: {supported: all}
"""


def test_the_folded_transpose_is_an_option_and_unfolding_it_places_it(tmp_path):
    model = tied_embedding(str(tmp_path / "tied.onnx"))
    (tmp_path / "r.yaml").write_text(RULES)
    mg = load_model(model)
    p = compile_problem(mg, load_rules(str(tmp_path / "r.yaml")))
    assert p.n == 3 and [o.name for o in p.fold_options] == ["tied"]
    assert candidates(p, [0]) == [0]
    q, _ = unfold(p, [0])
    assert q.n == 4 and q.names[3] == "tied" and q.info.folded == []
    head = q.names.index("head")
    assert 3 in q.pred[head] and not any(q.const_names[c] == "WT" for c in q.node_consts[head])


def test_a_tied_embedding_fits_one_card_unfolded(tmp_path):
    """Folded, the card would hold W and W^T (1.97 MB > 1.5 MiB): the answer would move a node
    off the NPU.  Placing the Transpose next to the Gather shares W: one part, no fallback,
    proven over both fold choices; the parts reproduce the model in onnxruntime."""
    model = tied_embedding(str(tmp_path / "tied.onnx"))
    rules = tmp_path / "r.yaml"
    rules.write_text(RULES)
    greedy = hs.solve(model, str(rules), engine="heuristic")
    assert greedy.metrics.fallback > 0          # folded, W and W^T cannot share the card
    res = hs.solve(model, str(rules))
    assert res.metrics.fallback == 0 and res.metrics.partitions == 1
    assert res.solution.status == "optimal"
    assert validate(res.problem, res.solution) == []
    assert res.solution.stats["folds"]["placed"] is True
    out = write_result(res, tmp_path / "out")
    manifest = json.loads((out / "partition.json").read_text())
    assert manifest["folded"] == []
    assert sorted(manifest["partitions"][0]["node_names"]) == ["embed", "head", "relu", "tied"]
    assert manifest["partitions"][0]["memory"] <= 1.5 * 2 ** 20
    rep = hs.verify(model, out, inputs={"ids": np.arange(S, dtype=np.int64)[None] % V})
    assert rep.ok
