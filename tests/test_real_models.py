"""Issue 13: hetero-solve on real models nobody on this project wrote (``corpus/``).

For every committed model of the corpus (``corpus/models/``, <= 2 MB each: OCR, voice
activity, BERT / T5 / Whisper-encoder / ResNet / MobileNetV2 exported by torch's two exporters):

- **shapes against the runtime** (``corpus/truth/<model>.json``: every main-graph tensor's shape
  in onnxruntime on three random inputs): (a) no tensor hetero-solve calls static has a shape
  different from onnxruntime's; (b) hetero-solve finds as many static tensors as the runtime
  shows, except tensors that depend on an op ONNX has no shape inference for (named below);
- **every rule profile** in ``rules/``: the answer is valid (``hetero_solve.validate``), every
  part file passes ``onnx.checker`` (full check), and running the parts in id order reproduces
  the original outputs in onnxruntime.

What fails today is marked ``xfail(strict=True)`` with its cause: when a fix lands, the test
passes, strict xfail turns that into a failure, and the mark must go.  Models whose inputs have
anonymous ``?`` dims need whole input shapes (``--shape``); the library is asked for them with a
``shapes={input: [d0, d1, ...]}`` keyword of ``load_model`` / ``solve`` as soon as it has one.
The solver runs with ``engine="heuristic"`` here (fast and deterministic); the exact engine on
the whole corpus, cache included, is ``benchmarks/bench_real.py``.
"""

from __future__ import annotations

import functools
import inspect
import json

import numpy as np
import onnx
import pytest

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.run.onnxruntime import run_original
from hetero_solve.run.session import run_partitioned

from conftest import ROOT, rule_profiles
from corpus import truth as T

pytestmark = pytest.mark.corpus

CORPUS = T.load_corpus()
COMMITTED = [n for n, e in CORPUS.items() if e.get("stored") == "committed"]

#: Ops without ONNX shape inference whose tensors (and what is computed from them) the static
#: count may miss.  A committed model that brings a new one must name it here.
NO_SHAPE_INFERENCE = {"com.microsoft.DynamicQuantizeLSTM"}

WHOLE_SHAPES = ("issue 13: input {inputs} has anonymous dims: needs its whole shape "
                "(--shape; a shapes= keyword of load_model/solve), which the library lacks")

#: (a) shapes called static that differ from onnxruntime's (none today; a model that brings
#: one names its cause here).
WRONG_TODAY: dict[str, str] = {}
#: (b) tensors static at run time that hetero-solve leaves non-static.
MISSED_TODAY: dict[str, str] = {}
#: Part files that fail onnx.checker, or partitions that do not reproduce the outputs.
PIPELINE_TODAY: dict[tuple[str, str], str] = {}


def _takes_shapes(fn) -> bool:
    return "shapes" in inspect.signature(fn).parameters


def _kwargs(entry: dict, fn) -> dict:
    """``dims`` of the entry, and its whole input shapes when ``fn`` accepts them."""
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes") and _takes_shapes(fn):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    return kw


def _whole_shape_mark(name: str, fn) -> list:
    entry = CORPUS[name]
    if T.needs_whole_shapes(entry) and not _takes_shapes(fn):
        return [pytest.mark.xfail(strict=True, reason=WHOLE_SHAPES.format(
            inputs=", ".join(entry["shapes"])))]
    return []


def _cases(known: dict, fn) -> list:
    out = []
    for name in COMMITTED:
        marks = [pytest.mark.xfail(strict=True, reason=known[name])] if name in known \
            else _whole_shape_mark(name, fn)
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@functools.lru_cache(maxsize=None)
def _loaded(name: str):
    entry = CORPUS[name]
    path = T.model_file(name, entry)
    mg = hs.load_model(str(path), **_kwargs(entry, hs.load_model))
    return mg, T.load_truth(T.truth_file(name))


