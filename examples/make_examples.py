"""Build the example models with onnx.helper and numpy (no torch needed).

    python examples/make_examples.py            # writes examples/*.onnx

- ``resnet_like.onnx``: a small ResNet (conv, batch norm, residual adds, max pool) with a
  MobileNetV3-style squeeze-excitation block (HardSigmoid, often missing on NPUs), global
  pooling, a classifier and Softmax.  Input ``image[batch, 3, 32, 32]``.
- ``transformer_encoder.onnx``: a 2-layer encoder exported the way torch exports dynamic
  shapes: every head split and merge is ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``.
  Inputs ``input_ids[batch, seq]`` (int64).  With ``--dim batch=1 --dim seq=16`` the shape
  chains fold; without, they are value-dependent inputs.
- ``seed000.onnx``: the 7-node worked example of OpenVINO's subgraph selection (seed 000).
- ``control_flow.onnx``: an RNN written as a ``Loop`` over time steps, followed by an ``If``
  that picks an activation from the data.  Input ``x[seq, batch, 8]``.

Weights are seeded, so the files are reproducible.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17
HERE = Path(__file__).resolve().parent


class Builder:
    """Small helper: unique tensor names, initializers, nodes in topological order."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count: dict[str, int] = {}

    def name(self, base: str) -> str:
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def weight(self, base: str, shape, scale: float = 0.1, dtype=np.float32) -> str:
        name = self.name(base)
        self.inits.append(nh.from_array((self.rng.standard_normal(shape) * scale).astype(dtype), name))
        return name

    def const(self, base: str, value) -> str:
        name = self.name(base)
        self.inits.append(nh.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, n_out: int = 1, **attrs) -> str | list[str]:
        node_name = self.name(name)
        outs = [f"{node_name}_out{i}" if n_out > 1 else f"{node_name}_out" for i in range(n_out)]
        self.nodes.append(h.make_node(op_type, inputs, outs, name=node_name, **attrs))
        return outs if n_out > 1 else outs[0]

    def model(self, graph_name: str, inputs, outputs, doc: str) -> onnx.ModelProto:
        graph = h.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits, doc_string=doc)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)],
                             producer_name="hetero-solve examples")
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model


# -- ResNet-like CNN -------------------------------------------------------------------------

