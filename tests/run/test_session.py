"""``hetero_solve.Session`` (issue 25): an OUT_DIR loaded once and run like an onnxruntime
``InferenceSession``, on the real-model corpus (``corpus/``, models nobody here wrote).

Every committed model runs under **one** rule profile here, rotating through ``rules/`` in
model order so that every profile is used (the whole model x profile matrix takes ~5 minutes
of part loading on this machine; ``tests/test_real_models.py`` runs every pair through
:func:`~hetero_solve.run.session.run_partitioned`, which is a ``Session`` too).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.errors import HeteroSolveWarning
from hetero_solve.export import write_result
from hetero_solve.run.common import RunError
from hetero_solve.run.onnxruntime import run_original
from hetero_solve.run.verify import compare

from conftest import RULES, rule_profiles
from corpus import truth as C

pytestmark = pytest.mark.corpus

CORPUS = C.load_corpus()
COMMITTED = [n for n, e in CORPUS.items() if e.get("stored") == "committed"]
PROFILES = rule_profiles()
#: Model i runs under profile i + 3: every profile is used, and the rows with 100+ parts (an
#: OCR model on the FPGA profile) that make loading slow are not (187 parts in all, not 307).
OFFSET = 3
ROTATION = [(name, PROFILES[(i + OFFSET) % len(PROFILES)]) for i, name in enumerate(COMMITTED)]


def _solve(name: str, rules, out):
    entry = CORPUS[name]
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes"):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    result = hs.solve(str(C.model_file(name, entry)), str(rules), engine="heuristic", **kw)
    return write_result(result, out, annotated=False, dots=False)


class _Counting:
    """Counts ``onnxruntime.InferenceSession`` constructions while installed."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = ort.InferenceSession
        counter = self

        class Counted(real):
            def __init__(self, *args, **kwargs):
                counter.count += 1
                super().__init__(*args, **kwargs)
        monkeypatch.setattr(ort, "InferenceSession", Counted)


@pytest.mark.parametrize("name,rules", [pytest.param(n, r, id=f"{n}-{r.stem}")
                                        for n, r in ROTATION])
def test_session_reproduces_the_original_and_loads_once(name, rules, tmp_path, monkeypatch):
    out = _solve(name, rules, tmp_path / "out")
    path = C.model_file(name, CORPUS[name])
    model = onnx.load(str(path), load_external_data=False)
    feeds = C.random_feeds(model, CORPUS[name], seed=0)
    want = run_original(str(path), feeds)
    counting = _Counting(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeteroSolveWarning)   # providers this machine lacks
        sess = hs.Session(out)
    loaded = counting.count
    manifest = sess.manifest
    assert loaded == len(manifest["partitions"]) + (1 if manifest.get("direct_outputs") else 0)
    assert [i.name for i in sess.get_inputs()] == \
        [x for x in manifest["graph_inputs"] if x in {i.name for i in sess.get_inputs()}]
    assert [o.name for o in sess.get_outputs()] == [o.name for o in model.graph.output]

    feed = {k: v for k, v in feeds.items() if k in manifest["graph_inputs"]}
    first = sess.run(None, feed)
    for o, got in zip(model.graph.output, first):
        diff = compare(o.name, got, want[o.name])
        assert diff.ok, diff.as_dict()
    assert [p.id for p in sess.last_run] == sorted(p["id"] for p in manifest["partitions"])
    second = sess.run(None, feed)
    assert counting.count == loaded, "a second run created sessions again"
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


# -- small models: the mechanics ---------------------------------------------------------------

RULES_2 = {"version": 1, "devices": [
    {"name": "ACC", "ops": {"supported": ["Relu", "Add"]},
     "runtime": {"onnxruntime": ["CUDAExecutionProvider", "CPUExecutionProvider"]}},
    {"name": "CPU", "ops": {"supported": "all"}}]}


def _branches(shape=(2, 3)) -> onnx.ModelProto:
    """x -> Relu -> Neg -> Relu -> y1 (3 parts: ACC, CPU, ACC) and x -> Add(x, x) -> y2."""
    x = h.make_tensor_value_info("x", T.FLOAT, list(shape))
    ys = [h.make_tensor_value_info(n, T.FLOAT, list(shape)) for n in ("y1", "y2")]
    nodes = [h.make_node("Relu", ["x"], ["a"], name="r1"), h.make_node("Neg", ["a"], ["b"], name="neg"),
             h.make_node("Relu", ["b"], ["y1"], name="r2"), h.make_node("Add", ["x", "x"], ["y2"], name="add")]
    return h.make_model(h.make_graph(nodes, "g", [x], ys), opset_imports=[h.make_opsetid("", 17)])


