"""The profiles in rules/: each loads, names real ops and providers, and gives a valid partition
on every example; and each shows the case it was written for."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnx.defs
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.export import affinity_map
from hetero_solve.model import load_model
from hetero_solve.rules.check import query
from hetero_solve.validate import validate

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "rules").glob("*.yaml"))
EXAMPLE_DIMS = {"resnet_like": {"batch": 1}, "transformer_encoder": {"batch": 1, "seq": 16},
                "control_flow": {"seq": 5, "batch": 2}, "seed000": {}}
ONNX_OPS = {s.name for s in onnx.defs.get_all_schemas_with_history()
            if s.domain in ("", "ai.onnx.ml")}

_solved: dict[tuple[str, str], hs.Result] = {}


def solved(profile: str, example: str) -> hs.Result:
    """One heuristic solve per (profile, example), shared by the tests of this module."""
    key = (profile, example)
    if key not in _solved:
        _solved[key] = hs.solve(ROOT / "examples" / f"{example}.onnx", ROOT / "rules" / profile,
                                dims=EXAMPLE_DIMS[example], engine="heuristic")
    return _solved[key]


def placement(result: hs.Result) -> list[tuple[str, list[str]]]:
    """(device, sorted node names) per part."""
    p, sol = result.problem, result.solution
    return [(p.devices[sol.part_device[k]].name, sorted(p.names[v] for v in nodes))
            for k, nodes in enumerate(result.parts())]


def device_of(result: hs.Result) -> dict[str, str]:
    return affinity_map(result.problem, result.solution)


# -- every profile --------------------------------------------------------------------------

def test_the_library_has_the_profiles_the_issue_asks_for():
    names = {p.name for p in PROFILES}
    assert {"npu-static.yaml", "gpu-cpu.yaml", "multi-card.yaml", "fpga-cpu.yaml",
            "seed000.yaml"} <= names
    assert len(names) >= 5


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_profile_loads_and_names_real_ops_and_providers(path):
    rules = hs.load_rules(path)
    assert rules.description, "a profile says what it is"
    text = path.read_text()
    assert text.lstrip().startswith("#"), "a profile opens with a comment saying where it comes from"
    known_providers = set(ort.get_all_providers())
    for d in rules.devices:
        named = set(d.supported or ()) | set(d.unsupported) | set(d.when)
        assert named <= ONNX_OPS, f"{d.name}: not ONNX ops: {sorted(named - ONNX_OPS)}"
        wanted = d.runtime.get("onnxruntime")
        assert wanted, f"{d.name}: no runtime: {{onnxruntime: ...}}"
        wanted = [wanted] if isinstance(wanted, str) else wanted
        assert set(wanted) <= known_providers, f"{d.name}: unknown providers {wanted}"
        assert "CPUExecutionProvider" in wanted or d.runtime, d.name


@pytest.mark.parametrize("example", sorted(EXAMPLE_DIMS))
@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_profile_gives_a_valid_partition_on_every_example(path, example):
    result = solved(path.name, example)
    assert validate(result.problem, result.solution) == []
    placed = sorted(v for part in result.parts() for v in part)
    assert placed == list(range(result.problem.n))
    assert result.metrics.partitions >= 1


# -- what each profile shows ----------------------------------------------------------------

def test_seed000_profile_gives_the_seeds_answer():
    parts = placement(solved("seed000.yaml", "seed000"))
    assert sorted(parts) == [("ACCEL", ["1", "2"]), ("ACCEL", ["3", "5", "6", "7"]), ("CPU", ["4"])]


def test_npu_static_falls_back_on_the_ops_it_lacks():
    result = solved("npu-static.yaml", "resnet_like")
    devices = device_of(result)
    assert [n for n, d in devices.items() if d == "CPU"] == ["layer2/block0/se/gate"]  # HardSigmoid
    assert result.metrics.partitions == 3 and result.metrics.fallback == 0
    npu = result.rules.devices[0]
    assert npu.memory == 8 * 2**20 and npu.static_shapes and npu.enforce_values
    # the transformer: the embedding Gather and GELU's Erf go to the CPU, the rest to the NPU
    devices = device_of(solved("npu-static.yaml", "transformer_encoder"))
    cpu = sorted(n for n, d in devices.items() if d == "CPU")
    assert cpu == ["embeddings/word", "encoder/layer.0/ffn/gelu/Erf",
                   "encoder/layer.1/ffn/gelu/Erf", "encoder/output"]


def test_npu_static_refuses_dynamic_shapes():
    """Without seq, the transformer's shapes are symbolic: the NPU refuses every node."""
    rules = hs.load_rules(ROOT / "rules" / "npu-static.yaml")
    mg = load_model(ROOT / "examples" / "transformer_encoder.onnx", dims=rules.dims)
    report = query(rules, mg)
    npu = report.devices[0]
    assert npu.preferred == 0
    assert any("non-static shape" in r.reason and "NPU needs static shapes" in r.reason
               for r in npu.refuses)


