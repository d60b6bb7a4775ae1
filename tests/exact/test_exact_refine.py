"""refine(): status and lower bound semantics, never worse than the start, determinism,
progress, the pipeline and partition.json, the ``explain`` command, and the doctests."""

from __future__ import annotations

import doctest
import json
import random

import pytest
from typer.testing import CliRunner

import hetero_solve.exact as exact
import hetero_solve.exact.search as search
from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.cli import app
from hetero_solve.errors import InfeasibleError
from hetero_solve.exact import refine
from support.generators import cnn_like, greedy_trap, random_dag, transformer_like
from hetero_solve.export import build_manifest, write_result
from hetero_solve.pipeline import solve
from hetero_solve.problem import Objective, make_problem
from hetero_solve.solution import Solution, evaluate, normalize, objective_key
from hetero_solve.validate import validate
from hetero_solve.budget import Budget

TRANSFORMER = ("examples/transformer_encoder.onnx", "rules/npu-static.yaml")


def _one_part_per_node(p) -> Solution:
    order = list(range(p.n))        # generated node ids are topological
    return normalize(p, Solution(order, [p.allowed[v][0] for v in order], [0] * p.n))


@pytest.mark.parametrize("seed", range(6))
def test_never_worse_than_the_start(seed):
    p = random_dag(random.Random(seed).randint(20, 60), seed)
    for start in (heuristic(p), _one_part_per_node(p)):
        if validate(p, start):
            continue            # one part per node can overflow a memory limit
        sol = refine(p, start, budget=Budget.of(work_limit=0.5))
        assert validate(p, sol) == []
        assert objective_key(p, sol) <= objective_key(p, start)


def test_a_bad_start_is_repaired_and_proven():
    p = cnn_like(300, seed=2)
    start = _one_part_per_node(p)
    sol = refine(p, start, budget=Budget.of(work_limit=2.5))
    assert sol.status == "optimal" and sol.num_parts == heuristic(p).num_parts
    assert sol.lower_bound == sol.num_parts
    assert sol.stats["heuristic_partitions"] == p.n       # the start's count, kept


def test_status_and_bounds_for_the_default_objective():
    p = greedy_trap("sequence", 2)
    h = heuristic(p)
    sol = refine(p, h)
    assert sol.status == "optimal" and sol.stats["proven"] == ["fallback", "partitions",
                                                               "transfer"]
    assert sol.lower_bound == sol.num_parts == 11 < h.num_parts
    json.dumps(sol.stats)                                  # all of it goes into partition.json
    ex = sol.stats["explain"]
    assert ex["parts"] == 11 and ex["lower_bound"] <= 11 and ex["proof"] in ("cpsat", "sequence")


def test_weighted_objective_status():
    p = greedy_trap("weighted", 3)
    sol = refine(p, heuristic(p), engine="cpsat")
    assert sol.status == "optimal" and sol.stats["proven"] == ["weighted"]
    assert sol.lower_bound == 1 and evaluate(p, sol).fallback == 3
    assert sol.stats["explain"]["proof"] == "bound"          # one part: at the bound
    q = greedy_trap("weighted", 1)
    q.objective = Objective(weights={"fallback": 30, "partitions": 10})   # moving costs more
    sol = refine(q, heuristic(q), engine="sat")
    assert sol.num_parts == 3 and sol.status == "optimal"
    assert sol.stats["explain"]["proof"] == "weighted" and sol.lower_bound == 1


