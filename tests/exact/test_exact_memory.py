"""The exact engine under memory limits: refusals that name what cannot fit, and agreement
with brute force on small memory-limited problems."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.errors import InfeasibleError
from hetero_solve.exact import refine
from hetero_solve.exact.analysis import device_sets
from hetero_solve.exact.assign import relaxed_fallback, relaxed_parts
from support.brute import brute_force
from hetero_solve.fitting.floors import binding_devices
from hetero_solve.algorithms.greedy import parts_without_memory
from hetero_solve.fitting.realize import fit_by_runs, realize
from support.generators import random_memory
from hetero_solve.measures import topological_order
from hetero_solve.problem import Device, Objective, make_problem
from hetero_solve.solution import Solution, evaluate, normalize, objective_key
from hetero_solve.validate import validate
from hetero_solve.budget import Budget


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
        refine(p, start, engine="cpsat", budget=Budget.of(work_limit=0.5))
    with pytest.raises(InfeasibleError, match="'big'"):
        refine(p, Solution([0, 1, 2], [1, 0, 1], [0, 0, 0]), engine="sat", budget=Budget.of(work_limit=0.5))


# -- brute force ------------------------------------------------------------------------------

MEMORY_SEEDS = range(250)


@functools.lru_cache(maxsize=None)
def _brute(seed: int, limited_cpu: bool = False, objective: Objective | None = None):
    p = random_memory(seed, limited_cpu=limited_cpu)
    if objective is not None:
        p.objective = objective
    return p, brute_force(p)


def _start(p):
    """The heuristic's answer, or one node per part when the heuristic cannot fit memory
    (what the pipeline does)."""
    try:
        return heuristic(p)
    except InfeasibleError:
        order = topological_order(p.succ, p.pred)
        part = [0] * p.n
        for k, v in enumerate(order):
            part[v] = k
        return Solution(part, [p.allowed[v][0] for v in order], [0] * p.n)


@pytest.mark.parametrize("seed", MEMORY_SEEDS)
def test_engines_match_brute_force_under_memory(seed):
    """Both engines (and ``auto`` on every third) prove the brute-force optimum on small
    problems where memory binds: activations larger than an instance, shared constants,
    nodes with several constants, 1-3 instances, lexicographic and weighted objectives."""
    p, best = _brute(seed)
    assert best is not None
    want = objective_key(p, best)
    start = _start(p)
    for engine in ("cpsat", "sat") + (("auto",) if seed % 3 == 0 else ()):
        sol = refine(p, start, engine=engine, budget=Budget.of(work_limit=2.5))
        assert validate(p, sol) == [], engine
        assert objective_key(p, sol) == want, (engine, p.objective.describe())
        assert sol.status == "optimal", engine
        assert 1 <= sol.lower_bound <= sol.num_parts


@pytest.mark.parametrize("seed", range(150))
def test_refusals_only_when_nothing_fits(seed):
    """Every device limited (the CPU too): the engines refuse only problems brute force finds
    no answer for, and otherwise prove its optimum."""
    p, best = _brute(seed, True)
    try:
        start = _start(p)
        sol = refine(p, start, engine="cpsat", budget=Budget.of(work_limit=2.5))
    except InfeasibleError:
        assert best is None
        return
    if validate(p, sol):     # the start did not fit and the solver found nothing better
        assert best is None
        return
    assert best is not None and objective_key(p, sol) == objective_key(p, best)
    assert sol.status == "optimal"


def test_the_memory_generator_covers_the_hard_features():
    seen = Counter()
    for seed in MEMORY_SEEDS:
        p, best = _brute(seed)
        m = evaluate(p, best)
        cap = max(d.memory or 0 for d in p.devices)
        seen["binding memory"] += bool(binding_devices(p, device_sets(p, fixed=False)))
        seen["optimum with fallback"] += m.fallback > 0
        seen["weighted"] += not p.objective.lexicographic
        seen["lexicographic"] += p.objective.lexicographic
        seen["several instances used"] += len(set(zip(best.part_device, best.part_instance))) \
            > len(set(best.part_device))
        seen["large activation inside a part"] += any(
            p.tensor_bytes[t] > cap and all(best.part_of[c] == best.part_of[u]
                                            for c in p.tensor_consumers[t])
            for t, u in enumerate(p.tensor_producer) if p.tensor_consumers[t])
        seen["shared constant"] += any(sum(c in cs for cs in p.node_consts) > 1
                                       for c in range(len(p.const_names)))
        seen["node with three constants"] += any(len(cs) >= 3 for cs in p.node_consts)
        seen["8 nodes"] += p.n == 8
    for key in ("binding memory", "optimum with fallback", "weighted", "lexicographic",
                "several instances used", "large activation inside a part", "shared constant",
                "node with three constants", "8 nodes"):
        assert seen[key] >= 5, (key, seen)


# -- the pieces of the decomposition ------------------------------------------------------------

FALLBACK_ONLY = Objective(order=("fallback",))


@pytest.mark.parametrize("seed", range(0, 250, 2))
def test_relaxed_assignment_bounds_the_fallback(seed):
    """The relaxed assignment model (one set per instance, forced splits counted) never
    exceeds the least fallback of any valid partition (brute force); and the runs built from
    its devices, or from the preferred ones, are valid whenever they are returned."""
    p, best = _brute(seed, False, FALLBACK_ONLY)
    R = device_sets(p, fixed=False)
    mem = binding_devices(p, R)
    a = relaxed_fallback(p, R, mem, budget=Budget.of(work_limit=5))
    assert a.optimal
    assert a.bound <= evaluate(p, best).fallback
    for devices in ([p.allowed[v][0] for v in range(p.n)], a.node_device):
        for sol in (fit_by_runs(p, parts_without_memory(p, devices)), realize(p, devices, parts=parts_without_memory(p, devices))):
            if sol is not None:
                assert validate(p, normalize(p, sol)) == []


@pytest.mark.parametrize("seed", range(0, 60, 2))
def test_above_the_reach_size_the_relaxation_stays_a_bound(seed, monkeypatch):
    """Large graphs leave out split witnesses and split / reread pairs (their reachability
    bitsets are quadratic): no reachability is computed, and the weaker model still never
    exceeds the brute-force optimum, nor the full model's bound."""
    import hetero_solve.exact.assign as assign
    p, best = _brute(seed, False, FALLBACK_ONLY)
    R = device_sets(p, fixed=False)
    mem = binding_devices(p, R)
    full = relaxed_fallback(p, R, mem, budget=Budget.of(work_limit=5))
    monkeypatch.setattr(assign, "REACH_NODES", 0)
    monkeypatch.setattr(assign, "_reach", lambda problem: pytest.fail("reachability computed"))
    weak = relaxed_fallback(p, R, mem, budget=Budget.of(work_limit=5))
    assert weak.optimal and weak.bound <= full.bound <= evaluate(p, best).fallback


