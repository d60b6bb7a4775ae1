"""What every exact engine needs to know about a problem before modelling it.

* :func:`device_sets`: the devices each node may use in the solutions under consideration
  (``R(v)``).  With ``fixed=True`` every node is on its preferred device: that is the set of
  fallback-0 solutions, the only ones a lexicographic objective with ``fallback`` first can
  choose when fallback 0 is reachable.  Otherwise a device is dropped from ``R(v)`` when no part
  holding ``v`` fits one of its instances: first by what any such part holds for ``v`` (its
  constants, graph inputs and graph outputs: :func:`min_part_memory`), then by the least
  memory of any node set holding ``v`` (a minimum cut,
  :func:`hetero_solve.algorithms.memory_cut.placeable_nodes`, iterated to a fixed point).
  Safe: such a placement breaks SPEC section 5 whatever the rest of the partition is.  A
  node's memory on its own is *not* a reason (inside a larger part its tensors are internal).
* :func:`binding_devices`: devices whose memory limit can be reached at all.  The memory of a
  part is at most the sum over its nodes of their constants, inputs and outputs (SPEC section 5
  counts each distinct tensor once), so the total over every part a device could hold is at most
  ``upper_memory``; when that fits one instance the limit never binds and the device is treated
  as unlimited (every memory-free reduction and engine then applies).

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(2, [(0, 1)], [[0, 1], [1]], [Device("NPU", memory=100), "CPU"],
...                  tensor_bytes=10, const_bytes=[200, 0])
>>> device_sets(p, fixed=False)
[(1,), (1,)]
>>> binding_devices(p, device_sets(p, fixed=False))
[]
"""

from __future__ import annotations

from ..algorithms.memory_cut import placeable_nodes
from ..problem import Problem

MAX_CUT_TESTS = 400     # nodes per device tested by a minimum cut (the rest are kept: safe)


def min_part_memory(problem: Problem, v: int) -> int:
    """A lower bound on the memory of any part holding ``v``: its constants, the graph inputs
    it reads and the graph outputs it writes are counted whatever else the part holds."""
    tb = problem.tensor_bytes
    total = sum(problem.const_bytes[c] for c in set(problem.node_consts[v]))
    total += sum(tb[t] for t in problem.node_inputs[v] if problem.tensor_producer[t] < 0)
    total += sum(tb[t] for t in problem.node_outputs[v] if problem.tensor_is_output[t])
    return total


def device_sets(problem: Problem, *, fixed: bool) -> list[tuple[int, ...]]:
    """``R(v)`` per node, in priority order: ``(preferred,)`` when ``fixed``, else the allowed
    devices minus those on which no part holding ``v`` fits an instance (module doc)."""
    if fixed:
        return [(a[0],) for a in problem.allowed]
    out = _within_min_part_memory(problem)
    for d in binding_devices(problem, out):
        candidates = [v for v in range(problem.n) if d in out[v]]
        _, refused = placeable_nodes(problem, d, candidates, max_tests=MAX_CUT_TESTS)
        for v in refused:
            out[v] = tuple(x for x in out[v] if x != d)
    return out


def _within_min_part_memory(problem: Problem) -> list[tuple[int, ...]]:
    """The allowed devices minus those where :func:`min_part_memory` exceeds an instance."""
    out: list[tuple[int, ...]] = []
    devs = problem.devices
    for v, allowed in enumerate(problem.allowed):
        need = None
        keep = []
        for d in allowed:
            cap = devs[d].memory
            if cap is not None:
                if need is None:
                    need = min_part_memory(problem, v)
                if need > cap:
                    continue
            keep.append(d)
        out.append(tuple(keep))
    return out


def upper_memory(problem: Problem, R: list[tuple[int, ...]], d: int) -> int:
    """An upper bound on the total memory of all parts on device ``d`` (see module doc)."""
    tb = problem.tensor_bytes
    cb = problem.const_bytes
    total = 0
    for v in range(problem.n):
        if d in R[v]:
            total += sum(cb[c] for c in problem.node_consts[v])
            total += sum(tb[t] for t in problem.node_inputs[v])
            total += sum(tb[t] for t in problem.node_outputs[v])
    return total


def binding_devices(problem: Problem, R: list[tuple[int, ...]]) -> list[int]:
    """Devices with a memory limit that some partition within ``R`` could exceed."""
    out = []
    for d, dev in enumerate(problem.devices):
        if dev.memory is not None and upper_memory(problem, R, d) > dev.memory:
            out.append(d)
    return out


def is_value_edge(problem: Problem, u: int, v: int) -> bool:
    return u in problem.value_pred[v]


def shared_devices(problem: Problem, R: list[tuple[int, ...]], u: int, v: int) -> tuple[int, ...]:
    """Devices on which ``u`` and ``v`` (an edge u -> v) could share a part: common to both
    sets and, for a value edge, not enforcing value inputs.  Empty = a forced break."""
    common = tuple(d for d in R[u] if d in R[v])
    if not common or u not in problem.value_pred[v]:
        return common
    devs = problem.devices
    return tuple(d for d in common if not devs[d].enforce_values)
