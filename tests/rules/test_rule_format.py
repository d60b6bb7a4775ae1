"""The rule-file format (issue 15, items 2 and 3): op names checked against the installed onnx,
catalogs installed with the package and included by name, value ranges, and the JSON Schema
generated from the one definition the loader checks files against."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper

import hetero_solve as hs
from conftest import EXAMPLES, ROOT, RULES
from hetero_solve.errors import RuleError
from hetero_solve.export import affinity_map
from hetero_solve.rules.schema import RULE_FILE, json_schema, json_schema_text, \
    markdown_reference


def rules_with(devices: str, extra: str = "") -> dict:
    import yaml
    return yaml.safe_load(f"version: 1\ndevices:\n{devices}\n{extra}")


def error(data) -> RuleError:
    with pytest.raises(RuleError) as e:
        hs.load_rules(data)
    return e.value


# -- item 2: op names ------------------------------------------------------------------------

def test_a_misspelled_op_is_an_error_with_the_closest_names():
    e = error(rules_with("  - name: NPU\n    ops: {supported: [Conv, conv, Relu]}\n"
                         "  - name: CPU\n    ops: {supported: all}"))
    assert e.key == "devices[0].ops.supported[1]"
    assert "unknown op 'conv'" in e.reason and "did you mean Conv" in e.reason
    e = error(rules_with("  - name: NPU\n    ops: {supported: all, unsupported: [Softmaxx]}"))
    assert e.key == "devices[0].ops.unsupported[0]" and "Softmax" in e.reason
    e = error(rules_with("  - name: NPU\n    ops: {supported: all, when: {Cnov: {max_rank: 4}}}"))
    assert e.key == "devices[0].ops.when.Cnov" and "Conv" in e.reason


def test_ops_of_every_onnx_domain_and_opset_and_other_domains_with_their_domain():
    rules = hs.load_rules(rules_with(
        "  - name: NPU\n    ops: {supported: [LabelEncoder, Scatter, Upsample, Gradient, "
        "com.microsoft.FusedConv]}\n  - name: CPU\n    ops: {supported: all}"))
    assert "com.microsoft.FusedConv" in rules.devices[0].supported
    e = error(rules_with("  - name: NPU\n    ops: {supported: [FusedConv]}"))
    assert "written with its domain" in e.reason
    e = error(rules_with("  - name: NPU\n    ops: {supported: [ai.onnx.ml.LabelEncoder]}"))
    assert "write 'LabelEncoder'" in e.reason


def test_a_node_of_another_domain_matches_its_domain_qualified_name(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="r"),
         helper.make_node("FusedThing", ["a"], ["y"], name="f", domain="com.example")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    rules = rules_with("  - name: ACC\n    ops: {supported: [Relu, com.example.FusedThing]}\n"
                       "  - name: CPU\n    ops: {supported: all}")
    result = hs.solve(model, rules, engine="heuristic")
    assert affinity_map(result.problem, result.solution) == {"r": "ACC", "f": "ACC"}
    assert result.metrics.partitions == 1


def test_rules_check_calls_a_misspelled_op_an_error(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("version: 1\ndevices:\n  - name: NPU\n    ops: {supported: [Conv, Rleu]}\n")
    r = subprocess.run([sys.executable, "-m", "hetero_solve", "rules", "check", bad],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "unknown op 'Rleu'" in r.stderr and "Relu" in r.stderr


# -- item 3: packaged catalogs, ranges, the JSON Schema ----------------------------------------

def test_a_profile_copied_out_of_the_repository_works(tmp_path):
    copy = tmp_path / "elsewhere" / "npu.yaml"
    copy.parent.mkdir()
    shutil.copy(RULES / "npu-static.yaml", copy)
    rules = hs.load_rules(copy)
    assert rules.value_input_indices("Reshape", 17) == (1,)
    same = hs.load_rules(RULES / "npu-static.yaml")
    assert rules.value_inputs == same.value_inputs


def test_catalogs_by_name_and_by_relative_path_give_the_same_values(tmp_path):
    by_name = hs.load_rules({"version": 1, "include": ["onnx-value-inputs"],
                             "devices": [{"name": "CPU", "ops": {"supported": "all"}}]})
    by_path = hs.load_rules({"version": 1, "include": ["constraints/onnx-value-inputs.yaml"],
                             "devices": [{"name": "CPU", "ops": {"supported": "all"}}]},
                            base_dir=ROOT)
    assert by_name.value_inputs == by_path.value_inputs and by_name.value_inputs
    e = error({"version": 1, "include": ["onnx-valu-inputs"],
               "devices": [{"name": "CPU", "ops": {"supported": "all"}}]})
    assert e.key == "include[0]" and "onnx-value-inputs" in e.reason


def test_the_catalog_is_installed_with_the_package():
    import hetero_solve.rules.load as load
    assert "onnx-value-inputs" in load.packaged_catalogs()
    assert load.CATALOG_DIR.is_relative_to(ROOT / "hetero_solve")
    assert (ROOT / "constraints" / "onnx-value-inputs.yaml").resolve() == \
        load.packaged_catalogs()["onnx-value-inputs"].resolve()       # one copy, not two
    text = (ROOT / "pyproject.toml").read_text()
    assert '"catalogs/*.yaml"' in text


@pytest.mark.parametrize("device,key,words", [
    ("memory: .inf", "devices[0].memory", "finite"),
    ("memory: 1.0e+400", "devices[0].memory", "finite"),
    ("memory: 99999999999999999999999", "devices[0].memory", "too large"),
    ("memory: 10000000000PB", "devices[0].memory", "cannot parse"),
    ("instances: 1000000000", "devices[0].instances", "from 1 to 4096"),
    ("instances: 0", "devices[0].instances", "from 1 to 4096"),
])
def test_absurd_device_values_are_refused(device, key, words):
    e = error(rules_with(f"  - name: CPU\n    {device}\n    ops: {{supported: all}}"))
    assert e.key == key and words in e.reason, e


@pytest.mark.parametrize("objective,words", [
    ("{fallback: .inf}", "finite"), ("{fallback: .nan}", "finite"),
    ("{fallback: -1}", ">= 0"), ("{fallback: 0}", "every weight is 0"),
])
def test_objective_weights_are_finite_and_not_negative(objective, words):
    e = error(rules_with("  - name: CPU\n    ops: {supported: all}", f"objective: {objective}"))
    assert e.key.startswith("objective") and words in e.reason, e


def test_a_device_name_of_sane_length():
    e = error(rules_with(f"  - name: {'N' * 300}\n    ops: {{supported: all}}"))
    assert e.key == "devices[0].name" and "too long" in e.reason


def test_the_published_schema_is_generated_from_the_definition():
    published = json.loads((ROOT / "schemas" / "rules.schema.json").read_text())
    if f"onnx {onnx.__version__}" not in published["$comment"]:
        pytest.skip(f"schemas/ were generated with another onnx ({published['$comment']})")
    assert (ROOT / "schemas" / "rules.schema.json").read_text() == json_schema_text("rules")
    assert (ROOT / "schemas" / "catalog.schema.json").read_text() == json_schema_text("catalog")
    r = subprocess.run([sys.executable, "-m", "hetero_solve", "rules", "schema"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and json.loads(r.stdout) == json_schema("rules")


def test_the_schema_says_what_the_loader_checks():
    schema = json_schema("rules")
    assert set(schema["properties"]) == set(RULE_FILE.keys)
    assert schema["required"] == ["version", "devices"]
    device = schema["properties"]["devices"]["items"]
    assert device["properties"]["instances"]["maximum"] == 4096
    assert device["properties"]["memory"]["oneOf"][0]["maximum"] == 2**63 - 1
    assert device["additionalProperties"] is False
    ops = device["properties"]["ops"]["properties"]["supported"]["oneOf"][1]["items"]["anyOf"]
    assert "Conv" in ops[0]["enum"] and "conv" not in ops[0]["enum"]


def test_every_profile_validates_against_the_schema():
    import jsonschema   # a test extra: an independent reading of the schema we publish
    import yaml
    schema = json_schema("rules")
    for profile in sorted(RULES.glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(profile.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"version": 1, "devices": [{"name": "X", "ops": {
            "supported": ["conv"]}}]}, schema)


def test_docs_hold_the_generated_key_reference():
    docs = (ROOT / "docs" / "rules.md").read_text()
    assert markdown_reference() in docs
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme and "docs/rules.md" in readme


def test_description_is_a_documented_key_at_the_top_and_in_a_device():
    """Issue 24: ``description`` is part of the schema (kept, shown by ``rules check``,
    documented, in the JSON Schema); a misspelt one is an unknown key like any other."""
    rules = hs.load_rules(rules_with("  - name: NPU\n    description: Edge NPU\n"
                                     "    ops: {supported: all}", "description: my board"))
    assert rules.description == "my board" and rules.devices[0].description == "Edge NPU"
    reference = markdown_reference()
    assert "| `description` | string |" in reference
    assert "| `devices[].description` | string |" in reference
    schema = json_schema("rules")
    assert schema["properties"]["description"]["type"] == "string"
    assert schema["properties"]["devices"]["items"]["properties"]["description"]["type"] == "string"
    e = error(rules_with("  - name: NPU\n    descripton: Edge NPU\n    ops: {supported: all}"))
    assert e.key == "devices[0].descripton"
    e = error(rules_with("  - name: NPU\n    ops: {supported: all}", "descriptions: x"))
    assert e.key == "descriptions"
