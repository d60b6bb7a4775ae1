"""``rules from-onnxruntime`` and ``rules from-openvino``: rule files asked of the runtime.

Probing every op type takes a minute on OpenVINO; the tests probe the op types of one
committed corpus model (``--model``), which is what a user checking one model does too."""

from __future__ import annotations


import onnx
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper

import hetero_solve as hs
from conftest import ROOT
from openvino_quiet import import_openvino
from hetero_solve.cli import main
from hetero_solve.rules.from_runtime import (DTYPES, ask_runtime, onnxruntime_taker,
                                              op_schemas, probes, rule_file)

pytestmark = pytest.mark.runtime

CORPUS = ROOT / "corpus" / "models"


def _cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _op_types(model_path) -> set[str]:
    found, todo = set(), [onnx.load(str(model_path), load_external_data=False).graph]
    while todo:
        graph = todo.pop()
        for node in graph.node:
            found.add(node.op_type)
            for attr in node.attribute:
                todo.extend([attr.g] if attr.HasField("g") else [])
    return found


def test_probes_are_built_for_nearly_every_onnx_op():
    schemas = op_schemas(17)
    built = [s.name for s in schemas
             if any(next(probes(s, d, 17), None) is not None for d in DTYPES)]
    # the ops left are those on sequences, optionals, strings and Loop/Scan bodies
    assert len(built) >= 0.88 * len(schemas), sorted({s.name for s in schemas} - set(built))


def test_a_refused_element_type_becomes_a_dtypes_condition():
    def takes(models):   # a runtime that refuses every float16 probe
        return [m.graph.input[0].type.tensor_type.elem_type != TensorProto.FLOAT16
                for m in models]
    found = ask_runtime("fake", "DEV", takes, ops=["Relu", "Sigmoid"])
    ops = found.ops_section()
    assert ops["supported"] == ["Constant", "Relu", "Sigmoid"]
    assert "float16" not in ops["when"]["Relu"]["dtypes"]
    assert "float32" in ops["when"]["Relu"]["dtypes"]
    rules = rule_file(found, "DEV", fallback="CPU")
    assert [d["name"] for d in rules["devices"]] == ["DEV", "CPU"]


def test_from_onnxruntime_cpu_rules_solve_a_corpus_model(tmp_path, capsys):
    model = CORPUS / "bert-tiny-legacy.onnx"
    out = tmp_path / "ort-cpu.yaml"
    code, _, err = _cli(["rules", "from-onnxruntime", "CPUExecutionProvider", "--model",
                         str(model), "-o", str(out)], capsys)
    assert code == 0, err
    data = yaml.safe_load(out.read_text())
    assert data["devices"][0]["runtime"] == {"onnxruntime": "CPUExecutionProvider"}
    assert _op_types(model) <= set(data["devices"][0]["ops"]["supported"])
    code, _, err = _cli(["rules", "check", str(out)], capsys)
    assert code == 0, err
    # onnxruntime's CPU provider runs the whole model, so its rules take every node: one part
    result = hs.solve(model, out)
    assert result.metrics.partitions == 1 and result.metrics.fallback == 0


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_rules_from_the_runtime_solve_a_loop_without_a_fallback(runtime, tmp_path, capsys):
    """Loop, If and the ops in their bodies are probed (a probe with a body graph), so the
    CPU's rules take the whole of examples/control_flow.onnx: no fallback device needed."""
    if runtime == "openvino" and import_openvino() is None:
        pytest.skip("OpenVINO is not installed: pip install 'hetero-solve[openvino]'")
    model = ROOT / "examples" / "control_flow.onnx"
    out = tmp_path / "cpu.yaml"
    args = ["rules", "from-onnxruntime", "CPUExecutionProvider"] if runtime == "onnxruntime" \
        else ["rules", "from-openvino", "CPU"]
    code, _, err = _cli([*args, "--model", str(model), "-o", str(out)], capsys)
    assert code == 0, err
    assert "not probed" not in err
    assert {"Loop", "If"} <= set(yaml.safe_load(out.read_text())["devices"][0]["ops"]["supported"])
    result = hs.solve(model, out)
    assert result.metrics.partitions == 1 and result.metrics.fallback == 0


