"""Issue 13: dims a user can give and see, and a missing dim is never silent.

- ``--shape INPUT=d0,d1,...`` (``shapes=`` in the library) sets one input's whole shape;
- ``hetero-solve dims MODEL`` lists the inputs and the dims that have no value;
- rule-file dims the model does not use are silent, ``--dim`` names it lacks are a warning;
- a static-shape device that refuses nodes only because dims have no value: the summary and
  ``explain`` say which dims and how many nodes, the library warns (Python ``warnings``),
  ``--strict`` exits 2 with one line and writes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.errors import HeteroSolveWarning
from hetero_solve.export import affinity_map
from hetero_solve.problem import MissingDims

from conftest import EXAMPLES, ROOT, RULES

TRANSFORMER = EXAMPLES / "transformer_encoder.onnx"
NPU = RULES / "npu-static.yaml"          # static shapes; dims: {batch: 1}


def run(*args):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _anonymous_model(tmp_path):
    """``x: [?, 3, ?, ?]`` (anonymous dims, as Paddle exports write them)."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"),
             h.make_node("GlobalAveragePool", ["a"], ["y"], name="pool")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [-1, 3, "?", "?"])],
                     [h.make_tensor_value_info("y", T.FLOAT, [-1, 3, 1, 1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "anon.onnx"
    onnx.save(m, str(path))
    return path


STATIC = {"version": 1, "devices": [
    {"name": "NPU", "ops": {"supported": "all", "static_shapes": True}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def test_a_whole_shape_makes_anonymous_dims_static(tmp_path):
    path = _anonymous_model(tmp_path)
    with pytest.warns(HeteroSolveWarning, match=r"NPU refused 2 node\(s\) only because anonymous "
                                                r"dims of input 'x' have no value: pass "
                                                r"--shape x=\?,3,\?,\?"):
        r = hs.solve(path, STATIC, engine="heuristic")
    assert affinity_map(r.problem, r.solution) == {"relu": "CPU", "pool": "CPU"}
    r = hs.solve(path, STATIC, shapes={"x": [1, 3, 8, 8]}, engine="heuristic")
    assert affinity_map(r.problem, r.solution) == {"relu": "NPU", "pool": "NPU"}
    assert r.model_graph.tensor_type("a").shape == (1, 3, 8, 8)
    assert r.problem.info.missing_dims == []


def test_a_whole_shape_that_disagrees_with_the_model_is_an_error(tmp_path):
    path = _anonymous_model(tmp_path)
    with pytest.raises(hs.ModelError, match=r"--shape x: the input has rank 4, the shape given "
                                            r"has 3 dims"):
        hs.load_model(path, shapes={"x": [1, 3, 8]})
    with pytest.raises(hs.ModelError, match=r"--shape x: dim 1 of the input is 3, the shape "
                                            r"given says 4"):
        hs.load_model(path, shapes={"x": [1, 4, 8, 8]})
    with pytest.raises(hs.ModelError, match=r"the model has no input 'z' \(its inputs: x\)"):
        hs.load_model(path, shapes={"z": [1]})


def test_cli_shape_option(tmp_path):
    path = _anonymous_model(tmp_path)
    rules = tmp_path / "r.yaml"
    rules.write_text(json.dumps(STATIC))
    r = run(path, rules, "-o", tmp_path / "out", "--engine", "heuristic", "--shape", "x=1,3,8,8")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "out" / "partition.json").read_text())
    assert [p["device"] for p in manifest["partitions"]] == ["NPU"]
    r = run(path, rules, "--shape", "x=1,3,a")
    assert r.returncode == 2 and "is not a list of whole numbers" in r.stderr


def test_dims_lists_the_inputs_and_what_has_no_value(tmp_path):
    r = run("dims", TRANSFORMER)
    assert r.returncode == 0, r.stderr
    assert "input_ids: int64 [batch, seq]" in r.stdout
    assert "no value yet: --dim batch=N --dim seq=N" in r.stdout
    r = run("dims", TRANSFORMER, "--dim", "batch=1", "--dim", "seq=16")
    assert "input_ids: int64 [batch=1, seq=16]" in r.stdout and "every dim has a value" in r.stdout
    r = run("dims", _anonymous_model(tmp_path), "--json")
    data = json.loads(r.stdout)
    assert data["inputs"] == [{"name": "x", "dtype": "float32", "dims": [
        {"name": None, "value": None}, {"name": None, "value": 3},
        {"name": None, "value": None}, {"name": None, "value": None}]}]
    assert [(d.input, d.name, d.value) for d in hs.model.list_dims(TRANSFORMER, {"seq": 4})] == \
        [("input_ids", "batch", None), ("input_ids", "seq", 4)]


def test_unused_rule_dims_are_silent_and_unused_user_dims_warn():
    rules = {**STATIC, "dims": {"batch": 1, "channels": 3}}   # the model has no 'channels'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hs.solve(TRANSFORMER, rules, dims={"seq": 16}, engine="heuristic")
    assert not [w for w in caught if "channels" in str(w.message)]
    with pytest.warns(HeteroSolveWarning, match=r"dim 'sequence' names no dimension of the "
                                                r"model's inputs \(they have: batch, seq\)"):
        hs.solve(TRANSFORMER, rules, dims={"sequence": 16}, engine="heuristic")


def test_a_missing_dim_is_said_in_the_summary_in_explain_and_as_a_warning(tmp_path):
    with pytest.warns(HeteroSolveWarning, match=r"NPU refused 69 node\(s\) only because dim "
                                                r"'seq' has no value: pass --dim seq=N"):
        r = hs.solve(TRANSFORMER, NPU, engine="heuristic")
    assert r.problem.info.missing_dims == [MissingDims("NPU", 69, ["seq"], [], "--dim seq=N")]
    # The counterfactual: with seq given, those nodes go to the NPU (or fold).
    given = hs.solve(TRANSFORMER, NPU, dims={"seq": 16}, engine="heuristic")
    assert given.problem.info.missing_dims == []
    on_npu = sum(1 for d in affinity_map(given.problem, given.solution).values() if d == "NPU")
    assert on_npu + len(given.model_graph.folded) - len(r.model_graph.folded) >= 69 - 6
    line = "NPU refused 69 node(s) only because dim 'seq' has no value: pass --dim seq=N"
    out = run(TRANSFORMER, NPU, "-o", tmp_path / "out", "--engine", "heuristic")
    assert out.returncode == 0 and line in out.stdout
    assert line not in out.stderr          # said once, in the summary
    ex = run("explain", TRANSFORMER, NPU, "--time-limit", "2")
    assert ex.returncode == 0 and line in ex.stdout


def test_strict_turns_a_missing_dim_into_exit_2_with_nothing_written(tmp_path):
    out = tmp_path / "out"
    r = run(TRANSFORMER, NPU, "-o", out, "--engine", "heuristic", "--strict")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "hetero-solve: error: --strict: NPU refused 69 node(s) only because dim 'seq' has no "
        "value: pass --dim seq=N"]
    assert not out.exists()
    r = run(TRANSFORMER, NPU, "-o", out, "--engine", "heuristic", "--strict", "--dim", "seq=16")
    assert r.returncode == 0, r.stderr and (out / "partition.json").exists()
