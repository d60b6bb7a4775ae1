"""Greedy, closure-based partitioning: a valid partition in O(V + E) per pass.

The parts are built one at a time in topological order.  A part on device ``d`` is the
*maximal d-closure* of what is placed so far: every node whose predecessors are placed, that
goes to ``d``, and whose value-dependent inputs come from earlier parts (Kahn's algorithm with
one ready list per device; nodes unlocked inside the part join it at once).  For a fixed
sequence of part devices, placing every node as early as possible is optimal (docs/exact.md,
"Search over device sequences"); the greedy part is the choice of the next device: the one whose
ready nodes head the longest remaining chain of forced breaks (list scheduling by bottom level),
ties to the device with more ready nodes, then to priority order.

Acyclic by construction: a node joins a part only when all its predecessors are in that part
or earlier ones, so every edge goes forward.  No transitive closure is ever built.

Memory limits (docs/problem.md) are met after the parts are built, not node by node: a part's
memory counts only its constants and the tensors crossing its boundary, so whether a node fits
depends on what else its part holds (a convolution whose activations fill a card fits inside
a larger part that keeps them internal).  :func:`heuristic` builds parts as if memory were
unlimited, cuts and places them on device instances (:mod:`hetero_solve.fitting.fit`), and when a device
cannot hold its nodes, moves the nodes that cost it most memory per node to their next device
(:mod:`hetero_solve.fitting.placement`) and builds again.

Reference: the maximal-extension step is the ``grow`` of OpenVINO's subgraph selection (seed
000) without its roll-backs, and the list-scheduling order follows Graham's list scheduling.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
...                  [[0], [0], [0], [1], [0], [0], [0]])
>>> greedy(p).num_parts
3
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..errors import InfeasibleError
from ..fitting.fit import fit_memory
from ..fitting.packing import first_fit
from ..fitting.placement import Placement
from ..measures import part_memories, topological_order
from ..problem import Device, Problem
from ..solution import Solution, normalize, objective_term
from .regions import regions
from ..validate import validate
from .baselines import BASELINES, BaselineSkipped

MAX_ROUNDS = 24        # device choices tried when memory binds (each lowers a byte target)
BISECTIONS = 6         # then targets tried between the last that failed and the first that fit


class PackingFailed(InfeasibleError):
    """The heuristic found no partition that fits the memory limits.  Not a proof that none
    exists (packing parts into instances is bin packing): the pipeline asks the exact solver
    (:func:`hetero_solve.pipeline.initial_solution`)."""


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
        When memory limits leave a node no room on any device it may use (proven: no part
        holding it fits, the message names the node and the bytes).
    PackingFailed
        (an ``InfeasibleError``) when the parts found could not be placed on the instances:
        not a proof, the exact solver may still find a partition (the pipeline asks it).

    Examples
    --------
    >>> from hetero_solve.problem import make_problem
    >>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0], [1], [1], [0]])
    >>> s = heuristic(p)
    >>> s.num_parts, s.part_of, s.part_device
    (3, [0, 1, 1, 2], [0, 1, 0])
    """
    shared = _Shared(problem)
    if problem.has_memory_limits():
        best = _with_memory(problem, shared)
    else:
        best = _best_pass(problem, shared, None)
    best.algorithm = "heuristic"
    best.stats["heuristic_partitions"] = best.num_parts
    return best


def _best_pass(problem: Problem, shared: "_Shared", devices: list[int] | None) -> Solution:
    """The better of the forward and backward passes (memory ignored)."""
    best = greedy(problem, direction="forward", devices=devices, _shared=shared)
    if not _cannot_improve(problem, best):
        backward = greedy(problem, direction="backward", devices=devices, _shared=shared)
        best = _better(problem, best, backward)
    return best


