"""Random inputs for ``run`` and ``verify`` respect what the model says (issue 15, item 7):
integer inputs used as indices stay within the table they index (a BERT export's
``token_type_ids`` into a 2-row embedding), ``--input-range`` sets any input's range, and
onnxruntime's own log stays out of a non-terminal stderr."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from conftest import ROOT
from hetero_solve.export import write_result
from hetero_solve.run.inputs import model_input_specs, random_inputs

RULES = {"version": 1, "devices": [
    {"name": "ACC", "ops": {"supported": ["Gather", "Add"]}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def hetero_solve(*argv) -> subprocess.CompletedProcess:
    """The command, as a user runs it, from the repository root."""
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, argv)],
                          capture_output=True, text=True, cwd=ROOT)


def bert_like(tmp_path):
    """input_ids -> Gather(word table, 30 rows); token_type_ids -> Cast -> Gather(type table,
    2 rows); their sum through a Tanh (CPU)."""
    rng = np.random.default_rng(0)
    words = onnx.numpy_helper.from_array(rng.standard_normal((30, 4)).astype(np.float32), "words")
    types = onnx.numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "types")
    nodes = [h.make_node("Gather", ["words", "input_ids"], ["w"], name="word_emb"),
             h.make_node("Cast", ["token_type_ids"], ["tt"], name="cast", to=T.INT64),
             h.make_node("Gather", ["types", "tt"], ["t"], name="type_emb"),
             h.make_node("Add", ["w", "t"], ["s"], name="add"),
             h.make_node("Tanh", ["s"], ["y"], name="tanh")]
    graph = h.make_graph(nodes, "bert_like",
                         [h.make_tensor_value_info("input_ids", T.INT64, [1, 8]),
                          h.make_tensor_value_info("token_type_ids", T.INT32, [1, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 4])],
                         initializer=[words, types])
    path = tmp_path / "bert_like.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_index_inputs_stay_within_the_table_they_index(tmp_path):
    model = bert_like(tmp_path)
    specs = {s.name: s for s in model_input_specs(onnx.load(model))}
    assert specs["input_ids"].index_bound == 30 and specs["token_type_ids"].index_bound == 2
    out = tmp_path / "out"
    write_result(hs.solve(model, RULES, engine="heuristic"), out)
    for seed in range(5):
        report = hs.verify(model, out, seed=seed)        # failed with exit 2 before (ids 0..9)
        assert report.ok
    feeds = report.run.inputs
    assert feeds["token_type_ids"].max() <= 1 and feeds["token_type_ids"].dtype == np.int32
    run = hs.run(out, seed=3)
    assert run.inputs["token_type_ids"].max() <= 1


def test_input_range_sets_the_values(tmp_path):
    model = bert_like(tmp_path)
    specs = model_input_specs(onnx.load(model))
    feeds = random_inputs(specs, seed=1, ranges={"input_ids": (5, 6)})
    assert set(np.unique(feeds["input_ids"])) <= {5, 6}
    out = tmp_path / "out"
    write_result(hs.solve(model, RULES, engine="heuristic"), out)
    r = hetero_solve("verify", model, out, "--input-range", "input_ids=0,3", "--json")
    assert r.returncode == 0, r.stderr
    r = hetero_solve("run", out, "--no-save", "--input-range", "nope=0,3")
    assert r.returncode == 2 and "--input-range nope: no such input" in r.stderr
    r = hetero_solve("run", out, "--no-save", "--input-range", "input_ids=3")
    assert r.returncode == 2 and "expected NAME=LO,HI" in r.stderr


def test_onnxruntime_log_stays_out_of_a_file(tmp_path):
    """onnxruntime logs a failing run itself (a coloured error line) before it raises: with
    stderr a file, the only line is hetero-solve's."""
    model = bert_like(tmp_path)
    out = tmp_path / "out"
    write_result(hs.solve(model, RULES, engine="heuristic"), out)
    np.save(tmp_path / "tt.npy", np.full((1, 8), 7, np.int32))       # row 7 of a 2-row table
    r = hetero_solve("verify", model, out, "--input", f"token_type_ids={tmp_path / 'tt.npy'}")
    assert r.returncode == 2
    # hetero-solve's lines only: the random inputs used (input_ids), then the one error line
    lines = r.stderr.splitlines()
    assert "\x1b[" not in r.stderr and len(lines) == 2, r.stderr
    assert lines[0].startswith("hetero-solve: random inputs (seed 0): input_ids int64 (1,8)")
    assert lines[1].startswith("hetero-solve: error: ") and "--input-range" in lines[1]
    assert "out of data bounds" in r.stderr