def resnet_like() -> onnx.ModelProto:
    b = Builder(0)

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, prefix: str, relu: bool = True) -> str:
        w = b.weight(f"{prefix}.w", (cout, cin, k, k), scale=(2.0 / (cin * k * k)) ** 0.5)
        y = b.op("Conv", [x, w], f"{prefix}/conv", kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4)
        scale = b.const(f"{prefix}.bn.scale", (1 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        bias = b.const(f"{prefix}.bn.bias", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        mean = b.const(f"{prefix}.bn.mean", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
        var = b.const(f"{prefix}.bn.var", (1 + 0.1 * b.rng.random(cout)).astype(np.float32))
        y = b.op("BatchNormalization", [y, scale, bias, mean, var], f"{prefix}/bn", epsilon=1e-5)
        return b.op("Relu", [y], f"{prefix}/relu") if relu else y

    def block(x: str, cin: int, cout: int, stride: int, prefix: str, se: bool = False) -> str:
        y = conv_bn(x, cin, cout, 3, stride, f"{prefix}/a")
        y = conv_bn(y, cout, cout, 3, 1, f"{prefix}/b", relu=False)
        if se:  # squeeze-excitation: pool -> 1x1 conv -> relu -> 1x1 conv -> hard sigmoid -> scale
            s = b.op("GlobalAveragePool", [y], f"{prefix}/se/pool")
            w1 = b.weight(f"{prefix}/se.w1", (cout // 4, cout, 1, 1))
            s = b.op("Relu", [b.op("Conv", [s, w1], f"{prefix}/se/fc1", kernel_shape=[1, 1])], f"{prefix}/se/relu")
            w2 = b.weight(f"{prefix}/se.w2", (cout, cout // 4, 1, 1))
            s = b.op("Conv", [s, w2], f"{prefix}/se/fc2", kernel_shape=[1, 1])
            s = b.op("HardSigmoid", [s], f"{prefix}/se/gate", alpha=1 / 6, beta=0.5)
            y = b.op("Mul", [y, s], f"{prefix}/se/scale")
        skip = x if (cin == cout and stride == 1) else conv_bn(x, cin, cout, 1, stride, f"{prefix}/down", relu=False)
        return b.op("Relu", [b.op("Add", [y, skip], f"{prefix}/add")], f"{prefix}/out")

    x = conv_bn("image", 3, 8, 3, 1, "stem")
    x = b.op("MaxPool", [x], "stem/pool", kernel_shape=[2, 2], strides=[2, 2])
    widths = [(8, 8, 1), (8, 16, 2), (16, 32, 2)]
    for s, (cin, cout, stride) in enumerate(widths):
        x = block(x, cin, cout, stride, f"layer{s + 1}/block0", se=(s == 1))
        x = block(x, cout, cout, 1, f"layer{s + 1}/block1")
    x = b.op("GlobalAveragePool", [x], "head/pool")
    x = b.op("Flatten", [x], "head/flatten", axis=1)
    w = b.weight("head.fc.w", (10, 32))
    bias = b.weight("head.fc.b", (10,))
    x = b.op("Gemm", [x, w, bias], "head/fc", transB=1)
    b.nodes.append(h.make_node("Softmax", [x], ["probs"], name="head/softmax", axis=1))
    return b.model("resnet_like", [h.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 32, 32])],
                   [h.make_tensor_value_info("probs", T.FLOAT, ["batch", 10])],
                   "ResNet-like CNN with a squeeze-excitation block (hetero-solve example)")


# -- Transformer encoder, torch-style dynamic shapes -----------------------------------------

def transformer_encoder(layers: int = 2, d: int = 32, heads: int = 4, ffn: int = 64,
                        vocab: int = 100, max_len: int = 64) -> onnx.ModelProto:
    b = Builder(1)
    hd = d // heads
    emb = b.weight("embeddings.word", (vocab, d), scale=0.5)
    pos = b.weight("embeddings.position", (max_len, d), scale=0.1)
    zero = b.const("const.0", np.array(0, dtype=np.int64))
    one = b.const("const.1", np.array(1, dtype=np.int64))
    axes0 = b.const("const.axes0", np.array([0], dtype=np.int64))
    x = b.op("Gather", [emb, "input_ids"], "embeddings/word", axis=0)
    # position ids: Shape -> Gather(1) -> Unsqueeze -> Slice(pos table)  (torch's arange(seq))
    ids_shape = b.op("Shape", ["input_ids"], "embeddings/Shape")
    seq = b.op("Gather", [ids_shape, one], "embeddings/Gather", axis=0)
    seq1 = b.op("Unsqueeze", [seq, axes0], "embeddings/Unsqueeze")
    start = b.const("const.start", np.array([0], dtype=np.int64))
    p = b.op("Slice", [pos, start, seq1, axes0], "embeddings/Slice")
    x = b.op("Add", [x, p], "embeddings/Add")

    def layer_norm(x: str, prefix: str) -> str:
        g = b.const(f"{prefix}.gamma", np.ones(d, np.float32))
        bb = b.const(f"{prefix}.beta", np.zeros(d, np.float32))
        return b.op("LayerNormalization", [x, g, bb], f"{prefix}/LayerNorm", axis=-1, epsilon=1e-5)

    def linear(x: str, cin: int, cout: int, prefix: str) -> str:
        w = b.weight(f"{prefix}.weight", (cin, cout), scale=cin ** -0.5)
        bias = b.weight(f"{prefix}.bias", (cout,), scale=0.02)
        return b.op("Add", [b.op("MatMul", [x, w], f"{prefix}/MatMul"), bias], f"{prefix}/Add")

    def dims_of(x: str, prefix: str) -> tuple[str, str]:
        """torch: x.size(0), x.size(1) -> Shape, Gather, Unsqueeze."""
        s = b.op("Shape", [x], f"{prefix}/Shape")
        bsz = b.op("Unsqueeze", [b.op("Gather", [s, zero], f"{prefix}/Gather", axis=0), axes0], f"{prefix}/Unsqueeze")
        sl = b.op("Unsqueeze", [b.op("Gather", [s, one], f"{prefix}/Gather", axis=0), axes0], f"{prefix}/Unsqueeze")
        return bsz, sl

    def split_heads(x: str, prefix: str) -> str:
        bsz, sl = dims_of(x, prefix)
        hh = b.const(f"{prefix}.heads", np.array([heads, hd], dtype=np.int64))
        shape = b.op("Concat", [bsz, sl, hh], f"{prefix}/Concat", axis=0)
        y = b.op("Reshape", [x, shape], f"{prefix}/Reshape")
        return b.op("Transpose", [y], f"{prefix}/Transpose", perm=[0, 2, 1, 3])

    for i in range(layers):
        pre = f"encoder/layer.{i}"
        hdn = layer_norm(x, f"{pre}/attention/ln")
        q = split_heads(linear(hdn, d, d, f"{pre}/attention/query"), f"{pre}/attention/q")
        k = split_heads(linear(hdn, d, d, f"{pre}/attention/key"), f"{pre}/attention/k")
        v = split_heads(linear(hdn, d, d, f"{pre}/attention/value"), f"{pre}/attention/v")
        kt = b.op("Transpose", [k], f"{pre}/attention/kT", perm=[0, 1, 3, 2])
        scores = b.op("MatMul", [q, kt], f"{pre}/attention/scores")
        scale = b.const(f"{pre}.scale", np.array(hd ** 0.5, dtype=np.float32))
        scores = b.op("Div", [scores, scale], f"{pre}/attention/Div")
        probs = b.op("Softmax", [scores], f"{pre}/attention/Softmax", axis=-1)
        ctx = b.op("MatMul", [probs, v], f"{pre}/attention/context")
        ctx = b.op("Transpose", [ctx], f"{pre}/attention/merge/Transpose", perm=[0, 2, 1, 3])
        bsz, sl = dims_of(hdn, f"{pre}/attention/merge")
        dd = b.const(f"{pre}.d", np.array([d], dtype=np.int64))
        shape = b.op("Concat", [bsz, sl, dd], f"{pre}/attention/merge/Concat", axis=0)
        ctx = b.op("Reshape", [ctx, shape], f"{pre}/attention/merge/Reshape")
        x = b.op("Add", [x, linear(ctx, d, d, f"{pre}/attention/output")], f"{pre}/attention/residual")
        hdn = layer_norm(x, f"{pre}/ffn/ln")
        up = linear(hdn, d, ffn, f"{pre}/ffn/up")
        # GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))
        r2 = b.const(f"{pre}.sqrt2", np.array(2 ** 0.5, dtype=np.float32))
        half = b.const(f"{pre}.half", np.array(0.5, dtype=np.float32))
        onef = b.const(f"{pre}.one", np.array(1.0, dtype=np.float32))
        e = b.op("Erf", [b.op("Div", [up, r2], f"{pre}/ffn/gelu/Div")], f"{pre}/ffn/gelu/Erf")
        g = b.op("Mul", [b.op("Mul", [up, b.op("Add", [e, onef], f"{pre}/ffn/gelu/Add")], f"{pre}/ffn/gelu/Mul"), half],
                 f"{pre}/ffn/gelu/Mul")
        x = b.op("Add", [x, linear(g, ffn, d, f"{pre}/ffn/down")], f"{pre}/ffn/residual")
    x = layer_norm(x, "encoder/final_ln")
    b.nodes.append(h.make_node("Identity", [x], ["last_hidden_state"], name="encoder/output"))
    return b.model("transformer_encoder",
                   [h.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"])],
                   [h.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "seq", d])],
                   "Transformer encoder with torch-style dynamic shape chains (hetero-solve example)")


# -- RNN as a Loop, then an If ---------------------------------------------------------------

def control_flow(hidden: int = 8, features: int = 8) -> onnx.ModelProto:
    b = Builder(2)
    wx = b.weight("rnn.wx", (features, hidden), scale=0.3)
    wh = b.weight("rnn.wh", (hidden, hidden), scale=0.3)
    bias = b.weight("rnn.b", (hidden,), scale=0.1)
    x = b.op("Mul", ["x", b.const("input.scale", np.array(0.5, np.float32))], "input/scale")
    shape = b.op("Shape", [x], "rnn/Shape")
    steps = b.op("Gather", [shape, b.const("const.0", np.array(0, np.int64))], "rnn/steps", axis=0)
    bsz = b.op("Gather", [shape, b.const("const.1", np.array(1, np.int64))], "rnn/batch", axis=0)
    h0_shape = b.op("Concat", [b.op("Unsqueeze", [bsz, b.const("axes0", np.array([0], np.int64))], "rnn/Unsqueeze"),
                              b.const("hidden", np.array([hidden], np.int64))], "rnn/h0_shape", axis=0)
    h0 = b.op("ConstantOfShape", [h0_shape], "rnn/h0", value=nh.from_array(np.zeros(1, np.float32)))
    # Loop body: (iter, cond, h) -> (cond, h', h' as scan output).  Reads x, wx, wh, bias from
    # the outer scope: hetero-solve counts them as inputs of the Loop node.
    body_nodes = [
        h.make_node("Gather", [x, "iter"], ["x_t"], name="body/x_t", axis=0),
        h.make_node("MatMul", ["x_t", wx], ["xw"], name="body/xw"),
        h.make_node("MatMul", ["h_prev", wh], ["hw"], name="body/hw"),
        h.make_node("Add", ["xw", "hw"], ["s"], name="body/sum"),
        h.make_node("Add", ["s", bias], ["sb"], name="body/bias"),
        h.make_node("Tanh", ["sb"], ["h_next"], name="body/tanh"),
        h.make_node("Identity", ["cond_in"], ["cond_out"], name="body/cond"),
        h.make_node("Identity", ["h_next"], ["h_scan"], name="body/scan"),
    ]
    body = h.make_graph(
        body_nodes, "rnn_body",
        [h.make_tensor_value_info("iter", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("h_prev", T.FLOAT, ["batch", hidden])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_next", T.FLOAT, ["batch", hidden]),
         h.make_tensor_value_info("h_scan", T.FLOAT, ["batch", hidden])])
    b.nodes.append(h.make_node("Loop", [steps, "", h0], ["h_last", "h_all"], name="rnn/Loop", body=body))
    # If the mean activation is positive use ReLU on the projection, else Tanh.
    w_out = b.weight("proj.w", (hidden, 4), scale=0.5)
    proj = b.op("MatMul", ["h_last", w_out], "proj/MatMul")
    mean = b.op("ReduceMean", ["h_all"], "gate/ReduceMean", keepdims=0)
    cond = b.op("Greater", [mean, b.const("zero_f", np.array(0.0, np.float32))], "gate/Greater")
    then_g = h.make_graph([h.make_node("Relu", [proj], ["branch_out"], name="then/relu")], "then",
                          [], [h.make_tensor_value_info("branch_out", T.FLOAT, ["batch", 4])])
    else_g = h.make_graph([h.make_node("Tanh", [proj], ["branch_out"], name="else/tanh")], "else",
                          [], [h.make_tensor_value_info("branch_out", T.FLOAT, ["batch", 4])])
    act = b.op("If", [cond], "gate/If", then_branch=then_g, else_branch=else_g)
    b.nodes.append(h.make_node("Softmax", [act], ["y"], name="head/softmax", axis=-1))
    b.nodes.append(h.make_node("ReduceMax", ["h_all"], ["h_max"], name="summary/ReduceMax", keepdims=0, axes=[0]))
    return b.model("control_flow", [h.make_tensor_value_info("x", T.FLOAT, ["seq", "batch", features])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4]),
                    h.make_tensor_value_info("h_max", T.FLOAT, ["batch", hidden])],
                   "RNN written as a Loop, then an If on the data (hetero-solve example)")


# -- Seed 000's worked example ----------------------------------------------------------------

def seed000() -> onnx.ModelProto:
    """The 7-node graph of OpenVINO's subgraph-selection example: 1->2, 2->3, 2->4, 3->5, 4->5,
    5->6, 6->7.  Node 4 is an ``Erf`` (refused by ``rules/seed000.yaml``'s first device), the
    others are ``Relu`` and one ``Add``.  Expected: [1,2] and [3,5,6,7] on the first device,
    [4] on the second."""
    b = Builder(3)
    n1 = b.op("Relu", ["x"], "1")
    n2 = b.op("Relu", [n1], "2")
    n3 = b.op("Relu", [n2], "3")
    n4 = b.op("Erf", [n2], "4")
    n5 = b.op("Add", [n3, n4], "5")
    n6 = b.op("Relu", [n5], "6")
    b.nodes.append(h.make_node("Relu", [n6], ["y"], name="7"))
    return b.model("seed000", [h.make_tensor_value_info("x", T.FLOAT, [1, 16])],
                   [h.make_tensor_value_info("y", T.FLOAT, [1, 16])],
                   "OpenVINO subgraph-selection worked example (seed 000)")


EXAMPLES = {"resnet_like": resnet_like, "transformer_encoder": transformer_encoder,
            "control_flow": control_flow, "seed000": seed000}

#: Inputs the tests and the README demo feed: name -> (shape with dims filled, dtype).
EXAMPLE_DIMS = {"resnet_like": {"batch": 1}, "transformer_encoder": {"batch": 1, "seq": 16},
                "control_flow": {"seq": 5, "batch": 2}, "seed000": {}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="directory to write to")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, build in EXAMPLES.items():
        model = build()
        path = args.out / f"{name}.onnx"
        onnx.save(model, str(path))
        print(f"{path}: {len(model.graph.node)} nodes, {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
