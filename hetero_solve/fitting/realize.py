"""From a device per node to a partition that fits memory: parts first, then runs.

:func:`realize` is the primal side of the decomposition (docs/exact.md, "Memory"):

1. **Parts without memory.**  With every node's device fixed, the fewest parts come from the
   maximal extensions of the greedy (forward and backward, the better kept; the memory
   limits are ignored here).
2. **Runs.**  Each part on a device with a memory limit is cut into *contiguous runs of its
   topological order*.  Any such cut keeps the quotient acyclic (the runs replace the part in
   the order of parts, and every edge between runs goes forward) and keeps value inputs
   separated (a value edge inside a run was inside the part).  The cut is chosen by dynamic
   programming on the exact memory of each run (:func:`~hetero_solve.measures.fitting_runs`,
   :func:`~.cuts.cut_runs`): fewest runs that each fit an instance, ties to the least total
   memory; or, when those do not pack, the least total memory.
3. **Instances.**  The runs of every part on a device are packed into its instances, largest
   first, each into the instance with the most room (:func:`~.packing.first_fit`; a bin
   packing heuristic, so a failure here is not a proof of anything).

:func:`fit_by_runs` is the same with each run kept on its device or dropped to an unlimited
one, at a price per byte kept (:class:`~.cuts.SlotRuns`).

The result is a valid partition or ``None``; it is never claimed optimal by itself.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0, 1]] * 4,
...                  [Device("NPU", memory=10, instances=2), "CPU"], tensor_bytes=1,
...                  const_bytes=[4, 4, 4, 4])
>>> from hetero_solve.algorithms.greedy import parts_without_memory
>>> s = realize(p, [0, 0, 0, 0], parts=parts_without_memory(p, [0, 0, 0, 0]))
>>> s.num_parts, s.part_device, sorted(s.part_instance)   # 16 bytes of weights: two cards
(2, [0, 0], [0, 1])
"""

from __future__ import annotations

from ..budget import Budget, Steps
from ..measures import part_memory, topological_order
from ..problem import Problem
from ..solution import Solution
from .cuts import SlotRuns, cut_runs
from .order import branch_order
from .packing import first_fit

Run = tuple[int, list[int], int]        # (device, nodes, memory): one part of an answer


def realize(problem: Problem, node_device: list[int], *, parts: Solution,
            steps: Steps | None = None) -> Solution | None:
    """A valid-by-construction partition with these devices that fits memory, or ``None``
    (module doc).  ``parts``: the parts to cut (valid apart from memory, those devices: :func:`~hetero_solve.algorithms.greedy.parts_without_memory`);
    ``steps`` counts the work (nodes added to runs, :mod:`hetero_solve.budget`)."""
    pos = {v: k for k, v in enumerate(topological_order(problem.succ, problem.pred))}
    members: list[list[int]] = [[] for _ in range(parts.num_parts)]
    for v in sorted(range(problem.n), key=pos.__getitem__):
        members[parts.part_of[v]].append(v)
    for fewest in (True, False):
        runs: list[Run] = []
        for p, nodes in enumerate(members):
            d = parts.part_device[p]
            cap = problem.devices[d].memory
            if cap is None:
                runs.append((d, nodes, 0))
                continue
            cut = cut_runs(problem, nodes, cap, fewest=fewest, steps=steps)
            if cut is None:
                return None
            runs.extend((d, run, part_memory(problem, run)) for run in cut)
        sol = _on_instances(problem, runs)
        if sol is not None:
            return sol
    return None


def fit_by_runs(problem: Problem, parts: Solution, *, part_cost: float = 1e-3,
                iterations: int = 40, depth_first: bool = True,
                budget: Budget | None = None, steps: Steps | None = None) -> Solution | None:
    """Make ``parts`` (valid apart from memory) fit: every part on a limited device is cut into
    contiguous runs of its topological order, each kept on the device or dropped to an
    unlimited one, choosing the cuts that minimise ``fallback + lam x memory kept`` per part
    (:class:`~.cuts.SlotRuns`), with ``lam`` the smallest (by bisection on a log scale) whose
    kept runs pack into the instances.  A Lagrangian relaxation of the capacity: each
    evaluation is exact, the packing is first fit decreasing.  ``None`` when no ``lam``
    packs.  The work is a fixed number of bisection steps (counted in ``steps``,
    :mod:`hetero_solve.budget`); once ``budget``'s deadline has passed
    (:meth:`~hetero_solve.budget.Budget.out_of_time`: the clock ended first), the bisection
    stops at the best ``lam`` found."""
    order = (branch_order(problem, ties="edges") if depth_first
             else topological_order(problem.succ, problem.pred))
    members: list[list[int]] = [[] for _ in range(parts.num_parts)]
    for v in order:
        members[parts.part_of[v]].append(v)
    devs = problem.devices
    slots = {p: SlotRuns(problem, members[p], parts.part_device[p],
                          devs[parts.part_device[p]].memory, steps)
             for p in range(parts.num_parts) if devs[parts.part_device[p]].memory is not None}
    cache: dict[float, Solution | None] = {}

    def attempt(lam: float) -> Solution | None:
        if lam not in cache:
            if steps is not None:
                steps.add(sum(sr.size for sr in slots.values()))
            chosen = {}
            for p, sr in slots.items():
                runs = sr.cut(lam, part_cost)
                if not runs:
                    cache[lam] = None
                    return None
                chosen[p] = runs
            cache[lam] = _assemble(problem, parts, members, chosen)
        return cache[lam]

    if attempt(0.0) is not None:
        return attempt(0.0)
    lo, hi = 1e-12, float(problem.n + 1)    # at hi, a kept byte costs more than every node
    if attempt(hi) is None:
        return None
    for _ in range(iterations):
        if budget is not None and budget.out_of_time():
            break
        mid = (lo * hi) ** 0.5
        if attempt(mid) is None:
            lo = mid
        else:
            hi = mid
    return attempt(hi)


def _assemble(problem: Problem, parts: Solution, members, chosen) -> Solution | None:
    """Parts in order, limited ones replaced by their runs; instances packed per device."""
    runs: list[Run] = []
    for p, nodes in enumerate(members):
        cut = chosen.get(p)
        if cut is None:
            runs.append((parts.part_device[p], nodes, 0))
        else:
            runs.extend((dev, nodes[i:j], used) for i, j, dev, used in cut)
    return _on_instances(problem, runs)


def _on_instances(problem: Problem, runs: list[Run]) -> Solution | None:
    """``runs`` as the parts of a solution, in order, the runs of each limited device packed
    into its instances (largest first, into the roomiest); ``None`` when they do not fit."""
    part_of = [0] * problem.n
    for q, (_, nodes, _) in enumerate(runs):
        for v in nodes:
            part_of[v] = q
    part_device = [d for d, _, _ in runs]
    part_instance = [0] * len(runs)
    for d, dev in enumerate(problem.devices):
        if dev.memory is None:
            continue
        qs = [q for q, e in enumerate(part_device) if e == d]
        where, left = first_fit([runs[q][2] for q in qs], dev.memory, dev.instances,
                                into="roomiest")
        if left:
            return None
        for q, b in zip(qs, where):
            part_instance[q] = b
    return Solution(part_of, part_device, part_instance, algorithm="exact-runs")
