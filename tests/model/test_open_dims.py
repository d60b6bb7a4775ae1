"""Issue 24: dims left open.  Every dimension that does not depend on an input value is
resolved with the graph inputs' dims symbolic (the heads of a grouped-query attention), and
any ``dim_param`` an input declares, ``?`` included, can be given a value."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_solve as hs
from corpus import truth as TR
from hetero_solve.export import affinity_map
from hetero_solve.model.graph import size_of

from conftest import ROOT


def gqa_model(hidden=128, heads=4, kv_heads=2, head_dim=32, seed=0) -> onnx.ModelProto:
    """One grouped-query attention block as transformers writes it: ``view(*input_shape, -1,
    head_dim)`` for q, k, v (a ``Reshape`` whose ``-1`` is the heads), ``repeat_kv`` (an
    ``Expand`` and a ``Reshape`` on shapes concatenated from ``Shape(x)``), and the heads
    merged back with ``view(*input_shape, -1)``.  ``x: [batch, sequence, hidden]``."""
    rng = np.random.default_rng(seed)

    def w(name, *shape):
        return nh.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    def c(name, values):
        return nh.from_array(np.array(values, np.int64), name)

    inits = [w("Wq", hidden, heads * head_dim), w("Wk", hidden, kv_heads * head_dim),
             w("Wv", hidden, kv_heads * head_dim), w("Wo", heads * head_dim, hidden),
             c("tail", [-1, head_dim]), c("i0", [0]), c("i1", [1]), c("ax2", [2]),
             c("rep", [kv_heads, heads // kv_heads]), c("nh", [heads]), c("hd", [head_dim]),
             c("minus1", [-1])]
    n = [h.make_node("Shape", ["x"], ["xs"]),
         h.make_node("Gather", ["xs", "i0"], ["b"], axis=0),
         h.make_node("Gather", ["xs", "i1"], ["s"], axis=0),
         h.make_node("Concat", ["b", "s", "tail"], ["hid_shape"], axis=0)]
    for p in "qkv":
        n += [h.make_node("MatMul", ["x", "W" + p], [p + "p"]),
              h.make_node("Reshape", [p + "p", "hid_shape"], [p + "r"]),
              h.make_node("Transpose", [p + "r"], [p + "t"], perm=[0, 2, 1, 3])]
    for p in "kv":
        n += [h.make_node("Unsqueeze", [p + "t", "ax2"], [p + "u"]),
              h.make_node("Concat", ["b", "rep", "s", "hd"], [p + "es"], axis=0),
              h.make_node("Expand", [p + "u", p + "es"], [p + "e"]),
              h.make_node("Concat", ["b", "nh", "s", "hd"], [p + "rs"], axis=0),
              h.make_node("Reshape", [p + "e", p + "rs"], [p + "rep"])]
    n += [h.make_node("Transpose", ["krep"], ["kT"], perm=[0, 1, 3, 2]),
          h.make_node("MatMul", ["qt", "kT"], ["scores"]),
          h.make_node("Softmax", ["scores"], ["probs"], axis=-1),
          h.make_node("MatMul", ["probs", "vrep"], ["ctx"]),
          h.make_node("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),
          h.make_node("Concat", ["b", "s", "minus1"], ["out_shape"], axis=0),
          h.make_node("Reshape", ["ctxT", "out_shape"], ["merged"]),
          h.make_node("MatMul", ["merged", "Wo"], ["y"])]
    for k, node in enumerate(n):
        node.name = f"{node.op_type.lower()}_{k}"
    g = h.make_graph(n, "gqa", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence", hidden])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", "sequence", hidden])],
                     initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _runtime(model, dims):
    feeds = TR.random_feeds(model, {"dims": dims}, seed=0)
    return TR.observe_shapes(TR.exposing_all(model), feeds, TR.main_graph_tensors(model))


def _disagreements(model, open_ok=()):
    """With batch and sequence open, a dimension the runtime gives the same value at two
    different (batch, sequence) must be a number in hetero-solve's shape, that number; one
    that follows them, the dim's name.  ``open_ok``: (tensor, axis) left open knowingly (a
    dim that follows the inputs without a name inference can give)."""
    mg = hs.load_model(model)
    runs = [({"batch": 1, "sequence": 5}, _runtime(model, {"batch": 1, "sequence": 5})),
            ({"batch": 3, "sequence": 7}, _runtime(model, {"batch": 3, "sequence": 7}))]
    wrong = {}
    for x in runs[0][1]:
        ours = mg.tensor_type(x).shape
        for dims, real in runs:
            if ours is None or len(ours) != len(real[x]) or any(
                    (x, k) not in open_ok and (dims[d] if isinstance(d, str) and d in dims else d) != r
                    for k, (d, r) in enumerate(zip(ours, real[x]))):
                wrong[x] = (ours, real[x])
    return wrong


def test_open_dims_resolve_every_dimension_the_runtime_fixes():
    model = gqa_model()
    assert _disagreements(model) == {}
    mg = hs.load_model(model)
    # The heads: 4 query heads, 2 key/value heads, repeated to 4.
    assert mg.tensor_type("qt").shape == ("batch", 4, "sequence", 32)
    assert mg.tensor_type("kt").shape == ("batch", 2, "sequence", 32)
    assert mg.tensor_type("merged").shape == ("batch", "sequence", 128)


def test_open_dims_count_the_bytes_the_runtime_has_at_one():
    """docs/problem.md counts an open dim as 1: each tensor's bytes are the runtime's with
    every dim 1 (the heads counted, not taken for 1)."""
    model = gqa_model()
    mg = hs.load_model(model)
    real = _runtime(model, {"batch": 1, "sequence": 1})
    off = {x: (size_of(mg.tensor_type(x)), int(np.prod(s)) * 4) for x, s in real.items()
           if mg.tensor_type(x).elem_type == T.FLOAT
           and size_of(mg.tensor_type(x)) != int(np.prod(s)) * 4}
    assert off == {}


def test_a_slice_keeps_the_axes_it_does_not_slice():
    """BERT's ``position_ids[:, :Shape(input_ids)[1]]`` of a ``[1, 512]`` buffer: ONNX leaves
    both dims open when the end is not a constant; the runtime has ``[1, sequence]``."""
    nodes = [h.make_node("Shape", ["x"], ["xs"], name="shape"),
             h.make_node("Slice", ["xs", "one", "two"], ["seq"], name="seq"),
             h.make_node("Slice", ["buffer", "zero", "seq", "one"], ["pos"], name="pos"),
             h.make_node("Gather", ["table", "pos"], ["emb"], name="emb")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.INT64, ["batch", "sequence"])],
                     [h.make_tensor_value_info("emb", T.FLOAT, [None, None, None])],
                     initializer=[nh.from_array(np.arange(512, dtype=np.int64)[None] % 8, "buffer"),
                                  nh.from_array(np.zeros((8, 16), np.float32), "table"),
                                  nh.from_array(np.array([0], np.int64), "zero"),
                                  nh.from_array(np.array([1], np.int64), "one"),
                                  nh.from_array(np.array([2], np.int64), "two")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    assert _disagreements(m, open_ok={("pos", 1), ("emb", 1)}) == {}
    mg = hs.load_model(m)
    assert mg.tensor_type("pos").shape[0] == 1 and mg.tensor_type("emb").shape[::2] == (1, 16)


def test_a_reshape_whose_count_does_not_cancel_stays_open():
    """``[batch, sequence, 128] -> [-1, 128]`` is ``batch * sequence`` rows: no number."""
    nodes = [h.make_node("Reshape", ["x", "shape"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence", 128])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, None])],
                     initializer=[nh.from_array(np.array([-1, 128], np.int64), "shape")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    y = hs.load_model(m).tensor_type("y").shape
    assert len(y) == 2 and y[1] == 128 and not isinstance(y[0], int)


def _question_marks(tmp_path):
    """``x: [?, 3, ?, ?]`` as paddle2onnx writes it (``dim_param: "?"``)."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"),
             h.make_node("GlobalAveragePool", ["a"], ["y"], name="pool")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["?", 3, "?", "?"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["?", 3, 1, 1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "paddle.onnx"
    onnx.save(m, str(path))
    return path


STATIC = {"version": 1, "devices": [
    {"name": "NPU", "ops": {"supported": "all", "static_shapes": True}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def test_a_dim_named_question_mark_takes_the_value_a_rule_file_gives(tmp_path, recwarn):
    path = _question_marks(tmp_path)
    r = hs.solve(path, {**STATIC, "dims": {"?": 8}}, engine="heuristic")
    assert r.model_graph.tensor_type("a").shape == (8, 3, 8, 8)
    assert affinity_map(r.problem, r.solution) == {"relu": "NPU", "pool": "NPU"}
    assert r.problem.info.missing_dims == []
    assert not [w for w in recwarn if "'?'" in str(w.message)]   # not "names no dimension"


def test_a_dim_named_question_mark_takes_the_value_dim_gives(tmp_path):
    path = _question_marks(tmp_path)
    r = subprocess.run([sys.executable, "-m", "hetero_solve", "dims", str(path), "--dim", "?=2",
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    dims = json.loads(r.stdout)["inputs"][0]["dims"]
    assert [(d["name"], d["value"]) for d in dims] == [("?", 2), (None, 3), ("?", 2), ("?", 2)]
    assert "names no dimension" not in r.stderr
    mg = hs.load_model(path, dims={"?": 2})
    assert mg.tensor_type("y").shape == (2, 3, 1, 1) and mg.unset_dims() == []


def test_a_real_gqa_decoder_with_dims_open_knows_its_heads():
    """``qwen2-kv-tiny-legacy`` (transformers' Qwen2, 4 query / 2 key-value heads, exported
    by torch) loaded with no dim given: the heads of q, k and v are numbers, and every number
    hetero-solve gives is the runtime's (``corpus/truth``, taken at the corpus dims)."""
    name = "qwen2-kv-tiny-legacy"
    mg = hs.load_model(TR.model_file(name))
    truth = TR.load_truth(TR.truth_file(name))["tensors"]
    heads = {}
    for layer in (0, 1):
        for k, suffix in enumerate(("", "_1", "_2")):
            x = f"/model/model/layers.{layer}/self_attn/Transpose{suffix}_output_0"
            heads[x] = mg.tensor_type(x).shape
            assert heads[x] == ("batch", (4, 2, 2)[k], "sequence", 16), (x, heads[x])
    wrong = {x: (mg.tensor_type(x).shape, real) for x, real in truth.items()
             if real is not None and mg.tensor_type(x).shape is not None
             and any(isinstance(d, int) and d != r for d, r in zip(mg.tensor_type(x).shape, real))}
    assert wrong == {}
