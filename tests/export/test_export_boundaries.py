"""Part inputs and outputs as partition.json lists them (docs/problem.md and the README, "Use")."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_solve import make_problem


@pytest.mark.parametrize("seed", range(20))
def test_part_boundaries_match_the_definition(seed):
    """partition.json's inputs/outputs per part (one pass over all parts) against
    docs/problem.md applied to each part alone: an input is read in the part and made outside
    it (or a graph input), an output is made in the part and is a graph output or read outside
    it."""
    from hetero_solve.export.submodels import part_boundary
    from hetero_solve.measures import part_boundaries
    from hetero_solve.solution import Solution
    rng = np.random.default_rng(500 + seed)
    n = int(rng.integers(2, 50))
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.15]
    p = make_problem(n, edges, [[0, 1]] * n, outputs=[v for v in range(n) if rng.random() < 0.2])
    k = int(rng.integers(1, 6))
    part_of = [int(x) for x in rng.integers(0, k, n)]
    sol = Solution(part_of, [0] * k, [0] * k)
    got = part_boundaries(p, part_of)
    for q in range(k):
        nodes = [v for v in range(n) if part_of[v] == q]
        want_in, want_out = [], []
        for v in nodes:
            for t in p.node_inputs[v]:
                u = p.tensor_producer[t]
                if (u < 0 or part_of[u] != q) and p.tensor_names[t] not in want_in:
                    want_in.append(p.tensor_names[t])
            for t in p.node_outputs[v]:
                if p.tensor_is_output[t] or {part_of[c] for c in p.tensor_consumers[t]} - {q}:
                    want_out.append(p.tensor_names[t])
        assert got.get(q, ([], [])) == (want_in, want_out) == part_boundary(p, sol, q, nodes)
