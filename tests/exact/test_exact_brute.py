"""Both exact engines return the brute-force optimum on every small generated problem.

The generator (``support.generators.random_small``) draws 2-8 nodes, random DAGs, random
supports and pins (single-device nodes), value edges on enforcing and ignoring devices, memory
limits with 1 or 2 instances and shared constants, and the objectives of docs/problem.md in both
forms.  Brute force enumerates every set partition and device choice (``support.brute``).
"""

from __future__ import annotations

from collections import Counter

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.exact import refine
from hetero_solve.exact.analysis import device_sets
from hetero_solve.fitting.floors import binding_devices
from support.brute import brute_force
from support.generators import random_small
from hetero_solve.solution import evaluate, objective_key
from hetero_solve.validate import validate
from hetero_solve.budget import Budget

SEEDS = range(150)


@pytest.mark.parametrize("seed", SEEDS)
def test_engines_match_brute_force(seed):
    p = random_small(seed)
    best = brute_force(p)
    assert best is not None          # generated problems always have a solution
    start = heuristic(p)
    want = objective_key(p, best)
    for engine in ("cpsat", "sat") + (("auto",) if seed % 3 == 0 else ()):
        sol = refine(p, start, engine=engine, budget=Budget.of(work_limit=2.5))
        assert validate(p, sol) == [], engine
        assert objective_key(p, sol) == want, (engine, p.objective.describe())
        assert sol.status == "optimal", engine
        assert sol.lower_bound is not None and 1 <= sol.lower_bound <= sol.num_parts
        if p.objective.lexicographic and "partitions" in p.objective.order:
            assert sol.lower_bound == sol.num_parts     # partitions proven: the bound is tight


def test_the_generator_covers_the_hard_features():
    """The seeds above include what makes the problem hard, not only easy cases."""
    seen = Counter()
    for seed in SEEDS:
        p = random_small(seed)
        best = brute_force(p)
        h = heuristic(p)
        seen["objective " + ("weighted" if p.objective.weights else "lexicographic")] += 1
        seen["heuristic not optimal"] += objective_key(p, h) != objective_key(p, best)
        seen["binding memory"] += bool(binding_devices(p, device_sets(p, fixed=False)))
        seen["optimum with fallback"] += evaluate(p, best).fallback > 0
        seen["value edges"] += any(p.value_pred)
        seen["8 nodes"] += p.n == 8
        seen["shared constant"] += any(
            sum(c in cs for cs in p.node_consts) > 1 for c in range(len(p.const_names)))
    for key in ("objective weighted", "objective lexicographic", "heuristic not optimal",
                "binding memory", "optimum with fallback", "value edges", "8 nodes",
                "shared constant"):
        assert seen[key] >= 5, (key, seen)
