"""The one validator: docs/problem.md's five conditions, for every algorithm's answer and for
user-defined maps alike.

:func:`validate` lists every violation (kind, message naming the nodes and parts);
:func:`check` raises :class:`~hetero_solve.errors.ValidationError` when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ValidationError
from .measures import find_cycle, off_preferred, quotient_edges
from .measures.arrays import ProblemArrays
from .problem import Problem
from .solution import Metrics, Solution, evaluate
from .units import format_bytes

KINDS = ("structure", "support", "pin", "cycle", "order", "value", "memory", "colocation",
         "stages")
MAX_PER_KIND = 50


@dataclass
class Violation:
    kind: str            # one of KINDS
    message: str
    nodes: list[str] = field(default_factory=list)
    parts: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "nodes": self.nodes, "parts": self.parts}


def validate(problem: Problem, sol: Solution, *, require_order: bool = True,
             metrics: Metrics | None = None) -> list[Violation]:
    """Every violation of docs/problem.md's five conditions, for any answer.

    Parameters
    ----------
    problem : Problem
    sol : Solution
    require_order : bool
        Also require part ids in topological order (the README, "Use").
    metrics : Metrics, optional
        :func:`~hetero_solve.solution.evaluate` of ``sol``, when the caller has it (saves
        recomputing part memories).

    Returns
    -------
    list of Violation
        Support, pins, acyclic quotient (one cycle, with the node edges that close it), value
        inputs, memory per device instance (docs/problem.md), plus structural ones (a node
        without a valid part, an empty part, an unknown device or instance, ids not
        topological).  At most ``MAX_PER_KIND`` per kind, then a count of the rest.  Empty
        when ``sol`` is valid.

    Examples
    --------
    >>> from hetero_solve.problem import Device, make_problem
    >>> p = make_problem(2, [(0, 1)], [[0], [0]], [Device("NPU", memory=1)], tensor_bytes=4)
    >>> [str(v) for v in validate(p, Solution([0, 0], [0], [0]))]
    ['memory: NPU instance 0 holds parts [0] needing 4 B, over its 1 B by 3 B']
    """
    out: list[Violation] = []
    count: dict[str, int] = {}

    def add(v: Violation) -> None:
        count[v.kind] = count.get(v.kind, 0) + 1
        if count[v.kind] <= MAX_PER_KIND:
            out.append(v)

    names = problem.names
    k = len(sol.part_device)
    if len(sol.part_of) != problem.n:
        add(Violation("structure", f"{len(sol.part_of)} nodes assigned, the model has {problem.n}"))
        return out
    if len(sol.part_instance) != k:
        add(Violation("structure", "part_instance and part_device differ in length"))
        return out
    bad = [v for v, p in enumerate(sol.part_of) if not 0 <= p < k]
    for v in bad:
        add(Violation("structure", f"node {names[v]!r} is in no part (part id {sol.part_of[v]})",
                      [names[v]]))
    for p, d in enumerate(sol.part_device):
        if not 0 <= d < len(problem.devices):
            add(Violation("structure", f"part {p} has no valid device (index {d})", parts=[p]))
        elif not 0 <= sol.part_instance[p] < problem.devices[d].instances:
            dev = problem.devices[d]
            add(Violation("structure", f"part {p} is on {dev.name} instance {sol.part_instance[p]}, "
                                       f"{dev.name} has {dev.instances}", parts=[p]))
    if bad or any(v.kind == "structure" for v in out):
        return out
    sizes = [0] * k
    for p in sol.part_of:
        sizes[p] += 1
    for p in range(k):
        if sizes[p] == 0:
            add(Violation("structure", f"part {p} is empty", parts=[p]))

    # On a large problem numpy finds the nodes and edges worth a look (none, when the answer
    # is valid); the Python walks below report what they find.
    arrays = problem.arrays
    _support(problem, sol, add, arrays)
    cyclic = _acyclic(problem, sol, add)
    if require_order and not cyclic:
        _order(problem, sol, add, arrays)
    _values(problem, sol, add, arrays)
    _memory(problem, sol, add, metrics)
    _colocation_and_stages(problem, sol, add)
    for kind, c in count.items():
        if c > MAX_PER_KIND:
            out.append(Violation(kind, f"... and {c - MAX_PER_KIND} more {kind} violations"))
    return out


def check(problem: Problem, sol: Solution, **kw) -> None:
    """Raise :class:`ValidationError` listing the violations, if any."""
    violations = validate(problem, sol, **kw)
    if violations:
        raise ValidationError(violations)


def _support(problem: Problem, sol: Solution, add, arrays: ProblemArrays | None) -> None:
    devices = problem.devices
    # A node on its preferred device is supported (it heads the node's allowed list).
    nodes = range(problem.n) if arrays is None else off_preferred(problem, sol.part_of, sol.part_device)
    for v in nodes:
        p = sol.part_of[v]
        d = sol.part_device[p]
        if d in problem.allowed[v]:
            continue
        name = problem.names[v]
        pin = problem.pinned[v] if problem.pinned else -1
        if pin >= 0 and pin != d:
            add(Violation("pin", f"node {name!r} is pinned to {devices[pin].name} but part {p} is on "
                                 f"{devices[d].name}", [name], [p]))
        else:
            add(Violation("support", f"node {name!r} ({problem.op_types[v]}) is in part {p} on "
                                     f"{devices[d].name}, which refuses it: {problem.why_not(v, d)}",
                          [name], [p]))


def _acyclic(problem: Problem, sol: Solution, add) -> bool:
    """Report one cycle of the quotient graph with the node edges that close it."""
    k = len(sol.part_device)
    cycle = find_cycle(quotient_edges(problem, sol.part_of), k)
    if not cycle:
        return False
    witness = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        witness.append(_edge_witness(problem, sol.part_of, a, b))
    path = " -> ".join(str(p) for p in cycle + cycle[:1])
    via = ", ".join(f"{problem.names[u]!r} -> {problem.names[v]!r}" for u, v in witness)
    add(Violation("cycle", f"parts {path} form a cycle (via {via})",
                  [problem.names[u] for u, _ in witness], cycle))
    return True


def _edge_witness(problem: Problem, part_of: list[int], a: int, b: int) -> tuple[int, int]:
    for u, succ in enumerate(problem.succ):
        if part_of[u] == a:
            for v in succ:
                if part_of[v] == b:
                    return u, v
    raise AssertionError("quotient edge without a node edge")


def _order(problem: Problem, sol: Solution, add, arrays: ProblemArrays | None) -> None:
    if arrays is not None and not arrays.any_backward_edge(sol.part_of):
        return
    for u, succ in enumerate(problem.succ):
        pu = sol.part_of[u]
        for v in succ:
            if sol.part_of[v] < pu:
                add(Violation("order", f"part ids are not topological: {problem.names[u]!r} in part "
                                       f"{pu} feeds {problem.names[v]!r} in part {sol.part_of[v]}",
                              [problem.names[u], problem.names[v]], [pu, sol.part_of[v]]))
                return


def _values(problem: Problem, sol: Solution, add, arrays: ProblemArrays | None) -> None:
    devices = problem.devices
    if arrays is not None and not arrays.any_value_inside(
            sol.part_of, [devices[d].enforce_values for d in sol.part_device]):
        return
    for v, us in enumerate(problem.value_pred):
        p = sol.part_of[v]
        dev = devices[sol.part_device[p]]
        if not dev.enforce_values:
            continue
        for u in us:
            if sol.part_of[u] == p:
                add(Violation("value", f"node {problem.names[v]!r} ({problem.op_types[v]}) needs the "
                                       f"value of a tensor made by {problem.names[u]!r} in the same part "
                                       f"{p} on {dev.name}", [problem.names[u], problem.names[v]], [p]))


def _colocation_and_stages(problem: Problem, sol: Solution, add) -> None:
    """Colocation groups on one device instance; with contiguous stages (the cost model's
    ``contiguous``), at most one part per device instance."""
    names, dev = problem.names, problem.devices

    def where(p: int) -> str:
        return f"{dev[sol.part_device[p]].name}.{sol.part_instance[p]}"

    for group in problem.colocation:
        places = sorted({where(sol.part_of[v]) for v in group})
        if len(places) > 1:
            add(Violation("colocation", f"colocated nodes {[names[v] for v in group]} are on "
                                        f"{', '.join(places)}, not on one device instance",
                          [names[v] for v in group], sorted({sol.part_of[v] for v in group})))
    if problem.costs is not None and problem.costs.contiguous:
        seen: dict[str, list[int]] = {}
        for p in range(len(sol.part_device)):
            seen.setdefault(where(p), []).append(p)
        for inst, parts in seen.items():
            if len(parts) > 1:
                add(Violation("stages", f"{inst} runs parts {parts}: contiguous stages allow "
                                        f"one part per device instance", parts=parts))


def _exact(n: int) -> str:
    """The exact byte count beside a rounded size (nothing when the size is already exact)."""
    return f" ({n:,} bytes)" if abs(n) >= 1024 else ""


def _memory(problem: Problem, sol: Solution, add, metrics: Metrics | None) -> None:
    if not problem.has_memory_limits():
        return
    metrics = metrics or evaluate(problem, sol)
    for (d, i), used in sorted(metrics.instance_memory.items()):
        cap = problem.devices[d].memory
        if cap is not None and used > cap:
            parts = [p for p in range(len(sol.part_device))
                     if sol.part_device[p] == d and sol.part_instance[p] == i]
            add(Violation("memory", f"{problem.devices[d].name} instance {i} holds parts {parts} "
                                    f"needing {format_bytes(used)}{_exact(used)}, over its "
                                    f"{format_bytes(cap)} by {format_bytes(used - cap)}",
                              parts=parts))
