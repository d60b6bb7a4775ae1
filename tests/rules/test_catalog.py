"""The value-input catalog (constraints/onnx-value-inputs.yaml) against the installed ONNX schemas.

How an input is recognised as possibly value-dependent is documented in
``hetero_solve/rules/catalog.py`` and ``docs/rules.md``: by name (shape, axes, pads, sizes, K...),
by schema text ("Specified shape for output"...), or by index type (int64/int32 only).  Every
recognised input must be in the catalog at every opset unless ``NOT_VALUE_INPUTS`` says why not;
every catalog entry must exist at its opset, and one not derived from the schema needs a note.
"""

from __future__ import annotations

import onnx
import onnx.defs
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from hetero_solve.compile import compile_problem
from hetero_solve.model import load_model
from hetero_solve.rules import catalog, load_rules
from hetero_solve.rules.catalog import (CATALOG_PATH, NOT_VALUE_INPUTS, audit, audit_exceptions,
                                        derive, read_catalog, schema_history)


@pytest.fixture(scope="module")
def committed():
    return read_catalog(CATALOG_PATH)


def _steps(d: dict[int, list[int]]) -> list[tuple[int, tuple[int, ...]]]:
    return sorted((k, tuple(v)) for k, v in d.items())


# -- the committed catalog ------------------------------------------------------------------

def test_committed_catalog_passes_the_audit(committed):
    value_inputs, notes = committed
    assert audit(value_inputs, notes) == []


def test_committed_catalog_is_the_derived_one(committed):
    """The YAML is what the schemas + exception list give (regenerate with --derive)."""
    value_inputs, notes = committed
    assert value_inputs == {op: _steps(steps) for op, steps in derive().items()}
    assert notes == catalog.derived_notes()


def test_exception_lists_are_live():
    assert audit_exceptions() == []
    for key, why in {**NOT_VALUE_INPUTS, **catalog.EXTRA_VALUE_INPUTS}.items():
        assert len(why) > 20, key


def test_every_op_of_both_domains_is_examined():
    ops = {s.name for s in onnx.defs.get_all_schemas_with_history()
           if s.domain in ("", "ai.onnx.ml")}
    assert set(schema_history()) == ops          # and no op type is in both domains
    assert {"Reshape", "TreeEnsembleClassifier", "LabelEncoder"} <= ops


@pytest.mark.parametrize("op, opset, expected", [
    ("Reshape", 4, ()), ("Reshape", 5, (1,)), ("Reshape", 21, (1,)),
    ("Expand", 8, (1,)), ("Tile", 1, (1, 2)), ("Tile", 6, (1,)), ("Tile", 13, (1,)),
    ("Slice", 9, ()), ("Slice", 10, (1, 2, 3, 4)), ("Slice", 13, (1, 2, 3, 4)),
    ("Resize", 10, (1,)), ("Resize", 11, (2, 3)), ("Resize", 19, (2, 3)),
    ("Upsample", 7, ()), ("Upsample", 9, (1,)),
    ("Pad", 2, ()), ("Pad", 11, (1,)), ("Pad", 18, (1, 3)),
    ("TopK", 1, ()), ("TopK", 10, (1,)), ("ConstantOfShape", 9, (0,)),
    ("Range", 11, (0, 1, 2)), ("OneHot", 9, (1,)),
    ("Squeeze", 11, ()), ("Squeeze", 13, (1,)), ("Unsqueeze", 12, ()), ("Unsqueeze", 13, (1,)),
    ("Split", 1, (1,)), ("Split", 2, ()), ("Split", 11, ()), ("Split", 13, (1,)), ("Split", 18, (1,)),
    ("ReduceSum", 12, ()), ("ReduceSum", 13, (1,)),
    ("ReduceMean", 13, ()), ("ReduceMean", 17, ()), ("ReduceMean", 18, (1,)),
    ("ReduceMax", 18, (1,)), ("ReduceLogSumExp", 18, (1,)),
    ("CenterCropPad", 18, (1,)), ("DFT", 17, (1,)), ("DFT", 20, (1, 2)),
    ("Loop", 1, (0,)), ("CumSum", 11, (1,)),
    ("Gather", 13, ()), ("Conv", 11, ()), ("Trilu", 14, ()), ("Attention", 23, ()),
])
def test_indices_resolve_per_opset(op, opset, expected):
    """What a rule file including the catalog answers (Rules.value_input_indices)."""
    rules = load_rules("rules/npu-static.yaml")
    assert rules.value_input_indices(op, opset) == expected


