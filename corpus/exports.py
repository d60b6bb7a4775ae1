"""Export the corpus's torch models (run inside the build virtualenv, by ``build.py``).

Every model is a real architecture from ``transformers`` (BERT, T5, Whisper's encoder, ResNet,
MobileNetV2, Qwen2 as a float16 decoder with its KV cache), built from a config written here (nothing is downloaded from a model hub), with
random weights drawn after ``torch.manual_seed(SEED)``, and exported by one of torch's two
exporters:

- ``legacy``: the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) with
  ``dynamic_axes``, which names the symbolic dims ``batch``, ``sequence``...; what most models
  on the hubs were exported with (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains);
- ``dynamo``: ``torch.export`` + the onnxscript translator (``dynamo=True``) with
  ``dynamic_shapes`` (``torch.export.Dim``), the default from torch 2.9 on.

Usage (``build.py`` calls it): ``python exports.py OUT_DIR NAME [NAME ...]``; ``--list``
prints the recipe names.  Each recipe is a function returning ``(module, args, input names,
output names, dynamic dims)``; the dims are ``{input name: {axis: dim name}}``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import torch

SEED = 0
OPSET_LEGACY = 17     # the TorchScript exporter's default in torch 2.x
OPSET_DYNAMO = 18     # the dynamo exporter's default


class LogitsOnly(torch.nn.Module):
    """Call a transformers model with keyword inputs and return one output tensor (exporters
    handle plain tensors best; real export scripts (optimum) do the same)."""

    def __init__(self, model, names, output="last_hidden_state", **fixed):
        super().__init__()
        self.model, self.names, self.output, self.fixed = model, names, output, fixed

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)), **self.fixed)
        return getattr(out, self.output)


def _eval(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _tokens(vocab, batch=2, seq=16):
    g = torch.Generator().manual_seed(SEED)
    return torch.randint(0, vocab, (batch, seq), generator=g)


# -- recipes: name -> builder(size) ------------------------------------------------------------

def bert(size):
    from transformers import BertConfig, BertModel
    cfg = {"tiny": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128),
           "small": dict(vocab_size=4000, hidden_size=192, num_hidden_layers=4,
                         num_attention_heads=4, intermediate_size=768)}[size]
    model = _eval(BertModel(BertConfig(max_position_embeddings=128, **cfg)))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = _tokens(cfg["vocab_size"])
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}
    return LogitsOnly(model, names), args, names, ["last_hidden_state"], dyn


def t5(size):
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = {"tiny": dict(vocab_size=1000, d_model=64, d_kv=32, d_ff=128, num_layers=2,
                        num_decoder_layers=2, num_heads=2),
           "small": dict(vocab_size=4000, d_model=128, d_kv=32, d_ff=512, num_layers=3,
                         num_decoder_layers=3, num_heads=4)}[size]
    model = _eval(T5ForConditionalGeneration(T5Config(tie_word_embeddings=True,
                                                      decoder_start_token_id=0, **cfg)))
    names = ["input_ids", "attention_mask", "decoder_input_ids"]
    ids = _tokens(cfg["vocab_size"])
    dec = _tokens(cfg["vocab_size"], seq=8)
    args = (ids, torch.ones_like(ids), dec)
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
           "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}}
    return LogitsOnly(model, names, output="logits", use_cache=False), args, names, ["logits"], dyn


def whisper_encoder(size):
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = {"tiny": dict(d_model=64, encoder_layers=2, encoder_attention_heads=2,
                        encoder_ffn_dim=128),
           "small": dict(d_model=192, encoder_layers=3, encoder_attention_heads=3,
                         encoder_ffn_dim=768)}[size]
    config = WhisperConfig(num_mel_bins=80, max_source_positions=1500, **cfg)
    config._attn_implementation = "eager"     # explicit 1500 x 1500 attention weights
    model = _eval(WhisperEncoder(config))
    g = torch.Generator().manual_seed(SEED)
    feats = torch.randn(2, 80, 3000, generator=g)   # 30 s of log-mel frames -> 1500 positions
    return LogitsOnly(model, ["input_features"]), (feats,), ["input_features"], \
        ["last_hidden_state"], {"input_features": {0: "batch"}}


def resnet(size):
    from transformers import ResNetConfig, ResNetModel
    cfg = {"tiny": dict(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                        layer_type="basic"),
           "small": dict(embedding_size=32, hidden_sizes=[32, 64, 128, 256],
                         depths=[2, 2, 2, 2], layer_type="basic")}[size]
    model = _eval(ResNetModel(ResNetConfig(**cfg)))
    _randomise_batchnorm(model)
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(2, 3, 224, 224, generator=g)
    return LogitsOnly(model, ["pixel_values"], output="pooler_output"), (x,), ["pixel_values"], \
        ["pooler_output"], {"pixel_values": {0: "batch"}}


def mobilenet(size):
    from transformers import MobileNetV2Config, MobileNetV2Model
    cfg = {"tiny": dict(depth_multiplier=0.35), "small": dict(depth_multiplier=1.0)}[size]
    # tf_padding (the default): "same" padding computed from the input's height and width at
    # run time, as the TensorFlow checkpoints need; with dynamic height/width it exports shape
    # arithmetic feeding Pad.
    model = _eval(MobileNetV2Model(MobileNetV2Config(image_size=160, **cfg)))
    _randomise_batchnorm(model)
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(2, 3, 160, 160, generator=g)
    dyn = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    return LogitsOnly(model, ["pixel_values"], output="pooler_output"), (x,), ["pixel_values"], \
        ["pooler_output"], dyn


class DecoderWithCache(torch.nn.Module):
    """A causal LM called with flat tensors and returning flat tensors, as optimum exports
    decoders: ``input_ids``, ``attention_mask``, ``position_ids``, then ``past_key_values.N.key``
    and ``.value`` per layer; ``logits`` and ``present.N.key``/``.value`` out.  The cache object
    transformers uses is built inside ``forward`` (the exporters see tensors only)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.layers = model, model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers.cache_utils import DynamicCache
        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def qwen2_kv(size):
    """Qwen2 (grouped-query attention, RMSNorm, rotary, q/k/v biases) in float16 with its KV
    cache as inputs and outputs; ``2gb``: TinyLlama-1.1B's shape, 2.2 GB of float16 weights
    (external data)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = {"tiny": dict(vocab_size=1000, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
           "2gb": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                       num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4)}[size]
    config = Qwen2Config(max_position_embeddings=256, use_cache=True, tie_word_embeddings=False,
                         **cfg)
    config._attn_implementation = "eager"        # explicit softmax(QK^T) attention
    model = _eval(Qwen2ForCausalLM(config)).half()
    layers, kv = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    head = cfg["hidden_size"] // cfg["num_attention_heads"]
    batch, seq, past = 2, 5, 3
    g = torch.Generator().manual_seed(SEED)
    ids = _tokens(cfg["vocab_size"], batch, seq)
    args = [ids, torch.ones(batch, past + seq, dtype=torch.long),
            torch.arange(past, past + seq).unsqueeze(0).expand(batch, -1)]
    args += [torch.randn(batch, kv, past, head, generator=g).half() for _ in range(2 * layers)]
    cache = [f"{i}.{k}" for i in range(layers) for k in ("key", "value")]
    names = ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{c}" for c in cache]
    outs = ["logits"] + [f"present.{c}" for c in cache]
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "position_ids": {0: "batch", 1: "sequence"},
           "attention_mask": {0: "batch", 1: "total_sequence"},
           "logits": {0: "batch", 1: "sequence"}}
    dyn.update({f"past_key_values.{c}": {0: "batch", 2: "past_sequence"} for c in cache})
    dyn.update({f"present.{c}": {0: "batch", 2: "total_sequence"} for c in cache})
    return DecoderWithCache(model), tuple(args), names, outs, dyn


def _randomise_batchnorm(model):
    """Fresh BatchNorm running statistics are 0 / 1: give them values, as a trained model has."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)


