"""Issue 37 item 4: the tensors onnxruntime's contrib ops make are sized from the model
(``hetero_solve/model/contrib.py``), checked axis by axis and byte by byte against onnxruntime
running each op at two settings of the dims; and a model quantized in the test with
onnxruntime's own dynamic quantizer (``DynamicQuantizeLSTM``, ``MatMulInteger``): every tensor's
size equal to onnxruntime's at two input shapes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import hetero_solve as hs
from corpus import truth as TR
from hetero_solve.model.contrib import SHAPE_FUNCTIONS
from hetero_solve.units import element_bits

SETTINGS = ({"b": 1, "s": 3, "l": 5, "m": 2, "h": 4}, {"b": 2, "s": 7, "l": 4, "m": 5, "h": 3})
MS = "com.microsoft"
RNG = np.random.default_rng(0)
NP = {T.FLOAT: np.float32, T.UINT8: np.uint8, T.INT8: np.int8, T.INT16: np.int16,
      T.INT32: np.int32, T.INT64: np.int64}


def scalar(dtype, value):
    return ("const", dtype, np.array(value, dtype=NP[dtype]))


def const(dtype, shape, high=None):
    if dtype == T.FLOAT:
        value = RNG.standard_normal(shape).astype(np.float32)
    else:
        info = np.iinfo(NP[dtype])
        value = RNG.integers(max(info.min, -8), high if high is not None else min(info.max, 8),
                             size=shape).astype(NP[dtype])
    return ("const", dtype, value)


def feed(dtype, shape, high=None):
    return ("feed", dtype, shape, high)


F, U8, I8 = T.FLOAT, T.UINT8, T.INT8
QSCALE = [scalar(F, 0.05), scalar(U8, 128)]
#: op -> (domain, inputs in order (None: absent), outputs, attributes).  Dims: b(atch),
#: s(equence), l (key length), m, h: graph input dims with two settings each.
CASES = {
    "DynamicQuantizeLSTM": (MS, [feed(F, ["s", "b", 4]), const(I8, [2, 4, 12]),
                                 const(I8, [2, 3, 12]), const(F, [2, 24]), None, None, None,
                                 None, scalar(F, [0.1, 0.1]), const(I8, [2], 1),
                                 scalar(F, [0.1, 0.1]), const(I8, [2], 1)],
                            ["Y", "Y_h", "Y_c"], {"hidden_size": 3, "direction": "bidirectional"}),
    "Attention": (MS, [feed(F, ["b", "s", 8]), const(F, [8, 24]), const(F, [24])],
                  ["output", "present"], {"num_heads": 2}),
    "QAttention": (MS, [feed(U8, ["b", "s", 8]), const(U8, [8, 24]), const(F, [24]),
                        scalar(F, 0.05), scalar(F, 0.05), None, scalar(U8, 128), scalar(U8, 128)],
                   ["output", "present"], {"num_heads": 2}),
    "MultiHeadAttention": (MS, [feed(F, ["b", "s", 8]), feed(F, ["b", "l", 8]),
                                feed(F, ["b", "l", 6])], ["output"], {"num_heads": 2}),
    "SkipLayerNormalization": (MS, [feed(F, ["b", "s", 8]), feed(F, ["b", "s", 8]),
                                    const(F, [8]), const(F, [8])],
                               ["output", "mean", "inv_std_var", "sum"], {}),
    "SkipSimplifiedLayerNormalization": (MS, [feed(F, ["b", "s", 8]), feed(F, ["b", "s", 8]),
                                              const(F, [8])],
                                         ["output", "mean", "inv_std_var", "sum"], {}),
    "EmbedLayerNormalization": (MS, [feed(T.INT32, ["b", "s"], 10), feed(T.INT32, ["b", "s"], 2),
                                     const(F, [10, 8]), const(F, [16, 8]), const(F, [2, 8]),
                                     const(F, [8]), const(F, [8])],
                                ["output", "mask_index", "embedding_sum"], {}),
    "MatMulInteger16": (MS, [feed(T.INT16, ["b", "s", 4]), const(T.INT16, [4, 5])], ["Y"], {}),
    "MatMulIntegerToFloat": (MS, [feed(U8, ["b", "s", 4]), const(I8, [4, 5]), scalar(F, 0.05),
                                  scalar(F, 0.05)], ["Y"], {}),
    "DynamicQuantizeMatMul": (MS, [feed(F, ["b", "s", 4]), const(I8, [4, 5]), scalar(F, 0.05),
                                   scalar(I8, 0)], ["Y"], {}),
    "FusedMatMul": (MS, [feed(F, ["b", 4, "s"]), const(F, [5, 4])], ["Y"],
                    {"transA": 1, "transB": 1}),
    "MatMulNBits": (MS, [feed(F, ["b", "s", 16]), const(U8, [5, 1, 8]), const(F, [5])], ["Y"],
                    {"K": 16, "N": 5, "bits": 4, "block_size": 16}),
    "QGemm": (MS, [feed(U8, ["m", 4]), *QSCALE, const(U8, [5, 4]), *QSCALE], ["Y"],
              {"transB": 1}),
    "QLinearAdd": (MS, [feed(U8, ["b", 1, 4]), *QSCALE, feed(U8, ["s", 4]), *QSCALE, *QSCALE],
                   ["C"], {}),
    "QLinearMul": (MS, [feed(U8, ["b", 1, 4]), *QSCALE, feed(U8, ["s", 4]), *QSCALE, *QSCALE],
                   ["C"], {}),
    "QLinearConcat": (MS, [*QSCALE, feed(U8, ["b", 2, "s"]), *QSCALE, feed(U8, ["b", 3, "s"]),
                           *QSCALE], ["Y"], {"axis": 1}),
    "QLinearGlobalAveragePool": (MS, [feed(U8, ["b", 3, "h", "h"]), *QSCALE, *QSCALE], ["Y"],
                                 {"channels_last": 0}),
    "QLinearSigmoid": (MS, [feed(U8, ["b", "s"]), *QSCALE, *QSCALE], ["Y"], {}),
    "QLinearLeakyRelu": (MS, [feed(U8, ["b", "s"]), *QSCALE, *QSCALE], ["Y"], {"alpha": 0.1}),
    "QLinearSoftmax": (MS, [feed(U8, ["b", "s"]), *QSCALE, *QSCALE], ["Y"],
                       {"axis": -1, "opset": 13}),
    "Gelu": (MS, [feed(F, ["b", "s", 8])], ["Y"], {}),
    "FastGelu": (MS, [feed(F, ["b", "s", 8]), const(F, [8])], ["Y"], {}),
    "BiasGelu": (MS, [feed(F, ["b", "s", 8]), const(F, [8])], ["Y"], {}),
    "QuickGelu": (MS, [feed(F, ["b", "s", 8])], ["Y"], {"alpha": 1.702}),
    "RotaryEmbedding": (MS, [feed(F, ["b", "s", 8]), feed(T.INT64, ["b", "s"], 8),
                             const(F, [16, 2]), const(F, [16, 2])], ["Y"], {"num_heads": 2}),
    "QuantizeLinear": (MS, [feed(F, ["b", "s"]), *QSCALE], ["Y"], {}),
    "DequantizeLinear": (MS, [feed(U8, ["b", "s"]), *QSCALE], ["Y"], {}),
}


def single_op(op: str, elems: dict | None = None):
    """A model of one contrib op: fed inputs with symbolic dims, constants as initializers,
    every output a graph output (declared with its element type and rank from ``elems``,
    never a dimension; untyped without it, which onnxruntime accepts and ``onnx.checker`` does not), and
    the feeds' integer ranges."""
    domain, inputs, outputs, attrs = CASES[op]
    names, graph_inputs, inits, ranges = [], [], [], {}
    for k, spec in enumerate(inputs):
        if spec is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        if spec[0] == "const":
            inits.append(nh.from_array(spec[2], name))
        else:
            graph_inputs.append(h.make_tensor_value_info(name, spec[1], spec[2]))
            if spec[3] is not None:
                ranges[name] = spec[3]
    node = h.make_node(op, names, outputs, domain=domain, **attrs)
    declared = [h.make_tensor_value_info(o, elems[o][0], [None] * elems[o][1]) if elems else
                onnx.ValueInfoProto(name=o) for o in outputs]
    graph = h.make_graph([node], op, graph_inputs, declared, initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model, ranges


def _feeds(model: onnx.ModelProto, dims: dict, ranges: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
                 for d in tt.shape.dim]
        dtype = NP[tt.elem_type]
        if np.issubdtype(dtype, np.integer):
            high = ranges.get(vi.name, 8)
            feeds[vi.name] = rng.integers(0, high, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def runtime_sizes(model: onnx.ModelProto, feeds: dict, elems: dict | None = None
                  ) -> dict[str, tuple[list[int], int]]:
    """Every main-graph tensor's shape and bytes as onnxruntime makes it (``elems``: filled
    with each one's element type and rank)."""
    import onnxruntime as ort
    exposed = TR.exposing_all(model)
    names = TR.main_graph_tensors(exposed)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(exposed.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    values = sess.run(names, feeds)
    if elems is not None:
        elems.update((n, (onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.ndim))
                     for n, v in zip(names, values))
    return {n: (list(v.shape), v.nbytes) for n, v in zip(names, values)}


def our_sizes(model: onnx.ModelProto, dims: dict, names) -> dict[str, tuple[list, int]]:
    mg = hs.load_model(model, dims=dims)
    out = {}
    for n in names:
        t = mg.tensor_type(n)
        static = t.shape is not None and all(isinstance(d, int) for d in t.shape)
        out[n] = (list(t.shape) if t.shape is not None else None,
                  mg.tensor_bytes(n) if static and t.elem_type else None)
    return out


def test_every_shape_function_has_a_case():
    assert {op for _, op in SHAPE_FUNCTIONS} == set(CASES)


@pytest.mark.parametrize("op", sorted(CASES))
def test_contrib_outputs_are_sized_as_onnxruntime_makes_them(op):
    bare, ranges = single_op(op)
    assert not onnx.defs.has(op, CASES[op][0])   # ONNX knows nothing of it: the point
    for k, dims in enumerate(SETTINGS):
        elems: dict = {}
        want = runtime_sizes(bare, _feeds(bare, dims, ranges, seed=k), elems)
        got = our_sizes(single_op(op, elems)[0], dims, want)
        assert got == want, f"{op} at {dims}"


def test_without_the_shape_functions_those_sizes_are_unknown(monkeypatch):
    """The check above can fail: the same ops with the functions removed are not sized."""
    import hetero_solve.model.contrib as contrib
    monkeypatch.setattr(contrib, "SHAPE_FUNCTIONS", {})
    model, _ = single_op("DynamicQuantizeLSTM", {"Y": (T.FLOAT, 4), "Y_h": (T.FLOAT, 3),
                                                  "Y_c": (T.FLOAT, 3)})
    got = our_sizes(model, SETTINGS[0], ["Y", "Y_h"])
    assert got["Y"][1] is None and got["Y_h"][1] is None


# -- a model quantized by onnxruntime ------------------------------------------------------------

def float_lstm_model() -> onnx.ModelProto:
    """``input [seq, batch, 16]`` -> bidirectional LSTM (hidden 32) -> Transpose -> Reshape
    ``[batch, seq, 64]`` (from ``Shape``) -> MatMul 64 x 40 -> Softmax: the CRNN tail that
    onnxruntime's dynamic quantizer turns into ``DynamicQuantizeLSTM`` and ``MatMulInteger``."""
    rng = np.random.default_rng(1)
    w = lambda *s: nh.from_array((rng.standard_normal(s) * 0.2).astype(np.float32))  # noqa: E731
    inits = [w(2, 128, 16), w(2, 128, 32), w(2, 256), w(64, 40)]
    for t, name in zip(inits, ("W", "R", "B", "M")):
        t.name = name
    inits.append(nh.from_array(np.array([0, 0, -1], dtype=np.int64), "zero_zero_minus1"))
    nodes = [
        h.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=32,
                    direction="bidirectional"),
        h.make_node("Transpose", ["Y"], ["Yt"], perm=[2, 0, 1, 3]),
        h.make_node("Reshape", ["Yt", "zero_zero_minus1"], ["flat"]),
        h.make_node("MatMul", ["flat", "M"], ["logits"]),
        h.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = h.make_graph(nodes, "crnn_tail",
                         [h.make_tensor_value_info("x", T.FLOAT, ["seq", "batch", 16])],
                         [h.make_tensor_value_info("probs", T.FLOAT, None)], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_dynamically_quantized_lstm_is_sized_as_onnxruntime_runs_it(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, dst = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(float_lstm_model(), str(src))
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    model = onnx.load(str(dst))
    ops = {(n.domain, n.op_type) for n in model.graph.node}
    assert (MS, "DynamicQuantizeLSTM") in ops and ("", "MatMulInteger") in ops
    for k, (seq, batch) in enumerate(((20, 1), (13, 3))):
        dims = {"seq": seq, "batch": batch}
        feeds = {"x": np.random.default_rng(k).standard_normal((seq, batch, 16)).astype(np.float32)}
        want = runtime_sizes(model, feeds)
        got = our_sizes(model, dims, want)
        assert got == want, {n: (got[n], want[n]) for n in want if got[n] != want[n]}
        mg = hs.load_model(model, dims=dims)
        names = [o for outs in mg.outputs for o in outs if o]
        assert mg.open_sizes(names) == []


def test_element_bits_agree_with_numpy():
    for dtype, np_type in NP.items():
        assert element_bits(dtype) == 8 * np.dtype(np_type).itemsize
