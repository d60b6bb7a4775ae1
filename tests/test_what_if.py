"""What if (issue 30, item 6): ``vary(prepared, change)`` is a real re-solve, equal to solving
with the edited rule file; ``explain --what-if`` and ``--rank`` on a model where the right
answer is known; the critical chain.

The model: Conv, Relu, Pad (reflect), Conv, Relu, Pad (reflect), Conv, Softmax.  The NPU takes
Conv, Relu and Pad, but only ``mode: constant`` Pads, and no Softmax: the fewest-fallback
answer alternates NPU and CPU in 6 parts.  Supporting reflect Pads leaves 2 parts (the Softmax
on the CPU), supporting Softmax 5.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto as T, helper as h, numpy_helper

import hetero_solve as hs
from hetero_solve.pipeline import prepare, solve_prepared, vary
from hetero_solve.problem import Objective
from hetero_solve.rules.change import Change, apply_change, parse_change
from hetero_solve.budget import Budget
from hetero_solve.measures.costs import critical_chain
from hetero_solve.what_if import outcome, rank_changes, refused_changes

C = 4


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    nodes = []
    x = "x"
    for k in range(3):
        w = f"w{k}"
        inits.append(numpy_helper.from_array(rng.standard_normal((C, C, 3, 3)).astype(np.float32), w))
        nodes.append(h.make_node("Conv", [x, w], [f"c{k}"], name=f"conv{k}",
                                 pads=[1, 1, 1, 1] if k == 0 else [0, 0, 0, 0]))
        x = f"c{k}"
        if k < 2:
            nodes.append(h.make_node("Relu", [x], [f"r{k}"], name=f"relu{k}"))
            nodes.append(h.make_node("Pad", [f"r{k}", "pads"], [f"p{k}"], name=f"pad{k}",
                                     mode="reflect"))
            x = f"p{k}"
    nodes.append(h.make_node("Softmax", [x], ["y"], name="softmax", axis=1))
    graph = h.make_graph(nodes, "what_if", [h.make_tensor_value_info("x", T.FLOAT, [1, C, 16, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, C, 16, 16])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _rules(costs: bool = False) -> dict:
    npu = {"name": "NPU", "ops": {"supported": ["Conv", "Relu", "Pad"],
                                  "when": {"Pad": {"attributes": {"mode": "constant"}}}}}
    cpu = {"name": "CPU", "ops": {"supported": "all"}}
    if costs:
        npu.update(roofline={"flops": "10TFLOPS", "bandwidth": "100GB/s"}, part_cost="5us",
                   link={"bandwidth": "10GB/s", "latency": "1us"})
        cpu.update(roofline={"flops": "1GFLOPS", "bandwidth": "10GB/s"})
    return {"version": 1, "devices": [npu, cpu]}


def _edited(rules: dict, device: str, op: str, add: bool = True) -> dict:
    """The rule file a user would write for the change, by hand."""
    rules = copy.deepcopy(rules)
    dev = next(d for d in rules["devices"] if d["name"] == device)
    ops = dev["ops"]
    if add:
        if ops["supported"] != "all" and op not in ops["supported"]:
            ops["supported"].append(op)
        ops.get("when", {}).pop(op, None)
    else:
        ops.setdefault("unsupported", []).append(op)
    return rules


def _answer(r):
    return (r.metrics.partitions, r.metrics.fallback, r.metrics.latency,
            [r.problem.devices[d].name for d in r.solution.part_device], r.solution.part_of)


@pytest.mark.parametrize("objective", [None, Objective(order=("latency",)),
                                       Objective(order=("fallback", "latency"))])
def test_supporting_a_refused_condition_merges_parts_as_the_edited_rule_file_does(objective):
    costs = objective is not None
    base = prepare(_model(), _rules(costs), objective=objective)
    before = solve_prepared(base, time_limit=5)
    varied = vary(base, Change("NPU", "Pad"))
    after = solve_prepared(varied, time_limit=5)
    edited = hs.solve(_model(), _edited(_rules(costs), "NPU", "Pad"), objective=objective,
                      time_limit=5)
    assert _answer(after) == _answer(edited)
    assert base.problem.allowed != varied.problem.allowed       # prepared is not changed
    if objective is None:
        assert (outcome(before).partitions, outcome(before).fallback) == (6, 3)
        assert (outcome(after).partitions, outcome(after).fallback) == (2, 1)
    else:   # the predicted time saved is the edited file's
        plain = hs.solve(_model(), _rules(True), objective=objective, time_limit=5)
        assert before.metrics.latency == plain.metrics.latency
        assert after.metrics.latency < before.metrics.latency
        assert (before.metrics.latency - after.metrics.latency
                == plain.metrics.latency - edited.metrics.latency)


def test_removing_support_equals_the_edited_rule_file():
    base = prepare(_model(), _rules())
    after = solve_prepared(vary(base, Change("NPU", "Relu", add=False)), time_limit=5)
    edited = hs.solve(_model(), _edited(_rules(), "NPU", "Relu", add=False), time_limit=5)
    assert _answer(after) == _answer(edited)
    assert sum(1 for q in after.solution.part_of if after.solution.part_device[q] == 1) == 5


def test_a_change_no_node_depends_on_keeps_the_problem():
    base = prepare(_model(), _rules())
    assert vary(base, Change("NPU", "MatMul")).problem is base.problem   # no MatMul
    assert vary(base, Change("CPU", "Pad")).problem is base.problem      # the CPU takes all
    assert base.rules.devices[0].when                                    # not changed


def test_ranking_puts_the_op_whose_support_saves_most_first():
    base = prepare(_model(), _rules())
    assert [str(c) for c in refused_changes(base)] == ["NPU+=Pad", "NPU+=Softmax"]
    before = outcome(solve_prepared(base, time_limit=5))
    ranked, tried = rank_changes(base, before, top=5, budget=Budget.of(work_limit=5))
    assert tried == 2
    assert [str(r.change) for r in ranked] == ["NPU+=Pad", "NPU+=Softmax"]
    assert [r.saves()["partitions"] for r in ranked] == [4, 1]
    assert [r.saves()["fallback"] for r in ranked] == [2, 1]
    # each is what the edited rule file gives
    for r in ranked:
        edited = hs.solve(_model(), _edited(_rules(), "NPU", r.change.op), time_limit=5)
        assert r.after == outcome(edited)
    assert [str(r.change) for r in rank_changes(base, before, top=1,
                                                budget=Budget.of(work_limit=5))[0]] == ["NPU+=Pad"]


def test_the_ranking_draws_on_one_work_budget_and_is_the_same_at_any_load():
    """Every ranked re-solve takes an equal share of the one budget: under a work limit the
    ranking and what it records do not depend on the clock, and the budget is spent once."""
    base = prepare(_model(), _rules())
    before = outcome(solve_prepared(base, work_limit=1))
    budget = Budget.of(work_limit=1)
    first = rank_changes(base, before, budget=budget)
    assert budget.spent <= 1 and budget.deterministic
    again = rank_changes(base, before, budget=Budget.of(work_limit=1))
    assert [(str(r.change), r.after) for r in first[0]] == \
        [(str(r.change), r.after) for r in again[0]]


@pytest.mark.parametrize("text, words", [
    ("GPU+=Pad", "unknown device 'GPU'"), ("npu+=Pad", "did you mean 'NPU'"),
    ("NPU+=Pda", "did you mean Pad"), ("NPU=Pad", "expected DEVICE+=OP"),
    ("NPU+=", "expected DEVICE+=OP"), ("+=Pad", "expected DEVICE+=OP")])
def test_a_bad_change_says_why(text, words):
    with pytest.raises(ValueError) as e:
        parse_change(text, hs.load_rules(_rules()))
    assert words in str(e.value)


def test_apply_change_is_what_the_edited_file_loads_as():
    for device, op, add in [("NPU", "Pad", True), ("NPU", "Softmax", True),
                            ("NPU", "Relu", False), ("CPU", "Conv", False)]:
        changed = apply_change(hs.load_rules(_rules()), Change(device, op, add))
        edited = hs.load_rules(_edited(_rules(), device, op, add))
        assert [(d.supported, d.unsupported, d.when) for d in changed.devices] == \
               [(d.supported, d.unsupported, d.when) for d in edited.devices]


def test_the_critical_chain_of_a_chain_of_parts_is_every_part():
    r = hs.solve(_model(), _rules(True), objective=Objective(order=("fallback", "latency")),
                 time_limit=5)
    chain, seconds = critical_chain(r.problem, r.solution.part_of, r.solution.part_device)
    assert chain == list(range(r.metrics.partitions)) and len(chain) == 6
    assert seconds == pytest.approx(r.metrics.latency)
    assert r.explanation["time"]["critical_chain"] == {"parts": chain, "seconds": seconds}
    assert "time" not in hs.solve(_model(), _rules(), time_limit=5).explanation


# -- the command line --------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture
def files(tmp_path):
    model, rules = tmp_path / "m.onnx", tmp_path / "r.yaml"
    onnx.save(_model(), model)
    rules.write_text(yaml.safe_dump(_rules(True)))
    return model, rules


def test_explain_what_if_and_rank_on_the_command_line(files, tmp_path):
    model, rules = files
    out = _cli("explain", model, rules, "--objective", "fallback,latency", "-t", "5",
               "--what-if", "NPU+=Pad", "--rank", "5", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(_edited(_rules(True), "NPU", "Pad")))
    again = hs.solve(model, edited, objective=Objective(order=("fallback", "latency")),
                     time_limit=5)
    w = data["what_if"]
    assert w["changes"] == ["NPU+=Pad"]
    assert (w["before"]["partitions"], w["before"]["fallback"]) == (6, 3)
    assert w["after"]["latency"] == again.metrics.latency
    assert w["after"]["partitions"] == again.metrics.partitions == 2
    best = data["ranking"]["best"]
    assert [b["change"] for b in best] == ["NPU+=Pad", "NPU+=Softmax"]
    assert best[0]["saves"]["latency"] == pytest.approx(
        w["before"]["latency"] - again.metrics.latency)
    assert data["time"]["critical_chain"]["parts"] == list(range(6))
    text = _cli("explain", model, rules, "--objective", "fallback,latency", "-t", "5",
                "--what-if", "NPU+=Pad", "--rank", "1")
    assert text.returncode == 0, text.stderr
    assert "what if NPU+=Pad:" in text.stdout and "1. NPU+=Pad: saves 4 part(s)" in text.stdout
    assert "2. " not in text.stdout and "critical chain: part 0 -> 1" in text.stdout


def test_explain_what_if_without_costs(files):
    model, _ = files
    rules = files[1].with_name("plain.yaml")
    rules.write_text(yaml.safe_dump(_rules()))
    out = _cli("explain", model, rules, "-t", "5", "--what-if", "NPU+=Softmax")
    assert out.returncode == 0, out.stderr
    assert "before: 6 part(s), 3 node(s) on CPU" in out.stdout
    assert "after:  5 part(s), 2 node(s) on CPU" in out.stdout


@pytest.mark.parametrize("change, words", [
    ("GPU+=Pad", "unknown device 'GPU'"), ("NPU+=Pda", "did you mean Pad"),
    ("NPU Pad", "expected DEVICE+=OP")])
def test_a_bad_what_if_is_one_line_exit_2(files, change, words):
    out = _cli("explain", *files, "--what-if", change)
    assert out.returncode == 2 and words in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""


def test_doctests_of_the_change_module():
    import doctest
    import hetero_solve.rules.change as module
    res = doctest.testmod(module)
    assert res.attempted >= 5 and res.failed == 0


def test_a_ranked_change_that_makes_the_answer_worse_says_so():
    """explain --rank printed "saves -2 part(s)" when supporting an op made the answer worse."""
    from hetero_solve.cli.explain import saves_text
    assert saves_text({"partitions": -2, "fallback": 0, "latency": 0.0005}, "CPU") == \
        "adds 2 part(s), 0 node(s) on CPU, 500 µs"
    worse = saves_text({"partitions": 1, "fallback": -3, "latency": -0.002}, "CPU")
    assert worse == "saves 1 part(s), 3 more node(s) on CPU, 2 ms slower"
    assert "-" not in worse


# -- predicted times in study and check --------------------------------------------------------

def test_study_has_predicted_latency_columns_with_costs(files, tmp_path):
    from hetero_solve.study import StudyConfig, run_study
    from hetero_solve.study.core import load_results
    from hetero_solve.study.store import COLUMNS, COST_COLUMNS
    model, rules = files
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(_rules()))

    def study(rule_file, out, objective=None):
        cfg = StudyConfig(models=[model], rules=[rule_file], out_dir=tmp_path / out,
                          algorithms=["heuristic", "cpsat"], time_limit=5, memory="none",
                          plots=False, objective=objective)
        run_study(cfg, progress=False)
        return load_results(tmp_path / out), (tmp_path / out / "summary.md").read_text()

    rows, summary = study(rules, "timed", "fallback,latency")
    assert list(rows[0]) == COLUMNS + COST_COLUMNS
    cpsat = next(r for r in rows if r["algorithm"] == "cpsat")
    edited = hs.solve(model, rules, objective=Objective(order=("fallback", "latency")),
                      time_limit=5)
    assert cpsat["latency"] == pytest.approx(edited.metrics.latency)
    assert "## Predicted latency per problem" in summary
    rows, summary = study(plain, "plain")
    assert list(rows[0]) == COLUMNS and "Predicted latency" not in summary


def test_check_prints_the_predicted_latency_beside_the_optimum(files, tmp_path):
    model, rules = files
    cpu_only = tmp_path / "map.json"
    cpu_only.write_text(json.dumps({n.name: "CPU" for n in _model().graph.node}))
    out = _cli("check", model, rules, "--affinity", cpu_only, "--no-export", "-t", "5",
               "--objective", "latency")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("predicted latency:"))
    assert "hetero-solve's answer:" in line and "on CPU alone:" in line
