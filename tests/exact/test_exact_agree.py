"""CP-SAT and SAT agree on the optimum on 50 random graphs of 30-200 nodes.

Half the graphs keep every node on its preferred device (objective ``[fallback, partitions]``,
fallback 0 is reachable: the devices are fixed, value edges decide), half let nodes move
(``[partitions]`` with 2-3 devices per flexible node).  Both engines must prove their answer, and
the answers must have the same number of parts; the search over device sequences (the third
exact method) must agree too.
"""

from __future__ import annotations

import random

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.exact import refine
from support.generators import random_dag
from hetero_solve.problem import Objective
from hetero_solve.validate import validate
from hetero_solve.budget import Budget


def _problem(seed: int):
    rng = random.Random(seed)
    n = rng.randint(30, 200)
    objective = Objective(order=("fallback", "partitions")) if seed % 2 == 0 else \
        Objective(order=("partitions",))
    return random_dag(n, seed, memory=False, devices=2 + seed % 3 % 2, objective=objective,
                      value_prob=0.1)


@pytest.mark.parametrize("seed", range(50))
def test_cpsat_and_sat_agree(seed):
    p = _problem(seed)
    start = heuristic(p)
    parts = {}
    for engine in ("cpsat", "sat", "auto"):
        sol = refine(p, start, engine=engine, budget=Budget.of(work_limit=10))
        assert validate(p, sol) == []
        assert sol.status == "optimal", (engine, sol.stats["stages"])
        assert sol.num_parts <= start.num_parts
        parts[engine] = sol.num_parts
    assert len(set(parts.values())) == 1, parts
