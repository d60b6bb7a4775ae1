"""What every exact engine needs to know about a problem before modelling it.

* :func:`device_sets`: the devices each node may use in the solutions under consideration
  (``R(v)``).  With ``fixed=True`` every node is on its preferred device: that is the set of
  fallback-0 solutions, the only ones a lexicographic objective with ``fallback`` first can
  choose when fallback 0 is reachable.  Otherwise a device is dropped from ``R(v)`` when no part
  holding ``v`` fits one of its instances (:func:`min_part_memory`): safe, since such a
  placement breaks SPEC section 5 whatever the rest of the partition is.
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

from ..problem import Problem


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
    devices minus those where ``v`` fits no instance on its own."""
    if fixed:
        return [(a[0],) for a in problem.allowed]
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
