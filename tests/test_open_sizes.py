"""Issue 37 item 4: where a tensor's size is still unknown (an op no analysis sizes), the
answer's memory and transfer figures that count it are marked lower bounds in partition.json
and the summary, a memory-limited part holding one is not called proven to fit, and --strict
refuses (docs/problem.md, "Memory of a part")."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import hetero_solve as hs
from hetero_solve.cli import main
from hetero_solve.export.manifest import build_manifest

RULES = """version: 1
devices:
  - name: CARD
    memory: 8KiB
    value_inputs: ignore
    ops: {supported: [Relu]}
  - name: CPU
    value_inputs: ignore
    ops: {supported: all}
objective: [fallback, partitions, transfer]
"""


def chain(middle: str, domain: str = "") -> onnx.ModelProto:
    """``x [1, 256] -> Relu -> MIDDLE -> Relu -> Relu -> y``: with a custom op in the middle
    nothing knows the size of its output nor of what follows it."""
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node(middle, ["a"], ["b"], domain=domain),
             h.make_node("Relu", ["b"], ["c"]), h.make_node("Relu", ["c"], ["y"])]
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 256])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, None])])
    opsets = [h.make_opsetid("", 17)] + ([h.make_opsetid(domain, 1)] if domain else [])
    model = h.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


@pytest.fixture
def files(tmp_path):
    rules = tmp_path / "card.yaml"
    rules.write_text(RULES)
    unknown, known = tmp_path / "unknown.onnx", tmp_path / "known.onnx"
    onnx.save(chain("Mystery", "my.ops"), str(unknown))
    onnx.save(chain("Sigmoid"), str(known))
    return unknown, known, rules


def test_figures_that_count_an_unknown_size_are_lower_bounds(files, tmp_path):
    unknown, known, rules = files
    result = hs.solve(str(unknown), str(rules), work_limit=2)
    manifest = build_manifest(result, files=False)
    sizes = manifest["open_sizes"]
    assert sizes["unknown_tensors"] == 3           # b, c and y
    parts = manifest["partitions"]
    # the Relus after the custom op read and write tensors of unknown size
    card = [p["id"] for p in parts if p["device"] == "CARD" and "c" in
            [result.problem.tensor_names[t] for v in result.parts()[p["id"]]
             for t in result.problem.node_inputs[v] + result.problem.node_outputs[v]]]
    assert card and set(card) <= set(sizes["memory_lower_bound_parts"])
    assert sizes["fit_not_proven_parts"] == card
    assert {p["id"] for p in parts if p.get("memory_is_lower_bound")} == \
        set(sizes["memory_lower_bound_parts"])
    assert sizes["transfer_lower_bound"] is True    # b crosses from the CPU to the card
    # the same answer proven optimal when every size is known; not here
    assert hs.solve(str(known), str(rules), work_limit=2).solution.status == "optimal"
    assert result.solution.status == "feasible"
    assert any("not proven to fit" in w for w in result.warnings)
    # the claims say the same: nothing proven, because of the sizes
    assert result.solution.stats["proven"] == []
    assert result.solution.stats["proven_if_sizes_hold"]
    assert result.explanation["text"][0].startswith("not proven (proven only if")


def test_answers_with_every_size_known_say_nothing(files):
    _, known, rules = files
    manifest = build_manifest(hs.solve(str(known), str(rules), work_limit=2), files=False)
    assert "open_sizes" not in manifest
    assert not any("memory_is_lower_bound" in p for p in manifest["partitions"])


def cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_the_summary_marks_lower_bounds_and_strict_refuses(files, tmp_path, capsys):
    unknown, known, rules = files
    out = tmp_path / "out"
    code, text, err = cli([unknown, rules, "-o", out, "--no-models", "--work-limit", "2"], capsys)
    assert code == 0, err
    assert "≥ " in text and "transfer: ≥" in text
    assert "status: feasible" in text
    data = json.loads((out / "partition.json").read_text())
    assert data["open_sizes"]["fit_not_proven_parts"]
    strict = tmp_path / "strict"
    code, text, err = cli([unknown, rules, "-o", strict, "--no-models", "--work-limit", "2",
                           "--strict"], capsys)
    assert code == 2 and "--strict" in err and "not proven to fit" in err
    assert not strict.exists()
    code, text, err = cli([known, rules, "-o", tmp_path / "k", "--no-models", "--work-limit", "2",
                           "--strict"], capsys)
    assert code == 0, err
    assert "≥" not in text


def test_the_unknown_size_warning_names_what_would_size_the_tensors():
    """The warning's hint follows what is left open (issue 39 item 7): the dims still without
    a value, the inputs whose anonymous dims need a whole shape, or, when every input
    dimension has one, that the sizes depend on values the model computes (it used to say
    "give --dim NAME=VALUE" with no dim left to give)."""
    from conftest import EXAMPLES, ROOT, RULES as RULE_FILES

    def warning(model, **kw):
        r = hs.solve(model, RULE_FILES / "gpu-cpu.yaml", engine="heuristic", **kw)
        (w,) = [w for w in r.warnings if "unknown dimensions or type" in w]
        return w

    assert "(every input dimension has a value: these sizes depend on values the model " \
           "computes" in warning(EXAMPLES / "control_flow.onnx", dims={"seq": 5, "batch": 2})
    assert "(give --dim seq=VALUE --dim batch=VALUE)" in warning(EXAMPLES / "control_flow.onnx")
    vad = ROOT / "corpus" / "models" / "silero-vad-16k-op15.onnx"
    assert "(give --dim batch=VALUE --dim sequence=VALUE)" in warning(vad)
    assert "(give --dim sequence=VALUE)" in warning(vad, dims={"batch": 1})
