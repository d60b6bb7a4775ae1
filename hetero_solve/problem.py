"""The compiled problem: plain data that every algorithm reads the same way.

Nodes are ``0..n-1`` (the model's placeable nodes: not ``Constant``, not folded).  Devices are
``0..D-1`` in priority order.  Everything is lists of ints so that the greedy heuristic, CP-SAT,
SAT, the baselines and the validator share one view and tests can build problems by hand with
:func:`make_problem`.

Memory of a part (SPEC section 5) and transfer (SPEC section 6) are defined here once:
:func:`part_memory` and :func:`transfer_bytes`.  Large problems are measured with numpy
(:mod:`hetero_solve.arrays`), which the tests hold to these definitions.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, MutableMapping, NamedTuple, Sequence, Union

from .arrays import arrays_of

OBJECTIVE_TERMS = ("fallback", "partitions", "transfer")


@dataclass(frozen=True)
class Device:
    name: str
    memory: int | None = None        # bytes per instance; None = unlimited
    instances: int = 1
    enforce_values: bool = True      # value-dependent inputs bind on this device


@dataclass(frozen=True)
class Objective:
    """SPEC section 6: lexicographic ``order`` (default) or a weighted sum ``weights``."""
    order: tuple[str, ...] = OBJECTIVE_TERMS
    weights: Mapping[str, float] | None = None

    @property
    def lexicographic(self) -> bool:
        return self.weights is None

    def key(self, values: Mapping[str, float]) -> tuple:
        """Sort key: smaller is better."""
        if self.weights is None:
            return tuple(values[t] for t in self.order)
        return (sum(w * values[t] for t, w in self.weights.items()),)

    def describe(self) -> str:
        if self.weights is None:
            return "lexicographic " + " > ".join(self.order)
        return "weighted " + " + ".join(f"{w}*{t}" for t, w in self.weights.items())


class NonStaticShape(NamedTuple):
    """Why a static-shape device refuses a node: its first tensor (inputs, then outputs)
    whose shape is not static."""

    role: str                  # "input" or "output"
    position: int
    tensor: str
    shape: tuple | None        # None: unknown rank
    device: str

    def text(self) -> str:
        shape = "unknown" if self.shape is None else list(self.shape)
        return (f"{self.role} {self.position} {self.tensor!r} has a non-static shape {shape} "
                f"({self.device} needs static shapes)")


class NamedReason(NamedTuple):
    """A reason found once for every node of one signature (op, tensor types, attributes),
    with the node's own tensor names to put in its holes.  ``pieces`` are texts and
    ``(is_input, position, quoted)`` holes (shared by every node of the signature)."""

    pieces: tuple
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def text(self) -> str:
        out = []
        for piece in self.pieces:
            if type(piece) is str:
                out.append(piece)
            else:
                is_input, k, quoted = piece
                x = (self.inputs if is_input else self.outputs)[k]
                out.append(repr(x) if quoted else x)
        return "".join(out)


#: An entry of :class:`Refusals`: ``None`` (taken), a text, or a record whose ``text()`` is
#: the text.  Plain data: no callables, nothing that refers to the model.
Reason = Union[None, str, NonStaticShape, NamedReason]


def reason_text(entry: Reason) -> str | None:
    """The text of a :class:`Refusals` entry."""
    return entry if entry is None or type(entry) is str else entry.text()


class Refusals(MutableMapping):
    """``(node, device) -> why the device refuses the node``, kept as compile found it: one
    row per device in node order, each entry a :data:`Reason`.  The text of a record is made
    when it is read: only errors and explanations read them, and a static-shape device can
    refuse 70,000 nodes of a large model.  Entries set later (pins) override the rows."""

    def __init__(self, rows: list[list[Reason]], overrides: dict[tuple[int, int], str] | None = None):
        self._rows = rows
        self._set: dict[tuple[int, int], str] = dict(overrides or {})

    def __getitem__(self, key: tuple[int, int]) -> str:
        found = self._set.get(key)
        if found is not None:
            return found
        v, d = key
        entry = self._rows[d][v] if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]) else None
        if entry is None:
            raise KeyError(key)
        return reason_text(entry)

    def entry(self, v: int, d: int) -> Reason:
        """The reason as kept (a record, a text or ``None``), overrides first."""
        found = self._set.get((v, d))
        if found is not None:
            return found
        return self._rows[d][v] if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]) else None

    def __setitem__(self, key: tuple[int, int], why: str) -> None:
        self._set[key] = why

    def __delitem__(self, key: tuple[int, int]) -> None:
        self[key]   # noqa: B018 - KeyError when absent
        self._set.pop(key, None)
        v, d = key
        if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]):
            self._rows[d][v] = None

    def __iter__(self) -> Iterator[tuple[int, int]]:
        yield from self._set
        for d, row in enumerate(self._rows):
            for v, entry in enumerate(row):
                if entry is not None and (v, d) not in self._set:
                    yield v, d

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass
class Problem:
    devices: list[Device]
    names: list[str]
    op_types: list[str]
    allowed: list[tuple[int, ...]]       # device indices a node may go to, priority order
    succ: list[list[int]]                # data dependencies u -> v, deduplicated
    pred: list[list[int]]
    value_pred: list[list[int]]          # u in value_pred[v]: u makes a value input of v
    # Non-constant tensors read or written by nodes (memory and transfer).
    tensor_names: list[str]
    tensor_bytes: list[int]
    tensor_producer: list[int]           # producing node, -1 for a graph input
    tensor_consumers: list[list[int]]
    tensor_is_output: list[bool]         # a graph output
    node_inputs: list[list[int]]         # tensor ids a node reads (distinct)
    node_outputs: list[list[int]]        # tensor ids a node writes
    # Constants (initializers, Constant outputs, folded outputs) read by nodes.
    const_names: list[str]
    const_bytes: list[int]
    node_consts: list[list[int]]
    objective: Objective = field(default_factory=Objective)
    pinned: list[int] = field(default_factory=list)     # device index, or -1
    graph_index: list[int] = field(default_factory=list)  # node -> index in model.graph.node
    refusals: MutableMapping[tuple[int, int], str] = field(default_factory=dict)  # (node, device) -> why
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.names)

    def __getstate__(self) -> dict:
        # The numpy views of :mod:`hetero_solve.arrays` are a cache: rebuilt where needed.
        state = dict(self.__dict__)
        state.pop("_arrays", None)
        state.pop("_flat", None)
        return state

    def preferred(self, v: int) -> int:
        return self.allowed[v][0]

    def has_memory_limits(self) -> bool:
        return any(d.memory is not None for d in self.devices)

    def value_succ(self) -> list[list[int]]:
        """Inverse of ``value_pred``."""
        out: list[list[int]] = [[] for _ in range(self.n)]
        for v, us in enumerate(self.value_pred):
            for u in us:
                out[u].append(v)
        return out

    def why_not(self, v: int, d: int) -> str:
        """Why node ``v`` may not go to device ``d`` (empty when it may)."""
        if d in self.allowed[v]:
            return ""
        return self.refusals.get((v, d), f"{self.devices[d].name} does not take {self.op_types[v]}")


# -- memory and transfer (the one definition) -----------------------------------------------

def part_memory(problem: Problem, nodes: Iterable[int], member: Sequence[int] | None = None,
                part: int | None = None) -> int:
    """SPEC section 5: distinct constants + input tensors + output tensors of a part.

    ``member``/``part`` give part membership for all nodes (``member[v] == part``); without them
    ``nodes`` alone is the part.
    """
    nodes = list(nodes)
    if member is None:
        inside = set(nodes)
        is_in = inside.__contains__
    else:
        is_in = lambda v: member[v] == part  # noqa: E731
    consts: set[int] = set()
    tensors_in: set[int] = set()
    tensors_out: set[int] = set()
    prod = problem.tensor_producer
    for v in nodes:
        consts.update(problem.node_consts[v])
        for t in problem.node_inputs[v]:
            p = prod[t]
            if p < 0 or not is_in(p):
                tensors_in.add(t)
        for t in problem.node_outputs[v]:
            if problem.tensor_is_output[t] or any(not is_in(c) for c in problem.tensor_consumers[t]):
                tensors_out.add(t)
    tb = problem.tensor_bytes
    return (sum(problem.const_bytes[c] for c in consts) + sum(tb[t] for t in tensors_in)
            + sum(tb[t] for t in tensors_out))


def part_memories(problem: Problem, part_of: Sequence[int], num_parts: int) -> tuple[list[int], int]:
    """Memory of every part and the transfer, in one O(V + E) pass (the same definitions as
    :func:`part_memory` and :func:`transfer_bytes`, which the tests hold it to)."""
    arrays = arrays_of(problem)
    if arrays is not None:
        return arrays.part_memories(part_of, num_parts)
    mem = [0] * num_parts
    cb = problem.const_bytes
    seen_const: set[tuple[int, int]] = set()
    for v, consts in enumerate(problem.node_consts):
        if consts:
            p = part_of[v]
            for c in consts:
                key = (p, c)
                if key not in seen_const:
                    seen_const.add(key)
                    mem[p] += cb[c]
    transfer = 0
    tb = problem.tensor_bytes
    is_out = problem.tensor_is_output
    consumers = problem.tensor_consumers
    for t, u in enumerate(problem.tensor_producer):
        b = tb[t]
        cons = consumers[t]
        if u < 0:
            if len(cons) == 1:
                mem[part_of[cons[0]]] += b
            else:
                for q in {part_of[c] for c in cons}:
                    mem[q] += b
            continue
        home = part_of[u]
        if len(cons) == 1:
            q = part_of[cons[0]]
            if q != home:
                mem[q] += b
                mem[home] += b
                transfer += b
            elif is_out[t]:
                mem[home] += b
            continue
        others = {part_of[c] for c in cons}
        others.discard(home)
        if others or is_out[t]:
            mem[home] += b
        for q in others:
            mem[q] += b
        transfer += b * len(others)
    return mem, transfer


def transfer_bytes(problem: Problem, part_of: Sequence[int]) -> int:
    """SPEC section 6: each produced tensor counts once per consuming part other than its
    producer's; graph inputs and constants do not count."""
    arrays = arrays_of(problem)
    if arrays is not None:
        return arrays.transfer(part_of)
    total = 0
    tb = problem.tensor_bytes
    consumers = problem.tensor_consumers
    for t, p in enumerate(problem.tensor_producer):
        if p < 0:
            continue
        cons = consumers[t]
        home = part_of[p]
        if len(cons) == 1:      # most tensors: no set needed
            if part_of[cons[0]] != home:
                total += tb[t]
            continue
        parts = {part_of[c] for c in cons}
        parts.discard(home)
        total += tb[t] * len(parts)
    return total