def test_every_committed_model_is_there_with_its_truth():
    assert len(COMMITTED) >= 10
    for name in COMMITTED:
        entry = CORPUS[name]
        path = T.model_file(name, entry)
        assert path.exists(), f"{name}: run corpus/build.py"
        assert path.stat().st_size == entry["bytes"] <= 2_000_000, f"{name}: size"
        assert T.sha256_of(path) == entry["sha256"], f"{name}: not the file corpus.yaml records"
        truth = T.load_truth(T.truth_file(name))
        assert truth["sha256"] == entry["sha256"], f"{name}: stale truth: run corpus/build.py"
        assert entry["license"] and entry["source"]


@pytest.mark.parametrize("name", _cases(WRONG_TODAY, hs.load_model))
def test_no_static_shape_differs_from_onnxruntime(name):
    mg, truth = _loaded(name)
    cmp = T.compare(truth, lambda t: mg.tensor_type(t).shape)
    assert cmp.static_ours > 0
    assert not cmp.wrong, f"{len(cmp.wrong)} wrong, e.g. {list(cmp.wrong.items())[:3]}"
    assert not cmp.extra, f"static for us, value-dependent at run time: {cmp.extra[:5]}"


@pytest.mark.parametrize("name", _cases(MISSED_TODAY, hs.load_model))
def test_static_tensors_equal_onnxruntime(name):
    mg, truth = _loaded(name)
    beyond = T.beyond_inference(onnx.load(str(T.model_file(name, CORPUS[name])),
                                          load_external_data=False))
    assert set(beyond.values()) <= NO_SHAPE_INFERENCE, \
        f"ops without shape inference not named in NO_SHAPE_INFERENCE: {set(beyond.values())}"
    cmp = T.compare(truth, lambda t: mg.tensor_type(t).shape)
    missed = {t: op for t, op in cmp.missed.items() if t not in beyond}
    assert not missed, (f"{len(missed)} of {cmp.static_truth} runtime-static tensors not "
                        f"static: by op {T.Comparison(0, 0, missed=missed).missed_ops()}, "
                        f"e.g. {list(missed)[:3]}")


PIPELINE_CASES = []
for _name in COMMITTED:
    for _rules in rule_profiles():
        _key = (_name, _rules.stem)
        _marks = [pytest.mark.xfail(strict=True, reason=PIPELINE_TODAY[_key])] \
            if _key in PIPELINE_TODAY else []
        PIPELINE_CASES.append(pytest.param(_name, _rules, marks=_marks, id=f"{_name}-{_rules.stem}"))


@pytest.mark.parametrize("name,rules", PIPELINE_CASES)
def test_parts_are_valid_and_reproduce_the_model(name, rules, tmp_path):
    entry = CORPUS[name]
    path = T.model_file(name, entry)
    result = hs.solve(str(path), str(rules), engine="heuristic", **_kwargs(entry, hs.solve))
    assert hs.validate(result.problem, result.solution) == []
    out = write_result(result, tmp_path / "out", annotated=False, dots=False)
    manifest = json.loads((out / "partition.json").read_text())
    for part in manifest["partitions"]:
        onnx.checker.check_model(str(out / part["file"]), full_check=True)

    model = onnx.load(str(path))
    feeds = T.random_feeds(model, entry, seed=0)
    got = run_partitioned(out, feeds, manifest=manifest).outputs
    want = run_original(str(path), feeds)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == want[k].shape, k
        # float16 outputs differ by a rounding step or two where onnxruntime fuses the
        # original and a part differently: four of their steps, as for float32 (1e-4 > 4 eps)
        tol = max(1e-4, 4 * float(np.finfo(want[k].dtype).eps)) \
            if np.issubdtype(want[k].dtype, np.floating) else 1e-4
        np.testing.assert_allclose(got[k], want[k], atol=tol, rtol=tol, err_msg=k)


def test_a_declared_minus_one_dim_is_not_static():
    """Paddle exports declare a dynamic batch as ``dim_value: -1``; ONNX shape inference
    copies it along.  It is an unknown dim, not a size: the tensor is not static and an unknown
    dim counts as 1 in its bytes (docs/problem.md)."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Neg", ["r"], ["y"], name="neg")], "g", [x], [y])
    mg = hs.load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert not mg.tensor_type("r").static
    assert mg.tensor_bytes("r") == 3 * 4
