"""Each stage's record says what the stage proved, and it holds against brute force.

The stages of ``exact.refine`` (``hetero_solve/exact/stages/``) return ``StageRecord``s; the
report step (``exact/report.py``) derives the answer's status and bounds from them alone.  On
small random problems (with and without binding memory, lexicographic and weighted
objectives) every claim is checked against the brute-force optimum:

* a stage that claims its term proven has the optimum's value of that term (a lexicographic
  term is proven only with every earlier one, so the best answer then agrees with the
  optimum's key up to that term);
* a parts or fallback bound, proven with every earlier term, is at most the optimum's value
  of that term (it bounds every answer as good on the earlier terms, and the optimum is one);
* the report's status, ``proven``, ``lower_bound`` and ``stages`` are what the records say.
"""

from __future__ import annotations

from collections import Counter

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.exact.analysis import device_sets
from support.brute import brute_force
from hetero_solve.exact.report import report
from hetero_solve.budget import Budget
from hetero_solve.exact.search import Search
from hetero_solve.exact.stages import run_stages
from support.generators import random_memory, random_small
from hetero_solve.solution import evaluate, objective_key
from hetero_solve.validate import validate

CASES = [("small", s) for s in range(60)] + [("memory", s) for s in range(60)]


def _problem(kind: str, seed: int):
    return random_small(seed) if kind == "small" else random_memory(seed)


def _records(p, engine: str = "auto"):
    ctx = Search.begin(p, heuristic(p), engine, Budget.of(work_limit=2.5), 0, None, 1,
                       device_sets(p, fixed=False))
    records = run_stages(ctx)
    return ctx, records, report(ctx, records)


@pytest.mark.parametrize("kind,seed", CASES)
def test_records_claim_only_what_brute_force_confirms(kind, seed):
    p = _problem(kind, seed)
    best = brute_force(p)
    want = objective_key(p, best)
    ctx, records, sol = _records(p)
    assert validate(p, sol) == []
    got = evaluate(p, sol).as_dict()
    opt = evaluate(p, best).as_dict()
    obj = p.objective
    if obj.lexicographic:
        assert [r.stage for r in records] == list(obj.order)
        for i, r in enumerate(records):
            if r.proven:     # proven with every earlier term: the optimum's key so far
                assert all(x.proven for x in records[:i])
                assert objective_key(p, sol)[:i + 1] == want[:i + 1], r.stage
                assert r.after == opt[r.stage]
            if r.stage == "partitions" and r.bound is not None:
                assert r.bound <= opt["partitions"]
    else:
        assert [r.stage for r in records] == ["weighted"]
        if records[0].proven:
            assert objective_key(p, sol) == want
    for i, r in enumerate(records):
        assert r.method, r.stage              # every stage says how it ended
        if r.stage == "fallback" and r.bound and all(x.proven for x in records[:i]):
            # a bound on the fallback of every answer as good on the earlier terms
            assert r.bound <= opt["fallback"]
    # the report says what the records say
    proven = [r.stage for r in records if r.proven]
    assert sol.stats["proven"] == proven
    assert sol.status == ("optimal" if len(proven) == len(records) else "feasible")
    assert sol.stats["stages"] == [r.as_dict() for r in records if r.listed]
    parts_bound = max((r.bound or 0 for r in records if r.stage == "partitions"), default=0)
    assert parts_bound <= sol.lower_bound <= sol.num_parts
    # a bound on every answer as good on the terms before partitions: the optimum is one
    assert sol.lower_bound <= opt["partitions"]
    if obj.lexicographic and "partitions" in proven:
        assert sol.lower_bound == got["partitions"] == opt["partitions"]


def test_records_cover_every_stage_and_proof():
    """The cases above reach every stage, proven, and the proofs worth checking: bounds that
    are not trivial and each way of settling a stage."""
    seen: Counter = Counter()
    for kind, seed in CASES:
        p = _problem(kind, seed)
        _ctx, records, _sol = _records(p)
        for r in records:
            seen[f"{r.stage} proven"] += r.proven
            seen[f"method {r.method}"] += 1
            seen["parts bound > 1"] += r.stage == "partitions" and (r.bound or 0) > 1
            seen["fallback bound > 0"] += r.stage == "fallback" and (r.bound or 0) > 0
    for key in ("fallback proven", "partitions proven", "transfer proven", "weighted proven",
                "method bound", "method relaxation", "method sequence", "parts bound > 1",
                "fallback bound > 0"):
        assert seen[key] > 0, (key, seen)
