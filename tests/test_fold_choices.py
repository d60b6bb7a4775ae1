"""Fold choices against brute force (issue 24): on random memory-limited problems with foldable
``Shape``/``Transpose`` chains read both as value inputs and as data, every answer is valid
under the judge ``check`` uses, and ``optimal`` is said only where brute force over **every**
fold choice (every set of placed options closed under ``requires``) finds nothing better."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest

from hetero_solve.errors import InfeasibleError
from hetero_solve.exact import refine_with_folds
from support.brute import brute_force
from hetero_solve.exact.folds import closure, relaxed, restrict, unfold
from hetero_solve.pipeline import initial_solution
from hetero_solve.problem import Device, FoldOption, make_problem
from hetero_solve.solution import objective_key
from hetero_solve.user_partition import judge_answer
from hetero_solve.validate import validate
from hetero_solve.budget import Budget

SEEDS = range(40)


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


def best_over_choices(p):
    best = None
    for ks in choices(p):
        q = unfold(p, ks)
        s = brute_force(q)
        if s is not None:
            key = objective_key(q, s)
            best = key if best is None or key < best else best
    return best


def checked(p, q, sol):
    """``check``'s verdict on ``sol`` as partition.json writes it (node names, devices,
    instances), the problem rebuilt from ``p`` and the names of the placed options."""
    mg = SimpleNamespace(names=list(q.names), path="<generated>")
    return judge_answer(mg, p, q, sol)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_answer_is_valid_and_optimal_only_where_brute_force_agrees(seed):
    p = folds_problem(seed)
    best = best_over_choices(p)
    try:
        start = initial_solution(p, budget=Budget.of(work_limit=1))
        q, sol = refine_with_folds(p, start, budget=Budget.of(work_limit=1))
    except InfeasibleError:
        assert best is None, f"seed {seed}: a partition exists ({best}) but none was found"
        return
    assert validate(q, sol) == []
    assert checked(p, q, sol) == []
    key = objective_key(q, sol)
    assert best is not None and key >= best
    if sol.status == "optimal":
        assert key == best, f"seed {seed}: optimal {key} but {best} exists"
    if best[0] == key[0]:     # the optimum is among the answers as good on fallback
        assert sol.lower_bound <= best[1]
    assert sol.stats.get("bounds", {}).get("fallback", 0) <= best[0]


def test_optimal_is_said_somewhere_and_the_relaxation_covers_every_choice():
    """Not a vacuous pass: some answers are proven over every choice; and the relaxation's
    measures bound every choice's optimum (restricted to the compiled nodes)."""
    proven = 0
    for seed in SEEDS:
        p = folds_problem(seed)
        rel = relaxed(p)
        for ks in choices(p):
            q = unfold(p, ks)
            s = brute_force(q)
            if s is None:
                continue
            r = restrict(p, q, s)
            assert validate(rel, r) == []
            assert all(a <= b for a, b in zip(objective_key(rel, r), objective_key(q, s)))
        try:
            _q, sol = refine_with_folds(p, initial_solution(p, budget=Budget.of(work_limit=1)), budget=Budget.of(work_limit=1))
        except InfeasibleError:
            continue
        proven += sol.status == "optimal"
    assert proven >= len(SEEDS) // 4


def test_a_placed_option_read_as_a_value_by_another_needs_another_part():
    """``Shape(W) -> Expand(x, shape)``, both placed on a device that enforces value inputs:
    the unfolded problem has the value edge between the two new nodes (the T5 pattern)."""
    p = make_problem(1, [], [[0, 1]], [Device("ACC", memory=100), "CPU"], const_bytes=[0])
    p.const_names += ["W", "s", "e"]
    p.const_bytes += [8, 2, 40]
    p.node_consts[0].append(2)
    p.fold_options = [FoldOption(5, "shape", "Shape", (0, 1), (0,), (1,), requires=(1,),
                                 value_requires=(1,)),
                      FoldOption(6, "expand", "Expand", (0, 1), (1,), (2,))]
    q = unfold(p, [0])
    shape, expand = q.names.index("shape"), q.names.index("expand")
    assert q.value_pred[expand] == [shape]
    assert any("value" == v.kind for v in validate(q, _one_part(q)))


def _one_part(q):
    from hetero_solve.solution import Solution
    return Solution([0] * q.n, [0], [0])
