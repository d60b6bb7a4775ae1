"""The memory of a part being built node by node (docs/problem.md, "Memory of
a part"), in O(degree) per step.

One tracker for every algorithm that grows parts (the heuristic, Glow's memory cuts): it holds
exactly :func:`~.definitions.part_memory` of the nodes added so far.

A tensor counts as an input while a consumer is inside and its producer is not (or it is a
graph input), and as an output while its producer is inside and it is a graph output or some
consumer is outside.  Adding a node can lower the total (an output becomes internal), exactly
as Glow's ``updateGraphMemInfoByAddingNode`` does; nodes may be added in any order.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0]] * 3, tensor_bytes=[10, 20, 30])
>>> m = MemoryTracker(p)
>>> m.delta(1), m.add(1), m.used      # t0 in, t1 out
(30, None, 30)
>>> m.delta(0)                        # t0 becomes internal
-10
>>> m.add(0); m.add(2); m.used        # one part: only the graph output t2
30
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

if TYPE_CHECKING:
    from ..problem import Problem


class MemoryTracker:
    """The memory of the nodes added so far (``used``, bytes)."""

    __slots__ = ("p", "used", "inside_consumers", "produced", "consts")

    def __init__(self, problem: "Problem"):
        self.p = problem
        self.used = 0
        self.inside_consumers: dict[int, int] = {}   # tensor -> its consumers inside
        self.produced: set[int] = set()              # tensors made inside
        self.consts: set[int] = set()                # constants read inside

    def delta(self, v: int) -> int:
        """Change of the part's memory if ``v`` joined it (negative when ``v`` makes the
        last outside consumer of a tensor come in)."""
        p = self.p
        tb = p.tensor_bytes
        is_out = p.tensor_is_output
        cons = p.tensor_consumers
        inside = self.inside_consumers
        produced = self.produced
        consts = self.consts
        cb = p.const_bytes
        delta = 0
        node_consts = p.node_consts[v]
        for i, c in enumerate(node_consts):
            if c not in consts and (i == 0 or c not in node_consts[:i]):
                delta += cb[c]
        for t in p.node_inputs[v]:
            k = inside.get(t, 0)
            if t in produced:       # an output of the part; internal once its last consumer joins
                if k + 1 == len(cons[t]) and not is_out[t]:
                    delta -= tb[t]
            elif k == 0:            # a new input of the part
                delta += tb[t]
        for t in p.node_outputs[v]:
            k = inside.get(t, 0)    # consumers already inside (parts grown backwards)
            before = tb[t] if k else 0
            after = tb[t] if (is_out[t] or k < len(cons[t])) else 0
            delta += after - before
        return delta

    def add(self, v: int, delta: int | None = None) -> None:
        """Add ``v`` (``delta``: :meth:`delta` of ``v``, when the caller has it)."""
        self.used += self.delta(v) if delta is None else delta
        p = self.p
        self.consts.update(p.node_consts[v])
        inside = self.inside_consumers
        for t in p.node_inputs[v]:
            inside[t] = inside.get(t, 0) + 1
        self.produced.update(p.node_outputs[v])


class RunInputs:
    """The constants and input tensors of a run grown in topological order, in bytes
    (``bytes``): part of the run's memory that never shrinks as it grows (a tensor read from
    outside stays an input, since its producer comes before the run), so once it exceeds the
    room no longer run fits."""

    __slots__ = ("p", "inside", "consts", "inputs", "bytes")

    def __init__(self, problem: "Problem"):
        self.p = problem
        self.inside: set[int] = set()
        self.consts: set[int] = set()
        self.inputs: set[int] = set()
        self.bytes = 0

    def extra(self, v: int) -> int:
        """Bytes ``bytes`` would grow by if ``v`` joined (a tensor ``v`` reads twice counts once)."""
        p = self.p
        b = 0
        seen = self.consts
        cb = p.const_bytes
        node_consts = p.node_consts[v]
        for i, c in enumerate(node_consts):
            if c not in seen and (i == 0 or c not in node_consts[:i]):
                b += cb[c]
        prod = p.tensor_producer
        inputs, inside, tb = self.inputs, self.inside, p.tensor_bytes
        for t in p.node_inputs[v]:          # distinct per node (a Problem invariant)
            if t not in inputs and prod[t] not in inside:
                b += tb[t]
        return b

    def add(self, v: int, extra: int | None = None) -> None:
        """Add ``v`` (``extra``: :meth:`extra` of ``v``, when the caller has it)."""
        p = self.p
        self.bytes += self.extra(v) if extra is None else extra
        self.consts.update(p.node_consts[v])
        prod = p.tensor_producer
        for t in p.node_inputs[v]:
            if prod[t] not in self.inside:
                self.inputs.add(t)
        self.inside.add(v)


def fitting_runs(problem: "Problem", order: Sequence[int], start: int, cap: int,
                 stop: int | None = None) -> Iterator[tuple[int, int]]:
    """Grow the run ``order[start:end]`` one node at a time (``order`` topological, ``end``
    up to ``stop``) and yield ``(end, memory)`` after each node: the run's memory,
    which may be above ``cap`` (a later node can make an output internal and bring it back
    under).  Stops once the run's constants and inputs (:class:`RunInputs`) exceed
    ``cap``: no longer run can fit then.

    >>> from hetero_solve.problem import make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0]] * 3, tensor_bytes=[10, 20, 30])
    >>> list(fitting_runs(p, [0, 1, 2], 0, 100))
    [(1, 10), (2, 20), (3, 30)]
    >>> list(fitting_runs(p, [0, 1, 2], 1, 35))     # t0 in, t1 out; t0 in, t2 out
    [(2, 30), (3, 40)]
    >>> list(fitting_runs(p, [0, 1, 2], 1, 5))      # the input t0 alone is over the room
    []
    """
    stop = len(order) if stop is None else min(stop, len(order))
    mem = MemoryTracker(problem)
    fixed = RunInputs(problem)
    for j in range(start, stop):
        v = order[j]
        extra = fixed.extra(v)
        if fixed.bytes + extra > cap:
            return
        fixed.add(v, extra)
        mem.add(v)
        yield j + 1, mem.used
