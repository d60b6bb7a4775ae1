"""``hetero-solve profile``: per-node times measured on both runtimes of this machine, and
imported from the files users already have (onnxruntime's profile JSON, OpenVINO's per-layer
report), mapped back to ONNX nodes (fused kernels, layout reorders, QDQ units) for >= 95 % of
the profiler's time; bad input and Ctrl-C leave nothing written."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from conftest import ROOT, RULES
from hetero_solve.cli import main
from hetero_solve.model import load_model
from hetero_solve.profiles import measure as measure_module
from hetero_solve.times import read_profile
from openvino_quiet import import_openvino

pytestmark = pytest.mark.runtime

MODELS = ROOT / "corpus" / "models"
QDQ = MODELS / "resnet-tiny-qdq.onnx"
TWO = RULES / "runtimes" / "two-runtimes-cpu.yaml"
REPORT = ROOT / "tests" / "data" / "resnet-tiny-qdq.benchmark_app.csv"

needs_openvino = pytest.mark.skipif(import_openvino() is None,
                                    reason="OpenVINO is not installed")


def cli(capsys, *args) -> tuple[int, str, str]:
    """``hetero-solve ARGS`` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as e:
        main(["profile", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def one_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("hetero-solve: error:"), err
    return lines[0]


def ort_trace(model: Path, feeds: dict, folder: Path, runs: int = 3) -> Path:
    """A profile as a user makes one: onnxruntime's profiler on, default optimisations."""
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(folder / "ort")
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        sess.run(None, feeds)
    return Path(sess.end_profiling())


def model_runs(trace: Path) -> list[float]:
    return [e["dur"] * 1e-6 for e in json.loads(trace.read_text())
            if e.get("cat") == "Session" and e.get("name") == "model_run"]


# -- imported ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dims, shapes", [
    ("resnet-tiny-qdq", {"batch": 1}, {}),                    # QDQ units -> QLinearConv, NHWC
    ("rapidocr-cls", {}, {"x": [1, 3, 48, 192]}),             # NCHWc kernels and reorders
    ("bert-tiny-legacy", {"batch": 1, "sequence": 16}, {}),   # attention fusions
])
def test_an_onnxruntime_profile_maps_to_onnx_nodes(capsys, tmp_path, name, dims, shapes):
    model = MODELS / f"{name}.onnx"
    mg = load_model(str(model), dims=dims, shapes=shapes)
    feeds = {x: (np.random.default_rng(0).standard_normal(mg.types[x].shape).astype(np.float32)
                 if mg.types[x].elem_type == 1 else np.ones(mg.types[x].shape, np.int64))
             for x in mg.graph_inputs}
    trace = ort_trace(model, feeds, tmp_path)
    rules = tmp_path / "cpu.yaml"
    rules.write_text("version: 1\ndescription: x\ndevices:\n  - name: CPU\n    ops: {supported: "
                     "all}\n    runtime: {onnxruntime: CPUExecutionProvider}\n")
    out = tmp_path / "p.json"
    args = [model, rules, "-o", out, "--import", f"CPU={trace}"]
    args += [f"--dim={k}={v}" for k, v in dims.items()]
    args += [f"--shape={k}={','.join(map(str, v))}" for k, v in shapes.items()]
    code, stdout, err = cli(capsys, *args)
    assert code == 0, err
    cpu = read_profile(out, mg).devices["CPU"]
    assert cpu.attributed >= 0.95, cpu.spread
    assert set(cpu.node_seconds) == set(mg.names)
    # every node time from the trace, the whole run (model_run) shared out: nothing lost
    assert sum(cpu.node_seconds.values()) == pytest.approx(
        statistics.median(model_runs(trace)), rel=1e-9)
    assert cpu.total_seconds == pytest.approx(statistics.median(model_runs(trace)))
    assert cpu.part_cost is None and cpu.runtime.startswith("onnxruntime-trace:")
    assert "attributed" in stdout or "CPU" in stdout


def test_a_qdq_unit_gets_the_time_of_its_fused_kernel(capsys, tmp_path):
    mg = load_model(str(QDQ), dims={"batch": 1})
    trace = ort_trace(QDQ, {"pixel_values": np.zeros((1, 3, 224, 224), np.float32)}, tmp_path)
    rules = tmp_path / "cpu.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: CPU\n    ops: {supported: all}\n")
    code, _, err = cli(capsys, QDQ, rules, "-o", tmp_path / "p.json", "--dim", "batch=1",
                       "--import", f"CPU={trace}")
    assert code == 0, err
    times = read_profile(tmp_path / "p.json", mg).devices["CPU"].node_seconds
    convs = [v for v, op in enumerate(mg.op_types) if op == "Conv"]
    assert convs and all(times[mg.names[v]] > 0 for v in convs)
    # the activation's QuantizeLinear after each Conv runs inside the QLinearConv kernel
    after = [mg.names[v] for v, op in enumerate(mg.op_types) if op == "QuantizeLinear"
             and mg.producer.get(mg.inputs[v][0]) in convs]
    assert after and all(times[n] > 0 for n in after)


