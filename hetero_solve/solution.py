"""A partition: part per node, device and instance per part; plus what it costs.

Every algorithm returns a :class:`Solution`; :func:`normalize` renumbers parts in topological
order (the README, "Use"), :func:`evaluate` gives the objective terms and part memories (the
measures of :mod:`hetero_solve.measures`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .measures import fallback_count, open_figures, part_memories, part_order, transfer_bytes
from .measures.costs import latency, time_per_sample
from .problem import Problem


@dataclass
class Solution:
    """A partition of a problem's nodes into parts, each on one device instance.

    Parameters
    ----------
    part_of : list of int
        Node -> part id.
    part_device : list of int
        Part -> device index.
    part_instance : list of int
        Part -> instance of that device.
    algorithm : str
        What made it.
    status : str
        ``"optimal"`` only when proven, else ``"feasible"``.
    lower_bound : int or None
        On the number of parts.
    stats : dict
        JSON-able details that reach ``partition.json`` (``heuristic_partitions``,
        ``explain``, the solver's stages...).

    Examples
    --------
    >>> s = Solution([0, 0, 1], [0, 1], [0, 0])
    >>> s.num_parts, s.node_device(), s.parts()
    (2, [0, 0, 1], [[0, 1], [2]])
    """

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
    latency: float | None = None          # cost terms (docs/costs.md): only with a cost model
    throughput: float | None = None       # time per sample

    def as_dict(self) -> dict[str, float]:
        out = {"fallback": self.fallback, "partitions": self.partitions, "transfer": self.transfer}
        for term in ("latency", "throughput"):
            if getattr(self, term) is not None:
                out[term] = getattr(self, term)
        return out


def normalize(problem: Problem, sol: Solution) -> Solution:
    """Drop empty parts and renumber in topological order (ties: the part holding the
    smallest node first, so the numbering is deterministic).  A cyclic partition is returned
    with empty parts dropped only; the validator reports the cycle."""
    k = sol.num_parts
    occupied = [False] * k
    for p in sol.part_of:
        occupied[p] = True
    order = part_order(problem, sol.part_of, k)
    if order is None:       # cyclic: keep the order of first nodes
        first = [problem.n] * k
        for v, p in enumerate(sol.part_of):
            if v < first[p]:
                first[p] = v
        order = sorted(range(k), key=lambda p: first[p])
    order = [p for p in order if occupied[p]]
    new_id = {p: i for i, p in enumerate(order)}
    return Solution(
        part_of=[new_id[p] for p in sol.part_of],
        part_device=[sol.part_device[p] for p in order],
        part_instance=[sol.part_instance[p] for p in order],
        algorithm=sol.algorithm, status=sol.status, lower_bound=sol.lower_bound,
        stats=dict(sol.stats))


def evaluate(problem: Problem, sol: Solution) -> Metrics:
    """Objective terms (docs/problem.md) and memory per part and per device instance."""
    mem, transfer = part_memories(problem, sol.part_of, sol.num_parts)
    inst: dict[tuple[int, int], int] = {}
    for p, m in enumerate(mem):
        key = (sol.part_device[p], sol.part_instance[p])
        inst[key] = inst.get(key, 0) + m
    costed = problem.costs is not None
    return Metrics(fallback=objective_term(problem, sol, "fallback"),
                   partitions=objective_term(problem, sol, "partitions"), transfer=transfer,
                   part_memory=mem, instance_memory=inst,
                   latency=objective_term(problem, sol, "latency") if costed else None,
                   throughput=objective_term(problem, sol, "throughput") if costed else None)


@dataclass
class OpenSizes:
    """The figures of an answer that count a tensor of unknown size as 1 element
    (docs/problem.md, "Memory of a part"), so are lower bounds, not sizes.

    ``tensors``: how many tensors and constants of the problem have an unknown size;
    ``parts``: the parts whose memory holds one; ``transfer``: whether the transfer does;
    ``unproven_fit``: those of ``parts`` on a device with a memory limit, whose fit is
    therefore not proven."""

    tensors: int
    parts: list[int]
    transfer: bool
    unproven_fit: list[int]

    @property
    def figures(self) -> bool:
        """Does any memory or transfer figure of the answer count an unknown size?"""
        return bool(self.parts) or self.transfer

    def as_dict(self) -> dict:
        return {"unknown_tensors": self.tensors, "memory_lower_bound_parts": self.parts,
                "transfer_lower_bound": self.transfer, "fit_not_proven_parts": self.unproven_fit}

    def text(self, problem: Problem, sol: "Solution") -> str:
        """One line for the user (a warning, the summary)."""
        what = []
        if self.parts:
            what.append(f"the memory of {len(self.parts)} part(s) ({_ids(self.parts)})")
        if self.transfer:
            what.append("the transfer")
        line = (f"{' and '.join(what)} count(s) tensors of unknown size as 1 element: those "
                f"figures are lower bounds")
        if self.unproven_fit:
            where = sorted({problem.devices[sol.part_device[k]].name for k in self.unproven_fit})
            line += (f"; part(s) {_ids(self.unproven_fit)} on {', '.join(where)} (memory-limited) "
                     f"are not proven to fit")
        return line


def _ids(ks: list[int]) -> str:
    shown = ", ".join(map(str, ks[:8]))
    return shown + (f" and {len(ks) - 8} more" if len(ks) > 8 else "")


def open_sizes(problem: Problem, sol: Solution) -> OpenSizes | None:
    """What of ``sol``'s figures counts a tensor of unknown size (``None``: nothing does, or
    the problem has no such tensor)."""
    names = problem.info.open_sizes
    if not names:
        return None
    parts, crossings = open_figures(problem, sol.part_of, sol.num_parts, names)
    if not parts and not crossings:
        return None
    limited = [k for k in parts if problem.devices[sol.part_device[k]].memory is not None]
    return OpenSizes(len(names), parts, crossings > 0, limited)


def objective_term(problem: Problem, sol: Solution, term: str) -> float:
    """One objective term (docs/problem.md) alone (what :func:`evaluate` gives, without part
    memories); ``latency`` and ``throughput`` (time per sample) need ``problem.costs``."""
    if term == "fallback":
        return fallback_count(problem, sol.part_of, sol.part_device)
    if term == "partitions":
        return len(set(sol.part_of))
    if term == "transfer":
        return transfer_bytes(problem, sol.part_of)
    if term == "latency":
        return latency(problem, sol.part_of, sol.part_device)
    if term == "throughput":
        return time_per_sample(problem, sol.part_of, sol.part_device, sol.part_instance)
    raise ValueError(f"unknown objective term {term!r}")


def objective_key(problem: Problem, sol: Solution) -> tuple:
    """Smaller is better under the problem's objective."""
    return problem.objective.key(evaluate(problem, sol).as_dict())
