"""The exact engine under memory limits: refusals that name what cannot fit, and agreement
with brute force on small memory-limited problems."""

from __future__ import annotations

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.errors import InfeasibleError
from hetero_solve.exact import refine
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import Solution


def _unplaceable(objective: Objective):
    """Node ``big`` reads a 7-byte constant and may only go to A (3 bytes per instance)."""
    return make_problem(3, [(0, 1), (1, 2)], [[1], [0], [1]],
                        [Device("A", memory=3, instances=2), Device("B")],
                        const_bytes=[0, 7, 0], names=["x", "big", "y"], objective=objective)


@pytest.mark.parametrize("objective", [
    Objective(order=("partitions", "fallback", "transfer")),
    Objective(order=("transfer", "partitions")),
    Objective(weights={"fallback": 1, "partitions": 3}),
    Objective(),
])
def test_a_node_that_fits_nowhere_is_refused_by_name(objective):
    """Issue 16: this crashed with an IndexError in the encoding when the objective did not
    start with [fallback, partitions]; it must be a refusal naming the node and the bytes."""
    p = _unplaceable(objective)
    with pytest.raises(InfeasibleError, match=r"'big' \(Op\) needs at least 7 bytes.*A holds 3 B"):
        start = Solution([0, 1, 2], [1, 0, 1], [0, 0, 0])     # one node per part
        refine(p, start, engine="cpsat", time_limit=1)
    with pytest.raises(InfeasibleError, match="'big'"):
        refine(p, Solution([0, 1, 2], [1, 0, 1], [0, 0, 0]), engine="sat", time_limit=1)