def _write(tmp_path, model, rules=RULES_2, **kw):
    import yaml
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(rules))
    result = hs.solve(str(tmp_path / "m.onnx"), str(tmp_path / "r.yaml"), engine="heuristic", **kw)
    return write_result(result, tmp_path / "out")


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(),
                    reason="CUDA is installed: nothing falls back")
def test_a_missing_provider_falls_back_to_cpu_with_a_warning(tmp_path):
    out = _write(tmp_path, _branches())
    with pytest.warns(HeteroSolveWarning, match="ACC: CUDAExecutionProvider is not available.*"
                                                "fall back to CPUExecutionProvider"):
        sess = hs.Session(out)
    assert len(sess.warnings) == 1                  # once per device, not once per part
    assert all(r.providers == ["CPUExecutionProvider"] for r in sess.parts)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    y1, y2 = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y1, np.maximum(-np.maximum(x, 0), 0))
    np.testing.assert_array_equal(y2, x + x)


def test_only_the_parts_an_output_needs_run_and_values_pass_without_copies(tmp_path):
    out = _write(tmp_path, _branches())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeteroSolveWarning)
        sess = hs.Session(out)
    made, fed = {}, {}
    for runner in sess.parts:                        # record what each part returns and gets
        def spy(feeds, run=runner.run):
            fed.update(feeds)
            values = run(feeds)
            made.update(values)
            return values
        runner.run = spy
    x = np.ones((2, 3), np.float32)
    y2, = sess.run(["y2"], {"x": x})
    np.testing.assert_array_equal(y2, 2 * x)
    needs_y2 = {p["id"] for p in sess.manifest["partitions"] if "y2" in p["outputs"]}
    assert {p.id for p in sess.last_run} == needs_y2
    sess.run(None, {"x": x})
    between = [t for t in fed if t in made]          # tensors one part made and another read
    assert between and all(fed[t] is made[t] for t in between)
    with pytest.raises(RunError, match="unknown output 'nope'"):
        sess.run(["nope"], {"x": x})
    with pytest.raises(RunError, match="needs 'x', a graph input not given"):
        sess.run(None, {})


def test_per_node_times_on_request(tmp_path):
    out = _write(tmp_path, _branches())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeteroSolveWarning)
        plain = hs.Session(out)
        profiled = hs.Session(out, profile=True, optimization="disabled")
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        plain.run(None, {"x": x})
        profiled.run(None, {"x": x})
    assert plain.node_times() == []
    times = profiled.node_times()
    assert {t.node for t in times} == {"r1", "neg", "r2", "add"}
    assert all(t.calls == 3 and t.microseconds >= 0 for t in times)
    part_of = {n: p["id"] for p in profiled.manifest["partitions"] for n in p["node_names"]}
    assert all(part_of[t.node] == t.part for t in times)


