"""The devices each node may use: ``R(v)``, for the exact engine, the bounds and ``check``.

:func:`device_sets` gives them in the solutions under consideration.  With ``fixed=True`` every
node is on its preferred device: that is the set of fallback-0 solutions, the only ones a
lexicographic objective with ``fallback`` first can choose when fallback 0 is reachable.
Otherwise a device is dropped from ``R(v)`` when no part holding ``v`` fits one of its
instances: first by what any such part holds for ``v`` (:func:`.floors.min_part_memory`), then
by the least memory of any node set holding ``v`` (a minimum cut,
:func:`.network.placeable_nodes`, iterated to a fixed point).  Safe: such a placement breaks the
memory limit (docs/exact.md, "Memory") whatever the rest of the partition is.

Which devices' memory can bind at all is :func:`.floors.binding_devices`.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(2, [(0, 1)], [[0, 1], [1]], [Device("NPU", memory=100), "CPU"],
...                  tensor_bytes=10, const_bytes=[200, 0])
>>> device_sets(p, fixed=False)
[(1,), (1,)]
"""

from __future__ import annotations

from ..problem import Problem
from .floors import binding_devices, within_min_part_memory
from .network import placeable_nodes

MAX_CUT_TESTS = 400     # nodes per device tested by a minimum cut (the rest are kept: safe)


def device_sets(problem: Problem, *, fixed: bool) -> list[tuple[int, ...]]:
    """``R(v)`` per node, in priority order: ``(preferred,)`` when ``fixed``, else the allowed
    devices minus those on which no part holding ``v`` fits an instance (module doc)."""
    if fixed:
        return [(a[0],) for a in problem.allowed]
    out = within_min_part_memory(problem)
    for d in binding_devices(problem, out):
        candidates = [v for v in range(problem.n) if d in out[v]]
        _, refused = placeable_nodes(problem, d, candidates, max_tests=MAX_CUT_TESTS)
        for v in refused:
            out[v] = tuple(x for x in out[v] if x != d)
    return out