def test_a_scalar_input_that_must_hold_one_value(tmp_path):
    """A VAD's ``sr`` must be 16000; here ``n``, a scalar int64, must be 6 (Reshape of a
    6-element tensor to [n]).  Random, it fails inside onnxruntime: the command prints the
    random inputs first (name, dtype, shape, values) and names --input-range in its error;
    with --input-range n=6,6 it runs and verifies (issue 31)."""
    from onnx import TensorProto as T, helper as h
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    n = h.make_tensor_value_info("n", T.INT64, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [6])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Unsqueeze", ["n", "zero"], ["shape"], name="unsq"),
             h.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")]
    graph = h.make_graph(nodes, "vad_like", [x, n], [y],
                         initializer=[onnx.numpy_helper.from_array(np.array([0]), "zero")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    path = tmp_path / "vad_like.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "out"
    write_result(hs.solve(path, RULES, engine="heuristic"), out)
    for command in (["verify", str(path), str(out)], ["run", str(out), "--no-save"]):
        r = hetero_solve(*command)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.splitlines()
        first = next(i for i, x in enumerate(lines) if "random inputs" in x)
        error = next(i for i, x in enumerate(lines) if x.startswith("hetero-solve: error:"))
        assert first < error and error == len(lines) - 1, lines
        assert "n int64 () from 0..9" in lines[first] and "x float32 (2,3)" in lines[first]
        assert "--input-range NAME=LO,HI" in lines[error] and "random inputs" in lines[error]
        ok = hetero_solve(*command, "--input-range", "n=6,6")
        assert ok.returncode == 0, ok.stderr
    with pytest.raises(hs.run.RandomInputsError) as e:
        hs.verify(path, out)
    assert "n" in e.value.random and "--" not in str(e.value)


def _sample_rate_model(path):
    """A VAD's ``sr``: ``If(Equal(Cast(sr), 16000))`` runs Relu(x); the other branch reshapes
    x (2x3) to 7x1 and fails inside onnxruntime, as a VAD's 8 kHz branch fails on a
    16 kHz window."""
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    sr = h.make_tensor_value_info("sr", T.INT64, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, None])
    then = h.make_graph([h.make_node("Relu", ["x"], ["yt"], name="relu")], "then", [],
                        [h.make_tensor_value_info("yt", T.FLOAT, [None, None])])
    other = h.make_graph([h.make_node("Reshape", ["x", "seven"], ["ye"], name="bad")], "else",
                         [], [h.make_tensor_value_info("ye", T.FLOAT, [None, None])],
                         initializer=[onnx.numpy_helper.from_array(np.array([7, 1]), "seven")])
    nodes = [h.make_node("Cast", ["sr"], ["sr32"], name="cast", to=T.INT32),
             h.make_node("Constant", [], ["rate"], name="rate",
                         value=onnx.numpy_helper.from_array(np.array(16000, np.int32))),
             h.make_node("Equal", ["sr32", "rate"], ["is16k"], name="eq"),
             h.make_node("If", ["is16k"], ["y"], name="branch", then_branch=then,
                         else_branch=other)]
    model = h.make_model(h.make_graph(nodes, "vad_like", [x, sr], [y]),
                         opset_imports=[h.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def test_a_single_integer_the_model_compares_with_a_constant_takes_that_value(tmp_path):
    """A VAD's sample rate (issue 39 item 7): a scalar integer input that the model tests for
    equality with constants (through a Cast) is given the first of them, not a random 0..9;
    ``verify`` and ``run`` pass by default and the line says where the value came from."""
    path = _sample_rate_model(tmp_path / "vad_like.onnx")
    (spec,) = [s for s in model_input_specs(onnx.load(str(path))) if s.name == "sr"]
    assert spec.compared == (16000,)
    assert random_inputs([spec], seed=3)["sr"] == 16000
    out = tmp_path / "out"
    write_result(hs.solve(path, RULES, engine="heuristic"), out)
    for command in (["verify", str(path), str(out)], ["run", str(out), "--no-save"]):
        r = hetero_solve(*command)
        assert r.returncode == 0, r.stderr
        assert "sr int64 () 16000 (the model compares it with 16000)" in r.stderr
    # --input-range still decides
    r = hetero_solve("run", out, "--no-save", "--input-range", "sr=8000,8000")
    assert r.returncode == 2 and "sr int64 () from 8000..8000" in r.stderr