@needs_openvino
def test_an_openvino_per_layer_report_maps_to_onnx_nodes(capsys, tmp_path):
    """benchmark_app -m resnet-tiny-qdq.onnx -d CPU -ip f32 -shape pixel_values[1,3,224,224]
    -infer_precision f32 -report_type detailed_counters (OpenVINO 2026.4, this machine)."""
    mg = load_model(str(QDQ), dims={"batch": 1})
    out = tmp_path / "p.json"
    code, _, err = cli(capsys, QDQ, TWO, "-o", out, "--dim", "batch=1",
                       "--import", f"OV_CPU={REPORT}")
    assert code == 0, err
    ov = read_profile(out, mg).devices["OV_CPU"]
    assert ov.attributed >= 0.95, ov.spread
    assert sum(ov.node_seconds.values()) == pytest.approx(1.885e-3)   # the report's Total
    assert ov.runtime == f"openvino-report:{REPORT.name}"
    convs = [mg.names[v] for v, op in enumerate(mg.op_types) if op == "Conv"]
    assert all(ov.node_seconds[n] > 0 for n in convs)


def test_imported_files_that_are_not_profiles_are_one_line(capsys, tmp_path):
    rules = tmp_path / "cpu.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: CPU\n    ops: {supported: all}\n")
    out = tmp_path / "p.json"
    base = [QDQ, rules, "-o", out, "--dim", "batch=1"]
    cases = {
        "trace.json": (json.dumps([{"cat": "Node", "name": "x_kernel_time", "ts": 0,
                                    "dur": -5}]), "negative dur"),
        "empty.json": ("[]", "no Node events"),
        "report.csv": ("layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)\n"
                       "conv;EXECUTED;Convolution;jit;fast;0.1\n", "is not a number"),
        "notes.txt": ("hello", "neither an onnxruntime profile"),
    }
    for file, (text, says) in cases.items():
        (tmp_path / file).write_text(text)
        line = one_error(*cli(capsys, *base, "--import", f"CPU={tmp_path / file}")[::2])
        assert says in line and file in line, line
        assert not out.exists()
    line = one_error(*cli(capsys, *base, "--import", f"NPU={tmp_path / 'empty.json'}")[::2])
    assert "no device 'NPU'" in line
    line = one_error(*cli(capsys, *base, "--import", "CPU")[::2])
    assert "expected DEVICE=FILE" in line


# -- measured ----------------------------------------------------------------------------------

@needs_openvino
def test_profile_measures_both_runtimes(capsys, tmp_path):
    model = MODELS / "resnet-tiny-legacy.onnx"
    mg = load_model(str(model), dims={"batch": 1})
    out = tmp_path / "p.json"
    code, stdout, err = cli(capsys, model, TWO, "-o", out, "--dim", "batch=1", "--repeats", "3",
                            "--warmup", "1", "--threads", "1")
    assert code == 0, err
    assert "OV_CPU" in stdout and "ORT_CPU" in stdout and f"written: {out}\n" in stdout
    profile = read_profile(out, mg)
    assert list(profile.devices) == ["OV_CPU", "ORT_CPU"]
    # the settings both runtimes ran with, as run will apply them
    assert profile.execution["threads"] == 1 and profile.execution["spinning"] == "stop"
    assert profile.execution["onnxruntime"]["session.force_spinning_stop"] == "1"
    for name, d in profile.devices.items():
        assert d.runtime == {"OV_CPU": "openvino:CPU",
                             "ORT_CPU": "onnxruntime:CPUExecutionProvider"}[name]
        assert d.attributed >= 0.95, (name, d.spread)
        assert set(d.node_seconds) == set(mg.names) and d.repeats == 3 and d.warmup == 1
        assert 0 < d.part_cost < d.total_seconds and d.switch_cost >= 0
        # the whole model in one part: its nodes and one part cost are the measured run
        assert sum(d.node_seconds.values()) + d.part_cost + d.switch_cost == \
            pytest.approx(d.total_seconds)
        convs = [mg.names[v] for v, op in enumerate(mg.op_types) if op == "Conv"]
        assert all(d.node_seconds[n] > 0 for n in convs)
        # what a cut costs, measured on a cut of this model; how far a run moves
        assert d.link is not None and d.link["latency"] == d.tensor_cost
        assert d.link["bandwidth"] is None or d.link["bandwidth"] > 0
        assert d.total_spread[0] <= d.total_seconds <= d.total_spread[1]


