"""Random problems several test rooms share: costed problems (tests/exact/test_costs_exact.py's
oracle), fold-choice problems (tests/exact/test_fold_choices.py) and a problem's valid rivals
(tests/algorithms/test_memory_heuristic.py)."""

from __future__ import annotations

import itertools
import random

import hetero_solve as hs
from hetero_solve.algorithms.baselines import BASELINES, BaselineSkipped
from hetero_solve.costs import CostModel, Link
from hetero_solve.exact.folds import closure
from hetero_solve.problem import Device, FoldOption, Objective, make_problem
from hetero_solve.solution import Solution
from support.generators import random_small
from hetero_solve.user_partition import Entry, UserMap, user_solution

OBJECTIVES = [Objective(order=("latency",)), Objective(order=("throughput",)),
              Objective(order=("throughput", "partitions")),
              Objective(order=("fallback", "latency")),
              Objective(weights={"latency": 1.0, "partitions": 0.5}),
              Objective(weights={"throughput": 2.0, "transfer": 0.01})]


def costed(seed: int):
    """A generated problem (memory limits, pins, value edges) with random costs, a random
    colocation pair, a cost objective and, one time in three, contiguous stages."""
    rng = random.Random(seed)
    p = random_small(seed)
    D = len(p.devices)
    p.costs = CostModel(
        node_time=[[round(rng.uniform(0.1, 3.0), 3) for _ in range(D)] for _ in range(p.n)],
        part_cost=[round(rng.uniform(0, 0.8), 2) for _ in range(D)],
        links=[None if d == D - 1 else Link(bandwidth=rng.choice([1.0, 4.0, None]),
                                            latency=round(rng.uniform(0, 0.3), 2))
               for d in range(D)],
        contiguous=seed % 3 == 0)
    if p.n >= 3 and seed % 2:
        a, b = rng.sample(range(p.n), 2)
        if set(p.allowed[a]) & set(p.allowed[b]):
            p.colocation = [[a, b]]
    p.objective = OBJECTIVES[seed % len(OBJECTIVES)]
    return p


def folds_problem(seed: int):
    """A random problem of 3-5 placed nodes on an ACC (memory-limited, enforcing value inputs
    or not, 1-2 instances) and a CPU, with a constant ``W`` and two fold options: ``f0`` reads
    ``W`` (a ``Transpose``, as large as ``W``, or a ``Shape``, small) and ``f1`` reads ``f0``'s
    output, as data or as a value (a ``Concat``, or an ``Expand`` whose output is larger than
    its inputs).  Placed nodes read the options' outputs as data or as value inputs, and
    ``W`` itself.  Unfolded completely, at most 7 nodes."""
    rng = random.Random(seed)
    n = rng.randint(3, 5)
    edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.45]
    acc = Device("ACC", memory=rng.choice([24, 32, 40, 56]), instances=rng.choice([1, 1, 2]),
                 enforce_values=rng.random() < 0.7)
    allowed = [[0, 1] if rng.random() < 0.85 else [1] for _ in range(n)]
    p = make_problem(n, edges, allowed, [acc, "CPU"],
                     tensor_bytes=[rng.choice([2, 4, 8]) for _ in range(n)],
                     const_bytes=[rng.choice([0, 0, 4, 8]) for _ in range(n)])
    w_bytes = rng.choice([8, 12, 16])
    f0_out = w_bytes if rng.random() < 0.5 else 2           # Transpose(W) or Shape(W)
    f1_out = rng.choice([2, 3 * w_bytes])                   # Concat, or a widening Expand
    ids = []
    for name, size in (("W", w_bytes), ("c0", f0_out), ("c1", f1_out)):
        ids.append(len(p.const_names))
        p.const_names.append(name)
        p.const_bytes.append(size)
    W, c0, c1 = ids
    readers = {c0: [], c1: []}
    value = {c0: [], c1: []}
    for v in range(n):
        if rng.random() < 0.35:
            p.node_consts[v].append(W)
        for c in (c0, c1):
            if rng.random() < 0.4:
                p.node_consts[v].append(c)
                readers[c].append(v)
                if rng.random() < 0.5:
                    value[c].append(v)
    if not readers[c0] and not readers[c1]:
        v = rng.randrange(n)
        p.node_consts[v].append(c1)
        readers[c1].append(v)
    f1_value = rng.random() < 0.5            # f1 reads f0's output as its shape input
    devs = lambda: tuple(d for d in (0, 1) if rng.random() < 0.7) or (1,)   # noqa: E731
    p.fold_options = [
        FoldOption(100, "f0", "Transpose" if f0_out == w_bytes else "Shape", devs(), (W,), (c0,),
                   value_readers=tuple(value[c0]), requires=(1,),
                   value_requires=(1,) if f1_value else ()),
        FoldOption(101, "f1", "Expand" if f1_out > 2 else "Concat", devs(), (c0,), (c1,),
                   value_readers=tuple(value[c1]))]
    return p


def choices(p):
    """Every set of options closed under ``requires``."""
    seen = set()
    for r in range(len(p.fold_options) + 1):
        for ks in itertools.combinations(range(len(p.fold_options)), r):
            c = tuple(closure(p, ks))
            if c not in seen:
                seen.add(c)
                yield list(c)


def rivals(problem: hs.Problem) -> dict[str, Solution]:
    """The baselines' answers and the all-on-preferred map that the validator accepts."""
    out = {}
    for name, baseline in BASELINES.items():
        try:
            sol = baseline.run(problem)
        except BaselineSkipped:
            continue
        out[name] = sol
    out["all on preferred"] = preferred_map(problem)
    return {k: s for k, s in out.items() if not hs.validate(problem, s, require_order=False)}


def preferred_map(problem: hs.Problem) -> Solution:
    """Every node on its preferred device, split into connected same-device regions, parts on
    instances first-fit decreasing (what ``hetero-solve check`` does with that map)."""
    names = problem.names
    devices = [problem.devices[a[0]].name for a in problem.allowed]
    umap = UserMap("<preferred>", "device", {n: Entry(device=d) for n, d in zip(names, devices)})
    resolved = [(a[0], None, None) for a in problem.allowed]
    return user_solution(problem, umap, resolved)