PARTS_FIRST = Objective(order=("partitions",))


@pytest.mark.parametrize("seed", range(1, 250, 2))
def test_relaxed_parts_bound_never_exceeds_brute_force(seed):
    """The parts bound of the relaxed assignment model is safe: with the fallback capped at
    its optimum it never exceeds the fewest parts among the fallback-optimal partitions
    (brute force, default objective), and without a cap never the fewest parts of any valid
    partition."""
    p, best = _brute(seed, False, Objective())
    R = device_sets(p, fixed=False)
    mem = binding_devices(p, R)
    m = evaluate(p, best)
    r = relaxed_parts(p, R, mem, m.fallback, budget=Budget.of(work_limit=5))
    assert r.optimal
    assert 1 <= r.bound <= m.partitions
    q, fewest = _brute(seed, False, PARTS_FIRST)
    r = relaxed_parts(q, R, mem, q.n, budget=Budget.of(work_limit=5))
    assert r.optimal
    assert r.bound <= evaluate(q, fewest).partitions


def test_relaxed_parts_bound_is_tight_where_memory_forces_a_device_change():
    """A chain NPU-NPU-NPU whose first and last constants do not fit together: one of them
    leaves (fallback 1), so two parts at least; the bounds that let every node use the CPU
    say 1."""
    p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
                     tensor_bytes=1, const_bytes=[6, 0, 6])
    R = device_sets(p, fixed=False)
    best = brute_force(p)
    assert evaluate(p, best).as_dict()["fallback"] == 1 and best.num_parts == 2
    assert relaxed_parts(p, R, binding_devices(p, R), 1, budget=Budget.of(work_limit=5)).bound == 2
    sol = refine(p, Solution([0, 1, 2], [0, 0, 1], [0, 0, 0]), budget=Budget.of(work_limit=2.5))
    assert sol.num_parts == 2 and "partitions" in sol.stats["proven"]


def test_runs_span_long_stretches_of_large_activations():
    """A chain of 150 nodes whose activations are larger than a card, except one small tensor
    in the middle: two cards hold it as two runs (cut at the small tensor), though every
    prefix of either run overflows until the run closes over the large tensors."""
    n = 150
    big = 50
    tb = [big] * n
    tb[74] = 1                       # the only cheap cut
    tb[n - 1] = 1                    # a small graph output
    cb = [0] * n
    cb[10] = cb[100] = 30            # weights: 60 bytes, more than one card holds
    p = make_problem(n, [(v, v + 1) for v in range(n - 1)], [[0, 1]] * n,
                     [Device("CARD", memory=40, instances=2), "CPU"],
                     tensor_bytes=tb, const_bytes=cb)
    p.node_inputs[0].append(len(p.tensor_names))      # a small graph input
    p.tensor_names.append("x")
    p.tensor_bytes.append(1)
    p.tensor_producer.append(-1)
    p.tensor_consumers.append([0])
    p.tensor_is_output.append(False)
    sol = fit_by_runs(p, parts_without_memory(p, [0] * n))
    assert sol is not None and validate(p, normalize(p, sol)) == []
    assert evaluate(p, sol).fallback == 0 and sol.num_parts == 2
    best = refine(p, heuristic(p), budget=Budget.of(work_limit=2.5))
    assert evaluate(p, best).fallback == 0 and best.num_parts == 2 and best.status == "optimal"


