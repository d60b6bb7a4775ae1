"""Generate large, realistic ONNX models for the benchmarks (onnx.helper + numpy, no torch).

    python benchmarks/gen_models.py                          # cnn and transformer, 1k/10k/100k
    python benchmarks/gen_models.py --sizes 1000 --models cnn --force --run

Files go to ``benchmarks/out/<model>-<size>.onnx`` (gitignored).  Generation is seeded and
deterministic; a file whose ``hetero_solve.bench.generator`` metadata differs from
``GENERATOR_VERSION`` is regenerated.

Models (sizes are graph nodes, ``Constant`` nodes included; the generator adds blocks or layers
until the target is reached, so a ``100000`` model has 100,000 nodes give or take one block):

``cnn``
    A ResNet/MobileNet-like CNN: stem (conv, bn, relu, max pool) then residual blocks at 8
    channels, 16x16 (conv -> bn -> relu -> conv -> bn -> add -> relu), with, in a fixed
    pattern, ops a static NPU profile (``rules/npu-static.yaml``) refuses:
    a squeeze-excitation gate (``HardSigmoid``) every 8th block, an inverted residual with a
    depthwise conv (``group != 1``, refused by ``ops.when.Conv``) every 16th block, and a
    GELU (``Erf``) activation every 32nd block.  Head: global pool, flatten, gemm, softmax.
    Input ``image[batch, 3, 32, 32]``.  Every conv and bn has its own initializers, as in
    real exports (tiny: 100,000 nodes make ~85 MB, 130,000 initializers).

``transformer``
    A BERT-like encoder exported the way torch exports dynamic shapes: every head split and
    merge is ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` (4 such chains per layer),
    GELU as ``Div -> Erf -> Add -> Mul -> Mul``, an additive attention mask, and ``Constant``
    nodes for the per-layer shape tails and scale (torch emits many).  Inputs
    ``input_ids[batch, seq]`` and ``attention_mask[batch, seq]`` (int64).  d=16, 2 heads,
    ffn 32.  With ``batch=1, seq=N`` the shape chains fold away; without ``seq`` they stay
    and their ``Reshape`` inputs are value-dependent.

``layered``
    A wide random layered DAG (issue 17's other profile): layers of 256 tensors
    ``x[batch, 16]``, each node reading the tensor above it and, for binary ops, one of any
    earlier layer (skip connections); MatMul with its own small weight, Add, Mul, Relu,
    Sigmoid, and 10 % computed-shape Reshape blocks that fold once ``batch`` is given.  On
    ``rules/gpu-cpu.yaml`` the answer is 1 part.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17
IR_VERSION = 8
GENERATOR_VERSION = "1"
HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
MODELS = ("cnn", "transformer", "layered")
SIZES = (1000, 10000, 100000)


class Builder:
    """Torch-style names (``/encoder/layer.0/attention/query/MatMul``, outputs
    ``..._output_0``), initializers, nodes in topological order."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape, scale: float = 0.1) -> str:
        self.inits.append(nh.from_array(
            (self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, name: str, value) -> str:
        self.inits.append(nh.from_array(np.asarray(value), name))
        return name

    def constant_node(self, name: str, value) -> str:
        out = f"{name}_output_0"
        self.nodes.append(h.make_node("Constant", [], [out], name=name,
                                      value=nh.from_array(np.asarray(value))))
        return out

    def op(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        out = f"{name}_output_0"
        self.nodes.append(h.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def model(self, graph_name: str, inputs, outputs, doc: str) -> onnx.ModelProto:
        graph = h.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits,
                             doc_string=doc)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)],
                             producer_name="hetero-solve benchmarks")
        model.ir_version = IR_VERSION
        return model


# -- CNN ---------------------------------------------------------------------------------------

CNN_CHANNELS = 8
CNN_SE_EVERY = 8          # HardSigmoid gate (NPU: not in ops.supported)
CNN_DW_EVERY = 16         # depthwise conv (NPU: ops.when.Conv needs group 1)
CNN_GELU_EVERY = 32       # Erf (NPU: not in ops.supported)


