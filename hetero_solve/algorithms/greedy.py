"""Greedy, closure-based partitioning: a valid partition in O(V + E) per pass.

The parts are built one at a time in topological order.  A part on device ``d`` is the
*maximal d-closure* of what is placed so far: every node whose predecessors are placed, that
goes to ``d``, and whose value-dependent inputs come from earlier parts (Kahn's algorithm with
one ready list per device; nodes unlocked inside the part join it at once).  For a fixed
sequence of part devices, placing every node as early as possible is optimal (SOLVING.md, "exact
search over device sequences"); the greedy part is the choice of the next device: the one whose
ready nodes head the longest remaining chain of forced breaks (list scheduling by bottom level),
ties to the device with more ready nodes, then to priority order.

Acyclic by construction: a node joins a part only when all its predecessors are in that part
or earlier ones, so every edge goes forward.  No transitive closure is ever built.

Memory limits (SPEC section 5): the part's memory is tracked incrementally; a node that would
overflow the part's instance waits for the next part on that device, and a node that fits in no
instance of its device on its own spills to its next allowed device (a fallback).

Reference: the maximal-extension step is the ``grow`` of OpenVINO's subgraph selection (seed
000) without its roll-backs, and the list-scheduling order follows Graham's list scheduling.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
...                  [[0], [0], [0], [1], [0], [0], [0]])
>>> greedy(p).num_parts
3
"""

from __future__ import annotations

from typing import Sequence

from ..errors import InfeasibleError
from ..measures import MemoryTracker, topological_order
from ..problem import Problem
from ..solution import Solution, objective_term
from ..units import format_bytes


def heuristic(problem: Problem) -> Solution:
    """A valid partition in linear time: the better of the forward and backward greedy passes.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    Solution
        Parts in topological order, ``algorithm="heuristic"``, status ``"feasible"``,
        ``stats["heuristic_partitions"]`` set.  Ties under the objective go to the answer
        whose largest parts are larger (OpenVINO keeps the largest subgraph; it also
        reproduces seed 000's worked example).  When the forward pass already gives one part
        with every node on its preferred device, nothing can beat it and the backward pass is
        skipped.

    Raises
    ------
    InfeasibleError
        When memory limits leave a node no room on any device it may use.

    Examples
    --------
    >>> from hetero_solve.problem import make_problem
    >>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0], [1], [1], [0]])
    >>> s = heuristic(p)
    >>> s.num_parts, s.part_of, s.part_device
    (3, [0, 1, 1, 2], [0, 1, 0])
    """
    shared = _Shared(problem)
    best = greedy(problem, direction="forward", _shared=shared)
    if not _cannot_improve(problem, best):
        backward = greedy(problem, direction="backward", _shared=shared)
        best = _better(problem, best, backward)
    best.algorithm = "heuristic"
    best.stats["heuristic_partitions"] = best.num_parts
    return best


def _cannot_improve(problem: Problem, sol: Solution) -> bool:
    """One part, no fallback: every objective term is at its minimum (weights are >= 0)."""
    obj = problem.objective
    if not obj.lexicographic and any(w < 0 for w in obj.weights.values()):
        return False
    return sol.num_parts <= 1 and objective_term(problem, sol, "fallback") == 0


def _better(problem: Problem, a: Solution, b: Solution) -> Solution:
    """The better of two solutions (``a`` on a full tie).  A lexicographic objective is
    compared term by term, so the transfer (a pass over every tensor) is only computed when
    the counts before it tie."""
    obj = problem.objective
    if obj.lexicographic:
        for term in obj.order:
            ka, kb = objective_term(problem, a, term), objective_term(problem, b, term)
            if ka != kb:
                return a if ka < kb else b
    else:
        ka, kb = (obj.key({t: objective_term(problem, s, t) for t in obj.weights}) for s in (a, b))
        if ka != kb:
            return a if ka < kb else b
    return a if _larger_parts_first(a) <= _larger_parts_first(b) else b


