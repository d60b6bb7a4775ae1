"""Issue 21: the bin-packing bound on the parts memory forces (``exact/bounds.py``: ``packing``,
``held_copies``, ``bin_packing_bound``), against brute force.

- ``bin_packing_bound`` never exceeds the least number of bins (every assignment of items to
  bins tried) and is never below ``ceil(sum / cap)``;
- on random memory-limited problems (``generators.random_memory``), the parts bound with the
  packing never exceeds the brute-force optimum's parts, device by device: the parts on a
  device are at least its packing bound in every optimal answer (the brute-force one), and
  with fallback fixed at 0 the same holds for optimal answers of fallback 0;
- a hand case, a weight read at both ends of a chain (a tied embedding), where the old bound
  (the bytes once, ``ceil(T / cap)``) said 2, brute force says 3, and the new bound proves 3.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from hetero_solve.budget import Budget
from hetero_solve.exact import refine
from hetero_solve.exact.analysis import device_sets
from hetero_solve.exact.bounds import lower_bounds
from hetero_solve.fitting.bounds import packing
from hetero_solve.fitting.floors import binding_devices
from hetero_solve.fitting.packing import bin_packing_bound
from support.brute import brute_force
from hetero_solve.exact.explain import explain
from support.generators import random_memory
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import Solution, evaluate


def least_bins(sizes: list[int], cap: int) -> int:
    """The optimum of a small bin packing: every assignment of items to bins."""
    for k in range(1, len(sizes) + 1):
        for assignment in itertools.product(range(k), repeat=len(sizes)):
            loads = [0] * k
            for size, b in zip(sizes, assignment):
                loads[b] += size
            if max(loads) <= cap:
                return k
    return len(sizes)


@pytest.mark.parametrize("seed", range(300))
def test_bin_packing_bound_is_a_bound(seed):
    rng = random.Random(seed)
    cap = rng.randint(5, 20)
    sizes = [rng.randint(1, cap) for _ in range(rng.randint(1, 7))]
    bound = bin_packing_bound(sizes, cap)
    assert math.ceil(sum(sizes) / cap) <= bound <= least_bins(sizes, cap), (sizes, cap)


def test_bin_packing_bound_beats_the_bytes():
    # three items over half a bin need three bins; their bytes fit in two
    assert bin_packing_bound([6, 6, 6], 10) == 3 > math.ceil(18 / 10)


def _parts_on(sol: Solution, d: int) -> int:
    return sum(1 for q in range(sol.num_parts) if sol.part_device[q] == d)


def _random(seed: int, mode: str):
    """A random memory-limited problem; one constant is shared by the first and the last node
    (what makes copies), and in mode ``preferred`` every node may use its preferred device
    only (as when fallback is fixed at 0: all nodes forced, the weights bound the parts)."""
    p = random_memory(seed, limited_cpu=mode == "limited_cpu")
    rng = random.Random(seed)
    if p.const_names and p.n >= 3:
        k = rng.randrange(len(p.const_names))
        for v in (0, p.n - 1):
            if k not in p.node_consts[v]:
                p.node_consts[v].append(k)
    if mode == "preferred":
        p.allowed = [a[:1] for a in p.allowed]
    return p


@pytest.mark.parametrize("mode", ["free", "preferred", "limited_cpu"])
@pytest.mark.parametrize("seed", range(120))
def test_packing_never_exceeds_the_brute_force_optimum(seed, mode):
    p = _random(seed, mode)
    best = brute_force(p)
    if best is None:
        return
    R = device_sets(p, fixed=False)
    mem = binding_devices(p, R)
    b = lower_bounds(p, R, mem)
    assert b.lb <= best.num_parts
    found = packing(p, R, mem)
    for d in mem:   # every valid answer has that many parts on d: the optimum too
        assert found.parts[d] <= _parts_on(best, d), (d, found, best)
    if p.objective.lexicographic and list(p.objective.order[:2]) == ["fallback", "partitions"] \
            and evaluate(p, best).fallback == 0:
        Rf = device_sets(p, fixed=True)
        assert lower_bounds(p, Rf, binding_devices(p, Rf)).lb <= best.num_parts


def test_the_random_problems_exercise_the_copies():
    """The test above is not vacuous: constants held twice, and bounds above the bytes."""
    copies = stronger = 0
    for seed in range(600):
        p = _random(seed, "preferred")
        R = device_sets(p, fixed=False)
        mem = binding_devices(p, R)
        found = packing(p, R, mem)
        copies += bool(found.copies)
        for d in mem:
            once = found.held[d] - sum(p.const_bytes[k] * (len(vs) - 1)
                                       for k, vs in found.copies.get(d, {}).items())
            stronger += found.parts[d] > math.ceil(once / p.devices[d].memory)
    assert copies >= 3 and stronger >= 3, (copies, stronger)


def tied_weight():
    """``embed`` (node 0, a 6-byte weight ``E``) feeds three 4-byte-weight nodes whose results
    the head (node 4) adds up with ``E`` again; four 10-byte cards.  A part holding both ends
    holds everything between (18 bytes), so ``E`` is held twice: items 6, 6, 4, 4, 4."""
    p = make_problem(5, [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)], [[0]] * 5,
                     [Device("CARD", memory=10, instances=4)], tensor_bytes=0,
                     const_bytes=[6, 4, 4, 4, 0], names=["embed", "a", "b", "c", "head"],
                     objective=Objective(order=("partitions", "transfer")))
    p.node_consts[4].append(0)
    return p


def test_a_tied_weight_proves_what_the_bytes_did_not():
    p = tied_weight()
    R = device_sets(p, fixed=False)
    mem = binding_devices(p, R)
    b = lower_bounds(p, R, mem)
    assert math.ceil(sum(p.const_bytes) / 10) == 2          # the bytes alone: 2
    assert brute_force(p).num_parts == 3
    assert max(b.lb_path, b.lb_through, b.runs_per_device[0]) < 3   # the other bounds: no
    assert b.lb == 3 and b.packing == [3] and b.packing_bytes == [24]
    assert b.packing_copies == {0: {0: [0, 4]}}
    sol = refine(p, Solution([0, 1, 2, 3, 4], [0] * 5, [0, 1, 2, 3, 0]), engine="cpsat",
                 budget=Budget.of(work_limit=2.5))
    assert sol.num_parts == 3 and sol.lower_bound == 3
    ex = explain(p, R, b, sol.num_parts, proof="bound", fixed=False)
    assert ex["bounds"]["packing"] == 3 and ex["packing"][0]["shared"] == [
        {"constant": "w0", "bytes": 6, "parts": 2, "readers": ["embed", "head"]}]
    assert any("counted 2 times" in line and "embed, head" in line for line in ex["text"])
