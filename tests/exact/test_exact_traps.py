"""CP-SAT (and SAT, and the default engine) find strictly fewer parts than the greedy heuristic
on the constructed traps of ``support.generators`` and prove them optimal.

- ``sequence``: three devices; the greedy's device order is not the shortest common
  supersequence of the chains (heuristic ``6k + 1`` parts, optimum ``5k + 1``).
- ``value``: value-dependent inputs; running the device with more ready nodes first strands
  nodes that wait for a value (4 against 3).
- ``weighted``: ``{fallback: 1, partitions: 10}``; the greedy never moves a node off its
  preferred device (``2k + 1`` parts against 1).
"""

from __future__ import annotations

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.exact import refine
from support.generators import GREEDY_TRAPS, greedy_trap
from hetero_solve.solution import objective_key
from hetero_solve.validate import validate
from hetero_solve.budget import Budget

EXPECTED = {("sequence", 1): (7, 6), ("sequence", 4): (25, 21), ("value", 1): (4, 3),
            ("value", 3): (4, 3), ("weighted", 1): (3, 1), ("weighted", 4): (9, 1)}


@pytest.mark.parametrize("name,k", sorted(EXPECTED))
@pytest.mark.parametrize("engine", ["cpsat", "sat", "auto"])
def test_exact_beats_the_heuristic_on_traps(name, k, engine):
    p = greedy_trap(name, k)
    h = heuristic(p)
    sol = refine(p, h, engine=engine, budget=Budget.of(work_limit=5))
    assert (h.num_parts, sol.num_parts) == EXPECTED[(name, k)]
    assert sol.status == "optimal"
    assert objective_key(p, sol) < objective_key(p, h)
    assert validate(p, sol) == []
    assert sol.stats["heuristic_partitions"] == h.num_parts


def test_every_trap_is_tested():
    assert {name for name, _ in EXPECTED} == set(GREEDY_TRAPS)
