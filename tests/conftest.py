"""Shared test helpers: paths, tiny model builders, random feeds."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RULES = ROOT / "rules"
sys.path.insert(0, str(EXAMPLES))

# A shell started without job control (`pytest ... &` in a script, CI runners) starts its
# background children with SIGINT ignored, and that is inherited across exec: every command the
# Ctrl-C tests start would then ignore their SIGINT and "not interrupted" would be the test's
# fault, not the product's.  A user's terminal delivers Ctrl-C, so the suite restores Python's
# handler; children exec'd from here start with SIGINT at its default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from make_examples import EXAMPLE_DIMS  # noqa: E402
from support import tiers  # noqa: E402


def pytest_addoption(parser):
    tiers.addoption(parser)


def pytest_configure(config):
    tiers.configure(config)


def example_models() -> list[Path]:
    return sorted(EXAMPLES.glob("*.onnx"))


def rule_profiles() -> list[Path]:
    return sorted(RULES.glob("*.yaml"))


def chain_model(ops: list[tuple[str, list[str], str]], inputs: dict[str, list], outputs: dict[str, list],
                initializers: dict[str, np.ndarray] | None = None, opset: int = 17,
                names: list[str] | None = None, dtype: int = T.FLOAT) -> onnx.ModelProto:
    """A model from ``(op_type, inputs, output)`` triples; node ``i`` is named ``names[i]`` or
    ``n{i}``."""
    nodes = [h.make_node(op, ins, [out], name=(names[i] if names else f"n{i}"))
             for i, (op, ins, out) in enumerate(ops)]
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = h.make_graph(nodes, "test", [h.make_tensor_value_info(k, dtype, s) for k, s in inputs.items()],
                         [h.make_tensor_value_info(k, dtype, s) for k, s in outputs.items()], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def rules_dict(devices: list[dict], **extra) -> dict:
    return {"version": 1, "devices": devices, **extra}


def random_feeds(model_path: Path | onnx.ModelProto, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of the right dtype and shape (symbolic dims from ``dims``)."""
    model = onnx.load(str(model_path)) if not isinstance(model_path, onnx.ModelProto) else model_path
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 50, size=shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = rng.random(shape) > 0.5
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


@pytest.fixture
def example_dims():
    return dict(EXAMPLE_DIMS)