def test_one_part_is_optimal_without_computing_a_bound(monkeypatch):
    """A problem with a node needs a part: an answer of one part is optimal (and, with no
    fallback, the whole objective is) without the bounds that cost seconds at 100k nodes."""
    def no_bounds(*_a, **_k):
        raise AssertionError("lower_bounds computed for a one-part answer")
    monkeypatch.setattr(exact, "lower_bounds", no_bounds)
    monkeypatch.setattr(search, "lower_bounds", no_bounds)
    p = make_problem(5, [(0, 1), (1, 2), (0, 3), (3, 4)], [[0, 1]] * 5)
    sol = refine(p, heuristic(p))
    assert sol.num_parts == 1 and evaluate(p, sol).fallback == 0
    assert sol.status == "optimal" and sol.lower_bound == 1
    assert sol.stats["proven"] == ["fallback", "partitions", "transfer"]
    assert sol.stats["bounds"]["nonempty"] == 1
    ex = sol.stats["explain"]
    assert ex["bound"] == "nonempty" and ex["proof"] == "bound" and ex["lower_bound"] == 1
    assert exact.lower_bound(p, sol) == 1          # what --engine heuristic reports
    p.objective = Objective(weights={"fallback": 1, "partitions": 10})
    sol = refine(p, heuristic(p))
    assert sol.num_parts == 1 and sol.status == "optimal" and sol.lower_bound == 1
    assert sol.stats["explain"]["bound"] == "nonempty"


def test_bounds_are_computed_once(monkeypatch):
    """Fallback 0 needs no bound of its own; the parts stage computes one (devices fixed)
    and the answer's lower bound and explanation reuse it.  (The sequence search bounds the
    contracted problem too: another problem, not counted.)"""
    calls = []
    real = search.lower_bounds
    p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
    monkeypatch.setattr(search, "lower_bounds",
                        lambda q, *a, **k: calls.append(q is p) or real(q, *a, **k))
    sol = refine(p, heuristic(p))
    assert (sol.num_parts, sol.status, sol.lower_bound) == (3, "optimal", 3)
    assert sol.stats["explain"]["bound"] != "nonempty"
    assert calls.count(True) == 1


def test_device_sets_are_computed_once(monkeypatch):
    """With memory limits the device sets cost minimum cuts: refine computes them once and
    hands them to the refusal check, the stages and the explanation."""
    import sys
    explain_module = sys.modules["hetero_solve.exact.explain"]   # not the function of that name
    calls = []
    real = exact.device_sets

    def counting(problem, *, fixed):
        calls.append(fixed)
        return real(problem, fixed=fixed)
    monkeypatch.setattr(exact, "device_sets", counting)
    monkeypatch.setattr(search, "device_sets", counting)
    monkeypatch.setattr(explain_module, "device_sets", counting)
    p = random_dag(40, 3, memory=True)
    sol = refine(p, heuristic(p), budget=Budget.of(work_limit=0.5))
    assert exact.binding_devices(p, real(p, fixed=False))   # memory can bind here
    assert "memory" in sol.stats["explain"]
    assert calls.count(False) == 1


def test_unproven_stage_gives_feasible_and_a_valid_bound(monkeypatch):
    """A time limit too small to finish: 'feasible', a lower bound no larger than the parts."""
    p = random_dag(120, 7, memory=True)
    h = heuristic(p)
    a = refine(p, h, budget=Budget.of(work_limit=0.25))
    b = refine(p, h, budget=Budget.of(work_limit=0.25))
    assert a.status == "feasible" and a.stats["deterministic"]
    assert a.part_of == b.part_of and a.part_device == b.part_device      # same seed, same answer
    assert a.status == b.status and a.lower_bound == b.lower_bound
    assert 1 <= a.lower_bound <= a.num_parts
    assert objective_key(p, a) <= objective_key(p, h)


def test_deterministic_across_runs_and_engines(monkeypatch):
    p = transformer_like(200, seed=1, objective=Objective(order=("partitions", "transfer")))
    h = heuristic(p)
    for engine in ("auto", "cpsat", "sat"):
        a = refine(p, h, engine=engine, seed=3, budget=Budget.of(work_limit=0.25))
        b = refine(p, h, engine=engine, seed=3, budget=Budget.of(work_limit=0.25))
        assert (a.part_of, a.part_device, a.status) == (b.part_of, b.part_device, b.status)


def test_progress_lines():
    lines = []
    p = greedy_trap("sequence", 3)
    refine(p, heuristic(p), engine="cpsat", progress=lines.append)
    assert lines and all(isinstance(x, str) for x in lines)
    assert any("cpsat" in x for x in lines)


