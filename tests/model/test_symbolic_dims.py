"""Issue 32: dims hidden behind torch's mask code (``Where(Equal(shape, -1))``, ``Range``,
``ConstantOfShape``, a KV cache's ``Concat``, ``rotate_half``'s ``Div``) get the value
onnxruntime sees: a number, or an expression of the inputs' dim names
(``hetero_solve/model/symbolic.py``).  Checked axis by axis against onnxruntime at two
settings of the dims; nothing claimed that the runtime contradicts."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_solve as hs
from corpus import truth as TR
from hetero_solve.export import write_result
from hetero_solve.model.symbolic import UNKNOWN, evaluate, parse, symbol, written

RULES = {"version": 1, "devices": [{"name": "GPU", "ops": {"supported": "all"}},
                                   {"name": "CPU", "ops": {"supported": "all"}}]}


# -- expressions -----------------------------------------------------------------------------

def test_expressions_are_canonical_and_read_back():
    b, s, p = symbol("batch"), symbol("sequence"), symbol("past_sequence")
    total = s + p
    assert written(total) == written(p + s) == "past_sequence + sequence"
    assert written(b * total) == "batch*past_sequence + batch*sequence"
    assert written(s - 1) == "sequence - 1" and written(1 - s) == "-sequence + 1"
    assert written(2 * s * s) == "2*sequence*sequence"
    assert written(total - p) == "sequence" and written(total - total) == 0
    for e in (total, b * total, s - 1, 1 - s, 2 * s * s, -s):
        assert parse(written(e)) == e
    assert evaluate("batch*past_sequence + batch*sequence", {"batch": 2, "sequence": 7,
                                                              "past_sequence": 4}) == 22
    assert evaluate("sequence - 1", {}) is None
    # Not expressions: names exporters write, and inference's "no name"
    assert parse("seq-len") == symbol("seq-len") and parse("p2o.DynamicDimension.0") == \
        symbol("p2o.DynamicDimension.0")
    assert parse("unk__3") is UNKNOWN and parse("?") is UNKNOWN and parse(None) is UNKNOWN


# -- a model written like torch's mask code --------------------------------------------------

def mask_model() -> onnx.ModelProto:
    """``x: [batch, sequence, 16]``, ``past: [batch, past, 16]``: a KV cache ``Concat``, a
    ``Range`` over its length, the mask expanded to ``Where(Equal(shape, -1), ones,
    shape)``, ``rotate_half``'s ``x[..., : Shape(x)[2] // 2]``, and a slice of a 32-long
    buffer up to ``sequence`` (which clamps when ``sequence > 32``: no claim)."""
    def c(name, values, dtype=np.int64):
        return nh.from_array(np.array(values, dtype), name)

    inits = [c("i0", [0]), c("i1", [1]), c("i2", [2]), c("one", [1]), c("zero_s", 0),
             c("one_s", 1), c("two_s", 2), c("minus1_s", -1), c("tail", [1, 1, 1, -1]),
             c("buffer", np.arange(32)[None])]
    n = [h.make_node("Shape", ["x"], ["s"]),
         h.make_node("Concat", ["past", "x"], ["kv"], axis=1),
         h.make_node("Shape", ["kv"], ["ks"]),
         h.make_node("Gather", ["ks", "one_s"], ["t"], axis=0),
         h.make_node("Range", ["zero_s", "t", "one_s"], ["r"]),
         h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
         h.make_node("Gather", ["s", "i1"], ["q"], axis=0),
         h.make_node("Unsqueeze", ["t", "i0"], ["t1"]),
         h.make_node("Concat", ["b", "one", "q", "t1"], ["target"], axis=0),
         h.make_node("Shape", ["target"], ["ts"]),
         h.make_node("ConstantOfShape", ["ts"], ["ones"],
                     value=nh.from_array(np.array([1], np.int64))),
         h.make_node("Mul", ["ones", "minus1_s"], ["neg"]),
         h.make_node("Equal", ["target", "neg"], ["eq"]),
         h.make_node("Where", ["eq", "ones", "target"], ["w"]),
         h.make_node("Reshape", ["r", "tail"], ["r4"]),
         h.make_node("Expand", ["r4", "w"], ["mask"]),
         h.make_node("Gather", ["s", "two_s"], ["d"], axis=0),
         h.make_node("Div", ["d", "two_s"], ["half"]),
         h.make_node("Unsqueeze", ["half", "i0"], ["half1"]),
         h.make_node("Slice", ["x", "i0", "half1", "i2"], ["rot"]),
         h.make_node("Slice", ["buffer", "i0", "q", "i1"], ["pos"])]
    for k, node in enumerate(n):
        node.name = f"{node.op_type.lower()}_{k}"
    g = h.make_graph(n, "mask", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence", 16]),
                                 h.make_tensor_value_info("past", T.FLOAT, ["batch", "past", 16])],
                     [h.make_tensor_value_info(y, e, [None] * rank) for y, e, rank in
                      (("mask", T.INT64, 4), ("rot", T.FLOAT, 3), ("kv", T.FLOAT, 3),
                       ("pos", T.INT64, 2))],
                     initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _axes(model, settings, ranges=None):
    mg = hs.load_model(model)
    return TR.open_axes(model, settings, lambda x: mg.tensor_type(x).shape, evaluate, ranges)


def test_mask_code_dims_get_the_runtimes_values():
    model = mask_model()
    mg = hs.load_model(model)
    assert mg.tensor_type("kv").shape == ("batch", "past + sequence", 16)
    assert mg.tensor_type("r").shape == ("past + sequence",)
    assert mg.tensor_type("mask").shape == ("batch", 1, "sequence", "past + sequence")
    assert mg.tensor_type("rot").shape == ("batch", "sequence", 8)
    axes = _axes(model, [{"batch": 1, "sequence": 5, "past": 3},
                         {"batch": 2, "sequence": 7, "past": 0}])
    assert axes.wrong == []
    # Only the buffer's slice stays open: min(sequence, 32) is no polynomial.
    assert [(a[0], a[1]) for a in axes.open] == [("pos", 1)]


def test_a_range_that_may_be_empty_and_a_division_that_does_not_divide_stay_open():
    """``Range(0, sequence - 4)`` has ``max(sequence - 4, 0)`` elements; ``sequence // 2``
    is no polynomial: neither is claimed."""
    inits = [nh.from_array(np.array(v, np.int64), k) for k, v in
             (("i1", 1), ("four", 4), ("zero", 0), ("two", 2), ("ax", [0]))]
    n = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i1"], ["q"], axis=0),
         h.make_node("Sub", ["q", "four"], ["q4"]),
         h.make_node("Range", ["zero", "q4", "i1"], ["r"]),
         h.make_node("Div", ["q", "two"], ["half"]),
         h.make_node("Range", ["zero", "half", "i1"], ["r2"])]
    g = h.make_graph(n, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence"])],
                     [h.make_tensor_value_info("r", T.INT64, [None]),
                      h.make_tensor_value_info("r2", T.INT64, [None])], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    mg = hs.load_model(m)
    assert not isinstance(mg.tensor_type("r").shape[0], int)
    assert parse(mg.tensor_type("r").shape[0]) is UNKNOWN
    assert parse(mg.tensor_type("r2").shape[0]) is UNKNOWN
    axes = _axes(m, [{"batch": 1, "sequence": 6}, {"batch": 2, "sequence": 9}])
    assert axes.wrong == [] and len(axes.open) == 2


# -- the corpus's decoders ---------------------------------------------------------------------

#: Two settings of each decoder's dims (the corpus's first; ``total_sequence`` is
#: ``past_sequence + sequence``, as a KV-cache step runs).
DECODERS = {
    "qwen2-kv-tiny-legacy": [dict(batch=1, sequence=16, past_sequence=32, total_sequence=48),
                             dict(batch=2, sequence=7, past_sequence=4, total_sequence=11)],
    "t5-tiny-legacy": [dict(batch=1, sequence=16, decoder_sequence=8),
                       dict(batch=2, sequence=11, decoder_sequence=5)],
    "t5-tiny-dynamo": [dict(batch=1, sequence=16, decoder_sequence=8),
                       dict(batch=2, sequence=11, decoder_sequence=5)],
    "whisper-encoder-tiny-legacy": [dict(batch=1), dict(batch=3)],
    "whisper-encoder-tiny-dynamo": [dict(batch=1), dict(batch=3)],
}


@pytest.mark.parametrize("name", list(DECODERS))
def test_a_decoders_dims_are_the_runtimes_axis_by_axis(name):
    """Every axis of every main-graph tensor with the dims open: a number onnxruntime gives at
    both settings, or an expression that evaluates to its size at both; none open (Qwen2 had
    121 open axes before, 24 of them numbers: ``benchmarks/results/dims.md``)."""
    path = TR.model_file(name)
    axes = _axes(onnx.load(str(path)), DECODERS[name], TR.load_corpus()[name].get("ranges"))
    assert axes.wrong == []
    assert axes.open == []
    assert axes.static + axes.symbolic == axes.total


def test_qwen2s_mask_and_kv_cache_dims():
    mg = hs.load_model(TR.model_file("qwen2-kv-tiny-legacy"))
    assert mg.tensor_type("present.0.key").shape == ("batch", 2, "past_sequence + sequence", 16)
    assert mg.tensor_type("/model/model/Where_1_output_0").shape == \
        ("batch", 1, "sequence", "past_sequence + sequence")
    # rotate_half: x[..., : 16 // 2]
    assert mg.tensor_type("/model/model/layers.0/self_attn/Slice_output_0").shape == \
        ("batch", 4, "sequence", 8)


def test_parts_cut_on_expression_dims_run_and_reproduce(tmp_path):
    """The parts' boundaries carry the expressions as ``dim_param``s: onnx.checker accepts
    every part, and the parts run in onnxruntime give the original's outputs."""
    path = TR.model_file("qwen2-kv-tiny-legacy")
    cpu_only = {"Softmax", "Range"}
    rules = {"version": 1, "devices": [
        {"name": "GPU", "ops": {"supported": "all", "unsupported": sorted(cpu_only)}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    r = hs.solve(path, rules, engine="heuristic")
    assert len(r.parts()) > 1
    write_result(r, tmp_path / "out")
    params = set()
    for part in sorted((tmp_path / "out").glob("part*.onnx")):
        onnx.checker.check_model(str(part), full_check=True)
        params |= {d.dim_param for vi in onnx.load(str(part)).graph.input
                   for d in vi.type.tensor_type.shape.dim}
    assert "past_sequence + sequence" in params
    dims = DECODERS["qwen2-kv-tiny-legacy"][1]
    report = hs.verify(path, tmp_path / "out", dims=dims,
                       ranges=TR.load_corpus()["qwen2-kv-tiny-legacy"]["ranges"])
    assert report.ok, report
