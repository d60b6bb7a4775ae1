"""Every rule-file error of docs/rules.md names the file, the key path and the reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import hetero_solve as hs
from hetero_solve.errors import RuleError

from conftest import EXAMPLES

BASE = """\
version: 1
devices:
  - name: NPU
    memory: 64MiB
    ops:
      supported: [Relu, Add]
  - name: CPU
    ops: {supported: all}
"""


def write(tmp_path: Path, text: str, name: str = "rules.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path, model: Path | None = None) -> RuleError:
    with pytest.raises(RuleError) as info:
        rules = hs.load_rules(path)
        if model is not None:
            hs.solve(model, rules, engine="heuristic")
    return info.value


def test_unknown_top_level_key(tmp_path):
    e = error_of(write(tmp_path, BASE + "objectve: [partitions]\n"))
    assert e.path.endswith("rules.yaml") and e.key == "objectve"
    assert "unknown key (did you mean 'objective'?)" in e.reason


def test_unknown_key_inside_a_device_names_its_path(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("      supported: [Relu, Add]",
                                              "      suported: [Relu, Add]")))
    assert e.key == "devices[0].ops.suported" and "did you mean 'supported'" in e.reason


def test_unknown_key_in_a_when_condition(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("      supported: [Relu, Add]",
                                              "      supported: [Relu, Add]\n"
                                              "      when: {Relu: {max_rnk: 4}}")))
    assert e.key == "devices[0].ops.when.Relu.max_rnk"


def test_pin_naming_an_unknown_device(tmp_path):
    e = error_of(write(tmp_path, BASE + 'affinity: {"/decoder/*": GPU}\n'))
    assert e.key == 'affinity["/decoder/*"]'
    assert "unknown device 'GPU' (devices: NPU, CPU)" in e.reason


def test_pin_by_exact_name_that_matches_no_node(tmp_path):
    e = error_of(write(tmp_path, BASE + 'affinity: {"conv42": CPU}\n'), EXAMPLES / "seed000.onnx")
    assert e.key == 'affinity["conv42"]' and "no node is named 'conv42'" in e.reason
    assert "seed000.onnx" in e.reason


def test_glob_pin_that_matches_no_node_is_only_a_warning(tmp_path):
    rules = hs.load_rules(write(tmp_path, BASE + 'affinity: {"/decoder/*": CPU}\n'))
    r = hs.solve(EXAMPLES / "seed000.onnx", rules, engine="heuristic")
    assert any('affinity["/decoder/*"]: the glob matches no node' in w for w in r.warnings)


def test_when_condition_on_an_attribute_the_op_does_not_have(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("      supported: [Relu, Add]",
                                              "      supported: [Relu, Add, Conv]\n"
                                              "      when: {Conv: {attributes: {groups: 1}}}")))
    assert e.key == "devices[0].ops.when.Conv.attributes.groups"
    assert "Conv has no attribute 'groups'" in e.reason and "group" in e.reason


def test_negative_memory(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("memory: 64MiB", "memory: -5MiB")))
    assert e.key == "devices[0].memory" and "must not be negative" in e.reason


def test_unparsable_memory(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("memory: 64MiB", "memory: 64 megs")))
    assert e.key == "devices[0].memory" and "cannot parse memory '64 megs'" in e.reason


def test_include_that_does_not_exist(tmp_path):
    e = error_of(write(tmp_path, BASE + "include: [../nowhere/catalog.yaml]\n"))
    assert e.key == "include[0]" and "included file does not exist: ../nowhere/catalog.yaml" in e.reason


def test_error_inside_an_included_catalog_names_the_catalog(tmp_path):
    write(tmp_path, "version: 1\nvalue_inputs: {Reshape: [one]}\n", "catalog.yaml")
    e = error_of(write(tmp_path, BASE + "include: [catalog.yaml]\n"))
    assert e.path.endswith("catalog.yaml") and e.key == "value_inputs.Reshape[0]"


def test_missing_version_and_yaml_syntax(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("version: 1\n", "")))
    assert e.key == "version"
    e = error_of(write(tmp_path, BASE + "affinity: {a: [\n"))
    assert "YAML syntax error at line" in e.reason


def test_duplicate_device_and_bad_dtype_and_bad_objective(tmp_path):
    e = error_of(write(tmp_path, BASE.replace("name: CPU", "name: NPU")))
    assert e.key == "devices[1].name" and "duplicate" in e.reason
    e = error_of(write(tmp_path, BASE.replace("      supported: [Relu, Add]",
                                              "      supported: [Relu]\n"
                                              "      when: {Relu: {dtypes: [float32, flaot16]}}")))
    assert e.key == "devices[0].ops.when.Relu.dtypes[1]" and "unknown dtype 'flaot16'" in e.reason
    e = error_of(write(tmp_path, BASE + "objective: [parts]\n"))
    assert e.key == "objective[0]" and "unknown term 'parts'" in e.reason


def test_message_is_one_line_with_file_key_and_reason(tmp_path):
    path = write(tmp_path, BASE.replace("memory: 64MiB", "memory: -1"))
    e = error_of(path)
    assert str(e) == f"{path}: devices[0].memory: memory must not be negative, got -1"
    assert "\n" not in str(e)


def test_memory_units(tmp_path):
    for text, expected in (("512KiB", 512 * 1024), ("1.5GB", 1_500_000_000), ("64MB", 64_000_000), ("4096", 4096)):
        rules = hs.load_rules(write(tmp_path, BASE.replace("64MiB", f'"{text}"')))
        assert rules.devices[0].memory == expected


def test_a_misspelt_dtype_gets_a_did_you_mean(tmp_path):
    for wrong, meant in (("fp32", "float32"), ("flaot16", "float16"), ("f16", "float16")):
        e = error_of(write(tmp_path, BASE.replace(
            "      supported: [Relu, Add]",
            f"      supported: [Relu]\n      when: {{Relu: {{dtypes: [{wrong}]}}}}")))
        assert f"unknown dtype {wrong!r} (did you mean {meant!r}?)" in e.reason, e


@pytest.mark.parametrize("key", ["onnxruntime", "onnxruntime_options"])
def test_an_empty_runtime_entry_is_an_error(tmp_path, key):
    """``runtime: {onnxruntime: null}`` says nothing: it is refused, not taken as absent."""
    e = error_of(write(tmp_path, BASE.replace("    ops: {supported: all}",
                                              f"    ops: {{supported: all}}\n"
                                              f"    runtime: {{{key}: null}}")))
    assert e.key == f"devices[1].runtime.{key}" and e.reason.startswith("empty:"), e


def test_another_domains_op_written_bare_in_unsupported_is_a_warning(tmp_path):
    """``unsupported: [FusedConv]`` (an onnxruntime op, whose rule name is
    com.microsoft.FusedConv) is read with its domain and warned about, not refused; a
    misspelling stays an error (it would let the device take what the user refused)."""
    path = write(tmp_path, BASE.replace("      supported: [Relu, Add]",
                                        "      supported: all\n"
                                        "      unsupported: [FusedConv, Relu]"))
    with pytest.warns(hs.HeteroSolveWarning,
                      match=r"devices\[0\]\.ops\.unsupported\[0\]: 'FusedConv' is not an op "
                            r"of onnx; read as com\.microsoft\.FusedConv"):
        rules = hs.load_rules(path)
    assert rules.devices[0].unsupported == frozenset({"com.microsoft.FusedConv", "Relu"})
    e = error_of(write(tmp_path, BASE.replace("[Relu, Add]", "all\n      unsupported: [Reluu]")))
    assert e.key == "devices[0].ops.unsupported[0]" and "did you mean Relu" in e.reason