def test_sequence_scan_and_contrib_ops_are_probed_or_read_from_the_registry(capsys):
    """Scan and sequence ops get a probe (a chain around the op); com.microsoft ops, which
    onnx cannot build a probe for, are taken where onnxruntime's kernel registry has them
    for the provider, and named in the file's header."""
    asked = ["Scan", "SequenceAt", "SplitToSequence", "OptionalHasElement",
             "com.microsoft.Gelu", "com.microsoft.NoSuchOp"]
    code, text, err = _cli(["rules", "from-onnxruntime", "CPUExecutionProvider", "--ops",
                            ",".join(asked)], capsys)
    assert code == 0, err
    supported = yaml.safe_load(text)["devices"][0]["ops"]["supported"]
    assert set(asked[:5]) <= set(supported) and "com.microsoft.NoSuchOp" not in supported
    assert "kernel registry" in text and "com.microsoft.Gelu" in text.split("version:")[0]
    # what could not be probed is named, with the way round it
    assert "not probed" in err and "com.microsoft.NoSuchOp" in err and "--fallback" in err


def test_a_contrib_op_model_solves_on_the_cpu_rules(tmp_path, capsys):
    """A model with a com.microsoft op (FusedMatMul) runs on onnxruntime's CPU provider; the
    rules asked of it take it without a fallback."""
    graph = helper.make_graph(
        [helper.make_node("FusedMatMul", ["a", "b"], ["c"], domain="com.microsoft", alpha=1.0),
         helper.make_node("Relu", ["c"], ["y"])], "fused",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = tmp_path / "fused.onnx"
    onnx.save(model, str(path))
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])   # it does run
    out = tmp_path / "cpu.yaml"
    code, _, err = _cli(["rules", "from-onnxruntime", "CPUExecutionProvider", "--model",
                         str(path), "-o", str(out)], capsys)
    assert code == 0, err
    result = hs.solve(path, out)
    assert result.metrics.partitions == 1 and result.metrics.fallback == 0


def test_what_the_cpu_provider_refuses_it_really_refuses():
    found = ask_runtime("onnxruntime", "CPUExecutionProvider",
                        onnxruntime_taker("CPUExecutionProvider"), ops=["Erf"])
    refused = sorted(found.refused.get("Erf", ()))
    assert refused, "expected some element type the CPU provider has no Erf kernel for"
    # an Erf node of that type, built by hand: onnxruntime cannot load it
    elem = {"float64": TensorProto.DOUBLE, "int32": TensorProto.INT32,
            "int64": TensorProto.INT64, "float16": TensorProto.FLOAT16,
            "int8": TensorProto.INT8, "uint8": TensorProto.UINT8}[refused[0]]
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"])], "erf",
                              [helper.make_tensor_value_info("x", elem, [2])],
                              [helper.make_tensor_value_info("y", elem, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(Exception, match="(?i)implementation|kernel"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", ["mobilenetv2-tiny-legacy", "silero-vad-16k-op15"])
def test_from_openvino_cpu_rules_solve_a_corpus_model(name, tmp_path, capsys):
    ov = import_openvino()
    if ov is None:
        pytest.skip("OpenVINO is not installed: pip install 'hetero-solve[openvino]'")
    model = CORPUS / f"{name}.onnx"   # silero: LSTM inside If bodies
    out = tmp_path / "ov-cpu.yaml"
    code, _, err = _cli(["rules", "from-openvino", "CPU", "--model", str(model), "--fallback",
                         "HOST", "-o", str(out)], capsys)
    assert code == 0, err
    code, _, err = _cli(["rules", "check", str(model), str(out), "--json"], capsys)
    assert code == 0, err
    result = hs.solve(model, out)
    assert result.metrics.fallback == 0 and result.metrics.partitions == 1
    if name.startswith("mobilenet"):
        # OpenVINO's own answer for the whole model agrees: its CPU takes every op of it
        core = ov.Core()
        real = core.read_model(str(model))
        answer = core.query_model(real, "CPU")
        assert all(answer.get(op.get_friendly_name()) == "CPU"
                   for op in real.get_ordered_ops())


def test_errors_are_one_line(tmp_path, capsys):
    code, _, err = _cli(["rules", "from-onnxruntime", "NoSuchExecutionProvider"], capsys)
    assert code == 2 and err.count("\n") == 1 and "NoSuchExecutionProvider" in err
    out = tmp_path / "x.yaml"
    out.write_text("keep me")
    code, _, err = _cli(["rules", "from-onnxruntime", "CPUExecutionProvider", "--ops", "Relu",
                         "-o", str(out)], capsys)
    assert code == 2 and "--force" in err and out.read_text() == "keep me"
    code, text, _ = _cli(["rules", "from-onnxruntime", "CPUExecutionProvider", "--ops",
                          "Relu"], capsys)
    assert code == 0 and yaml.safe_load(text)["devices"][0]["ops"]["supported"] == \
        ["Constant", "Relu"]


def test_no_thread_is_left_behind():
    """The OpenVINO tests leave the process single-threaded (the loader forks only then)."""
    import threading
    assert threading.active_count() == 1, threading.enumerate()