def test_the_issue_named_inputs_are_derived_from_the_schemas():
    """The inputs the issue names are recognised by name or text, not put in by hand."""
    named = {"Reshape": "shape", "Expand": "shape", "Tile": "repeats", "Slice": "starts",
             "Resize": "sizes", "Upsample": "scales", "Pad": "pads", "TopK": "K",
             "ConstantOfShape": "input", "Range": "limit", "OneHot": "depth",
             "Squeeze": "axes", "Unsqueeze": "axes", "Split": "split", "ReduceSum": "axes",
             "ReduceL2": "axes", "CenterCropPad": "shape"}
    for op, name in named.items():
        latest = schema_history()[op][-1]
        hits = [r for r in catalog.recognised(latest) if r.name == name]
        assert hits and hits[0].derived, (op, name)


# -- the audit catches what it claims to catch ----------------------------------------------

def _problems(value_inputs: dict, notes: dict | None = None) -> list[str]:
    full = {op: _steps(steps) for op, steps in derive().items()}
    full.update(value_inputs)
    return audit({k: v for k, v in full.items() if v is not None},
                 catalog.derived_notes() if notes is None else notes)


def test_audit_flags_an_unknown_op():
    problems = _problems({"Reshap": [(5, (1,))]})
    assert problems == [f"Reshap: no such op in ai.onnx or ai.onnx.ml (onnx {onnx.__version__})"]


def test_audit_flags_an_input_that_does_not_exist_at_that_opset():
    problems = _problems({"Reshape": [(1, (1,))]})       # Reshape-1 has one input (shape attr)
    assert any(p.startswith("Reshape at opset 1: input 1 does not exist") for p in problems)


def test_audit_flags_a_since_opset_where_the_op_does_not_change():
    problems = _problems({"Reshape": [(6, (1,))]})
    assert any("Reshape[6]: Reshape does not change at opset 6" in p for p in problems)
    assert any(p.startswith("Reshape at opset 5: input 1 (shape) is missing") for p in problems)


def test_audit_flags_a_missing_shape_input():
    problems = _problems({"Squeeze": None})
    assert problems == ["Squeeze at opset 13, 21, 23, 24, 25: input 1 (axes) is missing; "
                        "recognised by name+type (list it, or add it to NOT_VALUE_INPUTS with "
                        "the reason)"]


def test_audit_flags_a_step_that_drops_an_input_too_early():
    problems = _problems({"ReduceMean": [(18, ()), ]})
    assert any(p.startswith("ReduceMean at opset 18: input 1 (axes) is missing") for p in problems)


def test_audit_flags_an_excepted_input():
    problems = _problems({"Gather": [(1, (1,))]})
    assert any("Gather at opset 1, 11, 13: input 1 (indices) is listed, but it is not a value "
               "input" in p for p in problems)


def test_audit_wants_a_note_for_an_entry_it_cannot_derive():
    problems = _problems({"Pad": [(11, (1, 2)), (18, (1, 2, 3))]}, notes={})
    assert any(p.startswith("Pad at opset 11, 13, 18, 19, 21, 23, 24, 25: input 2 "
                            "(constant_value) is not derived") for p in problems)
    assert not _problems({"Pad": [(11, (1, 2)), (18, (1, 2, 3))]},
                         notes={**catalog.derived_notes(), "Pad": "the compiler bakes it in"})


def test_check_command_line(tmp_path, capsys):
    assert catalog.main(["--check"]) == 0
    assert "consistent with onnx" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nvalue_inputs:\n  Reshape: {5: [1]}\n")
    assert catalog.main(["--check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "Expand at opset 8, 13: input 1 (shape) is missing" in out


# -- the loader resolves the model's opset --------------------------------------------------

def _resize_model(opset: int) -> onnx.ModelProto:
    """Resize whose scales / roi come from a node: at opset 10 input 1 is scales (a value
    input), from 11 input 1 is roi (not one)."""
    nodes = [h.make_node("Abs", ["s"], ["s_abs"], name="abs"),
             h.make_node("Resize", ["x", "s_abs"] + (["scales"] if opset >= 11 else []), ["y"],
                         name="resize", mode="nearest")]
    inits = [h.make_tensor("scales", T.FLOAT, [4], [1, 1, 2, 2])] if opset >= 11 else []
    s_len = 4 if opset < 11 else 8
    graph = h.make_graph(nodes, "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 2]),
                          h.make_tensor_value_info("s", T.FLOAT, [s_len])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


@pytest.mark.parametrize("opset, binds", [(10, True), (11, False), (13, False)])
def test_value_edges_follow_the_model_opset(opset, binds):
    rules = load_rules("rules/npu-static.yaml")
    problem = compile_problem(load_model(_resize_model(opset), check=False), rules)
    resize = problem.names.index("resize")
    assert (problem.value_pred[resize] == [problem.names.index("abs")]) is binds


def test_docs_list_every_exception():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_text()
    missing = [f"{op}.{name}" for op, name in NOT_VALUE_INPUTS if f"`{op}.{name}`" not in text]
    assert missing == []
