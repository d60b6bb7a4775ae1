"""onnxruntime's annotation-based partitioning (issue 25): ``model.annotated.onnx`` tags every
node with ``layer_ann`` and ``partition.json`` gives the ``session.layer_assignment_settings``
that maps those tags to the execution providers the rule file names; onnxruntime's own report
(``session.record_ep_graph_assignment_info``, ``get_provider_graph_assignment_info()``) puts
every node on the provider the answer says, for the providers installed here.  Skipped, with
the version needed, where onnxruntime lacks the feature.

The corpus models (nobody here wrote them) run under one rule profile each, rotating through
``rules/`` as in ``tests/run/test_session.py``.
"""

from __future__ import annotations

import json

import onnx
import onnxruntime as ort
import pytest

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.export.annotated import (LAYER_KEY, LAYER_SETTINGS, layer_annotations,
                                           layer_assignment_settings)
from hetero_solve.run.onnxruntime import (LAYER_ASSIGNMENT_NEEDS, provider_assignment,
                                          supports_layer_assignment)

from conftest import EXAMPLES, RULES, rule_profiles
from corpus import truth as C

CORPUS = C.load_corpus()
COMMITTED = [n for n, e in CORPUS.items() if e.get("stored") == "committed"]
PROFILES = rule_profiles()
CASES = [pytest.param(str(C.model_file(n, CORPUS[n])), PROFILES[i % len(PROFILES)],
                      dict(CORPUS[n].get("dims") or {}),
                      {k: list(v) for k, v in (CORPUS[n].get("shapes") or {}).items()},
                      id=f"{n}-{PROFILES[i % len(PROFILES)].stem}")
         for i, n in enumerate(COMMITTED)]
CASES.append(pytest.param(str(EXAMPLES / "control_flow.onnx"), RULES / "npu-static.yaml",
                          {"batch": 1}, {}, id="control_flow-npu-static"))

needs_layering = pytest.mark.skipif(not supports_layer_assignment(),
                                    reason=f"needs {LAYER_ASSIGNMENT_NEEDS}; installed "
                                           f"onnxruntime {ort.__version__}")


@needs_layering
@pytest.mark.parametrize("model,rules,dims,shapes", CASES)
def test_onnxruntime_puts_every_node_where_the_answer_says(model, rules, dims, shapes, tmp_path):
    result = hs.solve(model, str(rules), engine="heuristic", dims=dims, shapes=shapes or None)
    out = write_result(result, tmp_path / "out", submodels=False, dots=False)
    manifest = json.loads((out / "partition.json").read_text())
    config = manifest["onnxruntime"]["session_config"]
    devices = {d["name"]: d for d in manifest["devices"]}
    assert config[LAYER_SETTINGS] == layer_assignment_settings(
        [(d["name"], d["runtime"]) for d in manifest["devices"]])
    annotated = onnx.load(str(out / manifest["onnxruntime"]["model"]), load_external_data=False)
    labels = dict(zip(layer_annotations(list(devices)), devices))
    device_of = {}
    for node in annotated.graph.node:
        meta = {e.key: e.value for e in node.metadata_props}
        assert meta.get(LAYER_KEY) in labels, node.name          # every node, a known device
        device_of[node.name] = labels[meta[LAYER_KEY]]
        if "affinity" in meta:                                    # a placed node: its answer
            assert device_of[node.name] == meta["affinity"]
    placed = {n for p in manifest["partitions"] for n in p["node_names"]}
    assert placed <= set(device_of)

    have = ort.get_available_providers()
    wanted = []
    for d in manifest["devices"]:
        names = (d["runtime"] or {}).get("onnxruntime") or "CPUExecutionProvider"
        wanted += [p for p in ([names] if isinstance(names, str) else names) if p in have]
    providers = list(dict.fromkeys(wanted + ["CPUExecutionProvider"]))
    assigned = provider_assignment(out / manifest["onnxruntime"]["model"], config, providers)
    # A node onnxruntime runs as its ONNX function body (a float16 Softmax on the CPU) is
    # reported as the unnamed nodes it made; every other placed node is reported by name.
    op_of = {n.name: (n.op_type, n.domain) for n in annotated.graph.node}
    opset = {o.domain: o.version for o in annotated.opset_import}
    expanded = {n for n in placed - set(assigned) if _has_function(*op_of[n], opset)}
    assert placed - expanded <= set(assigned), \
        f"not assigned: {sorted(placed - expanded - set(assigned))[:5]}"
    assert not expanded or "" in assigned or set(assigned) - set(device_of)
    for name, provider in assigned.items():
        if name not in device_of:          # a node onnxruntime made (none with optimisations off)
            continue
        runtime = devices[device_of[name]]["runtime"] or {}
        first = runtime.get("onnxruntime") or "CPUExecutionProvider"
        first = first if isinstance(first, str) else first[0]
        if first in have:                  # the providers installed here
            assert provider == first, (name, device_of[name], provider)


