"""Lines a user reads (issue 31, items 8 and 10): each says what happened and what exists."""

from __future__ import annotations

import shutil

import pytest

from conftest import EXAMPLES, RULES
from hetero_solve.cli import main
from hetero_solve.export import write_result

FAST = ["-q", "--engine", "heuristic"]


def cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_re_solving_says_it_replaced_the_previous_answer(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    shutil.copy(EXAMPLES / "seed000.onnx", model)
    args = [model, RULES / "seed000.yaml", "--engine", "heuristic"]
    code, out, err = cli(args, capsys)
    assert code == 0, err
    assert f"written: {tmp_path / 'm.hetero'}/\n" in out
    code, out, err = cli(args, capsys)   # the default folder again
    assert code == 0, err
    assert f"written: {tmp_path / 'm.hetero'}/ (replacing the previous answer there)" in out


def test_a_misspelt_node_in_check_affinity_gets_a_did_you_mean(tmp_path, capsys):
    import json
    import onnx
    model = EXAMPLES / "seed000.onnx"
    names = [n.name for n in onnx.load(str(model)).graph.node]
    mapping = {n: "CPU" for n in names}
    mapping[names[0] + "x"] = mapping.pop(names[0])    # one name misspelt
    amap = tmp_path / "a.json"
    amap.write_text(json.dumps(mapping))
    code, _, err = cli(["check", model, RULES / "seed000.yaml", "-a", amap, "--no-export",
                        "-q"], capsys)
    assert code == 2 and f"no node named {names[0] + 'x'!r}" in err
    assert f"(did you mean {names[0]!r}" in err, err


def test_hs_verify_issues_each_warning_once(tmp_path):
    """A device whose provider this onnxruntime lacks: one warning, not one from the run and
    one more from verify."""
    import warnings

    import hetero_solve as hs
    rules = tmp_path / "r.yaml"
    rules.write_text((RULES / "seed000.yaml").read_text().replace(
        "runtime: {onnxruntime: CPUExecutionProvider}\n  - name: CPU",
        "runtime: {onnxruntime: NoSuchExecutionProvider}\n  - name: CPU", 1))
    model = EXAMPLES / "seed000.onnx"
    out = write_result(hs.solve(model, rules, engine="heuristic"), tmp_path / "out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = hs.verify(model, out)
    texts = [str(w.message) for w in caught if issubclass(w.category, hs.HeteroSolveWarning)]
    assert report.ok and texts and len(texts) == len(set(texts)), texts
    assert any("NoSuchExecutionProvider" in t for t in texts), texts


def test_tables_in_a_pipe_keep_each_row_on_one_line_and_titles_unpadded(tmp_path, capsys):
    """stdout not a terminal (a pipe, a file): rows are not wrapped at 80 columns in the
    middle of a phrase, and no line ends in spaces (rich padded titles to the table width)."""
    code, out, err = cli([EXAMPLES / "resnet_like.onnx", RULES / "npu-static.yaml", "-o",
                          tmp_path / "o", *FAST], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "resnet_like.onnx: 3 part(s)"
    assert all(line == line.rstrip() for line in lines), [x for x in lines if x != x.rstrip()]
    row = next(x for x in lines if "NPU" in x and "Conv" in x)
    assert "Conv×10, BatchNormalization×8, Relu×7, ..." in row and "KiB" in row


# -- item 8: objectives and files an ONNX user tries -----------------------------------------

def test_instance_on_an_onnx_model_says_what_it_is_and_what_to_run(capsys):
    model = EXAMPLES / "seed000.onnx"
    code, _, err = cli(["instance", model, "--objective", "latency"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"{model} is an ONNX model" in err and f"hetero-solve {model} RULES.yaml" in err


def test_json_that_is_not_an_instance_is_named_as_such(tmp_path, capsys):
    other = tmp_path / "config.json"
    other.write_text('{"layers": 12}')
    for args in ([other], ["instance", other], [other, RULES / "seed000.yaml"]):
        code, _, err = cli(args, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert f"{other} is JSON but not an instance file" in err, err
        assert "ModelProto" not in err and "maxSizePerFPGA: missing" not in err
    answer = tmp_path / "a"
    cli([EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", "-o", answer, *FAST], capsys)
    code, _, err = cli([answer / "partition.json"], capsys)
    assert code == 2 and "is an answer of hetero-solve: run, verify and export take its " \
        f"folder {answer}" in err, err


def test_a_bad_objective_in_the_library_is_a_typed_error_naming_no_flag():
    import hetero_solve as hs
    from hetero_solve.instances.solve import solve_instance
    path = EXAMPLES.parent / "benchmarks" / "tarnawski2020" / "throughput_bert_l-3_inference.json"
    with pytest.raises(hs.HeteroSolveError) as e:
        solve_instance(path, "speed")
    assert "unknown objective 'speed'" in str(e.value) and "throughput or latency" in str(e.value)
    assert "--" not in str(e.value)


def test_a_one_part_instance_answer_is_on_the_first_instance(tmp_path, capsys):
    """A chain every accelerator runs faster: latency puts it in one part, on FPGA.0 (the
    instances are identical; the solver's pick of one was shown as it came)."""
    import json

    from hetero_solve.instances.solve import first_instances
    from hetero_solve.solution import Solution
    assert first_instances(Solution([0, 1, 2], [0, 1, 0], [2, 5, 0])).part_instance == [0, 0, 1]
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({
        "maxSizePerFPGA": 100.0, "maxFPGAs": 4, "maxCPUs": 1,
        "nodes": [{"id": k, "supportedOnFpga": True, "cpuLatency": 10, "fpgaLatency": 1,
                   "size": 1.0} for k in range(6)],
        "edges": [{"sourceId": k, "destId": k + 1, "cost": 1} for k in range(5)]}))
    for objective in ("latency", "throughput"):
        code, out, err = cli(["instance", path, "--objective", objective, "-o",
                              tmp_path / objective, "-t", "5"], capsys)
        assert code == 0, err
        parts = json.loads((tmp_path / objective / "partition.json").read_text())["partitions"]
        used = {}
        for part in parts:   # each device's instances are numbered 0, 1, ... as parts come
            assert part["instance"] == used.setdefault(part["device"], {}).setdefault(
                part["instance"], len(used[part["device"]])), parts
        if objective == "latency":
            assert len(parts) == 1 and "FPGA.0" in out, out


def test_rules_check_without_a_model_prints_the_rule_files_warnings(tmp_path, capsys):
    """They were shown before the loader's warnings were collected: never printed."""
    rules = tmp_path / "r.yaml"
    rules.write_text((RULES / "seed000.yaml").read_text().replace(
        "    ops: {supported: all}", "    ops: {supported: all, unsupported: [FusedConv]}", 1))
    code, _, err = cli(["rules", "check", rules], capsys)
    assert code == 0, err
    assert "warning: " in err and "read as com.microsoft.FusedConv" in err