def _with_memory(problem: Problem, shared: "_Shared") -> Solution:
    """Build parts without memory limits, fit them into the instances; while a device cannot
    hold its parts, lower its byte target (by the bytes left over) and choose devices again.
    Every node stays on its preferred device unless no part there can hold it, or a target
    moves it.  When memory binds (the first parts did not fit), each round also fits its
    parts moving the nodes no run can start with to the next device (:func:`fit_memory`'s
    ``spill``), and the simple constructions of :func:`_rivals` are compared: the answer is
    the best of all, never worse than a valid rival."""
    plan = Placement(problem)
    targets: dict[int, int] = {}
    best: Solution | None = None

    def keep(sol: Solution) -> None:
        nonlocal best
        best = sol if best is None else _better(problem, best, sol)

    def round_(targets: dict[int, int]) -> tuple[bool, dict[int, int]]:
        """Devices for ``targets``, parts, fits: whether a fit needed no move, and the bytes
        left over per device otherwise."""
        dev = plan.devices(targets)
        left: dict[int, int] = {}
        fitted = False
        for direction in ("forward", "backward"):
            sol = greedy(problem, direction=direction, devices=dev, _shared=shared)
            fit, over = fit_memory(problem, sol, spill=plan.next_device)
            if fit is not None:
                keep(fit)
            if not over:
                fitted = True
                if fit is not None and _cannot_improve(problem, fit):
                    break
                continue
            for d, b in over.items():
                left[d] = min(left.get(d, b), b)
        return fitted, left

    failed: dict[int, int] | None = None      # the last targets whose parts did not fit
    for _ in range(MAX_ROUNDS):
        fitted, left = round_(targets)
        if fitted and not targets:
            return best             # memory did not bind
        if fitted:
            # The targets fell in steps of what was left over: between the last that failed
            # and this one, bisect for targets that move fewer nodes.
            if failed is not None:
                ok = dict(targets)
                for _ in range(BISECTIONS):
                    mid = {d: (ok[d] + failed.get(d, ok[d])) // 2 for d in ok}
                    if mid == ok or mid == failed:
                        break
                    if round_(mid)[0]:
                        ok = mid
                    else:
                        failed = mid
            break
        failed = dict(targets) if targets else None
        for d, b in left.items():
            dev_d = problem.devices[d]
            whole = dev_d.memory * dev_d.instances
            if d not in targets and plan.union.get(d, 0) > whole:
                targets[d] = whole      # first: what the instances hold together
            else:                       # then less, by what did not fit
                now = min(targets.get(d, whole), plan.union.get(d, 0))
                targets[d] = _lower_target(now, b)
        if not targets:
            targets = {d: problem.devices[d].memory * problem.devices[d].instances for d in left}
    for rival in _rivals(problem):
        keep(rival)
    if best is None:
        over = ", ".join(f"{problem.devices[d].name}" for d in targets)
        raise PackingFailed(f"memory: the heuristic could not fit the parts into the instances "
                            f"of {over} (not a proof that no partition exists)", [])
    return best


def _lower_target(now: int, left: int) -> int:
    """The next byte target of a device whose parts did not fit: lower by what was left
    over, by at least a sixteenth."""
    return max(0, now - max(left, now // 16, 1))


#: Baselines tried as rivals only up to these sizes: above, they cost seconds (GraphCycles'
#: cycle checks grow faster than the graph: 0.9 s at 5,000 nodes, 13 s at 20,000 on the
#: layered memory benchmark), far more than the search above.
RIVAL_NODES = {"openvino": 2_000, "graphcycles": 5_000}


def _rivals(problem: Problem) -> list[Solution]:
    """The valid answers of simple constructions that know memory only partly or not at all
    (the baselines; every node on its preferred device, split into connected regions): cheap
    next to the search above, and the heuristic must never be worse than them."""
    out = []
    candidates = [_preferred_regions(problem)]
    for name, baseline in BASELINES.items():
        if problem.n > RIVAL_NODES.get(name, problem.n):
            continue
        try:
            candidates.append(baseline.run(problem))
        except BaselineSkipped:
            continue
    for sol in candidates:
        fit = _instances_first_fit(problem, sol)
        if not validate(problem, fit):
            out.append(fit)
    return out


def _preferred_regions(problem: Problem) -> Solution:
    """Every node on its preferred device; each connected region of one device a part (what
    OpenVINO does with an affinity map; may be cyclic, then the validator rejects it)."""
    pref = [a[0] for a in problem.allowed]
    part_of = regions(problem, pref)
    part_device = [0] * (max(part_of, default=-1) + 1)
    for v, q in enumerate(part_of):
        part_device[q] = pref[v]
    return normalize(problem, Solution(part_of, part_device, [0] * len(part_device)))


def _instances_first_fit(problem: Problem, sol: Solution) -> Solution:
    """``sol`` with its parts on instances first-fit decreasing by memory, per device (a part
    no instance has room for goes to instance 0: the validator then rejects the candidate)."""
    mems, _ = part_memories(problem, sol.part_of, sol.num_parts)
    inst = [0] * sol.num_parts
    for d, dev in enumerate(problem.devices):
        if dev.memory is None:
            continue
        qs = [q for q in range(sol.num_parts) if sol.part_device[q] == d]
        where, _ = first_fit([mems[q] for q in qs], dev.memory, dev.instances, full="first")
        for q, i in zip(qs, where):
            inst[q] = i
    return Solution(sol.part_of, sol.part_device, inst, algorithm=sol.algorithm)


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
    """What every pass needs: a topological order and the value-separated pairs."""

    def __init__(self, problem: Problem):
        # Compiled problems number nodes in the model's order, which ONNX requires to be
        # topological: then that order serves (the bottom levels are the same in any).
        arrays = problem.arrays
        self.order = (list(range(problem.n)) if arrays is not None and arrays.edges_ascend()
                      else topological_order(problem.succ, problem.pred))
        self.sep = _separated(problem)


def greedy(problem: Problem, *, direction: str = "forward",
           devices: list[int] | None = None, _shared: _Shared | None = None) -> Solution:
    """One greedy pass, memory limits ignored (:func:`heuristic` fits the parts afterwards).
    ``direction="backward"`` builds parts from the sinks up (the same algorithm on the
    reversed graph).  ``devices`` fixes the device of each node (default: the preferred
    one); every part is then on one device, all instance 0."""
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

    def push(v: int) -> None:
        d = dev[v]
        ready[d].append(v)
        if level[v] > top[d]:
            top[d] = level[v]

    for v in range(n):
        if indeg[v] == 0:
            push(v)

    part_of = [-1] * n
    part_device: list[int] = []
    placed = 0
    while placed < n:
        d = _next_device(ready, top)
        if d < 0:
            raise AssertionError("greedy: no ready node but nodes left (the graph has a cycle)")
        queue = ready[d]
        ready[d] = []
        top[d] = -1
        p = len(part_device)
        part_device.append(d)
        size = 0
        waiting: list[int] = []
        qi = 0
        while qi < len(queue):
            v = queue[qi]
            qi += 1
            if enforce[d] and sep[v] and any(part_of[u] == p for u in sep[v]):
                waiting.append(v)       # a value input made in this part: next part
                continue
            part_of[v] = p
            size += 1
            placed += 1
            for w in nxt[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    if dev[w] == d:
                        queue.append(w)
                    else:
                        push(w)
        for v in waiting:
            push(v)
        if size == 0:
            part_device.pop()
    k = len(part_device)
    if direction == "backward":   # parts were made sinks first: reverse to a topological order
        part_of = [k - 1 - p for p in part_of]
        part_device.reverse()
    # Part ids are topological by construction: a node joins a part only after all its
    # predecessors are placed in that part or an earlier one.
    return Solution(part_of, part_device, [0] * k, algorithm=f"greedy-{direction}")


def parts_without_memory(problem: Problem, node_device: list[int]) -> Solution:
    """The greedy's maximal extensions with every node's device fixed and memory ignored
    (forward and backward; the fewer parts kept)."""
    free = dataclasses.replace(
        problem, devices=[Device(d.name, None, d.instances, d.enforce_values)
                          for d in problem.devices],
        allowed=[(node_device[v],) for v in range(problem.n)], arrays=None)
    a = greedy(free, direction="forward", devices=node_device)
    b = greedy(free, direction="backward", devices=node_device)
    return a if a.num_parts <= b.num_parts else b


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