def test_bad_engine_and_empty_problem():
    p = make_problem(2, [(0, 1)], [[0], [1]])
    with pytest.raises(ValueError):
        refine(p, heuristic(p), engine="gurobi")
    empty = make_problem(0, [], [])
    sol = refine(empty, Solution([], [], []))
    assert sol.status == "optimal" and sol.lower_bound == 0


def test_pipeline_reports_status_bound_and_explanation(tmp_path):
    r = solve(*TRANSFORMER, dims={"seq": 16}, work_limit=2.5)
    assert r.solution.status == "optimal"
    m = build_manifest(r, files=False)
    assert m["lower_bound"] == {"partitions": r.metrics.partitions}
    assert m["solver"]["heuristic_partitions"] >= r.metrics.partitions
    assert m["explain"]["parts"] == r.metrics.partitions and m["explain"]["text"]
    out = write_result(r, tmp_path / "out", submodels=False, annotated=False)
    saved = json.loads((out / "partition.json").read_text())
    assert saved["status"] == "optimal" and saved["explain"]["lower_bound"] >= 1
    # the pipeline's seconds per stage and the refinement's stage records both reach the file
    assert set(saved["solver"]["stage_seconds"]) >= {"load", "compile", "heuristic"}
    assert [s["stage"] for s in saved["solver"]["stages"]][0] == "fallback"


def test_pipeline_engines_agree():
    parts = {e: solve(*TRANSFORMER, engine=e, work_limit=2.5).metrics.partitions
             for e in ("heuristic", "auto", "cpsat", "sat")}
    assert parts["auto"] == parts["cpsat"] == parts["sat"] <= parts["heuristic"]


def test_explain_command():
    runner = CliRunner()
    res = runner.invoke(app, ["explain", *TRANSFORMER, "--dim", "seq=16", "-q"])
    assert res.exit_code == 0, res.output
    assert "at least 7 part(s)" in res.output and "Erf" in res.output
    res = runner.invoke(app, ["explain", *TRANSFORMER, "--dim", "seq=16", "-q", "--json"])
    data = json.loads(res.output)
    assert res.exit_code == 0 and data["parts"] == 7 and data["lower_bound"] == 7
    # one shape for every objective: the answer's head, then partition.json's explanation
    # (a cost objective adds "time": tests/test_cost_rules.py)
    assert {"status", "objective", "objective_spec", "proof", "text"} <= set(data)
    assert "time" not in data
    res = runner.invoke(app, ["explain", *TRANSFORMER, "-q", "--engine", "heuristic"])
    assert res.exit_code != 0


def test_doctests_of_the_exact_modules():
    import hetero_solve.fitting.devices as m1     # R(v): exact/analysis reads it there
    import hetero_solve.exact.bounds as m2
    import support.brute as m3
    import hetero_solve.exact.cpsat as m4
    import hetero_solve.exact.encoding as m5
    import hetero_solve.exact.reductions as m6
    import hetero_solve.exact.sat as m7
    import hetero_solve.exact.sequence as m8
    import support.generators as m9
    for mod in (exact, m1, m2, m3, m4, m5, m6, m7, m8, m9):
        res = doctest.testmod(mod)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


@pytest.mark.parametrize("seed", range(30))
def test_the_explanation_states_the_answers_lower_bound(seed):
    """``explain`` says the bound ``partition.json`` reports, also when a solver proved more
    than the graph's structure shows (then the structural bound is kept beside it)."""
    from support.generators import random_memory
    p = random_memory(seed)
    try:
        sol = refine(p, heuristic(p), budget=Budget.of(work_limit=1))
    except InfeasibleError:
        return
    ex = sol.stats["explain"]
    assert ex["lower_bound"] == sol.lower_bound
    if "structural_bound" in ex:
        assert ex["structural_bound"] < sol.lower_bound
        assert f"at least {sol.lower_bound} part(s) are needed" in ex["text"][0]
