"""What memory forces before any part is built (docs/ARCHITECTURE.md, "Fitting into
memory"): what every part holding a node holds, and which devices' limits can bind at all.

* :func:`min_part_memory`: the constants, graph inputs and graph outputs of a node: a part
  holding it holds them whatever else it holds (a node's memory *on its own* is no floor:
  inside a larger part its tensors are internal); :func:`held_items` and :func:`held_bytes`:
  the same for a node set, held by the parts holding it (each item by at least one of them).
* :func:`slot_items`: the items a node brings to a part holding it, and when the part holds
  each (the one list the slot models state per slot).
* :func:`within_min_part_memory`: the allowed devices minus those that floor already rules out.
* :func:`binding_devices`: devices whose memory limit can be reached at all.  The memory of a
  part is at most the sum over its nodes of their constants, inputs and outputs (each distinct
  tensor counts once), so the total over every part a device could hold is at most
  :func:`upper_memory`; when that fits one instance the limit never binds and the device is
  treated as unlimited (every memory-free reduction and engine then applies).

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(2, [(0, 1)], [[0, 1], [1]], [Device("NPU", memory=100), "CPU"],
...                  tensor_bytes=10, const_bytes=[200, 0])
>>> min_part_memory(p, 0), within_min_part_memory(p), held_bytes(p, [0, 1])
(200, [(1,), (1,)], 210)
>>> binding_devices(p, [(0, 1), (1,)]), binding_devices(p, [(1,), (1,)])
([0], [])
"""

from __future__ import annotations

from typing import Iterable, Iterator

from ..problem import Problem


def min_part_memory(problem: Problem, v: int) -> int:
    """A lower bound on the memory of any part holding ``v``: its constants, the graph inputs
    it reads and the graph outputs it writes are counted whatever else the part holds."""
    tb = problem.tensor_bytes
    total = sum(problem.const_bytes[c] for c in set(problem.node_consts[v]))
    total += sum(tb[t] for t in problem.node_inputs[v] if problem.tensor_producer[t] < 0)
    total += sum(tb[t] for t in problem.node_outputs[v] if problem.tensor_is_output[t])
    return total


def slot_items(problem: Problem, v: int) -> Iterator[tuple[str, int, int]]:
    """The memory items node ``v`` brings to a part holding it (docs/problem.md, "Memory of
    a part"), as ``(kind, id, bytes)``, in this order: ``("c", w, ...)`` each constant it
    reads (held); ``("in", t, ...)`` each tensor it reads (held unless the part makes it: a
    graph input always); ``("out", t, ...)`` each tensor it writes (held when it is a graph
    output or a reader is in another part).  The one list both slot models state per slot
    (:func:`hetero_solve.exact.encoding` and :class:`hetero_solve.exact.costs.CostModelCP`),
    each with its own literals."""
    for w in problem.node_consts[v]:
        yield "c", w, problem.const_bytes[w]
    for t in problem.node_inputs[v]:
        yield "in", t, problem.tensor_bytes[t]
    for t in problem.node_outputs[v]:
        yield "out", t, problem.tensor_bytes[t]


def held_items(problem: Problem, nodes: Iterable[int]) -> tuple[dict[int, list[int]], set[int]]:
    """What the parts holding ``nodes`` hold whatever else they hold: each constant (id ->
    its readers among ``nodes``, in the order given, a node once per read) and the graph
    inputs and graph outputs (tensor ids) the nodes read or write."""
    readers: dict[int, list[int]] = {}
    io: set[int] = set()
    for v in nodes:
        for k in problem.node_consts[v]:
            readers.setdefault(k, []).append(v)
        io.update(t for t in problem.node_inputs[v] if problem.tensor_producer[t] < 0)
        io.update(t for t in problem.node_outputs[v] if problem.tensor_is_output[t])
    return readers, io


def held_bytes(problem: Problem, nodes: Iterable[int]) -> int:
    """The bytes of :func:`held_items`: at most what all instances of a device hold, when
    every node of ``nodes`` must be on it."""
    readers, io = held_items(problem, nodes)
    return (sum(problem.const_bytes[k] for k in readers)
            + sum(problem.tensor_bytes[t] for t in io))


def within_min_part_memory(problem: Problem) -> list[tuple[int, ...]]:
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
