"""The heuristic of the cost objectives (docs/costs.md): an island that costs more than it
saves goes back to a device next to it.

Fewest parts puts every node on its preferred device; under a time objective a small island
on an accelerator can cost more in transfers and fixed part costs than it saves in compute
(users' top complaint about every runtime's splits).  :func:`cost_islands` starts from the
fewest-parts answer (:func:`~hetero_solve.algorithms.greedy.heuristic`) and, round by round:

1. prices each part ``p`` on device ``d`` moved whole to each other device ``e`` that takes
   all its nodes: its nodes' times on ``e`` minus on ``d``, minus ``d``'s part cost and the
   transfers over ``d``'s link at its boundary, plus those over ``e``'s link, plus ``e``'s part
   cost unless a neighbouring part is already on ``e`` (they merge);
2. moves every part whose best move saves time, and re-splits the nodes, devices fixed, into
   the fewest parts (the same greedy, so every condition of the problem still holds);
3. keeps the new answer only if it is valid (contiguous stages, colocation) and the objective
   ranks it better (measured exactly), and stops when a round gains nothing.

Linear time per round (a few rounds): seconds at 100,000 nodes, like the greedy itself.  The
pipeline also compares the answer with the best single device (:mod:`.single`).

>>> from hetero_solve.costs import CostModel, Link
>>> from hetero_solve.problem import Objective, make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[1], [0, 1], [1]], tensor_bytes=100,
...                  objective=Objective(order=("latency",)))
>>> p.costs = CostModel(node_time=[[None, 1.0], [0.5, 1.0], [None, 1.0]],
...                     part_cost=[1.0, 0.0], links=[Link(bandwidth=100.0, latency=1.0), None])
>>> heuristic(p).node_device(), cost_islands(p).node_device()   # the island does not pay
([1, 0, 1], [1, 1, 1])
"""

from __future__ import annotations

import dataclasses

from ..errors import InfeasibleError
from ..measures import crossings, quotient_edges
from ..problem import Problem
from ..solution import Solution, normalize, objective_term
from ..validate import validate
from .greedy import heuristic

#: Rounds at most (each one re-splits the whole model).
ROUNDS = 4


def cost_islands(problem: Problem, start: Solution | None = None) -> Solution:
    """The answer of the module doc; ``start``: the fewest-parts answer to start from
    (computed when not given).  Needs ``problem.costs``."""
    if problem.costs is None:
        raise ValueError("cost_islands needs a cost model (Problem.costs)")
    best = start if start is not None else heuristic(problem)
    best_key = _key(problem, best)
    for _ in range(ROUNDS):
        moved = _moves(problem, best)
        if moved is None:
            break
        try:
            restricted = dataclasses.replace(problem, allowed=[(d,) for d in moved])
            candidate = normalize(problem, heuristic(restricted))
        except InfeasibleError:      # memory: the moved nodes do not pack
            break
        key = _key(problem, candidate)
        if key >= best_key or validate(problem, candidate):   # contiguity, colocation
            break
        best, best_key = candidate, key
    if best is start:
        return best
    best.algorithm, best.status = "cost islands", "feasible"
    best.stats["heuristic_partitions"] = (start or best).stats.get("heuristic_partitions")
    return best


def _key(problem: Problem, sol: Solution) -> tuple:
    """The objective's sort key, computing only its own terms."""
    obj = problem.objective
    return obj.key({t: objective_term(problem, sol, t) for t in obj.terms()})


def _moves(problem: Problem, sol: Solution) -> list[int] | None:
    """Node -> device after moving every part whose best move saves time; ``None`` when no
    move does."""
    c, tb = problem.costs, problem.tensor_bytes
    k = sol.num_parts
    parts = sol.parts()
    dev = sol.part_device
    D = len(problem.devices)
    # per part, per device: the link time of its boundary tensors (written out, read in)
    boundary = [[0.0] * D for _ in range(k)]
    for t, home, readers in crossings(problem, sol.part_of):
        for d in range(D):
            one = c.tensor_time(d, t, tb)
            if one:
                boundary[home][d] += one
                for q in readers:
                    boundary[q][d] += one
    near: list[set[int]] = [set() for _ in range(k)]
    for a, b in quotient_edges(problem, sol.part_of):
        near[a].add(dev[b])
        near[b].add(dev[a])
    node_device = sol.node_device()
    changed = False
    for p, nodes in enumerate(parts):
        d = dev[p]
        options = set(range(D))
        for v in nodes:
            options.intersection_update(problem.allowed[v])
        options.discard(d)
        if not options:
            continue
        here = sum(c.time(v, d) for v in nodes) + c.part_cost[d] + boundary[p][d]
        best_e, best_gain = -1, 0.0
        for e in sorted(options):
            there = sum(c.time(v, e) for v in nodes) + boundary[p][e] + \
                (0.0 if e in near[p] else c.part_cost[e])
            if here - there > best_gain:
                best_e, best_gain = e, here - there
        if best_e >= 0:
            changed = True
            for v in nodes:
                node_device[v] = best_e
    return node_device if changed else None


__all__ = ["cost_islands"]
