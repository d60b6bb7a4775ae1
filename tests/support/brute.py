"""Brute force over every partition of a small problem: the reference the engines are tested
against (up to about 9 nodes; Bell(9) = 21,147 set partitions).

Enumerates set partitions as restricted growth strings, keeps those with an acyclic quotient,
gives each part the devices every member allows (minus enforcing devices when a value edge lies
inside the part, minus devices the part's memory overflows), and picks devices per part to
minimise the objective, checking that the parts fit the instances (a small bin packing, by
search).  Nothing is pruned on the strength of a theorem: that is the point of a reference.

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
>>> brute_force(p).num_parts
3
"""

from __future__ import annotations

import itertools

from hetero_solve.measures import part_memory, part_order
from hetero_solve.problem import Problem
from hetero_solve.solution import Solution, normalize, objective_key
from hetero_solve.validate import validate


def set_partitions(n: int):
    """Restricted growth strings: ``a[0] = 0``, ``a[i] <= max(a[:i]) + 1``."""
    if n == 0:
        yield []
        return
    a = [0] * n

    def rec(i: int, m: int):
        if i == n:
            yield list(a)
            return
        for b in range(m + 2):
            a[i] = b
            yield from rec(i + 1, max(m, b))

    yield from rec(1, 0)


def _pack(sizes: list[int], bins: int, cap: int) -> list[int] | None:
    """Assign items to ``bins`` bins of ``cap`` (largest first, depth-first)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    load = [0] * bins
    where = [0] * len(sizes)

    def rec(j: int) -> bool:
        if j == len(order):
            return True
        i = order[j]
        tried = set()
        for b in range(bins):
            if load[b] in tried or load[b] + sizes[i] > cap:
                continue
            tried.add(load[b])
            load[b] += sizes[i]
            where[i] = b
            if rec(j + 1):
                return True
            load[b] -= sizes[i]
        return False

    return where if rec(0) else None


def brute_force(problem: Problem, *, max_nodes: int = 9) -> Solution | None:
    """An optimal solution under ``problem.objective``, or ``None`` when none exists."""
    n = problem.n
    if n > max_nodes:
        raise ValueError(f"brute force is for at most {max_nodes} nodes, not {n}")
    devs = problem.devices
    best: Solution | None = None
    best_key = None
    for part_of in set_partitions(n):
        k = max(part_of) + 1 if n else 0
        if part_order(problem, part_of, k) is None:
            continue
        parts = [[] for _ in range(k)]
        for v, p in enumerate(part_of):
            parts[p].append(v)
        mems = [part_memory(problem, nodes, part_of, p) for p, nodes in enumerate(parts)]
        options = []
        for p, nodes in enumerate(parts):
            common = set(problem.allowed[nodes[0]])
            for v in nodes[1:]:
                common &= set(problem.allowed[v])
            inside_value = any(part_of[u] == p for v in nodes for u in problem.value_pred[v])
            opts = [d for d in sorted(common)
                    if not (inside_value and devs[d].enforce_values)
                    and (devs[d].memory is None or mems[p] <= devs[d].memory)]
            if not opts:
                break
            options.append(opts)
        else:
            for choice in itertools.product(*options):
                sol = Solution(list(part_of), list(choice), [0] * k, algorithm="brute-force")
                key = objective_key(problem, sol)
                if best_key is not None and key >= best_key:
                    continue
                if not _assign_instances(problem, sol, mems):
                    continue
                best, best_key = sol, key
    if best is None:
        return None
    best.status = "optimal"
    return normalize(problem, best)


def _assign_instances(problem: Problem, sol: Solution, mems: list[int]) -> bool:
    for d, dev in enumerate(problem.devices):
        ps = [p for p, x in enumerate(sol.part_device) if x == d]
        if not ps or dev.memory is None:
            continue
        where = _pack([mems[p] for p in ps], dev.instances, dev.memory)
        if where is None:
            return False
        for p, b in zip(ps, where):
            sol.part_instance[p] = b
    return True


def cost_brute_force(p: Problem) -> tuple[Solution | None, tuple | None]:
    """The best valid answer under a cost objective by exhaustive search (every set partition
    with an acyclic quotient, every device instance per part, what the validator accepts),
    and its objective key; ``(None, None)`` when none is valid."""
    G = [(d, i) for d, dev in enumerate(p.devices) for i in range(dev.instances)]
    best = best_key = None
    for part_of in set_partitions(p.n):
        k = max(part_of) + 1
        if part_order(p, part_of, k) is None:
            continue
        options = []
        for q in range(k):
            common = set.intersection(*(set(p.allowed[v]) for v in range(p.n) if part_of[v] == q))
            options.append([g for g in G if g[0] in common])
        for choice in itertools.product(*options):
            sol = Solution(list(part_of), [g[0] for g in choice], [g[1] for g in choice])
            key = objective_key(p, sol)
            if best_key is not None and key >= best_key:
                continue
            if not validate(p, sol, require_order=False):
                best, best_key = sol, key
    return best, best_key
