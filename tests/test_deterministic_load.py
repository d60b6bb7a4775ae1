"""One budget per call (``hetero_solve/budget.py``, docs/exact.md "Determinism, time and
interruption"): ``--time-limit`` is a wall-clock promise with deterministic work inside it,
``--work-limit`` is deterministic work with no clock.

The model is one of the corpus's (``mobilenetv2-tiny-legacy``, nobody here wrote it) on the
3 MiB NPU: the budget runs out before every stage is proven (``feasible``), so the budget, not a
proof, decides where each search stops.  The wall-clock checks read the stage times the run
itself reports in ``partition.json`` (heuristic, exact, validate: the solve), never the test's
own clock."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hetero_solve as hs
from conftest import ROOT
from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.budget import TIME_LIMIT, Budget
from hetero_solve.exact import refine
from hetero_solve.export import build_manifest
from hetero_solve.pipeline import prepare, solve_prepared
from hetero_solve.solution import objective_key
from support.generators import random_dag, random_memory

pytestmark = pytest.mark.load

MODEL = ROOT / "corpus" / "models" / "mobilenetv2-tiny-legacy.onnx"
RULES = ROOT / "benchmarks" / "rules" / "mem-small-npu.yaml"
DIMS = {"batch": 1, "height": 160, "width": 160}
DIM_ARGS = [a for k, v in DIMS.items() for a in ("--dim", f"{k}={v}")]
#: Fields that are wall-clock measurements.
TIMING = {"seconds", "stage_seconds", "exact_seconds", "wall"}
#: The solve's stages, model prepared to answer ready (partition.json's stage_seconds).
SOLVE_STAGES = ("heuristic", "exact", "validate")
#: What may run after the deadline: the step under way when it passes (a model being built,
#: the heuristic: each step checks the deadline before it starts), the answer's validation and
#: report.  Tenths of a second on a quiet machine; seconds when the machine runs a test suite
#: per core.
SLACK = 2.0
HANG = 600


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _solve(out: Path, *limit: str) -> dict:
    """The command's partition.json (the solver writes ``stage_seconds`` of its own run)."""
    r = subprocess.run([sys.executable, "-m", "hetero_solve", str(MODEL), str(RULES), *DIM_ARGS,
                        *limit, "--no-models", "--json", "-q", "-o", str(out)],
                       capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads((out / "partition.json").read_text())
    solver = manifest["solver"]
    if solver["deterministic"]:
        assert "stopped_by" not in solver and "time limit" not in r.stderr, r.stderr
    else:           # the clock ended first: said in partition.json and in one warning line
        assert solver["stopped_by"] == TIME_LIMIT
        assert sum("time limit ended the search" in line for line in r.stderr.splitlines()) == 1
    return manifest


def _solve_seconds(manifest: dict) -> float:
    return sum(manifest["solver"]["stage_seconds"].get(s, 0.0) for s in SOLVE_STAGES)


def _beside_a_hog(work):
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        return work()
    finally:
        hog.kill()
        hog.wait()


def _solve_here(limit: float) -> tuple[dict, list[str]]:
    """The solve in this process: its partition.json (without files) and warnings."""
    r = hs.solve(MODEL, RULES, dims=DIMS, time_limit=limit)
    assert not hs.validate(r.problem, r.solution)
    return build_manifest(r, files=False), r.warnings


def test_time_limit_alone_and_beside_a_cpu_hog():
    """Twice alone, once beside a hog: every run the deterministic budget ended gives the same
    answer; a run the clock ended says so (once); each solve keeps its limit.  In this process,
    with CP-SAT imported first: its first import (pandas) is not what is measured here."""
    import ortools.sat.python.cp_model  # noqa: F401
    limit = 2.0
    runs = [_solve_here(limit), _solve_here(limit)]
    runs.append(_beside_a_hog(lambda: _solve_here(limit)))
    for m, warnings in runs:
        solver = m["solver"]
        assert _solve_seconds(m) <= limit + SLACK, solver["stage_seconds"]
        assert solver["time_limit"] == limit
        said = [w for w in warnings if "time limit ended the search" in w]
        if solver["deterministic"]:
            assert "stopped_by" not in solver and not said
        else:
            assert solver["stopped_by"] == TIME_LIMIT and len(said) == 1
    same = [_strip(m) for m, _ in runs if m["solver"]["deterministic"]]
    assert all(m == same[0] for m in same)


def test_work_limit_alone_and_beside_a_cpu_hog(tmp_path):
    """No clock: the same partition.json at any load, always deterministic."""
    alone = _solve(tmp_path / "alone", "--work-limit", "0.5")
    loaded = _beside_a_hog(lambda: _solve(tmp_path / "loaded", "--work-limit", "0.5"))
    assert alone["status"] == "feasible"         # the budget, not a proof, ended the search
    assert [s["stage"] for s in alone["solver"]["stages"]] == ["fallback", "partitions",
                                                              "transfer"]
    assert alone["solver"]["deterministic"] and alone["solver"]["work_limit"] == 0.5
    assert "time_limit" not in alone["solver"]
    assert _strip(alone) == _strip(loaded)


def _expired() -> Budget:
    """No work left and the deadline passed a second ago."""
    return Budget(0.0, time.perf_counter() - 1.0, time_limit=0.0)


def _forbid_solvers(monkeypatch) -> None:
    """Every solver run, the relaxed models, the search over device sequences, the second
    fold problem and the certification over every fold choice raise: a part of the solve
    that ignored the deadline would reach one of them."""
    import hetero_solve.exact as exact
    import hetero_solve.exact.cpsat as cpsat
    import hetero_solve.exact.folds as folds
    import hetero_solve.exact.stages.fallback as fallback
    import hetero_solve.exact.stages.partitions as partitions
    import pysat.solvers as pysat_solvers     # exact/sat imports its solver when used

    def forbidden(*_a, **_k):
        raise AssertionError("work ran after the deadline")

    for module, name in ((cpsat, "run"), (pysat_solvers, "Solver"),
                         (fallback, "relaxed_fallback"),
                         (partitions.sequence, "search"), (exact, "unfold"),
                         (folds, "_relaxed_lower_bound"), (folds, "_relaxed_fallback_bound")):
        monkeypatch.setattr(module, name, forbidden)


def test_when_the_clock_ends_first_the_heuristic_answer_is_kept_and_marked(monkeypatch):
    """A budget with no work left and its deadline passed: nothing but the heuristic runs,
    its answer comes back valid, and the answer and the warnings say the clock ended it."""
    prepared = prepare(MODEL, RULES, dims=DIMS)
    want = heuristic(prepared.problem)
    _forbid_solvers(monkeypatch)
    r = solve_prepared(prepared, budget=_expired())
    assert not hs.validate(r.problem, r.solution)
    assert (r.solution.part_of, r.solution.part_device) == (want.part_of, want.part_device)
    assert r.solution.status == "feasible"
    assert r.solution.stats["deterministic"] is False
    assert r.solution.stats["stopped_by"] == TIME_LIMIT
    assert sum("time limit ended the search" in w for w in r.warnings) == 1
    # a model with an optional fold: the second problem and the certification wait too
    cf = prepare(ROOT / "examples" / "control_flow.onnx", ROOT / "rules" / "multi-card.yaml",
                 dims={"seq": 5, "batch": 2})
    assert cf.problem.fold_options
    r = solve_prepared(cf, budget=_expired())
    assert not hs.validate(r.problem, r.solution) and r.solution.stats["stopped_by"] == TIME_LIMIT


def test_the_rescue_search_draws_on_the_budget_too(monkeypatch):
    """When the heuristic cannot pack memory the exact solver searches; past the deadline it
    does not, and the error says the budget, not a proof, ended it."""
    from hetero_solve.pipeline import initial_solution
    p = hs.make_problem(6, [], [[0]] * 6, [hs.Device("ACC", 10, 2)], tensor_bytes=0,
                        const_bytes=[5, 4, 3, 3, 3, 2])
    _forbid_solvers(monkeypatch)
    with pytest.raises(hs.InfeasibleError, match="within its budget"):
        initial_solution(p, engine="auto", budget=_expired())


def test_a_fold_choice_and_its_certification_draw_on_one_budget():
    """A model with optional folds: the two problems and the certification share the call's
    work (nothing spent twice: the call's total stays within its limit)."""
    model = ROOT / "examples" / "control_flow.onnx"
    rules = ROOT / "rules" / "multi-card.yaml"
    prepared = prepare(model, rules, dims={"seq": 5, "batch": 2})
    assert prepared.problem.fold_options
    budget = Budget.of(work_limit=0.4)
    r = solve_prepared(prepared, budget=budget)
    assert "folds" in r.solution.stats
    assert budget.spent <= 0.4 + 0.2     # a run's last step may pass its allotment a little
    assert r.solution.stats["work_limit"] == 0.4


@pytest.mark.parametrize("make,seed", [(random_dag, 3), (random_dag, 7), (random_memory, 2),
                                       (random_memory, 5)])
def test_a_larger_limit_is_never_worse(make, seed):
    """More work, never a worse answer (work limits, so no clock decides)."""
    p = make(120, seed, memory=True) if make is random_dag else make(seed)
    start = heuristic(p)
    keys = [objective_key(p, refine(p, start, budget=Budget.of(work_limit=w)))
            for w in (0.05, 0.1, 0.25, 0.5, 1.0)]
    assert keys == sorted(keys, reverse=True), keys


def test_one_budget_per_call_and_its_parts():
    b = Budget.of(work_limit=1.0)
    a = b.split(4)
    assert a.left() == 0.25
    a.charge(0.1)
    assert b.spent == pytest.approx(0.1) and b.left() == pytest.approx(0.9)
    c = b.allot(5.0)               # never more than the parent has left
    assert c.left() == pytest.approx(0.9)
    c.charge(1.0)
    assert b.left() == 0.0 and b.exhausted and a.left() == 0.0
    assert b.deterministic and b.stopped_by is None and b.deadline is None
    t = Budget.of(time_limit=2.0)
    assert t.work == 1.0 and 0 < t.wall_left() <= 2.0 and not t.out_of_time()
    with pytest.raises(ValueError):
        Budget.of(time_limit=1, work_limit=1)
    with pytest.raises(ValueError):
        Budget.of(work_limit=-1)
    gone = Budget(1.0, time.perf_counter() - 1, time_limit=1.0).split(2)
    assert gone.out_of_time() and not gone.deterministic and gone.stopped_by == TIME_LIMIT
