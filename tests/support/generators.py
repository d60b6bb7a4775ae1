"""Problem generators for tests, benchmarks and studies: each returns a
:class:`~hetero_solve.problem.Problem` and is reproducible from its ``seed``.

* :func:`random_small` - tiny random DAGs with random supports, value edges, memory limits,
  instances and objectives: the brute-force test bed (2-8 nodes).
* :func:`random_dag` - the same kind of random problem at any size (engine cross-checks).
* :func:`random_memory` - tiny problems where memory binds: activations larger than an
  instance (free inside a part), shared constants, nodes holding several constants (as an
  ``If`` holds its branches' weights), 1-3 instances (brute-force test bed for memory).
* :func:`cnn_like` - convolution chains, residual and inception blocks, CPU-only clumps
  (~16 % of nodes), a few shape chains that make value-dependent inputs.
* :func:`transformer_like` - encoder blocks whose head split and merge go through
  ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` on the CPU (value-dependent splits) and
  GELU's ``Erf`` on the CPU.
* :func:`random_layered` - random layered DAGs with random supports (2 or 3 devices).
* :func:`wide` - many parallel branches with CPU nodes scattered in them.
* :func:`greedy_trap` and :func:`greedy_traps` - constructed cases where the greedy heuristic is
  known to use more parts than the optimum (documented with each).

The large generators take ``memory`` (bytes per accelerator instance, ``None`` = unlimited) and
``instances``; devices are ``("NPU", "CPU")`` (or ``("NPU", "GPU", "CPU")`` with ``devices=3``),
the CPU supports everything and has no memory limit, so every generated problem has a solution.

>>> p = cnn_like(200, seed=1)
>>> p.n, [d.name for d in p.devices]
(200, ['NPU', 'CPU'])
>>> random_small(3).n <= 8
True
"""

from __future__ import annotations

import random
from typing import Sequence

from hetero_solve.problem import Device, Objective, Problem, make_problem

__all__ = ["random_small", "random_dag", "random_memory", "cnn_like", "transformer_like", "random_layered",
           "wide", "greedy_trap", "greedy_traps", "GREEDY_TRAPS"]

KIB = 1024


class _Builder:
    """Accumulates nodes in topological order (each writes one tensor) and builds a Problem."""

    def __init__(self, devices: Sequence[Device]):
        self.devices = list(devices)
        self.dev = {d.name: i for i, d in enumerate(self.devices)}
        self.edges: list[tuple[int, int]] = []
        self._edge_set: set[tuple[int, int]] = set()
        self.value_edges: list[tuple[int, int]] = []
        self.allowed: list[tuple[int, ...]] = []
        self.ops: list[str] = []
        self.tbytes: list[int] = []
        self.cbytes: list[int] = []

    @property
    def n(self) -> int:
        return len(self.ops)

    def add(self, op: str, inputs: Sequence[int] = (), on: Sequence[str] = ("NPU", "CPU"),
            out: int = 16 * KIB, const: int = 0, value: Sequence[int] = ()) -> int:
        v = self.n
        self.ops.append(op)
        self.allowed.append(tuple(sorted(self.dev[d] for d in on if d in self.dev)))
        self.tbytes.append(out)
        self.cbytes.append(const)
        for u in inputs:
            if (u, v) not in self._edge_set:
                self._edge_set.add((u, v))
                self.edges.append((u, v))
        for u in value:
            self.value_edges.append((u, v))
        return v

    def build(self, objective: Objective | None = None) -> Problem:
        names = [f"{op.lower()}_{v}" for v, op in enumerate(self.ops)]
        return make_problem(self.n, self.edges, self.allowed, self.devices,
                            value_edges=self.value_edges, tensor_bytes=self.tbytes,
                            const_bytes=self.cbytes, names=names, op_types=self.ops,
                            objective=objective)


def _devices(devices: int, memory: int | None, instances: int) -> list[Device]:
    acc = [Device("NPU", memory=memory, instances=instances)]
    if devices >= 3:
        acc.append(Device("GPU", memory=memory, instances=instances))
    return acc + [Device("CPU")]


# -- small random problems (brute force) ------------------------------------------------------

OBJECTIVES = (
    Objective(),
    Objective(order=("partitions", "fallback", "transfer")),
    Objective(order=("fallback", "partitions")),
    Objective(weights={"fallback": 1, "partitions": 3}),
    Objective(weights={"fallback": 2, "partitions": 5, "transfer": 1}),
)


