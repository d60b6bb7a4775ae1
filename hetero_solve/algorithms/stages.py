"""Pipeline stages cut from one order (docs/costs.md, "Throughput"): the best contiguous split
of a topological order into stages, exactly, by dynamic programming over its cuts.

Under the throughput objective a partition is a pipeline: each device instance's load (its
nodes' times, its part costs, the tensors crossing its boundary over its link) is paid once per
sample, and the largest load is the time per sample.  Tarnawski et al.'s dynamic programme
finds the best contiguous split over every *ideal* of the graph (every set closed under
predecessors), exponential in the graph's width.  Here one topological order of the colocation
groups is fixed and its prefixes are the only ideals tried: the stages are the order's
segments, the device of each segment and how many instances each device gives are chosen by the
programme, and the answer is the best such split exactly (O(m²) segments for m groups, with
numpy).  It is a heuristic for the problem (another order, or a non-prefix ideal, may do
better) and a strong start for the exact stages: on the training graphs of the literature it
finds their optimum or comes within 1.3 % of it in a fraction of a second (docs/instances.md).

A segment's crossing tensors are counted without walking it: a tensor whose producer and
readers sit at order positions ``S`` crosses a segment exactly when the segment holds some of
``S`` but not all, so its link time is added to every segment (``i``, ``j``) minus the
rectangles of segments that hold all of ``S`` or fall between two of its positions: a few
rectangles per tensor, summed once with two cumulative sums.

A segment's memory is bounded from above (each node's constants and tensors, shared ones
counted at every reader), so every split the programme takes fits; a segment on a device that
needs value inputs known holds no node with the maker of one of its value inputs (a rectangle
of segments per value edge, counted the same way).  The validator judges the answer and it is
dropped when it breaks anything.

>>> from hetero_solve.costs import CostModel, Link
>>> from hetero_solve.problem import Device, Objective, make_problem
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0, 1]] * 4, tensor_bytes=1,
...                  objective=Objective(order=("throughput",)))
>>> p.devices[0] = Device("ACC", instances=2)
>>> p.costs = CostModel(node_time=[[2.0, 4.0]] * 4, part_cost=[0.0, 0.0],
...                     links=[Link(bandwidth=1.0), None], contiguous=True)
>>> sol = pipeline_stages(p)
>>> sol.parts(), sol.part_device     # two accelerator stages of 2 nodes and 1 + 1 crossing
([[0, 1], [2, 3]], [0, 0])
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..measures.order import topological_order
from ..problem import Problem
from ..solution import Solution
from ..validate import validate

#: Largest order the programme takes (its segment tables are m² floats per linked device).
MAX_GROUPS = 3000
#: Largest programme: its steps (groups x instance-count states x devices, each a numpy pass)
#: and their elements (about half the order's length each), about a second in all.
MAX_STEPS = 100_000
MAX_ELEMENTS = 300_000_000


def pipeline_stages(problem: Problem) -> Solution | None:
    """The best split of one topological order of the colocation groups into stages (module
    doc), or ``None`` when the problem is too large for the programme, has no cost model, or
    its best split breaks a condition the programme does not see."""
    if problem.costs is None or problem.n == 0:
        return None
    group, m = _groups(problem)
    states = list(itertools.product(*[range(d.instances + 1) for d in problem.devices]))
    steps = m * len(states) * len(problem.devices)
    if m > MAX_GROUPS or steps > MAX_STEPS or steps * m // 2 > MAX_ELEMENTS:
        return None
    order = _group_order(problem, group, m)
    if order is None:       # the colocation groups close a cycle: no order of stages exists
        return None
    position = np.empty(m, dtype=np.int64)
    position[order] = np.arange(m)
    pos = position[np.asarray(group, dtype=np.int64)]
    segments = _best_split(problem, pos, m, states)
    if segments is None:
        return None
    sol = _solution(problem, pos, segments)
    return None if validate(problem, sol) else sol


def _groups(problem: Problem) -> tuple[list[int], int]:
    """Node -> colocation group id (a node outside every group is its own), and the count."""
    root = list(range(problem.n))
    for g in problem.colocation:
        for v in g:
            root[v] = g[0]
    ids: dict[int, int] = {}
    return [ids.setdefault(r, len(ids)) for r in root], len(ids)


def _group_order(problem: Problem, group: Sequence[int], m: int) -> list[int] | None:
    """A topological order of the groups by the problem's order edges, smallest first (the
    graph's own numbering, which follows its layers), or ``None`` on a cycle."""
    edges = {(group[u], group[v]) for u in range(problem.n) for v in problem.succ[u]
             if group[u] != group[v]}
    succ: list[list[int]] = [[] for _ in range(m)]
    pred: list[list[int]] = [[] for _ in range(m)]
    for a, b in sorted(edges):
        succ[a].append(b)
        pred[b].append(a)
    try:
        return topological_order(succ, pred, smallest_first=True)
    except ValueError:          # the groups close a cycle
        return None


def _prefix(per_position: np.ndarray) -> np.ndarray:
    """Cumulative sums with a leading 0: ``out[j] - out[i]`` sums positions ``i .. j-1``."""
    return np.concatenate([[0.0], np.cumsum(per_position)])