def fallback_count(problem: Problem, node_device: Sequence[int]) -> int:
    """SPEC section 6: nodes not on their preferred device."""
    return sum(1 for v, d in enumerate(node_device) if d != problem.allowed[v][0])


def topological_order(succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], *,
                      smallest_first: bool = False) -> list[int]:
    """Kahn's order of a DAG given as successor and predecessor lists (pass them swapped for
    the reversed graph).  ``smallest_first``: among ready nodes, always the smallest index
    (a heap; the baselines' documented tie rule), else first ready, first out (linear).
    Raises ``ValueError`` on a cycle."""
    indeg = [len(p) for p in pred]
    ready = [v for v in range(len(succ)) if indeg[v] == 0]
    if smallest_first:
        order: list[int] = []
        while ready:
            v = heapq.heappop(ready)
            order.append(v)
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    heapq.heappush(ready, w)
    else:
        order = ready
        for v in order:  # the list grows while it is walked
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    order.append(w)
    if len(order) != len(succ):
        raise ValueError("the graph has a cycle")
    return order


# -- building problems by hand (tests, benchmarks, generators) -------------------------------

def make_problem(n: int, edges: Iterable[tuple[int, int]], allowed: Sequence[Iterable[int]],
                 devices: Sequence[Device | str] = ("ACC", "CPU"), *,
                 value_edges: Iterable[tuple[int, int]] = (),
                 tensor_bytes: Sequence[int] | int = 1, const_bytes: Sequence[int] | int = 0,
                 outputs: Iterable[int] | None = None, names: Sequence[str] | None = None,
                 op_types: Sequence[str] | None = None,
                 objective: Objective | None = None) -> Problem:
    """A problem from a DAG: node ``v`` writes one tensor (``tensor_bytes[v]`` bytes) read by
    its successors, and reads one constant of ``const_bytes[v]`` bytes (none when 0).
    ``value_edges`` are edges ``(u, v)`` where ``u`` makes a value-dependent input of ``v``
    (they are added as data edges too).  ``outputs`` default to the sinks.

    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0], [1], [0]])
    >>> p.succ, [p.preferred(v) for v in range(3)]
    ([[1], [2], []], [0, 1, 0])
    """
    devs = [d if isinstance(d, Device) else Device(d) for d in devices]
    value_edges = list(value_edges)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in list(edges) + value_edges:
        if not (0 <= u < n and 0 <= v < n) or u == v:
            raise ValueError(f"bad edge ({u}, {v})")
        if v not in succ[u]:
            succ[u].append(v)
            pred[v].append(u)
    value_pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in value_edges:
        if u not in value_pred[v]:
            value_pred[v].append(u)
    tb = [tensor_bytes] * n if isinstance(tensor_bytes, int) else list(tensor_bytes)
    cb = [const_bytes] * n if isinstance(const_bytes, int) else list(const_bytes)
    outs = set(v for v in range(n) if not succ[v]) if outputs is None else set(outputs)
    const_names, const_sizes, node_consts = [], [], []
    for v in range(n):
        if cb[v]:
            node_consts.append([len(const_names)])
            const_names.append(f"w{v}")
            const_sizes.append(cb[v])
        else:
            node_consts.append([])
    return Problem(
        devices=devs, names=list(names) if names else [f"n{v}" for v in range(n)],
        op_types=list(op_types) if op_types else ["Op"] * n,
        allowed=[tuple(a) for a in allowed], succ=succ, pred=pred, value_pred=value_pred,
        tensor_names=[f"t{v}" for v in range(n)], tensor_bytes=tb,
        tensor_producer=list(range(n)), tensor_consumers=[list(s) for s in succ],
        tensor_is_output=[v in outs for v in range(n)],
        node_inputs=[list(p) for p in pred], node_outputs=[[v] for v in range(n)],
        const_names=const_names, const_bytes=const_sizes, node_consts=node_consts,
        objective=objective or Objective(), pinned=[-1] * n, graph_index=list(range(n)))