def test_a_device_this_machine_lacks_is_named_and_the_rest_measured(capsys, tmp_path):
    model = MODELS / "bert-tiny-legacy.onnx"
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ndevices:\n"
                     "  - name: GPU\n    ops: {supported: all}\n"
                     "    runtime: {onnxruntime: [CUDAExecutionProvider, CPUExecutionProvider]}\n"
                     "  - name: NPU\n    ops: {supported: [MatMul]}\n"
                     "  - name: CPU\n    ops: {supported: all}\n"
                     "    runtime: {onnxruntime: CPUExecutionProvider}\n")
    out = tmp_path / "p.json"
    dims = ["--dim", "batch=1", "--dim", "sequence=8"]
    code, _, err = cli(capsys, model, rules, "-o", out, *dims, "--repeats", "2", "--warmup",
                       "0")
    assert code == 0, err
    assert "not measured: GPU: CUDAExecutionProvider is not in this onnxruntime" in err
    assert "not measured: NPU: no runtime: key" in err
    assert list(read_profile(out).devices) == ["CPU"]
    # nothing measurable: one line naming each device, nothing written
    out.unlink()
    code, _, err = cli(capsys, model, rules, "-o", out, *dims, "--device", "GPU", "--device",
                       "NPU")
    line = one_error(code, err)
    assert "no device can be measured here: GPU: CUDAExecutionProvider" in line
    assert "NPU: no runtime: key" in line and not out.exists()
    # an existing file is kept unless --force; a symbolic dim left open is named
    out.write_text("mine")
    assert "exists: pass --force" in one_error(*cli(capsys, model, rules, "-o", out)[::2])
    assert out.read_text() == "mine"
    line = one_error(*cli(capsys, model, rules, "-o", tmp_path / "q.json", "--force")[::2])
    assert "give its dims" in line and not (tmp_path / "q.json").exists()


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(measure_module.ort_profile, "measure", interrupted)
    rules = tmp_path / "cpu.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: CPU\n    ops: {supported: all}\n"
                     "    runtime: {onnxruntime: CPUExecutionProvider}\n")
    out = tmp_path / "p.json"
    code, _, err = cli(capsys, QDQ, rules, "-o", out, "--dim", "batch=1")
    assert code == 130 and err.strip() == "hetero-solve: interrupted"
    assert list(tmp_path.iterdir()) == [rules]


# -- fused kernels: the time goes to the node that does the arithmetic --------------------------

CORPUS_PROFILED = ["resnet-tiny-legacy", "mobilenetv2-tiny-legacy", "resnet-tiny-qdq",
                   "rapidocr-cls", "bert-tiny-legacy", "t5-tiny-legacy",
                   "whisper-encoder-tiny-legacy", "qwen2-kv-tiny-legacy", "silero-vad-v6-fw"]


@needs_openvino
@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS_PROFILED)
def test_no_convolution_or_product_gets_no_time_while_its_partners_do(name):
    """Issue 36 item 2: OpenVINO names a fused layer after a partner (a ``Mul`` after the
    ``MatMul`` it scales) and onnxruntime after its first node; every convolution and matrix
    product with arithmetic gets time on both runtimes, and most of its kernel's."""
    import warnings
    import hetero_solve as hs
    from corpus import truth as C
    from hetero_solve.profiles.attribute import HEAVY_OPS
    from hetero_solve.profiles.measure import measure, plan
    from hetero_solve.roofline import node_flops
    entry = C.load_corpus()[name]
    path = C.model_file(name, entry)
    rules = hs.load_rules(TWO)
    mg = load_model(str(path), dims=dict(entry.get("dims") or {}),
                    shapes={k: list(v) for k, v in (entry.get("shapes") or {}).items()} or None,
                    rule_dims=rules.dims)
    ranges = {k: tuple(v) for k, v in (entry.get("ranges") or {}).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = measure(mg, str(path), plan(rules.devices).targets, warmup=1, repeats=2,
                          ranges=ranges)
    folded = set(mg.folded)
    heavy = [v for v, op in enumerate(mg.op_types)
             if op in HEAVY_OPS and v not in folded and node_flops(mg, v) > 0]
    assert heavy
    for device, d in profile.devices.items():
        zero = [mg.names[v] for v in heavy if d.node_seconds[mg.names[v]] <= 0]
        assert not zero, (device, zero[:5], d.spread)
        assert set(d.shares) == {"measured", "fused", "spread"}
        assert sum(d.shares.values()) == pytest.approx(1.0, abs=1e-6)