def test_gpu_cpu_is_priority_fallback():
    result = solved("gpu-cpu.yaml", "control_flow")
    devices = device_of(result)
    assert devices.pop("rnn/Loop") == "CPU" and devices.pop("gate/If") == "CPU"
    assert set(devices.values()) == {"GPU"}
    assert placement(solved("gpu-cpu.yaml", "resnet_like"))[0][0] == "GPU"
    assert solved("gpu-cpu.yaml", "resnet_like").metrics.partitions == 1
    assert not result.rules.devices[0].enforce_values


def test_multi_card_spreads_a_model_over_cards_within_their_memory():
    result = solved("multi-card.yaml", "resnet_like")
    card = result.rules.devices[0]
    assert (card.instances, card.memory) == (4, 100_000)
    used = {inst: b for (d, inst), b in result.metrics.instance_memory.items() if d == 0 and b}
    assert len(used) >= 2, "180 KB of weights cannot fit one 100 KB card"
    assert max(used.values()) <= 100_000
    devices = device_of(result)
    assert {n for n, d in devices.items() if d == "Interpreter"} == {
        "layer2/block0/se/pool", "head/pool"}                 # GlobalAveragePool: Glow's AvgPool
    # a model that fits one card stays on one card
    assert placement(solved("multi-card.yaml", "transformer_encoder")) == [
        ("CARD", sorted(solved("multi-card.yaml", "transformer_encoder").problem.names))]


def _conv_model(dtype: int, **attrs) -> onnx.ModelProto:
    np_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    w = onnx.numpy_helper.from_array(__import__("numpy").ones((4, 4, 3, 3), np_type), "w")
    node = h.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], **attrs)
    relu = h.make_node("Relu", ["c"], ["y"], name="relu")
    graph = h.make_graph([node, relu], "g", [h.make_tensor_value_info("x", dtype, [1, 4, 8, 8])],
                         [h.make_tensor_value_info("y", dtype, [1, 4, 8, 8])], initializer=[w])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("dtype, attrs, reason", [
    (T.FLOAT, {"pads": [1, 1, 1, 1]}, None),
    (T.FLOAT16, {"pads": [1, 1, 1, 1]}, None),
    (T.FLOAT, {"auto_pad": "SAME_UPPER"},
     "attribute auto_pad='SAME_UPPER', FPGA needs 'NOTSET' (ops.when.Conv)"),
    (T.DOUBLE, {"pads": [1, 1, 1, 1]},
     "input 0 'x' is float64, FPGA takes float32, float16 (ops.when.Conv.dtypes)"),
])
def test_fpga_conditions_depend_on_attributes_and_dtypes(dtype, attrs, reason):
    rules = hs.load_rules(ROOT / "rules" / "fpga-cpu.yaml")
    report = query(rules, load_model(_conv_model(dtype, **attrs)))
    conv = next(n for n in report.nodes if n.name == "conv")
    assert conv.refusals.get("FPGA") == reason
    assert conv.preferred == ("FPGA" if reason is None else "CPU")


def test_fpga_on_the_examples():
    devices = device_of(solved("fpga-cpu.yaml", "resnet_like"))
    assert devices["head/softmax"] == "FPGA"                   # axis 1: the softmax unit
    assert devices["layer2/block0/se/gate"] == "CPU"           # HardSigmoid: not in the bitstream
    devices = device_of(solved("fpga-cpu.yaml", "transformer_encoder"))
    assert devices["encoder/layer.0/attention/Softmax"] == "CPU"   # axis -1
    assert devices["encoder/layer.0/attention/scores"] == "CPU"    # 4-D MatMul
    rules = hs.load_rules(ROOT / "rules" / "fpga-cpu.yaml")
    assert rules.objective.weights == {"fallback": 1, "partitions": 10}


def test_npu_gpu_cpu_pins_the_head_to_the_cpu():
    result = solved("npu-gpu-cpu.yaml", "resnet_like")
    devices = device_of(result)
    assert {n for n, d in devices.items() if d == "CPU"} == {
        "head/pool", "head/flatten", "head/fc", "head/softmax"}
    assert devices["layer2/block0/se/gate"] == "GPU"       # second in priority for HardSigmoid
    assert devices["stem/conv"] == "NPU"
    # a model without head/* nodes: the glob is a warning, not an error
    warnings = solved("npu-gpu-cpu.yaml", "seed000").warnings
    assert any('affinity["head/*"]: the glob matches no node' in w for w in warnings)


def test_host_cpus_ignore_value_inputs():
    """Without --dim seq the transformer's shape chains stay in the model; the NPU refuses the
    dynamic shapes, and the CPU, which ignores value inputs, runs it all in one part."""
    result = hs.solve(ROOT / "examples" / "transformer_encoder.onnx", ROOT / "rules" / "npu-static.yaml",
                      engine="heuristic")
    assert any(result.problem.value_pred)                  # Reshape <- Concat edges exist
    assert placement(result) == [("CPU", sorted(result.problem.names))]
    assert all(not d.enforce_values for d in hs.load_rules(ROOT / "rules" / "gpu-cpu.yaml").devices)
