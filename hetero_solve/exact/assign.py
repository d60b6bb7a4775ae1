"""Device choice under memory: the relaxed assignment model (the master of the decomposition).

Which nodes must leave their preferred device is decided by memory alone: without memory
limits every node can stay (one node per part in topological order is valid).  This model
assigns every node a device, and a device instance where the device has a memory limit, and
asks only that the nodes on each instance, **taken as one set**, fit it:

* ``x[v, (d, i)]``: node ``v`` on instance ``i`` of device ``d`` (``i = 0`` for devices without a
  limit); exactly one per node, only for ``d`` in ``R(v)``;
* per limited instance ``(d, i)``, SPEC section 5 for the set ``S`` on it: ``z[c]`` for each
  constant some member reads, ``in[t]`` for a tensor a member reads that is a graph input or
  made outside ``S``, ``out[t]`` for a tensor a member makes that is a graph output or read
  outside ``S``; each bounded from below by clauses (``x[c] and not x[u] -> in[t]``), which is
  exact because the capacity only pushes them down; ``sum bytes <= capacity``.

Why this is a relaxation (a lower bound on fallback).  Take any valid partition and let ``S``
be the union of the parts on one instance.  Merging never raises memory:
``memory(P u Q) <= memory(P) + memory(Q)`` (a constant or tensor counted in the union is
counted in one of the two: a constant read by the union is read by one of them; a boundary
tensor of the union is read or made by a member of ``P`` or ``Q`` across that part's boundary
too).  So ``memory(S) <= sum of the parts' memory <= capacity``, and the partition's device
choice satisfies the model.  The model's optimum is therefore at most the optimal fallback.

It is strengthened by **forced splits**: when ``u -> c`` (tensor ``t``) and every path that
could keep them in one part on ``d`` is cut (``c`` needs ``u``'s value and ``d`` enforces value
inputs, or some path ``u -> ... -> c`` passes a node that ``d`` cannot run), ``u`` and ``c`` are
in different parts whenever both are on ``d``: ``t`` is then an output of ``u``'s part and an
input of ``c``'s, and the model counts it even when both are on the same instance (once each:
still a lower bound).

What it does not see: further splits that acyclicity or value inputs force between nodes that
*could* share a part (then a tensor between two parts of one instance is counted twice in the
partition and not at all here), and constants read by two parts of one instance.  On
weight-dominated models these are small; :func:`realize` (:mod:`.runs`) turns the model's
device choice into a partition and tells whether it fits.

Size: ``n x instances`` node literals plus ``2 x instances`` per tensor and one per constant
and instance: tens of thousands of literals at 5,000 nodes, against the millions of the full
ordinal model when nodes may change device.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
...                  tensor_bytes=1, const_bytes=[6, 6, 2])
>>> r = relaxed_fallback(p, [(0, 1)] * 3, [0], time_limit=5)
>>> r.fallback, r.optimal      # 6 + 6 does not fit 10: one of the heavy nodes leaves
(1, True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..problem import Device, Problem
from ..solution import Solution

INTERVAL_LIMIT = 32     # split witnesses per edge at most (see split_witnesses)
from ..measures import topological_order


@dataclass
class Assignment:
    node_device: list[int] | None      # device per node in the best assignment found
    node_instance: list[int] | None    # instance per node (0 where the device has no limit)
    fallback: int | None               # its fallback
    bound: int                         # a lower bound on the fallback of every valid partition
    optimal: bool                      # the model was solved to optimality (bound == fallback)
    stats: dict = field(default_factory=dict)


def forced_splits(problem: Problem, R: list[tuple[int, ...]], d: int) -> list[set[int]]:
    """Per node ``u``: the successors ``c`` (on an edge ``u -> c``) that can never share a part
    with ``u`` on device ``d``: ``c`` needs ``u``'s value and ``d`` enforces value inputs, or a
    path ``u -> w -> ... -> c`` passes a node ``w`` that cannot be on ``d``.

    Reachability is kept as bitsets (Python integers): ``through[x]`` = the nodes reachable
    from ``x`` by a path that passes a node off ``d`` (``x`` included), computed in reverse
    topological order; ``O(E x n / 64)`` word operations."""
    n = problem.n
    order = topological_order(problem.succ, problem.pred)
    desc = [0] * n           # descendants of x, x included
    through = [0] * n
    succ = problem.succ
    for x in reversed(order):
        dx = 1 << x
        tx = 0
        for s in succ[x]:
            dx |= desc[s]
            tx |= through[s]
        desc[x] = dx
        through[x] = dx if d not in R[x] else tx
    enforce = problem.devices[d].enforce_values
    out: list[set[int]] = [set() for _ in range(n)]
    for u in range(n):
        if d not in R[u]:
            continue
        ss = succ[u]
        cut = 0
        for s in ss:
            cut |= through[s]
        for c in ss:
            if d not in R[c]:
                continue
            if (cut >> c) & 1 or (enforce and u in problem.value_pred[c]):
                out[u].add(c)
    return out


def split_witnesses(problem: Problem, R: list[tuple[int, ...]], d: int,
                    limit: int = INTERVAL_LIMIT) -> dict[tuple[int, int], list[int]]:
    """Per edge ``u -> c`` (both may be on ``d``, not already a forced split): the nodes ``w``
    strictly between them (``u -> ... -> w -> ... -> c``) that may leave ``d``.  If one of
    them does, ``u`` and ``c`` cannot share a part on ``d`` (the path would leave the part and
    come back).  Edges with more than ``limit`` such nodes are left out (the model stays
    valid, only weaker)."""
    n = problem.n
    order = topological_order(problem.succ, problem.pred)
    desc = [0] * n
    for x in reversed(order):
        dx = 1 << x
        for s_ in problem.succ[x]:
            dx |= desc[s_]
        desc[x] = dx
    anc = [0] * n
    for x in order:
        ax = 1 << x
        for u in problem.pred[x]:
            ax |= anc[u]
        anc[x] = ax
    movable = 0
    for w in range(n):
        if d in R[w] and len(R[w]) > 1:
            movable |= 1 << w
    out: dict[tuple[int, int], list[int]] = {}
    for u in range(n):
        if d not in R[u]:
            continue
        du = desc[u] & ~(1 << u) & movable
        for c in problem.succ[u]:
            if d not in R[c]:
                continue
            between = du & anc[c] & ~(1 << c)
            if not between:
                continue
            k = between.bit_count()
            if k > limit:
                continue
            ws = []
            while between:
                low = between & -between
                ws.append(low.bit_length() - 1)
                between ^= low
            out[(u, c)] = ws
    return out


def relaxed_fallback(problem: Problem, R: list[tuple[int, ...]], memory_devices, *,
                     hint: Solution | None = None, time_limit: float = 5.0, seed: int = 0,
                     deadline: float | None = None, fallback_cap: int | None = None,
                     objective: str = "fallback", aggregate: bool = False) -> Assignment:
    """Solve the relaxed assignment model (module doc) with CP-SAT in deterministic time.

    ``aggregate``: every device's instances as one set holding their total memory (still a
    relaxation: the union of a device's parts fits the total; no instance symmetry, so it is
    solved far faster; the instances returned are all 0).
    ``objective``: ``"fallback"`` (minimise it), or ``"changes"`` (with ``fallback_cap``: keep
    fallback at most the cap and minimise the edges whose ends are on different devices, a
    proxy for parts used to pick among the fallback-optimal device choices)."""
    n = problem.n
    devs = problem.devices
    if aggregate:   # one set per device holding memory x instances: weaker, far smaller
        devs = [Device(d.name, None if d.memory is None else d.memory * d.instances, 1,
                       d.enforce_values) for d in devs]
    mem = [d for d in memory_devices if devs[d].memory is not None]
    from ortools.sat.python import cp_model   # imports pandas: only when a model is solved
    m = cp_model.CpModel()
    order = topological_order(problem.succ, problem.pred)
    rank = {v: k for k, v in enumerate(order)}

    # 1. x[v][(d, i)]: node v on instance i of device d; instance i only for the (i+1)-th
    #    node of the topological order that may use d, or later (instances are identical:
    #    number them by their first node).
    seen = {d: 0 for d in mem}
    x: list[dict[tuple[int, int], cp_model.IntVar]] = [dict() for _ in range(n)]
    for v in order:
        for d in R[v]:
            if d in seen:
                k = min(devs[d].instances, seen[d] + 1)
                seen[d] += 1
                for i in range(k):
                    x[v][(d, i)] = m.NewBoolVar("")
            else:
                x[v][(d, 0)] = m.NewBoolVar("")
        m.AddExactlyOne(x[v].values())

    def on(v: int, d: int, i: int):
        return x[v].get((d, i))

    # 2. memory of the set on each limited instance, with forced splits
    items_total = 0
    for d in mem:
        split = forced_splits(problem, R, d)
        witnesses = split_witnesses(problem, R, d, INTERVAL_LIMIT)
        off_d: dict[int, cp_model.LinearExpr] = {}

        def off(w: int):
            """1 when ``w`` is not on ``d``."""
            e = off_d.get(w)
            if e is None:
                e = off_d[w] = 1 - sum(lit for (e_, _i), lit in x[w].items() if e_ == d)
            return e

        cap = devs[d].memory
        for i in range(devs[d].instances):
            terms = []
            const_lit: dict[int, cp_model.IntVar] = {}
            for v in range(n):
                xv = on(v, d, i)
                if xv is None:
                    continue
                for c in problem.node_consts[v]:
                    z = const_lit.get(c)
                    if z is None:
                        z = const_lit[c] = m.NewBoolVar("")
                        terms.append((problem.const_bytes[c], z))
                    m.Add(z >= xv)
            for t, u in enumerate(problem.tensor_producer):
                size = problem.tensor_bytes[t]
                if size == 0:
                    continue
                cons = problem.tensor_consumers[t]
                xu = on(u, d, i) if u >= 0 else None
                # input of the set: a member reads it, it is made outside (or a graph input)
                zin = None
                for c in cons:
                    xc = on(c, d, i)
                    if xc is None:
                        continue
                    if zin is None:
                        zin = m.NewBoolVar("")
                        terms.append((size, zin))
                    if xu is None or c in split[u]:
                        m.Add(zin >= xc)
                    else:
                        m.Add(zin >= xc - xu)
                        for w in witnesses.get((u, c), ()):
                            m.Add(zin >= xc + off(w) - 1)
                # output of the set: made by a member, read outside (or a graph output)
                if xu is not None:
                    zout = m.NewBoolVar("")
                    terms.append((size, zout))
                    if problem.tensor_is_output[t] or any(on(c, d, i) is None or c in split[u]
                                                          for c in cons):
                        m.Add(zout >= xu)
                    else:
                        for c in cons:
                            m.Add(zout >= xu - on(c, d, i))
                            for w in witnesses.get((u, c), ()):
                                m.Add(zout >= xu + off(w) - 1)
            items_total += len(terms)
            if terms and sum(s for s, _ in terms) > cap:
                m.Add(sum(s * z for s, z in terms) <= cap)

    # 3. objective
    off = []
    for v in range(n):
        pref = problem.allowed[v][0]
        stay = [lit for (d, _i), lit in x[v].items() if d == pref]
        if not stay:
            off.append(1)
        else:
            off.append(1 - sum(stay))
    fallback = sum(off)
    if objective == "fallback":
        m.Minimize(fallback)
    else:
        m.Add(fallback <= fallback_cap)
        dev_of = []
        for v in range(n):
            dev_of.append({d: [lit for (e, _i), lit in x[v].items() if e == d] for d in R[v]})
        changes = []
        for u in range(n):
            for c in problem.succ[u]:
                common = [d for d in R[u] if d in R[c]]
                if not common:
                    continue
                same = m.NewBoolVar("")
                # same -> u and c on one common device
                picks = []
                for d in common:
                    both = m.NewBoolVar("")
                    m.AddBoolOr([both.Not(), *dev_of[u][d]])
                    m.AddBoolOr([both.Not(), *dev_of[c][d]])
                    picks.append(both)
                m.AddBoolOr([same.Not(), *picks])
                changes.append(same.Not())
        m.Minimize(sum(changes))

    # 4. hint: the best answer's devices, instances renumbered by their first node
    if hint is not None and len(hint.part_of) == n:
        relabel: dict[tuple[int, int], int] = {}
        for v in order:
            p = hint.part_of[v]
            d = hint.part_device[p]
            i = relabel.setdefault((d, hint.part_instance[p]),
                                   sum(1 for key in relabel if key[0] == d)) if d in seen else 0
            for key, lit in x[v].items():
                m.AddHint(lit, key == (d, i))

    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.linearization_level = 2
    prm.random_seed = seed
    prm.max_deterministic_time = max(0.05, time_limit)
    wall = 2 * max(0.05, time_limit) + 1 if deadline is None else deadline - time.perf_counter()
    prm.max_time_in_seconds = max(0.05, wall)
    t0 = time.perf_counter()
    status = solver.Solve(m)
    wall_used = time.perf_counter() - t0
    stats = {"status": solver.StatusName(status), "wall": round(wall_used, 3),
             "deterministic_time": round(solver.deterministic_time, 3),
             "literals": sum(len(a) for a in x), "memory_items": items_total,
             "deterministic": not (status not in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
                                   and wall_used >= prm.max_time_in_seconds - 0.05)}
    if status == cp_model.INFEASIBLE:
        # no assignment fits: no partition does (the model is a relaxation)
        return Assignment(None, None, None, n + 1, True, stats)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Assignment(None, None, None, 0, False, stats)
    node_device, node_instance = [], []
    for v in range(n):
        key = next(k for k, lit in x[v].items() if solver.BooleanValue(lit))
        node_device.append(key[0])
        node_instance.append(key[1])
    value = sum(1 for v in range(n) if node_device[v] != problem.allowed[v][0])
    if objective == "fallback":
        bound = int(-(-solver.BestObjectiveBound() // 1))
        optimal = status == cp_model.OPTIMAL
    else:
        bound, optimal = 0, False
    return Assignment(node_device, node_instance, value, bound, optimal, stats)