def cnn(target_nodes: int, seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    c = CNN_CHANNELS

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, p: str, group: int = 1,
                act: str | None = "relu") -> str:
        w = b.weight(f"{p}.conv.weight", (cout, cin // group, k, k), scale=(2.0 / (cin * k * k)) ** 0.5)
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        if group != 1:
            attrs["group"] = group
        y = b.op("Conv", [x, w], f"{p}/conv/Conv", **attrs)
        bn = [b.const(f"{p}.bn.{n}", v.astype(np.float32)) for n, v in (
            ("weight", 1 + 0.1 * b.rng.standard_normal(cout)),
            ("bias", 0.1 * b.rng.standard_normal(cout)),
            ("running_mean", 0.1 * b.rng.standard_normal(cout)),
            ("running_var", 1 + 0.1 * b.rng.random(cout)))]
        y = b.op("BatchNormalization", [y, *bn], f"{p}/bn/BatchNormalization", epsilon=1e-5)
        if act == "relu":
            y = b.op("Relu", [y], f"{p}/act/Relu")
        elif act == "gelu":
            y = gelu(y, f"{p}/act")
        return y

    def gelu(x: str, p: str) -> str:
        e = b.op("Erf", [b.op("Div", [x, sqrt2], f"{p}/Div")], f"{p}/Erf")
        return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, one], f"{p}/Add")], f"{p}/Mul"), half],
                    f"{p}/Mul_1")

    def basic(x: str, p: str, i: int) -> str:
        act = "gelu" if i % CNN_GELU_EVERY == CNN_GELU_EVERY // 4 else "relu"
        y = conv_bn(x, c, c, 3, 1, f"{p}/conv1", act=act)
        y = conv_bn(y, c, c, 3, 1, f"{p}/conv2", act=None)
        if i % CNN_SE_EVERY == CNN_SE_EVERY // 2:
            s = b.op("GlobalAveragePool", [y], f"{p}/se/GlobalAveragePool")
            s = b.op("Conv", [s, b.weight(f"{p}.se.fc1.weight", (c // 2, c, 1, 1))], f"{p}/se/fc1/Conv",
                     kernel_shape=[1, 1])
            s = b.op("Relu", [s], f"{p}/se/Relu")
            s = b.op("Conv", [s, b.weight(f"{p}.se.fc2.weight", (c, c // 2, 1, 1))], f"{p}/se/fc2/Conv",
                     kernel_shape=[1, 1])
            s = b.op("HardSigmoid", [s], f"{p}/se/HardSigmoid", alpha=1 / 6, beta=0.5)
            y = b.op("Mul", [y, s], f"{p}/se/Mul")
        return b.op("Relu", [b.op("Add", [y, x], f"{p}/Add")], f"{p}/Relu")

    def inverted(x: str, p: str) -> str:  # MobileNetV2: expand 1x1, depthwise 3x3, project 1x1
        y = conv_bn(x, c, 2 * c, 1, 1, f"{p}/expand")
        y = conv_bn(y, 2 * c, 2 * c, 3, 1, f"{p}/dw", group=2 * c)
        y = conv_bn(y, 2 * c, c, 1, 1, f"{p}/project", act=None)
        return b.op("Add", [y, x], f"{p}/Add")

    sqrt2 = b.const("gelu.sqrt2", np.array(2 ** 0.5, np.float32))
    one = b.const("gelu.one", np.array(1.0, np.float32))
    half = b.const("gelu.half", np.array(0.5, np.float32))
    x = conv_bn("image", 3, c, 3, 1, "/stem")
    x = b.op("MaxPool", [x], "/stem/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    head = 4
    i = 0
    while len(b.nodes) + head < target_nodes:
        p = f"/layers/block.{i}"
        x = inverted(x, p) if i % CNN_DW_EVERY == CNN_DW_EVERY - 1 else basic(x, p, i)
        i += 1
    x = b.op("GlobalAveragePool", [x], "/head/GlobalAveragePool")
    x = b.op("Flatten", [x], "/head/Flatten", axis=1)
    x = b.op("Gemm", [x, b.weight("head.fc.weight", (10, c)), b.weight("head.fc.bias", (10,))],
             "/head/fc/Gemm", transB=1)
    b.nodes.append(h.make_node("Softmax", [x], ["probs"], name="/head/Softmax", axis=1))
    return b.model(f"cnn_{i}_blocks",
                   [h.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 32, 32])],
                   [h.make_tensor_value_info("probs", T.FLOAT, ["batch", 10])],
                   f"hetero-solve benchmark CNN: {i} residual blocks")


# -- Transformer --------------------------------------------------------------------------------

def transformer(target_nodes: int, seed: int = 1, d: int = 16, heads: int = 2, ffn: int = 32,
                vocab: int = 1000, max_len: int = 512) -> onnx.ModelProto:
    b = Builder(seed)
    hd = d // heads
    zero = b.const("onnx::Gather_0", np.array(0, np.int64))
    one = b.const("onnx::Gather_1", np.array(1, np.int64))
    axes0 = b.const("onnx::Unsqueeze_axes0", np.array([0], np.int64))
    emb = b.weight("embeddings.word_embeddings.weight", (vocab, d), scale=0.5)
    pos = b.weight("embeddings.position_embeddings.weight", (max_len, d), scale=0.1)
    x = b.op("Gather", [emb, "input_ids"], "/embeddings/word_embeddings/Gather", axis=0)
    # position ids: arange(seq) -> Shape -> Gather(1) -> Unsqueeze -> Slice of the table
    seq = b.op("Gather", [b.op("Shape", ["input_ids"], "/embeddings/Shape"), one],
               "/embeddings/Gather", axis=0)
    seq1 = b.op("Unsqueeze", [seq, axes0], "/embeddings/Unsqueeze")
    p = b.op("Slice", [pos, b.const("onnx::Slice_start", np.array([0], np.int64)), seq1, axes0],
             "/embeddings/position_embeddings/Slice")
    x = b.op("Add", [x, p], "/embeddings/Add")
    # extended attention mask: (1 - mask[:, None, None, :]) * -10000
    m = b.op("Unsqueeze", ["attention_mask", b.const("onnx::Unsqueeze_axes12", np.array([1, 2], np.int64))],
             "/Unsqueeze")
    m = b.op("Cast", [m], "/Cast", to=T.FLOAT)
    m = b.op("Sub", [b.const("onnx::Sub_one", np.array(1.0, np.float32)), m], "/Sub")
    mask = b.op("Mul", [m, b.const("onnx::Mul_neg", np.array(-10000.0, np.float32))], "/Mul")

    def layer_norm(x: str, p: str, w: str) -> str:
        g = b.const(f"{w}.weight", np.ones(d, np.float32))
        bb = b.const(f"{w}.bias", np.zeros(d, np.float32))
        return b.op("LayerNormalization", [x, g, bb], f"{p}/LayerNormalization", axis=-1, epsilon=1e-12)

    def linear(x: str, cin: int, cout: int, p: str, w: str) -> str:
        weight = b.weight(f"onnx::MatMul_{w}", (cin, cout), scale=cin ** -0.5)
        bias = b.weight(f"{w}.bias", (cout,), scale=0.02)
        return b.op("Add", [b.op("MatMul", [x, weight], f"{p}/MatMul"), bias], f"{p}/Add")

    def sizes(x: str, p: str) -> tuple[str, str]:
        """torch: x.size(0), x.size(1) -> Shape, Gather, Unsqueeze (x2)."""
        s = b.op("Shape", [x], f"{p}/Shape")
        bsz = b.op("Unsqueeze", [b.op("Gather", [s, zero], f"{p}/Gather", axis=0), axes0], f"{p}/Unsqueeze")
        sl = b.op("Unsqueeze", [b.op("Gather", [s, one], f"{p}/Gather_1", axis=0), axes0], f"{p}/Unsqueeze_1")
        return bsz, sl

    def split_heads(x: str, p: str, tail: str) -> str:
        bsz, sl = sizes(x, p)
        shape = b.op("Concat", [bsz, sl, tail], f"{p}/Concat", axis=0)
        y = b.op("Reshape", [x, shape], f"{p}/Reshape")
        return b.op("Transpose", [y], f"{p}/Transpose", perm=[0, 2, 1, 3])

    per_layer = 63
    tail_nodes = 2
    i = 0
    while len(b.nodes) + tail_nodes + per_layer // 2 < target_nodes:
        p = f"/encoder/layer.{i}"
        w = f"encoder.layer.{i}"
        at = f"{p}/attention/self"
        heads_tail = b.constant_node(f"{at}/Constant", np.array([heads, hd], np.int64))
        scale = b.constant_node(f"{at}/Constant_1", np.array(hd ** 0.5, np.float32))
        hdn = layer_norm(x, f"{p}/attention/LayerNorm", f"{w}.attention.LayerNorm")
        q = split_heads(linear(hdn, d, d, f"{at}/query", f"{w}.attention.self.query"), f"{at}/q", heads_tail)
        k = split_heads(linear(hdn, d, d, f"{at}/key", f"{w}.attention.self.key"), f"{at}/k", heads_tail)
        v = split_heads(linear(hdn, d, d, f"{at}/value", f"{w}.attention.self.value"), f"{at}/v", heads_tail)
        kt = b.op("Transpose", [k], f"{at}/Transpose_3", perm=[0, 1, 3, 2])
        scores = b.op("MatMul", [q, kt], f"{at}/MatMul")
        scores = b.op("Div", [scores, scale], f"{at}/Div")
        scores = b.op("Add", [scores, mask], f"{at}/Add")
        probs = b.op("Softmax", [scores], f"{at}/Softmax", axis=-1)
        ctx = b.op("MatMul", [probs, v], f"{at}/MatMul_1")
        ctx = b.op("Transpose", [ctx], f"{at}/Transpose_4", perm=[0, 2, 1, 3])
        bsz, sl = sizes(hdn, f"{at}/merge")
        dd = b.constant_node(f"{at}/Constant_2", np.array([d], np.int64))
        shape = b.op("Concat", [bsz, sl, dd], f"{at}/merge/Concat", axis=0)
        ctx = b.op("Reshape", [ctx, shape], f"{at}/merge/Reshape")
        x = b.op("Add", [x, linear(ctx, d, d, f"{p}/attention/output/dense", f"{w}.attention.output.dense")],
                 f"{p}/attention/output/Add")
        hdn = layer_norm(x, f"{p}/output/LayerNorm", f"{w}.output.LayerNorm")
        up = linear(hdn, d, ffn, f"{p}/intermediate/dense", f"{w}.intermediate.dense")
        act = f"{p}/intermediate/intermediate_act_fn"
        r2 = b.constant_node(f"{act}/Constant", np.array(2 ** 0.5, np.float32))
        e = b.op("Erf", [b.op("Div", [up, r2], f"{act}/Div")], f"{act}/Erf")
        g = b.op("Add", [e, b.const(f"onnx::Add_{w}.gelu", np.array(1.0, np.float32))], f"{act}/Add")
        g = b.op("Mul", [b.op("Mul", [up, g], f"{act}/Mul"),
                         b.const(f"onnx::Mul_{w}.gelu", np.array(0.5, np.float32))], f"{act}/Mul_1")
        x = b.op("Add", [x, linear(g, ffn, d, f"{p}/output/dense", f"{w}.output.dense")], f"{p}/output/Add")
        i += 1
    x = layer_norm(x, "/final/LayerNorm", "final.LayerNorm")
    b.nodes.append(h.make_node("Identity", [x], ["last_hidden_state"], name="/final/Identity"))
    return b.model(f"transformer_{i}_layers",
                   [h.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"]),
                    h.make_tensor_value_info("attention_mask", T.INT64, ["batch", "seq"])],
                   [h.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "seq", d])],
                   f"hetero-solve benchmark transformer: {i} layers, torch-style dynamic shapes")


# -- wide random layered DAG -------------------------------------------------------------------

LAYER_WIDTH = 256
LAYER_D = 16
RESHAPE_SHARE = 0.1


def layered(target_nodes: int, seed: int = 2) -> onnx.ModelProto:
    """Layers of ``LAYER_WIDTH`` tensors ``[batch, 16]``; node ``j`` of a layer reads tensor
    ``j`` of the layer before (so every tensor is read) and, for binary ops, a tensor of any
    earlier layer (skip connections).  Ops: ``MatMul`` with its own 16x16 weight, ``Add``,
    ``Mul``, ``Relu``, ``Sigmoid``, and in ``RESHAPE_SHARE`` of the positions a computed-shape
    reshape as torch exports it (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``; with
    ``batch`` given, all but the ``Reshape`` fold).  The last layer is summed into the output."""
    b = Builder(seed)
    rng = np.random.default_rng(seed)
    zero = b.const("onnx::Gather_0", np.array(0, np.int64))
    axes0 = b.const("onnx::Unsqueeze_axes0", np.array([0], np.int64))
    tail = b.const("onnx::Concat_tail", np.array([LAYER_D], np.int64))
    layers = [[b.op("Relu", ["x"], f"/input/Relu_{j}") for j in range(LAYER_WIDTH)]]
    k = 0
    while len(b.nodes) + LAYER_WIDTH * 1.4 < target_nodes:
        k += 1
        prev, row = layers[-1], []
        for j in range(LAYER_WIDTH):
            p = f"/layer.{k}/n{j}"
            a = prev[j]
            skip = layers[int(rng.integers(0, len(layers)))][int(rng.integers(0, LAYER_WIDTH))]
            r = rng.random()
            if r < RESHAPE_SHARE:
                s = b.op("Shape", [a], f"{p}/Shape")
                n = b.op("Unsqueeze", [b.op("Gather", [s, zero], f"{p}/Gather", axis=0), axes0],
                         f"{p}/Unsqueeze")
                row.append(b.op("Reshape", [a, b.op("Concat", [n, tail], f"{p}/Concat", axis=0)],
                                f"{p}/Reshape"))
            elif r < 0.45:
                w = b.weight(f"layer.{k}.n{j}.weight", (LAYER_D, LAYER_D), scale=LAYER_D ** -0.5)
                row.append(b.op("MatMul", [a, w], f"{p}/MatMul"))
            elif r < 0.7:
                row.append(b.op("Add", [a, skip], f"{p}/Add"))
            elif r < 0.8:
                row.append(b.op("Mul", [a, skip], f"{p}/Mul"))
            else:
                row.append(b.op("Relu" if r < 0.9 else "Sigmoid", [a], f"{p}/Act"))
        layers.append(row)
    b.nodes.append(h.make_node("Sum", layers[-1], ["y"], name="/output/Sum"))
    return b.model(f"layered_{k}_layers",
                   [h.make_tensor_value_info("x", T.FLOAT, ["batch", LAYER_D])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["batch", LAYER_D])],
                   f"hetero-solve benchmark: wide random layered DAG, {k} layers of {LAYER_WIDTH}")


BUILDERS = {"cnn": cnn, "transformer": transformer, "layered": layered}


def path_for(model: str, size: int, out: Path = OUT) -> Path:
    return out / f"{model}-{size}.onnx"


def _stamp(model: onnx.ModelProto) -> str | None:
    for p in model.metadata_props:
        if p.key == "hetero_solve.bench.generator":
            return p.value
    return None


def build(model: str, size: int) -> onnx.ModelProto:
    m = BUILDERS[model](size)
    entry = m.metadata_props.add()
    entry.key, entry.value = "hetero_solve.bench.generator", GENERATOR_VERSION
    onnx.checker.check_model(m)
    return m


def ensure(model: str, size: int, out: Path = OUT, *, force: bool = False,
           say=lambda s: None) -> Path:
    """The model file, generated when missing or made by another generator version."""
    path = path_for(model, size, out)
    if path.exists() and not force:
        head = onnx.load(str(path), load_external_data=False)
        if _stamp(head) == GENERATOR_VERSION:
            return path
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    m = build(model, size)
    tmp = path.with_suffix(".onnx.tmp")
    onnx.save(m, str(tmp))
    tmp.replace(path)
    say(f"generated {path} ({len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers, "
        f"{path.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - t:.1f} s")
    return path


def run_check(path: Path, dims: dict[str, int]) -> None:
    """Run the model once in onnxruntime (proves it is executable, not just well-formed)."""
    import onnxruntime as ort
    m = onnx.load(str(path))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    for x in sess.get_inputs():
        shape = [dims.get(s, 1) if isinstance(s, str) or s is None else s for s in x.shape]
        if x.type == "tensor(int64)":
            feeds[x.name] = np.ones(shape, np.int64)
        else:
            feeds[x.name] = np.zeros(shape, np.float32)
    outs = sess.run(None, feeds)
    print(f"  ran {path.name}: outputs {[o.shape for o in outs]}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("-o", "--out", type=Path, default=OUT)
    ap.add_argument("--force", action="store_true", help="regenerate even when up to date")
    ap.add_argument("--run", action="store_true", help="run each model once in onnxruntime")
    args = ap.parse_args(argv)
    for model in args.models.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            path = ensure(model, size, args.out, force=args.force, say=print)
            print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB")
            if args.run:
                run_check(path, {"batch": 1, "seq": 16})


if __name__ == "__main__":
    sys.exit(main())
