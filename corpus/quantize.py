"""Quantized models of the corpus, made the way users make them: onnxruntime's
``quantize_static`` applied to a float model of the corpus.

A ``kind: quantized`` entry of ``corpus.yaml`` names its float model and the settings:

    source: {quantize: resnet-tiny-legacy, tool: onnxruntime==1.32.0, format: QDQ,
             per_channel: true, weights: QInt8, activations: QUInt8,
             calibration: {samples: 8, seed: 0}}

The calibration reader feeds ``samples`` random inputs of the float model's corpus entry
(:func:`truth.random_feeds` with seeds ``seed, seed + 1, ...``: N(0, 1) floats, integer inputs
within ``ranges``), so the same pins give the same bytes.  It runs in the project's own
environment (onnxruntime is a dependency of hetero-solve); ``build.py`` refuses another
onnxruntime version than the pin, whose quantizer may write other bytes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

import onnx

import truth as T


def check_tool(source: Mapping) -> None:
    """Refuse an onnxruntime other than the entry's pinned ``tool``."""
    import onnxruntime
    want = str(source["tool"]).split("==", 1)[1]
    if onnxruntime.__version__ != want:
        raise SystemExit(f"quantizing needs onnxruntime=={want} (the pin in corpus.yaml), this "
                         f"environment has {onnxruntime.__version__}")


def quantize(float_model: Path, float_entry: Mapping, source: Mapping, dest: Path) -> None:
    """Write ``dest``: ``float_model`` quantized with ``source``'s settings (module doc)."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    check_tool(source)
    model = onnx.load(str(float_model))
    cal = source.get("calibration") or {}
    seed, samples = int(cal.get("seed", 0)), int(cal.get("samples", 8))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([T.random_feeds(model, float_entry, seed + k)
                               for k in range(samples)])

        def get_next(self):
            return next(self.feeds, None)

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, dest.name)
        quantize_static(str(float_model), out, Reader(),
                        quant_format=getattr(QuantFormat, source.get("format", "QDQ")),
                        per_channel=bool(source.get("per_channel", True)),
                        weight_type=getattr(QuantType, source.get("weights", "QInt8")),
                        activation_type=getattr(QuantType, source.get("activations", "QUInt8")))
        os.replace(out, dest)