def test_explain_states_the_fallback_bound_the_engine_proved():
    """The memory section of ``explain`` states the strongest fallback bound the engine has:
    here the Lagrangian memory bound says 0, while the answer's fallback 1 is proven (brute
    force agrees), so "at least 1 must be"."""
    p = random_memory(7)
    p.objective = Objective()
    R = device_sets(p, fixed=False)
    from hetero_solve.fitting.bounds import memory_bounds
    assert memory_bounds(p, R).fallback == 0
    assert evaluate(p, brute_force(p)).fallback == 1
    sol = refine(p, _start(p), budget=Budget.of(work_limit=2.5))
    assert "fallback" in sol.stats["proven"]
    assert sol.stats["explain"]["memory"]["fallback_bound"] == 1
    assert "at least 1 must be" in "\n".join(sol.stats["explain"]["text"])


def test_relaxed_fallback_counts_a_tensor_read_by_two_parts():
    """An SE block: ``h`` (CPU) makes a 10-byte tensor read by ``g`` and by ``m``, with a
    CPU node ``x`` between them.  On the NPU, ``g`` and ``m`` are in different parts and both
    read the tensor from outside: 11 + 12 = 23 bytes, over the 20-byte NPU, although their
    union needs only 13.  The relaxed model counts the second read (``reread_pairs``): its
    bound is the optimum, 1 (the union alone says 0)."""
    p = make_problem(4, [(0, 1), (0, 3), (1, 2), (2, 3)], [[1], [0, 1], [1], [0, 1]],
                     [Device("NPU", memory=20), Device("CPU")], tensor_bytes=[10, 1, 1, 1],
                     names=["h", "g", "x", "m"])
    assert evaluate(p, brute_force(p)).fallback == 1
    R = device_sets(p, fixed=False)
    a = relaxed_fallback(p, R, binding_devices(p, R), budget=Budget.of(work_limit=5))
    assert a.optimal and a.bound == 1
    sol = refine(p, _start(p), budget=Budget.of(work_limit=2.5))
    assert evaluate(p, sol).fallback == 1 and "fallback" in sol.stats["proven"]


def _shared_reads(seed: int):
    """A random DAG of 4-8 nodes whose tensors are often read by several nodes, some nodes
    CPU-only between them, one NPU (one or two instances): the cases ``split_pairs`` and
    ``reread_pairs`` are about."""
    import random
    rng = random.Random(seed)
    n = rng.randint(4, 8)
    edges = set()
    for v in range(1, n):
        for u in rng.sample(range(v), min(v, rng.randint(1, 2))):
            edges.add((u, v))
    allowed = [[1] if rng.random() < 0.3 else [0, 1] for _ in range(n)]
    return make_problem(n, sorted(edges), allowed,
                        [Device("NPU", memory=rng.randint(8, 24),
                                instances=rng.choice([1, 1, 2])), Device("CPU")],
                        tensor_bytes=[rng.choice([1, 2, 5, 10]) for _ in range(n)],
                        const_bytes=[rng.choice([0, 0, 3, 6]) for _ in range(n)])


def test_relaxed_bounds_hold_where_reads_are_shared():
    """On 400 random problems with shared reads and CPU nodes between readers, the relaxed
    fallback bound and the relaxed parts bound (fallback capped at the optimum) never exceed
    the brute-force optimum; at least 60 of them exercise split or reread pairs."""
    from hetero_solve.exact.assign import reread_pairs, split_pairs
    covered = 0
    for seed in range(400):
        p = _shared_reads(seed)
        R = device_sets(p, fixed=False)
        mem = binding_devices(p, R)
        if not mem:
            continue
        best = brute_force(p)
        if best is None:
            continue
        m = evaluate(p, best)
        covered += any(reread_pairs(p, R, d) or split_pairs(p, R, d) for d in mem)
        a = relaxed_fallback(p, R, mem, budget=Budget.of(work_limit=5))
        assert a.bound <= m.fallback, seed
        assert relaxed_parts(p, R, mem, m.fallback, budget=Budget.of(work_limit=5)).bound <= m.partitions, seed
    assert covered >= 60