def test_shapes_of_anonymous_dims_on_run_and_verify(tmp_path):
    """An input with an anonymous dim needs its whole shape: ``--shape``, or by default the
    shapes the solve used (``partition.json``'s ``input_shapes``)."""
    import json
    from typer.testing import CliRunner
    from hetero_solve.cli import app
    out = _write(tmp_path, _branches(shape=(None, 3)), shapes={"x": [4, 3]})
    runner = CliRunner()
    manifest = json.loads((out / "partition.json").read_text())
    manifest.pop("input_shapes", None)                   # as written before the key existed
    (out / "partition.json").write_text(json.dumps(manifest))
    res = runner.invoke(app, ["run", str(out), "--no-save"])
    assert res.exit_code == 2 and "dimension 0 has no size" in res.stderr
    res = runner.invoke(app, ["run", str(out), "--no-save", "--shape", "x=4,3", "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["outputs"]["y1"]["shape"] == [4, 3]
    res = runner.invoke(app, ["verify", str(tmp_path / "m.onnx"), str(out), "--shape", "x=4,3"])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(app, ["run", str(out), "--no-save", "--shape", "x=4,3,1"])
    assert res.exit_code == 2 and "rank 2" in res.stderr

    manifest["input_shapes"] = {"x": [4, 3]}            # the solve's shapes, reused by default
    (out / "partition.json").write_text(json.dumps(manifest))
    res = runner.invoke(app, ["verify", str(tmp_path / "m.onnx"), str(out), "--json"])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(app, ["run", str(out), "--no-save", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["inputs"]["x"]["shape"] == [4, 3]
    res = runner.invoke(app, ["run", str(out), "--no-save", "--shape", "x=5,3"])
    assert res.exit_code == 2 and "built for x=4,3" in res.stderr


def test_io_binding_passes_ortvalues_between_parts(tmp_path):
    """What a device provider's parts use (forced here on the CPU): ``OrtValue`` objects
    handed from part to part as they are, the same outputs."""
    out = _write(tmp_path, _branches())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeteroSolveWarning)
        plain, bound = hs.Session(out), hs.Session(out)
    made, fed = {}, {}
    for runner in bound.parts:
        runner.binding, runner._binding = True, runner.session.io_binding()

        def spy(feeds, run=runner.run):
            fed.update(feeds)
            values = run(feeds)
            made.update(values)
            return values
        runner.run = spy
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    for a, b in zip(plain.run(None, {"x": x}), bound.run(None, {"x": x})):
        np.testing.assert_array_equal(a, b)
    between = [t for t in fed if t in made]
    assert between and all(fed[t] is made[t] and isinstance(made[t], ort.OrtValue)
                           for t in between)


def test_provider_options_from_the_rule_file_reach_onnxruntime(tmp_path, monkeypatch):
    rules = {"version": 1, "devices": [
        {"name": "ACC", "ops": {"supported": ["Relu", "Add"]},
         "runtime": {"onnxruntime": "CPUExecutionProvider",
                     "onnxruntime_options": {"CPUExecutionProvider": {"use_arena": False},
                                             "CUDAExecutionProvider": {"device_id": 1}}}},
        {"name": "CPU", "ops": {"supported": "all"}}]}
    out = _write(tmp_path, _branches(), rules=rules)
    seen = []
    real = ort.InferenceSession

    class Spy(real):
        def __init__(self, path, opts=None, providers=None, **kw):
            seen.append((str(path), providers))
            super().__init__(path, opts, providers=providers, **kw)
    monkeypatch.setattr(ort, "InferenceSession", Spy)
    sess = hs.Session(out)
    by_file = dict(seen)
    for spec in sess.specs:
        want = ([("CPUExecutionProvider", {"use_arena": "0"})] if spec.device == "ACC"
                else ["CPUExecutionProvider"])
        assert by_file[str(spec.file)] == want, spec.device
    import yaml
    rules["devices"][0]["runtime"]["onnxruntime_options"] = {"CPUExecutionProvider": [1]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(rules))
    with pytest.raises(hs.RuleError, match=r"runtime\.onnxruntime_options\.CPUExecutionProvider"):
        hs.load_rules(str(tmp_path / "bad.yaml"))


def test_session_checks_input_shapes_like_the_command(tmp_path):
    """A partition built for x=4,3 (the solve's --shape) fed x=5,3: the library says so with a
    typed error naming the shape it was built for, and no command-line flag; the command adds
    its own hint (issue 31)."""
    from typer.testing import CliRunner
    from hetero_solve.cli import app
    out = _write(tmp_path, _branches(shape=(None, 3)), shapes={"x": [4, 3]})
    sess = hs.Session(out)
    with pytest.raises(hs.InputShapeError) as e:
        sess.run(None, {"x": np.zeros((5, 3), np.float32)})
    assert isinstance(e.value, RunError) and isinstance(e.value, hs.HeteroSolveError)
    assert "built for x=4,3" in str(e.value) and "5,3" in str(e.value)
    assert "--" not in str(e.value)
    assert (e.value.name, e.value.shape, e.value.dim) == ("x", (5, 3), 0)
    y1, y2 = sess.run(None, {"x": np.ones((4, 3), np.float32)})     # the right shape runs
    assert y2.shape == (4, 3)
    np.save(tmp_path / "x.npy", np.zeros((5, 3), np.float32))
    res = CliRunner().invoke(app, ["run", str(out), "--no-save", "--input",
                                   f"x={tmp_path / 'x.npy'}"])
    assert res.exit_code == 2 and "built for x=4,3" in res.stderr
    assert "--shape x=5,3" in res.stderr                            # the command's hint


def test_get_inputs_gives_the_shapes_the_partition_accepts(tmp_path):
    """A partition built for x=4,3 (the solve's whole shape of an anonymous dim) and one built
    for dim n=2 (a named dim): ``get_inputs()`` reports the sizes ``run`` accepts, not the
    declared ``?`` or ``n`` (issue 39 item 4), and a feed of that shape runs."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    out = _write(tmp_path / "a", _branches(shape=(None, 3)), shapes={"x": [4, 3]})
    sess = hs.Session(out)
    (x,) = sess.get_inputs()
    assert (x.name, x.type, x.shape) == ("x", "tensor(float)", (4, 3))
    y1, _ = sess.run(None, {"x": np.ones(x.shape, np.float32)})
    assert y1.shape == (4, 3)
    named = _write(tmp_path / "b", _branches(shape=("n", 3)), dims={"n": 2})
    assert [i.shape for i in hs.Session(named).get_inputs()] == [(2, 3)]
    # a dim the partition leaves open stays as the parts declare it
    open_ = _write(tmp_path / "c", _branches(shape=("n", 3)))
    assert [i.shape for i in hs.Session(open_).get_inputs()] == [("n", 3)]
