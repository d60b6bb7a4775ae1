"""A Qwen2/Llama-style decoder with KV cache, built with onnx's helper API (the fallback recipe).

What ``exports.py`` would give for ``Qwen2ForCausalLM`` with ``use_cache=True``, written node by
node: token embedding (``Gather``), per layer RMSNorm (computed in float32 and cast back, as
``Qwen2RMSNorm`` does), grouped-query attention (``num_kv_heads`` < ``num_heads``: the keys and
values repeated with ``Tile``), rotary position embedding (cos/sin tables gathered by
``position_ids``, ``rotate_half`` as Split/Neg/Concat), the KV cache (``past_key_values.N.key``
inputs concatenated with the new keys, ``present.N.key`` outputs), a causal plus padding mask,
softmax in float32, a SwiGLU MLP, the final norm and the LM head.  Weights are random (seeded),
float16 or float32; large models keep them as external data, written tensor by tensor (never
the whole model in memory), so a 2 GB decoder costs this script a few hundred MB.

Used where torch cannot be installed (``build.py``'s recipes need the build virtualenv), by
tests that need a model with external data of a given size, and by ``benchmarks/bench_llm.py``.

    python corpus/decoder.py OUT.onnx --preset qwen2-0.5b [--dtype float32] [--external]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 18
#: External data offsets are aligned to this (onnxruntime memory-maps aligned tensors).
ALIGN = 4096


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of the decoder (names as in ``transformers.Qwen2Config``)."""

    vocab_size: int = 1000
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    attention_bias: bool = True      # Qwen2 has q/k/v biases; Llama does not

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


PRESETS = {
    # committed: ~1 MB in float16
    "tiny": DecoderConfig(),
    # tests: about 150 MB in float32
    "test-150mb": DecoderConfig(vocab_size=32000, hidden_size=384, num_hidden_layers=4,
                                num_attention_heads=6, num_key_value_heads=2,
                                intermediate_size=1536, max_position_embeddings=512),
    # Qwen2-0.5B's shape: 1.98 GB in float32 (tied embeddings)
    "qwen2-0.5b": DecoderConfig(vocab_size=151936, hidden_size=896, num_hidden_layers=24,
                                num_attention_heads=14, num_key_value_heads=2,
                                intermediate_size=4864, max_position_embeddings=4096,
                                rope_theta=1000000.0, tie_word_embeddings=True),
    # TinyLlama-1.1B's shape: 2.2 GB in float16
    "tinyllama-1.1b": DecoderConfig(vocab_size=32000, hidden_size=2048, num_hidden_layers=22,
                                    num_attention_heads=32, num_key_value_heads=4,
                                    intermediate_size=5632, max_position_embeddings=2048,
                                    rms_norm_eps=1e-5, attention_bias=False),
}