def random_dag(n: int, seed: int, *, devices: int | None = None, edge_prob: float | None = None,
               value_prob: float = 0.15, memory: bool | None = None,
               objective: Objective | None = None, flexible: float = 0.4) -> Problem:
    """A random DAG of ``n`` nodes: edges ``u -> v`` (``u < v``) with probability ``edge_prob``
    (default: about 3 successors per node), 2 or 3 devices, each node allowed on a random set
    of devices that always holds the last one (``CPU``, unlimited), so a solution exists.
    ``flexible``: share of nodes with more than one allowed device.  With ``memory`` the first
    device gets a limit (1 or 2 instances) that some parts will hit; tensors 1-8 bytes,
    constants 0-8 bytes, a few shared between nodes."""
    rng = random.Random(seed)
    D = devices or rng.choice((2, 2, 3))
    if memory is None:
        memory = rng.random() < 0.4
    window = 12     # larger graphs: edges reach back at most 12 nodes, plus a few far ones
    p = edge_prob if edge_prob is not None else (
        min(0.6, 3.0 / max(1, n - 1)) if n <= 30 else 2.0 / window)
    edges = []
    for v in range(1, n):
        for u in range(max(0, v - window), v) if n > 30 else range(v):
            if rng.random() < p:
                edges.append((u, v))
    if n > 30:   # keep far edges too, sparsely
        for _ in range(n // 10):
            u, v = sorted(rng.sample(range(n), 2))
            edges.append((u, v))
    edges = sorted(set(edges))
    cpu = D - 1
    allowed = []
    for v in range(n):
        if rng.random() < flexible:
            acc = [d for d in range(cpu) if rng.random() < 0.6]
            allowed.append(tuple(acc + [cpu]))
        else:
            allowed.append((rng.randrange(D),) if rng.random() < 0.8 else (cpu,))
    # single-device nodes may sit on an accelerator only: keep a solution possible
    allowed = [a if cpu in a or not memory else a + (cpu,) for a in allowed]
    value_edges = [e for e in edges if rng.random() < value_prob]
    tbytes = [rng.randint(1, 8) for _ in range(n)]
    cbytes = [rng.choice((0, 0, rng.randint(1, 8))) for _ in range(n)]
    devs = [Device(f"A{d}", enforce_values=rng.random() < 0.85) for d in range(cpu)]
    devs.append(Device("CPU", enforce_values=rng.random() < 0.5))
    if memory:
        instances = rng.choice((1, 1, 2))
        cap = rng.randint(6, 24) * (1 if n <= 10 else max(1, n // 8))
        devs[0] = Device(devs[0].name, memory=cap, instances=instances,
                         enforce_values=devs[0].enforce_values)
    prob = make_problem(n, [e for e in edges if e not in value_edges], allowed, devs,
                        value_edges=value_edges, tensor_bytes=tbytes, const_bytes=cbytes,
                        objective=objective or rng.choice(OBJECTIVES))
    # share a few constants (a weight read by two nodes counts once per part)
    if n >= 3 and prob.const_names:
        for _ in range(rng.randint(0, 2)):
            v = rng.randrange(n)
            c = rng.randrange(len(prob.const_names))
            if c not in prob.node_consts[v]:
                prob.node_consts[v].append(c)
    return prob


def random_small(seed: int, n: int | None = None, **kw) -> Problem:
    """A random problem of 2-8 nodes (``n`` to fix the size); see :func:`random_dag`."""
    rng = random.Random(seed * 7919 + 17)
    return random_dag(n if n is not None else rng.randint(2, 8), seed, **kw)


def random_memory(seed: int, n: int | None = None, *, limited_cpu: bool = False,
                  objective: Objective | None = None) -> Problem:
    """A random problem of 2-8 nodes (``n`` to fix the size) whose memory limits bind.

    Accelerators ``A0`` (and ``A1``) have a memory limit and 1-3 instances; ``CPU`` takes
    every node and is unlimited (so a solution exists) unless ``limited_cpu``.  Tensors are
    1-6 bytes, but about a quarter of the inner ones are *large activations* (more than an
    instance holds: they fit only inside a part, where they cost nothing); nodes read 0-2
    constants of 1-8 bytes, some shared with other nodes, and a few read three (a node with
    subgraphs holds its branches' weights); value edges on enforcing and ignoring devices;
    the objectives of :data:`OBJECTIVES` (lexicographic and weighted).  The limit is drawn
    between what the neediest node needs on its own and the total, so it binds."""
    rng = random.Random(seed * 104729 + 3)
    n = n if n is not None else rng.randint(2, 8)
    D = rng.choice((2, 2, 3))
    cpu = D - 1
    edges = sorted({(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.35})
    value_edges = [e for e in edges if rng.random() < 0.15]
    has_succ = {u for u, _ in edges}
    allowed = []
    for v in range(n):
        acc = [d for d in range(cpu) if rng.random() < 0.7] or [0]
        r = rng.random()
        allowed.append(tuple(acc + [cpu]) if r < 0.75 else ((cpu,) if r < 0.9 else tuple(acc)))
    if not limited_cpu:      # a node only an accelerator takes might fit nowhere: add the CPU
        allowed = [a if cpu in a else a + (cpu,) for a in allowed]
    tbytes = [rng.randint(1, 6) for _ in range(n)]
    big = [v for v in range(n) if v in has_succ and rng.random() < 0.25]
    p = make_problem(n, [e for e in edges if e not in value_edges], allowed,
                     [Device(f"A{d}") for d in range(cpu)] + [Device("CPU")],
                     value_edges=value_edges, tensor_bytes=tbytes,
                     objective=objective or rng.choice(OBJECTIVES))
    # constants: 0-2 per node (3 for a node with "subgraphs"), some shared
    for v in range(n):
        k = 3 if rng.random() < 0.15 else rng.choice((0, 1, 1, 2))
        for _ in range(k):
            if p.const_names and rng.random() < 0.3:
                c = rng.randrange(len(p.const_names))
                if c in p.node_consts[v]:
                    continue
            else:
                c = len(p.const_names)
                p.const_names.append(f"w{c}")
                p.const_bytes.append(rng.randint(1, 8))
            p.node_consts[v].append(c)
    need = [sum(p.const_bytes[c] for c in set(p.node_consts[v]))
            + (tbytes[v] if p.tensor_is_output[v] else 0) for v in range(n)]
    total = sum(need) + sum(tbytes)
    lo = max([need[v] for v in range(n) if allowed[v] != (cpu,)] + [1])
    devices = []
    for d in range(D):
        limited = d < cpu or limited_cpu
        cap = rng.randint(lo, max(lo, total * 2 // 3)) if limited else None
        devices.append(Device(p.devices[d].name, memory=cap,
                              instances=rng.choice((1, 1, 2, 3)) if limited else 1,
                              enforce_values=rng.random() < 0.8))
    p.devices = devices
    cap = max(d.memory or 0 for d in devices)
    for v in big:            # larger than any instance: only free inside a part
        p.tensor_bytes[v] = cap + rng.randint(1, 8)
    return p


# -- DNN-like problems ------------------------------------------------------------------------

def cnn_like(n: int, seed: int = 0, *, memory: int | None = None, instances: int = 1,
             devices: int = 2, cpu_share: float = 0.16, objective: Objective | None = None
             ) -> Problem:
    """A CNN of exactly ``n`` nodes: conv-bn-relu chains, residual blocks, inception blocks with
    2-4 branches, long skip connections, about ``cpu_share`` of the nodes CPU-only in clumps of
    1-3 (on the trunk and inside branches, so parts can interleave), and now and then a shape
    chain whose ``Reshape`` needs a value made on the CPU (about 3 % of the edges).  With
    ``devices=3`` some clumps run on the GPU only (``GPU`` and ``CPU`` when ``memory`` is set,
    to stay solvable)."""
    rng = random.Random(seed)
    b = _Builder(_devices(devices, memory, instances))
    acc = ("NPU", "GPU") if devices >= 3 else ("NPU",)
    every = acc + ("CPU",)
    gpu = ("GPU",) if memory is None else ("GPU", "CPU")
    x = b.add("Input", (), every, out=64 * KIB)
    skips: list[int] = []

    def node(op: str, ins, size: int, const: int = 0) -> int:
        """An accelerator op, or (with probability cpu_share, in a clump) a CPU-only one."""
        if rng.random() < cpu_share:
            on = gpu if devices >= 3 and rng.random() < 0.3 else ("CPU",)
            y = ins
            for _ in range(rng.randint(1, 3)):
                y = [b.add(rng.choice(("HardSwish", "NonZero", "TopK", "Round")), y, on,
                           out=size)]
            return y[0]
        return b.add(op, ins, every, out=size, const=const)

    while b.n < n:
        r = rng.random()
        size = rng.choice((16, 32, 64)) * KIB
        if r < 0.3:                       # conv chain
            for op in ("Conv", "BatchNormalization", "Relu")[: rng.randint(1, 3)]:
                x = node(op, [x], size, 8 * KIB if op == "Conv" else KIB)
        elif r < 0.5:                     # residual block
            y = node("Conv", [x], size, 8 * KIB)
            y = node("Relu", [y], size)
            y = node("Conv", [y], size, 8 * KIB)
            x = b.add("Add", [x, y], every, out=size)
        elif r < 0.7:                     # inception block
            outs = []
            for _ in range(rng.randint(2, 4)):
                y = x
                for _ in range(rng.randint(1, 3)):
                    y = node("Conv", [y], size, 4 * KIB)
                outs.append(y)
            x = b.add("Concat", outs, every, out=size * len(outs))
        elif r < 0.8:                     # long skip: add a tensor from a few blocks back
            if skips:
                x = b.add("Add", [x, rng.choice(skips[-8:])], every, out=size)
            skips.append(x)
        elif r < 0.9:                     # CPU clump on the trunk
            for _ in range(rng.randint(1, 3)):
                x = b.add(rng.choice(("HardSwish", "NonZero", "TopK", "Round")), [x], ("CPU",),
                          out=size)
        else:                             # shape chain: Reshape needs a value made on the CPU
            s_ = b.add("Shape", [x], ("CPU",), out=32)
            s_ = b.add("Gather", [s_], ("CPU",), out=8)
            x = b.add("Reshape", [x], every, out=size, value=[s_])
        if rng.random() < 0.05:
            skips.append(x)
    return _truncate(b, n).build(objective)


def transformer_like(n: int, seed: int = 0, *, memory: int | None = None, instances: int = 1,
                     devices: int = 2, objective: Objective | None = None) -> Problem:
    """Encoder blocks (about 45 nodes each) until ``n`` nodes: layer norms, q/k/v projections
    whose head split and merge are ``Reshape`` nodes fed by ``Shape -> Gather -> Unsqueeze ->
    Concat`` chains on the CPU (value-dependent inputs), attention, and a GELU whose ``Erf`` only
    the CPU runs.  Exactly ``n`` nodes."""
    rng = random.Random(seed)
    b = _Builder(_devices(devices, memory, instances))
    acc = ("NPU", "GPU") if devices >= 3 else ("NPU",)
    every = acc + ("CPU",)
    cpu = ("CPU",)
    h = 16 * KIB * rng.choice((1, 2))
    x = b.add("Gather", (), cpu, out=h)          # embedding lookup

    def shape_chain(src):
        s = b.add("Shape", [src], cpu, out=24)
        g = b.add("Gather", [s], cpu, out=8)
        u = b.add("Unsqueeze", [g], cpu, out=8)
        return b.add("Concat", [u], cpu, out=32)

    while b.n < n:
        ln = b.add("LayerNormalization", [x], every, out=h, const=KIB)
        heads = []
        for _ in range(3):                        # q, k, v
            m = b.add("MatMul", [ln], every, out=h, const=64 * KIB)
            a = b.add("Add", [m], every, out=h, const=KIB)
            c = shape_chain(ln)
            r = b.add("Reshape", [a], every, out=h, value=[c])
            heads.append(b.add("Transpose", [r], every, out=h))
        s = b.add("MatMul", heads[:2], every, out=h)
        s = b.add("Div", [s], every, out=h, const=4)
        s = b.add("Softmax", [s], every if rng.random() < 0.7 else cpu, out=h)
        o = b.add("MatMul", [s, heads[2]], every, out=h)
        o = b.add("Transpose", [o], every, out=h)
        c = shape_chain(o)
        o = b.add("Reshape", [o], every, out=h, value=[c])
        o = b.add("MatMul", [o], every, out=h, const=64 * KIB)
        x = b.add("Add", [x, o], every, out=h)
        ln = b.add("LayerNormalization", [x], every, out=h, const=KIB)
        f = b.add("MatMul", [ln], every, out=4 * h, const=256 * KIB)
        g = b.add("Div", [f], every, out=4 * h, const=4)
        g = b.add("Erf", [g], cpu, out=4 * h)
        g = b.add("Add", [g], every, out=4 * h, const=4)
        f = b.add("Mul", [f, g], every, out=4 * h)
        f = b.add("MatMul", [f], every, out=h, const=256 * KIB)
        x = b.add("Add", [x, f], every, out=h)
    return _truncate(b, n).build(objective)


def random_layered(n: int, seed: int = 0, *, width: int | None = None, cpu_share: float = 0.2,
                   devices: int = 2, memory: int | None = None, instances: int = 1,
                   value_share: float = 0.03, objective: Objective | None = None) -> Problem:
    """Layers of about ``width`` nodes (default ``sqrt(n)/2``); each node reads 1-3 nodes of
    the previous two layers; ``cpu_share`` of the nodes run on the CPU only (with 3 devices a
    further share runs on the GPU only, or prefers it when ``memory`` is set), ``value_share``
    of the edges are value inputs."""
    rng = random.Random(seed)
    b = _Builder(_devices(devices, memory, instances))
    acc = ("NPU", "GPU") if devices >= 3 else ("NPU",)
    w = width or max(2, int(n ** 0.5 / 2))
    layers: list[list[int]] = []
    while b.n < n:
        layer = []
        for _ in range(min(w, n - b.n)):
            r = rng.random()
            gpu_only = ("GPU",) if memory is None else ("GPU", "CPU")   # keep it solvable
            on = ("CPU",) if r < cpu_share else (
                gpu_only if devices >= 3 and r < 2 * cpu_share else acc + ("CPU",))
            srcs = [u for lay in layers[-2:] for u in lay]
            ins = rng.sample(srcs, min(len(srcs), rng.randint(1, 3))) if srcs else []
            val = [u for u in ins if rng.random() < value_share]
            layer.append(b.add("Op", [u for u in ins if u not in val], on,
                               out=rng.choice((4, 8, 16)) * KIB, const=rng.choice((0, 2, 8)) * KIB,
                               value=val))
        layers.append(layer)
    return b.build(objective)


def wide(n: int, seed: int = 0, *, branches: int | None = None, cpu_share: float = 0.08,
         memory: int | None = None, instances: int = 1, devices: int = 2,
         objective: Objective | None = None) -> Problem:
    """Blocks of 2-16 parallel branches (or ``branches``) of 3-12 nodes between a fork and a
    join, with CPU-only nodes scattered in the branches: many interleavings, the hard case for
    the search over device sequences."""
    rng = random.Random(seed)
    b = _Builder(_devices(devices, memory, instances))
    every = (("NPU", "GPU") if devices >= 3 else ("NPU",)) + ("CPU",)
    x = b.add("Input", (), every)
    while b.n < n:
        outs = []
        for _ in range(branches or rng.randint(2, 16)):
            y = x
            for _ in range(rng.randint(3, 12)):
                on = ("CPU",) if rng.random() < cpu_share else every
                y = b.add("Op", [y], on, const=rng.choice((0, 4 * KIB)))
            outs.append(y)
        x = b.add("Concat", outs, every)
    return _truncate(b, n).build(objective)


def _truncate(b: _Builder, n: int) -> _Builder:
    """Keep the first ``n`` nodes (they are in topological order)."""
    keep = b.n if b.n <= n else n
    b.ops, b.allowed = b.ops[:keep], b.allowed[:keep]
    b.tbytes, b.cbytes = b.tbytes[:keep], b.cbytes[:keep]
    b.edges = [(u, v) for u, v in b.edges if v < keep]
    b.value_edges = [(u, v) for u, v in b.value_edges if v < keep]
    return b


# -- cases where the greedy heuristic is poor -------------------------------------------------
#
# The greedy heuristic builds maximal parts, which is optimal for a fixed sequence of part
# devices; it can only go wrong in choosing the next device (and it never trades a fallback for
# fewer parts).  Each trap below is a gadget where that choice is wrong, repeated ``k`` times
# between barrier nodes so that the loss adds up: the optimum is strictly below the heuristic's
# count and the exact engines prove it.


def _sequence_trap(k: int) -> Problem:
    """Three devices A, B, C; per gadget two chains A->B->C and C->A->B between a fork and a
    join on a fourth device D.  The ready A and C nodes tie on the greedy's priority (each heads
    two more breaks), the tie goes to A by device order, and A,C,A,B,C (5 parts) follows,
    while C,A,B,C (4 parts: the shortest common supersequence of ABC and CAB) suffices.
    Heuristic ``6k + 1`` parts, optimum ``5k + 1``."""
    edges, allowed = [], [[3]]
    src = 0
    for _ in range(k):
        b = len(allowed)
        allowed += [[0], [1], [2], [2], [0], [1], [3]]
        edges += [(src, b), (src, b + 3), (b, b + 1), (b + 1, b + 2), (b + 3, b + 4),
                  (b + 4, b + 5), (b + 2, b + 6), (b + 5, b + 6)]
        src = b + 6
    names = ["fork"] + [f"g{g}_{x}" for g in range(k)
                        for x in ("a1", "b1", "c1", "c2", "a2", "b2", "join")]
    return make_problem(len(allowed), edges, allowed, ["A", "B", "C", "D"], names=names,
                        objective=Objective())


def _value_trap(k: int) -> Problem:
    """Two devices NPU and CPU, both enforcing value inputs; ``k`` disjoint copies of a gadget
    with CPU nodes ``c0 c3 c4 c5 c7 c8`` and NPU nodes ``n1 n2 n6``: ``c0 -> c3, c4, c5, n6``,
    ``n1 -> n2, c5, c7``, ``n2 -> c7``, ``c3 -> c5``, ``c4 -> c5, n6, c7``, and ``c3``, ``n6``
    need the *value* of ``n1``'s output.  Both devices' ready nodes head one more forced break;
    the tie goes to the CPU, which has more ready nodes (``c0``, ``c8``), but a CPU part first
    cannot take ``c3 c5 c7`` (they wait for ``n1``): CPU, NPU, CPU, NPU = 4 parts (the backward
    pass does no better).  NPU first: NPU{n1 n2}, CPU{all CPU nodes}, NPU{n6} = 3 parts.  The
    copies merge, so the counts are 4 and 3 for every ``k``."""
    edges, allowed, values, names = [], [], [], []
    kinds = ["c0", "n1", "n2", "c3", "c4", "c5", "n6", "c7", "c8"]
    local = [(0, 3), (0, 4), (0, 5), (0, 6), (1, 2), (1, 5), (1, 7), (2, 7), (3, 5),
             (4, 5), (4, 6), (4, 7)]
    for g in range(k):
        b = len(allowed)
        allowed += [[0] if x[0] == "n" else [1] for x in kinds]
        names += [f"g{g}_{x}" for x in kinds]
        edges += [(b + u, b + v) for u, v in local]
        values += [(b + 1, b + 3), (b + 1, b + 6)]
    return make_problem(len(allowed), edges, allowed, ["NPU", "CPU"], value_edges=values,
                        names=names, objective=Objective())


def _weighted_trap(k: int) -> Problem:
    """Objective ``{fallback: 1, partitions: 10}``: ``k + 1`` CPU-only nodes in a chain with a
    node between each two that both devices run and that prefers the NPU.  The heuristic keeps
    every node on its preferred device (``2k + 1`` parts, cost ``10(2k + 1)``); the optimum
    moves the ``k`` middle nodes to the CPU: one part, cost ``10 + k``."""
    n = 2 * k + 1
    allowed = [[1] if v % 2 == 0 else [0, 1] for v in range(n)]
    names = [f"cpu{v // 2}" if v % 2 == 0 else f"either{v // 2}" for v in range(n)]
    return make_problem(n, [(v, v + 1) for v in range(n - 1)], allowed, ["NPU", "CPU"],
                        names=names, objective=Objective(weights={"fallback": 1,
                                                                  "partitions": 10}))


GREEDY_TRAPS: dict = {
    "sequence": (_sequence_trap, "three devices: the greedy's device order is not the shortest "
                                 "common supersequence of the chains"),
    "value": (_value_trap, "value-dependent inputs: running the device with more ready nodes "
                           "first strands nodes that wait for a value"),
    "weighted": (_weighted_trap, "weighted objective: the greedy never moves a node off its "
                                 "preferred device to save parts"),
}


def greedy_trap(name: str, k: int = 2) -> Problem:
    """A constructed problem on which :func:`~hetero_solve.algorithms.greedy.heuristic` is
    worse than the optimum; ``k`` repeats the gadget (see :data:`GREEDY_TRAPS`)."""
    if name not in GREEDY_TRAPS:
        raise ValueError(f"unknown trap {name!r} (known: {', '.join(GREEDY_TRAPS)})")
    return GREEDY_TRAPS[name][0](k)


def greedy_traps(k: int = 2) -> dict[str, Problem]:
    """Every constructed trap at scale ``k``."""
    return {name: greedy_trap(name, k) for name in GREEDY_TRAPS}
