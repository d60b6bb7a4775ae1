"""The cost stages on the exact engine's rails (docs/exact.md, "Cost terms"): records, proofs
and answers as every stage's, at sizes from brute force (tests/exact/test_costs_exact.py) to
ONNX-like graphs of thousands of nodes: the answer is valid, never worse than the heuristic
start or the best single device, and the bound is true; ``engine="sat"`` says in one line that
it has no cost terms."""

from __future__ import annotations

import random

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.budget import Budget
from hetero_solve.costs import CostModel, Link
from hetero_solve.exact import refine
from hetero_solve.exact.stages.costs import SAT_LINE
from hetero_solve.pipeline import solve_problem
from hetero_solve.problem import Objective
from hetero_solve.solution import Solution, objective_term
from hetero_solve.validate import validate
from support.generators import cnn_like, transformer_like
from support.problems import costed


def with_costs(p, seed: int, objective: str):
    rng = random.Random(seed)
    D = len(p.devices)
    p.costs = CostModel([[rng.uniform(1e-5, 1e-3) if d in p.allowed[v] else None
                          for d in range(D)] for v in range(p.n)],
                        [1e-4] * D, [Link(1e9, 1e-5)] + [None] * (D - 1))
    p.objective = Objective(order=(objective,))
    return p


def single_device_values(p, term: str) -> list[float]:
    out = []
    for d in range(len(p.devices)):
        if all(d in a for a in p.allowed):
            s = Solution([0] * p.n, [d], [0])
            if not validate(p, s):
                out.append(objective_term(p, s, term))
    return out


@pytest.mark.parametrize("make, n", [(cnn_like, 400), (transformer_like, 3000),
                                     (cnn_like, 20_000)])
@pytest.mark.parametrize("term", ["latency", "throughput"])
def test_large_problems_never_worse_than_the_start_or_one_device(make, n, term):
    p = with_costs(make(n, 1), n, term)
    start = heuristic(p)
    _, sol, metrics, _ = solve_problem(p, engine="auto", budget=Budget.of(work_limit=1))
    assert validate(p, sol) == []
    value = getattr(metrics, term)
    assert value <= objective_term(p, start, term) + 1e-12
    assert all(value <= v + 1e-12 for v in single_device_values(p, term))
    bound = sol.stats["cost_bounds"][term]
    assert bound <= value + 1e-12
    assert sol.stats["deterministic"] in (True, False)
    stages = sol.stats["stages"]
    assert [s["stage"] for s in stages] == [term]
    assert stages[0]["bound"] == bound
    assert (sol.status == "optimal") == stages[0]["proven"]


def test_every_answer_is_validated():
    """A cost stage's answers go through Search.accept: valid ones only, and the record says
    which were kept."""
    p = costed(3)
    sol = refine(p, None, budget=Budget.of(work_limit=2))
    assert validate(p, sol) == []
    runs = [r for s in sol.stats["stages"] for r in s["runs"]]
    assert any(r.get("engine") == "single device" or "kept" in r for r in runs)


def test_sat_engine_says_it_has_no_cost_terms():
    p = with_costs(cnn_like(60, 2), 2, "latency")
    lines = []
    sol = refine(p, heuristic(p), engine="sat", budget=Budget.of(work_limit=1), progress=lines.append)
    assert SAT_LINE in lines and "\n" not in SAT_LINE
    assert p.info.warnings.count(SAT_LINE) == 1            # the answer's warning line
    assert validate(p, sol) == []
    assert sol.stats["stages"][0]["runs"][-1] == {"engine": "sat", "skipped": SAT_LINE}
    assert sol.stats["cost_bounds"]["latency"] <= objective_term(p, sol, "latency") + 1e-12


def test_lexicographic_counting_terms_first_keep_their_stages():
    """[fallback, latency]: fallback has its own stage (its records and proofs), latency is a
    cost stage capped by it."""
    p = with_costs(cnn_like(40, 3), 3, "latency")
    p.objective = Objective(order=("fallback", "latency"))
    start = heuristic(p)
    sol = refine(p, start, budget=Budget.of(work_limit=2))
    assert [s["stage"] for s in sol.stats["stages"]] == ["fallback", "latency"]
    assert validate(p, sol) == []
    assert (objective_term(p, sol, "fallback"), objective_term(p, sol, "latency")) <= \
        (objective_term(p, start, "fallback"), objective_term(p, start, "latency"))
