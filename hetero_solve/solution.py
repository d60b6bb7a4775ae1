"""A partition: part per node, device and instance per part; plus what it costs.

Every algorithm returns a :class:`Solution`; :func:`normalize` renumbers parts in topological
order (SPEC section 7), :func:`evaluate` gives the objective terms and part memories.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .arrays import arrays_of
from .problem import Problem, fallback_count, part_memories, transfer_bytes


@dataclass
class Solution:
    part_of: list[int]                 # node -> part id
    part_device: list[int]             # part -> device index
    part_instance: list[int]           # part -> instance of that device
    algorithm: str = ""
    status: str = "feasible"           # "optimal" only when proven
    lower_bound: int | None = None     # on the number of parts
    stats: dict = field(default_factory=dict)

    @property
    def num_parts(self) -> int:
        return len(self.part_device)

    def node_device(self) -> list[int]:
        pd = self.part_device
        return [pd[p] for p in self.part_of]

    def parts(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.part_device]
        for v, p in enumerate(self.part_of):
            out[p].append(v)
        return out


@dataclass
class Metrics:
    fallback: int
    partitions: int
    transfer: int
    part_memory: list[int]
    instance_memory: dict[tuple[int, int], int]   # (device, instance) -> bytes

    def as_dict(self) -> dict[str, int]:
        return {"fallback": self.fallback, "partitions": self.partitions, "transfer": self.transfer}


def quotient_edges(problem: Problem, part_of: list[int]) -> set[tuple[int, int]]:
    """Edges P -> Q between different parts (SPEC section 1, condition 3)."""
    arrays = arrays_of(problem)
    if arrays is not None:
        return arrays.quotient_edges(part_of)
    edges = set()
    for u, succ in enumerate(problem.succ):
        pu = part_of[u]
        for v in succ:
            pv = part_of[v]
            if pu != pv:
                edges.add((pu, pv))
    return edges


def normalize(problem: Problem, sol: Solution) -> Solution:
    """Drop empty parts and renumber in topological order (ties: the part holding the
    smallest node first, so the numbering is deterministic).  A cyclic partition is returned
    with empty parts dropped only; the validator reports the cycle."""
    k = sol.num_parts
    first = [problem.n] * k
    for v, p in enumerate(sol.part_of):
        if v < first[p]:
            first[p] = v
    used = [p for p in range(k) if first[p] < problem.n]
    edges = quotient_edges(problem, sol.part_of)
    indeg = {p: 0 for p in used}
    out: dict[int, list[int]] = {p: [] for p in used}
    for a, b in edges:
        out[a].append(b)
        indeg[b] += 1
    heap = [(first[p], p) for p in used if indeg[p] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, p = heapq.heappop(heap)
        order.append(p)
        for q in out[p]:
            indeg[q] -= 1
            if indeg[q] == 0:
                heapq.heappush(heap, (first[q], q))
    if len(order) < len(used):  # cyclic: keep relative order, drop empties
        order = sorted(used, key=lambda p: first[p])
    new_id = {p: i for i, p in enumerate(order)}
    return Solution(
        part_of=[new_id[p] for p in sol.part_of],
        part_device=[sol.part_device[p] for p in order],
        part_instance=[sol.part_instance[p] for p in order],
        algorithm=sol.algorithm, status=sol.status, lower_bound=sol.lower_bound,
        stats=dict(sol.stats))


def evaluate(problem: Problem, sol: Solution) -> Metrics:
    """Objective terms (SPEC section 6) and memory per part and per device instance."""
    mem, transfer = part_memories(problem, sol.part_of, sol.num_parts)
    inst: dict[tuple[int, int], int] = {}
    for p, m in enumerate(mem):
        key = (sol.part_device[p], sol.part_instance[p])
        inst[key] = inst.get(key, 0) + m
    return Metrics(fallback=objective_term(problem, sol, "fallback"),
                   partitions=objective_term(problem, sol, "partitions"), transfer=transfer,
                   part_memory=mem, instance_memory=inst)


def objective_term(problem: Problem, sol: Solution, term: str) -> int:
    """One term of SPEC section 6 alone (what :func:`evaluate` gives, without part memories)."""
    if term == "fallback":
        arrays = arrays_of(problem)
        if arrays is not None:
            return arrays.fallback(sol.part_of, sol.part_device)
        return fallback_count(problem, sol.node_device())
    if term == "partitions":
        return len(set(sol.part_of))
    if term == "transfer":
        return transfer_bytes(problem, sol.part_of)
    raise ValueError(f"unknown objective term {term!r}")


def objective_key(problem: Problem, sol: Solution) -> tuple:
    """Smaller is better under the problem's objective."""
    return problem.objective.key(evaluate(problem, sol).as_dict())