def _has_function(op: str, domain: str, opset: dict) -> bool:
    try:
        schema = onnx.defs.get_schema(op, opset.get(domain, opset.get("", 1)), domain)
    except Exception:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


@needs_layering
def test_a_settings_string_onnxruntime_rejects_is_not_what_we_write(tmp_path):
    """onnxruntime parses the string it is given: a duplicate annotation is refused, so an
    accepted string is evidence that ours has the format it reads."""
    result = hs.solve(str(EXAMPLES / "resnet_like.onnx"), str(RULES / "npu-static.yaml"),
                      engine="heuristic", dims={"batch": 1})
    out = write_result(result, tmp_path / "out", submodels=False, dots=False)
    manifest = json.loads((out / "partition.json").read_text())
    bad = {LAYER_SETTINGS: "CPUExecutionProvider(NPU, NPU)"}
    with pytest.raises(hs.HeteroSolveError, match="Duplicate"):
        provider_assignment(out / "model.annotated.onnx", bad, ["CPUExecutionProvider"])
    assert provider_assignment(out / "model.annotated.onnx",
                               manifest["onnxruntime"]["session_config"], ["CPUExecutionProvider"])


def test_annotations_are_prefix_free_and_made_of_characters_the_settings_allow():
    assert layer_annotations(["NPU", "GPU", "CPU"]) == ["NPU", "GPU", "CPU"]
    odd = layer_annotations(["NPU", "NPU2", "my card (8 GiB)"])
    assert odd == ["0:NPU", "1:NPU2", "2:my_card__8_GiB_"]
    many = layer_annotations([f"D{i}" for i in range(12)] + ["a,b"])
    assert not any(a != b and b.startswith(a) for a in many for b in many)
    assert all(not set(a) & set(";,() ") for a in many)
    settings = layer_assignment_settings([("NPU", {"onnxruntime": ["OpenVINOExecutionProvider",
                                                                   "CPUExecutionProvider"]}),
                                          ("GPU", {"onnxruntime": "CUDAExecutionProvider"}),
                                          ("DSP", {}), ("CPU", {"onnxruntime": "CPUExecutionProvider"})])
    assert settings == ("OpenVINOExecutionProvider(NPU); CUDAExecutionProvider(GPU); "
                        "CPUExecutionProvider(DSP, CPU)")


@pytest.mark.skipif(supports_layer_assignment(), reason="this onnxruntime has the feature")
def test_without_the_feature_nothing_claims_it(tmp_path):
    result = hs.solve(str(EXAMPLES / "resnet_like.onnx"), str(RULES / "npu-static.yaml"),
                      engine="heuristic", dims={"batch": 1})
    out = write_result(result, tmp_path / "out", submodels=False, dots=False)
    assert "onnxruntime" not in json.loads((out / "partition.json").read_text())
    annotated = onnx.load(str(out / "model.annotated.onnx"))
    assert not any(e.key == LAYER_KEY for n in annotated.graph.node for e in n.metadata_props)