def _larger_parts_first(sol: Solution) -> tuple[int, ...]:
    sizes = [0] * sol.num_parts
    for p in sol.part_of:
        sizes[p] += 1
    return tuple(sorted((-s for s in sizes)))


class _Shared:
    """What both passes need: a topological order, the value-separated pairs, and each node's
    memory alone in a part."""

    def __init__(self, problem: Problem):
        # Compiled problems number nodes in the model's order, which ONNX requires to be
        # topological: then that order serves (the bottom levels are the same in any).
        arrays = problem.arrays
        self.order = (list(range(problem.n)) if arrays is not None and arrays.edges_ascend()
                      else topological_order(problem.succ, problem.pred))
        self.sep = _separated(problem)
        # Memory of each node alone, computed when first needed: only nodes headed for a
        # device with a memory limit are ever asked.
        self.alone: list[int | None] = [None] * problem.n if problem.has_memory_limits() else []


def greedy(problem: Problem, *, direction: str = "forward",
           devices: list[int] | None = None, _shared: _Shared | None = None) -> Solution:
    """One greedy pass.  ``direction="backward"`` builds parts from the sinks up (the same
    algorithm on the reversed graph).  ``devices`` fixes a starting device per node (default:
    the preferred one)."""
    n = problem.n
    if direction == "forward":
        nxt, prv = problem.succ, problem.pred
    elif direction == "backward":
        nxt, prv = problem.pred, problem.succ
    else:
        raise ValueError(f"direction must be 'forward' or 'backward', not {direction!r}")
    dev = list(devices) if devices is not None else [a[0] for a in problem.allowed]
    D = len(problem.devices)
    enforce = [d.enforce_values for d in problem.devices]
    shared = _shared or _Shared(problem)
    sep = shared.sep
    order = shared.order if direction == "forward" else shared.order[::-1]
    level = _bottom_levels(problem, nxt, order, dev, enforce, direction)

    indeg = [len(p) for p in prv]
    ready: list[list[int]] = [[] for _ in range(D)]
    top = [-1] * D
    free = [[d.memory] * d.instances if d.memory is not None else None for d in problem.devices]
    most_free = [max(f) if f is not None else None for f in free]
    alone = shared.alone

    def settle(v: int) -> int:
        """Move ``v`` down its allowed list while its device has no instance it fits in
        alone, so that it can join a part being built on the next device right away."""
        d = dev[v]
        while most_free[d] is not None:
            need = alone[v]
            if need is None:
                need = alone[v] = standalone_memory(problem, v)
            if need <= most_free[d]:
                break
            allowed = problem.allowed[v]
            pos = allowed.index(d)
            if pos + 1 == len(allowed):
                break           # nowhere else: the spill step reports it
            d = dev[v] = allowed[pos + 1]
        return d

    def push(v: int) -> None:
        d = settle(v)
        ready[d].append(v)
        if level[v] > top[d]:
            top[d] = level[v]

    for v in range(n):
        if indeg[v] == 0:
            push(v)

    part_of = [-1] * n
    part_device: list[int] = []
    part_instance: list[int] = []
    placed = 0
    while placed < n:
        d = _next_device(ready, top)
        if d < 0:
            raise AssertionError("greedy: no ready node but nodes left (the graph has a cycle)")
        queue = ready[d]
        ready[d] = []
        top[d] = -1
        p = len(part_device)
        inst = 0
        tracker = None
        cap = 0
        if free[d] is not None:
            inst = max(range(len(free[d])), key=free[d].__getitem__)
            tracker = MemoryTracker(problem)
            cap = free[d][inst]
        part_device.append(d)
        part_instance.append(inst)
        size = 0
        waiting: list[int] = []
        qi = 0
        while qi < len(queue):
            v = queue[qi]
            qi += 1
            if enforce[d] and sep[v] and any(part_of[u] == p for u in sep[v]):
                waiting.append(v)       # a value input made in this part: next part
                continue
            if tracker is not None:
                delta = tracker.delta(v)
                if tracker.used + delta > cap:
                    if size:
                        waiting.append(v)   # this instance is full: a later part
                    else:
                        _spill(problem, v, dev, free)
                        push(v)
                    continue
                tracker.add(v, delta)
            part_of[v] = p
            size += 1
            placed += 1
            for w in nxt[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    if settle(w) == d:
                        queue.append(w)
                    else:
                        push(w)
        for v in waiting:
            push(v)
        if size == 0:
            part_device.pop()
            part_instance.pop()
        elif tracker is not None:
            free[d][inst] -= tracker.used
            most_free[d] = max(free[d])
    k = len(part_device)
    if direction == "backward":   # parts were made sinks first: reverse to a topological order
        part_of = [k - 1 - p for p in part_of]
        part_device.reverse()
        part_instance.reverse()
    # Part ids are topological by construction: a node joins a part only after all its
    # predecessors are placed in that part or an earlier one.
    return Solution(part_of, part_device, part_instance, algorithm=f"greedy-{direction}")


def standalone_memory(problem: Problem, v: int) -> int:
    """Memory of node ``v`` alone in a part: its constants, inputs, and the outputs that are
    graph outputs or read by anyone (all readers are outside a one-node part)."""
    cb, tb = problem.const_bytes, problem.tensor_bytes
    is_out, cons = problem.tensor_is_output, problem.tensor_consumers
    m = 0
    for c in problem.node_consts[v]:   # distinct per node (compile dedupes a node's reads)
        m += cb[c]
    for t in problem.node_inputs[v]:
        m += tb[t]
    for t in problem.node_outputs[v]:
        if is_out[t] or cons[t]:
            m += tb[t]
    return m


def _next_device(ready: list[list[int]], top: list[int]) -> int:
    best = -1
    for d in range(len(ready)):
        if ready[d] and (best < 0 or top[d] > top[best]
                         or (top[d] == top[best] and len(ready[d]) > len(ready[best]))):
            best = d
    return best


def _separated(problem: Problem) -> Sequence[Sequence[int]]:
    """Nodes that may not share a part with ``v`` on an enforcing device: the makers of v's
    value inputs and the nodes whose value inputs v makes."""
    if not any(problem.value_pred):
        return [()] * problem.n       # read-only: one shared empty tuple
    sep: list[list[int]] = [[] for _ in range(problem.n)]
    for v, us in enumerate(problem.value_pred):
        for u in us:
            sep[v].append(u)
            sep[u].append(v)
    return sep


def _bottom_levels(problem: Problem, nxt, order: list[int], dev, enforce, direction: str) -> list[int]:
    """Longest chain of forced breaks (device change, enforced value input) from each node to
    the end, in the direction of travel.  The list-scheduling priority.  ``order`` is a
    topological order in the direction of travel."""
    n = problem.n
    level = [0] * n
    vp = problem.value_pred
    forward = direction == "forward"
    for v in reversed(order):
        best = 0
        dv = dev[v]
        for w in nxt[v]:
            dw = dev[w]
            if dw != dv:
                b = level[w] + 1
            elif enforce[dv] and ((forward and v in vp[w]) or (not forward and w in vp[v])):
                b = level[w] + 1
            else:
                b = level[w]
            if b > best:
                best = b
        level[v] = best
    return level


def _spill(problem: Problem, v: int, dev: list[int], free) -> None:
    """Move ``v`` to its next allowed device: it fits in no instance of its current one."""
    allowed = problem.allowed[v]
    d = dev[v]
    pos = allowed.index(d)
    if pos + 1 < len(allowed):
        dev[v] = allowed[pos + 1]
        return
    need = MemoryTracker(problem).delta(v)
    options = ", ".join(
        f"{problem.devices[a].name} (largest free instance "
        f"{format_bytes(max(free[a])) if free[a] is not None else 'unlimited'})" for a in allowed)
    raise InfeasibleError(
        f"memory: node {problem.names[v]!r} ({problem.op_types[v]}) needs {need} bytes "
        f"({format_bytes(need)}) on its own; no instance of its devices has room: {options}",
        [problem.names[v]])