def _best_split(problem: Problem, pos: np.ndarray, m: int,
                states: list[tuple[int, ...]]) -> list[tuple[int, int, int]] | None:
    """The segments (start, end, device) of the best split (module doc), or ``None``."""
    c = problem.costs
    D = len(problem.devices)
    time = np.zeros((D, m))
    refused = np.zeros((D, m))
    memory = np.zeros(m)
    tb = problem.tensor_bytes
    for v in range(problem.n):
        allowed = problem.allowed[v]
        for d in range(D):
            t = c.node_time[v][d] if d in allowed else None
            if t is None:
                refused[d, pos[v]] += 1
            else:
                time[d, pos[v]] += t
        memory[pos[v]] += (sum(problem.const_bytes[k] for k in problem.node_consts[v])
                           + sum(tb[t] for t in problem.node_inputs[v])
                           + sum(tb[t] for t in problem.node_outputs[v]))
    time_p = [_prefix(time[d]) for d in range(D)]
    refused_p = [_prefix(refused[d]) for d in range(D)]
    memory_p = _prefix(memory)
    crossing = {d: _crossing(problem, pos, m, d) for d in range(D) if c.links[d] is not None}
    reads_value = _value_pairs(problem, pos, m)
    limit = [d.memory for d in problem.devices]

    best = {s: np.full(m + 1, np.inf) for s in states}
    back: dict[tuple[int, ...], list] = {s: [None] * (m + 1) for s in states}
    best[tuple(0 for _ in range(D))][0] = 0.0
    for j in range(1, m + 1):
        load = []
        for d in range(D):
            seg = time_p[d][j] - time_p[d][:j] + c.part_cost[d]
            if d in crossing:
                seg = seg + crossing[d][:j, j]
            bad = refused_p[d][j] - refused_p[d][:j] > 0
            if limit[d] is not None:
                bad |= memory_p[j] - memory_p[:j] > limit[d]
            if reads_value is not None and problem.devices[d].enforce_values:
                bad |= reads_value[:j, j] > 0
            load.append(np.where(bad, np.inf, seg))
        for s in states:
            for d in range(D):
                if s[d] == 0:
                    continue
                prev = s[:d] + (s[d] - 1,) + s[d + 1:]
                value = np.maximum(best[prev][:j], load[d])
                i = int(np.argmin(value))
                if value[i] < best[s][j]:
                    best[s][j] = value[i]
                    back[s][j] = (i, d, prev)
    s = min(states, key=lambda s: best[s][m])
    if not np.isfinite(best[s][m]):
        return None
    segments = []
    j = m
    while j > 0:
        i, d, prev = back[s][j]
        segments.append((i, j, d))
        j, s = i, prev
    return segments[::-1]


def _crossing(problem: Problem, pos: np.ndarray, m: int, d: int) -> np.ndarray:
    """``out[i, j]``: the link time on device ``d`` of the tensors crossing the boundary of the
    segment of positions ``i .. j-1`` (module doc)."""
    c = problem.costs
    corners = np.zeros((m + 2, m + 2))
    total = 0.0

    def minus(i0: int, i1: int, j0: int, j1: int, w: float) -> None:
        # segments with i0 <= i <= i1 and j0 <= j <= j1 lose w (2-D difference corners)
        corners[i0, j0] -= w
        corners[i1 + 1, j0] += w
        corners[i0, j1 + 1] += w
        corners[i1 + 1, j1 + 1] -= w

    for t, u in enumerate(problem.tensor_producer):
        if u < 0 or not problem.tensor_consumers[t]:
            continue
        at = sorted({int(pos[u]), *(int(pos[r]) for r in problem.tensor_consumers[t])})
        if len(at) == 1:
            continue
        w = c.tensor_time(d, t, problem.tensor_bytes)
        if not w:
            continue
        total += w
        minus(0, at[0], at[-1] + 1, m, w)               # the segment holds them all
        edges = [-1, *at, m]
        for a, b in zip(edges, edges[1:]):              # it falls between two of them
            if b - a >= 2:
                minus(a + 1, b - 1, a + 2, b, w)
    return total + corners.cumsum(0).cumsum(1)[:m + 1, :m + 1]


def _value_pairs(problem: Problem, pos: np.ndarray, m: int) -> np.ndarray | None:
    """``out[i, j] > 0`` when the segment of positions ``i .. j-1`` holds a node and the maker
    of one of its value inputs (not allowed in one part on a device that needs values known
    before it runs: docs/problem.md); ``None`` without value inputs."""
    pairs = [(int(pos[u]), int(pos[v])) for v in range(problem.n) for u in problem.value_pred[v]]
    if not pairs:
        return None
    corners = np.zeros((m + 2, m + 2))
    for a, b in pairs:
        lo, hi = min(a, b), max(a, b)
        corners[0, hi + 1] += 1             # i <= lo and j >= hi + 1
        corners[lo + 1, hi + 1] -= 1
    return corners.cumsum(0).cumsum(1)[:m + 1, :m + 1]


def _solution(problem: Problem, pos: np.ndarray, segments: list[tuple[int, int, int]]) -> Solution:
    starts = np.array([i for i, _, _ in segments])
    part_of = (np.searchsorted(starts, pos, side="right") - 1).tolist()
    devices = [d for _, _, d in segments]
    used: dict[int, int] = {}
    instances = []
    for d in devices:
        instances.append(used.get(d, 0))
        used[d] = instances[-1] + 1
    return Solution(part_of=part_of, part_device=devices, part_instance=instances,
                    algorithm="pipeline stages")


__all__ = ["pipeline_stages"]
