"""Issue 14 on real models: for every committed corpus model on every memory-limited profile
(``benchmarks/rules/mem-*.yaml``), the heuristic's answer is valid and never worse,
lexicographically, than any baseline's valid answer or the all-on-preferred map."""

from __future__ import annotations

import pytest

import hetero_solve as hs
from hetero_solve.solution import objective_key

from conftest import ROOT
from corpus import truth as T
from support.problems import rivals

pytestmark = pytest.mark.corpus

CORPUS = T.load_corpus()
COMMITTED = [n for n, e in CORPUS.items() if e.get("stored") == "committed"]
PROFILES = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))


def _kwargs(entry: dict) -> dict:
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes"):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    return kw


@pytest.mark.parametrize("name", COMMITTED)
def test_never_worse_than_a_baseline_on_the_memory_profiles(name):
    assert PROFILES, "benchmarks/rules/mem-*.yaml"
    entry = CORPUS[name]
    path = T.model_file(name, entry)
    for rules in PROFILES:
        r = hs.solve(str(path), str(rules), engine="heuristic", **_kwargs(entry))
        p, sol = r.problem, r.solution
        assert hs.validate(p, sol) == [], rules.stem
        mine = objective_key(p, sol)
        for who, other in rivals(p).items():
            assert mine <= objective_key(p, other), (rules.stem, who)
