"""Loading with the checker and shape inference in forked processes gives exactly what the
sequential path gives, reports invalid models the same way, and survives a failed child."""

from __future__ import annotations

import sys

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from hetero_solve.errors import ModelError
from hetero_solve.model import load_model
from hetero_solve.model import parallel

from conftest import EXAMPLE_DIMS, example_models

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is Linux-only here")


@pytest.fixture
def forking(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_NODES", 0)
    assert parallel.fork_pays(1)


def _summary(mg):
    return (mg.names, mg.folded, sorted(mg.constant_tensors),
            [tuple(mg.tensor_type(o).shape or ()) for outs in mg.outputs for o in outs if o])


@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_forked_load_equals_sequential(model, forking, monkeypatch):
    dims = EXAMPLE_DIMS[model.stem]
    forked = load_model(model, dims=dims)
    monkeypatch.setenv("HETERO_SOLVE_NO_FORK", "1")
    assert not parallel.fork_pays(10**6)
    assert _summary(forked) == _summary(load_model(model, dims=dims))


def test_forked_check_reports_an_invalid_model(tmp_path, forking):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], alpha=1.0)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])
    path = tmp_path / "bad.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelError, match="Unrecognized attribute: alpha for operator Relu"):
        load_model(path)


def test_a_child_that_fails_falls_back_to_the_parent(forking, monkeypatch):
    import hetero_solve.model.shapes as shapes

    def broken(model, dims):
        raise RuntimeError("child failed")

    monkeypatch.setattr(shapes, "first_inference_bytes", broken)
    model = example_models()[0]
    mg = load_model(model, dims=EXAMPLE_DIMS[model.stem])
    assert all(mg.tensor_type(o).elem_type for outs in mg.outputs for o in outs if o)


def test_forked_result_and_error():
    assert parallel.Forked(sum, [1, 2, 3]).result() == ("ok", 6)
    kind, message = parallel.Forked(int, "x").result()
    assert kind == "error" and "ValueError" in message