ARCHITECTURES = {"bert": bert, "t5": t5, "whisper-encoder": whisper_encoder, "resnet": resnet,
                 "mobilenetv2": mobilenet, "qwen2-kv": qwen2_kv}
#: Sizes per architecture (default: tiny and small).
SIZES = {"qwen2-kv": ("tiny", "2gb")}
#: Sizes whose weights exceed protobuf's 2 GiB: saved with external data in ``NAME.onnx.data``.
EXTERNAL_SIZES = ("2gb",)


def recipe(name: str):
    """``"bert-tiny-legacy"`` -> (builder, size, exporter)."""
    arch, size, exporter = name.rsplit("-", 2)
    if arch not in ARCHITECTURES or size not in SIZES.get(arch, ("tiny", "small")) or \
            exporter not in ("legacy", "dynamo"):
        raise SystemExit(f"unknown export recipe {name!r}")
    return ARCHITECTURES[arch], size, exporter


def export(name: str, out: Path) -> None:
    builder, size, exporter = recipe(name)
    torch.manual_seed(SEED)
    module, args, in_names, out_names, dyn = builder(size)
    external = size in EXTERNAL_SIZES
    if external:   # the legacy exporter writes one file per tensor: in a folder of their own
        staging = out.parent / f"{name}.staging"
        staging.mkdir(exist_ok=True)
        target, out = out, staging / out.name
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            torch.onnx.export(module, args, str(out), dynamo=False, opset_version=OPSET_LEGACY,
                              input_names=in_names, output_names=out_names,
                              dynamic_axes=dyn,
                              do_constant_folding=True)
        else:
            from torch.export import Dim
            dims: dict[str, Dim] = {}
            shapes = []
            for n in in_names:
                axes = dyn.get(n, {})
                shapes.append({a: dims.setdefault(d, Dim(d, min=1 if d == "batch" else 2,
                                                         max=1024 if d == "batch" else 4096))
                               for a, d in axes.items()} or None)
            prog = torch.onnx.export(module, args, dynamo=True, opset_version=OPSET_DYNAMO,
                                     input_names=in_names, output_names=out_names,
                                     dynamic_shapes={"args": tuple(shapes)}, optimize=True,
                                     verbose=False, report=False)
            prog.save(str(out), external_data=external)
    if external:   # one data file beside the model, as the hubs ship large models
        import shutil

        import onnx
        del module, args
        model = onnx.load(str(out))
        onnx.save_model(model, str(target), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=target.name + ".data",
                        size_threshold=1024)
        del model
        shutil.copymode(target, str(target) + ".data")   # onnx writes it 0600
        shutil.rmtree(staging)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path, nargs="?")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for arch in ARCHITECTURES:
            for size in SIZES.get(arch, ("tiny", "small")):
                for ex in ("legacy", "dynamo"):
                    print(f"{arch}-{size}-{ex}")
        return 0
    a.out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for name in a.names:
        out = a.out_dir / f"{name}.onnx"
        print(f"exporting {name} -> {out}", file=sys.stderr, flush=True)
        export(name, out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