class _Weights:
    """Initializers written as they are made: inline, or appended to one external data file."""

    def __init__(self, dtype: np.dtype, seed: int, data_file: Path | None):
        self.dtype = np.dtype(dtype)
        self.rng = np.random.default_rng(seed)
        self.data_file = data_file
        self.out = open(data_file, "wb") if data_file is not None else None
        self.tensors: list[TensorProto] = []

    def add(self, name: str, shape: tuple[int, ...], *, scale: float = 0.02,
            value: np.ndarray | None = None) -> str:
        if value is None:
            value = (self.rng.standard_normal(shape, dtype=np.float32) * scale).astype(self.dtype)
        value = np.ascontiguousarray(value)
        t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(value.dtype))
        t.dims.extend(value.shape)
        if self.out is None or value.nbytes < 1024:
            t.raw_data = value.tobytes()
        else:
            offset = -self.out.tell() % ALIGN + self.out.tell()
            self.out.seek(offset)
            value.tofile(self.out)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", self.data_file.name), ("offset", str(offset)),
                         ("length", str(value.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
        self.tensors.append(t)
        return name

    def close(self) -> None:
        if self.out is not None:
            self.out.close()


def build_decoder(cfg: DecoderConfig, path: str | os.PathLike, *, dtype: str = "float16",
                  external: bool = False, seed: int = 0) -> Path:
    """Write the decoder to ``path`` (and ``<path>.data`` when ``external``); return ``path``.

    Inputs: ``input_ids`` [batch, sequence] int64, ``attention_mask`` [batch, total] int64
    (total = past + sequence), ``position_ids`` [batch, sequence] int64,
    ``past_key_values.N.key``/``.value`` [batch, kv_heads, past, head_dim].  Outputs:
    ``logits`` [batch, sequence, vocab], ``present.N.key``/``.value``.
    """
    path = Path(path)
    w = _Weights(np.dtype(dtype), seed, path.with_name(path.name + ".data") if external else None)
    try:
        nodes, inputs, outputs = _graph(cfg, w)
    finally:
        w.close()
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, initializer=w.tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hetero-solve corpus/decoder.py")
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _graph(cfg: DecoderConfig, w: _Weights):
    elem = helper.np_dtype_to_tensor_dtype(w.dtype)
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    h, nh, kvh, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    nodes: list[onnx.NodeProto] = []
    consts: dict[str, str] = {}

    def node(op, ins, n_out=1, name=None, **attrs):
        name = name or f"/{op}_{len(nodes)}"
        outs = [f"{name}_output_{k}" for k in range(n_out)]
        nodes.append(helper.make_node(op, ins, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(values, dtype=np.int64):
        arr = np.asarray(values, dtype=dtype)
        key = f"{arr.dtype}:{arr.shape}:{arr.tobytes().hex()}"
        if key not in consts:
            consts[key] = node("Constant", [], value=onnx.numpy_helper.from_array(
                arr, f"const_{len(consts)}"))
        return consts[key]

    def rms_norm(x, weight, prefix):
        xf = node("Cast", [x], to=F, name=f"{prefix}/Cast")
        var = node("ReduceMean", [node("Mul", [xf, xf], name=f"{prefix}/Mul"), const([-1])],
                   keepdims=1, name=f"{prefix}/ReduceMean")
        inv = node("Reciprocal", [node("Sqrt", [node("Add", [var, const(cfg.rms_norm_eps, np.float32)],
                                                     name=f"{prefix}/Add")], name=f"{prefix}/Sqrt")],
                   name=f"{prefix}/Reciprocal")
        back = node("Cast", [node("Mul", [xf, inv], name=f"{prefix}/Mul_1")], to=elem,
                    name=f"{prefix}/Cast_1")
        return node("Mul", [back, weight], name=f"{prefix}/Mul_2")

    def linear(x, n_in, n_out, prefix, bias=False):
        y = node("MatMul", [x, w.add(f"{prefix}.weight", (n_in, n_out))], name=f"{prefix}/MatMul")
        if bias:
            y = node("Add", [y, w.add(f"{prefix}.bias", (n_out,))], name=f"{prefix}/Add")
        return y

    def heads(x, n, prefix):   # [b, s, n*hd] -> [b, n, s, hd]
        r = node("Reshape", [x, const([0, 0, n, hd])], name=f"{prefix}/Reshape")
        return node("Transpose", [r], perm=[0, 2, 1, 3], name=f"{prefix}/Transpose")

    def rotary(x, cos, sin, prefix):
        x1, x2 = node("Split", [x], n_out=2, axis=-1, num_outputs=2, name=f"{prefix}/Split")
        rot = node("Concat", [node("Neg", [x2], name=f"{prefix}/Neg"), x1], axis=-1,
                   name=f"{prefix}/Concat")
        return node("Add", [node("Mul", [x, cos], name=f"{prefix}/Mul"),
                            node("Mul", [rot, sin], name=f"{prefix}/Mul_1")], name=f"{prefix}/Add")

    inputs = [helper.make_tensor_value_info("input_ids", I64, ["batch", "sequence"]),
              helper.make_tensor_value_info("attention_mask", I64, ["batch", "total_sequence"]),
              helper.make_tensor_value_info("position_ids", I64, ["batch", "sequence"])]
    for i in range(cfg.num_hidden_layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", elem, ["batch", kvh, "past_sequence", hd]))
    outputs = [helper.make_tensor_value_info("logits", elem, ["batch", "sequence", cfg.vocab_size])]

    embed = w.add("model.embed_tokens.weight", (cfg.vocab_size, h))
    x = node("Gather", [embed, "input_ids"], name="/model/embed_tokens/Gather")
    # rotary tables, as Qwen2RotaryEmbedding computes them (float32, then the model's dtype)
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.float32) / hd)
    freqs = np.outer(np.arange(cfg.max_position_embeddings, dtype=np.float32), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos_t = w.add("model.rotary_emb.cos_cached", emb.shape, value=np.cos(emb).astype(w.dtype))
    sin_t = w.add("model.rotary_emb.sin_cached", emb.shape, value=np.sin(emb).astype(w.dtype))
    cos = node("Unsqueeze", [node("Gather", [cos_t, "position_ids"], name="/rotary/Gather"),
                             const([1])], name="/rotary/Unsqueeze")
    sin = node("Unsqueeze", [node("Gather", [sin_t, "position_ids"], name="/rotary/Gather_1"),
                             const([1])], name="/rotary/Unsqueeze_1")
    # causal + padding mask, [batch, 1, sequence, total]: the exporter's Shape/Range chain
    seq = node("Gather", [node("Shape", ["input_ids"], name="/mask/Shape"), const(1)], axis=0,
               name="/mask/Gather")
    total = node("Gather", [node("Shape", ["attention_mask"], name="/mask/Shape_1"), const(1)],
                 axis=0, name="/mask/Gather_1")
    past = node("Sub", [total, seq], name="/mask/Sub")
    q_pos = node("Unsqueeze", [node("Range", [past, total, const(1)], name="/mask/Range"),
                               const([1])], name="/mask/Unsqueeze")
    k_pos = node("Unsqueeze", [node("Range", [const(0), total, const(1)], name="/mask/Range_1"),
                               const([0])], name="/mask/Unsqueeze_1")
    future = node("Greater", [k_pos, q_pos], name="/mask/Greater")
    padded = node("Equal", [node("Unsqueeze", ["attention_mask"] + [const([1, 2])],
                                 name="/mask/Unsqueeze_2"), const(0)], name="/mask/Equal")
    masked = node("Or", [future, padded], name="/mask/Or")
    bias = node("Where", [masked, const(np.finfo(np.float32).min / 2, np.float32),
                          const(0.0, np.float32)], name="/mask/Where")
    rep = nh // kvh
    for i in range(cfg.num_hidden_layers):
        p = f"/model/layers.{i}"
        wp = f"model.layers.{i}"
        normed = rms_norm(x, w.add(f"{wp}.input_layernorm.weight", (h,), value=np.ones(h, w.dtype)),
                          f"{p}/input_layernorm")
        q = heads(linear(normed, h, nh * hd, f"{wp}.self_attn.q_proj", cfg.attention_bias), nh, f"{p}/q")
        k = heads(linear(normed, h, kvh * hd, f"{wp}.self_attn.k_proj", cfg.attention_bias), kvh, f"{p}/k")
        v = heads(linear(normed, h, kvh * hd, f"{wp}.self_attn.v_proj", cfg.attention_bias), kvh, f"{p}/v")
        q, k = rotary(q, cos, sin, f"{p}/q_rot"), rotary(k, cos, sin, f"{p}/k_rot")
        k = node("Concat", [f"past_key_values.{i}.key", k], axis=2, name=f"{p}/cache/Concat")
        v = node("Concat", [f"past_key_values.{i}.value", v], axis=2, name=f"{p}/cache/Concat_1")
        for kind, t in (("key", k), ("value", v)):
            nodes.append(helper.make_node("Identity", [t], [f"present.{i}.{kind}"],
                                          name=f"{p}/present/{kind}"))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", elem, ["batch", kvh, "total_sequence", hd]))

        def repeat(t, tag):   # GQA: [b, kvh, t, hd] -> [b, nh, t, hd]
            tiled = node("Tile", [node("Unsqueeze", [t, const([2])], name=f"{p}/{tag}/Unsqueeze"),
                                  const([1, 1, rep, 1, 1])], name=f"{p}/{tag}/Tile")
            return node("Reshape", [tiled, const([0, nh, -1, hd])], name=f"{p}/{tag}/Reshape")

        kt = node("Transpose", [repeat(k, "repeat_k")], perm=[0, 1, 3, 2], name=f"{p}/attn/Transpose")
        scores = node("Cast", [node("Mul", [node("MatMul", [q, kt], name=f"{p}/attn/MatMul"),
                                            const(1 / np.sqrt(hd), w.dtype)], name=f"{p}/attn/Mul")],
                      to=F, name=f"{p}/attn/Cast")
        probs = node("Cast", [node("Softmax", [node("Add", [scores, bias], name=f"{p}/attn/Add")],
                                   axis=-1, name=f"{p}/attn/Softmax")], to=elem, name=f"{p}/attn/Cast_1")
        ctx = node("MatMul", [probs, repeat(v, "repeat_v")], name=f"{p}/attn/MatMul_1")
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3], name=f"{p}/attn/Transpose_1"),
                               const([0, 0, h])], name=f"{p}/attn/Reshape")
        x = node("Add", [x, linear(ctx, nh * hd, h, f"{wp}.self_attn.o_proj")], name=f"{p}/Add")
        normed = rms_norm(x, w.add(f"{wp}.post_attention_layernorm.weight", (h,),
                                   value=np.ones(h, w.dtype)), f"{p}/post_attention_layernorm")
        gate = linear(normed, h, cfg.intermediate_size, f"{wp}.mlp.gate_proj")
        silu = node("Mul", [gate, node("Sigmoid", [gate], name=f"{p}/mlp/Sigmoid")], name=f"{p}/mlp/Mul")
        up = linear(normed, h, cfg.intermediate_size, f"{wp}.mlp.up_proj")
        down = linear(node("Mul", [silu, up], name=f"{p}/mlp/Mul_1"), cfg.intermediate_size, h,
                      f"{wp}.mlp.down_proj")
        x = node("Add", [x, down], name=f"{p}/Add_1")
    x = rms_norm(x, w.add("model.norm.weight", (h,), value=np.ones(h, w.dtype)), "/model/norm")
    if cfg.tie_word_embeddings:
        logits = node("Gemm", [node("Reshape", [x, const([-1, h])], name="/lm_head/Reshape"), embed],
                      transB=1, name="/lm_head/Gemm")
        logits = node("Reshape", [logits, node("Concat", [
            node("Shape", ["input_ids"], name="/lm_head/Shape"), const([cfg.vocab_size])], axis=0,
            name="/lm_head/Concat")], name="/lm_head/Reshape_1")
    else:
        logits = linear(x, h, cfg.vocab_size, "lm_head")
    nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/lm_head/output"))
    return nodes, inputs, outputs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the .onnx file to write")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    ap.add_argument("--external", action="store_true", help="weights in OUT.data")
    ap.add_argument("--layers", type=int, help="override the preset's layer count")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    cfg = PRESETS[a.preset]
    if a.layers:
        cfg = replace(cfg, num_hidden_layers=a.layers)
    build_decoder(cfg, a.out, dtype=a.dtype, external=a.external, seed=a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
