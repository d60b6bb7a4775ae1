"""Glow's heterogeneous partition: backend-based, then memory-based (seed 003).

Source: "Graph Partitioning Support in Glow" (``docs/Partitioner.md`` in the pytorch/glow
repository) and the code it describes (pytorch/glow ``lib/Partitioner/Partitioner.cpp``:
``backendBasedPartition``, ``selectPartitions``, ``assignLogicalDeviceID``;
``PartitionerUtils.cpp``: ``getBFSLevel``, ``updateGraphMemInfoByAddingNode``).

1. *Backend*: each node goes to the first device in the (order-sensitive) list that supports
   it: its preferred device.
2. *BFS levels*: a node's level is its longest distance to a sink (a node without users); the
   nodes are visited from the highest level (the inputs' side) down to 0.  A new part starts
   each time the device changes along that sequence.  Acyclic by construction (the sequence is
   a topological order cut into slices), but fragmented: independent regions of two devices
   interleave.
3. *Memory*: each slice is cut again the same way (BFS levels of the slice's own subgraph,
   highest first): nodes are added while the part's memory, (inputs + outputs) + constants
   (one execution context), stays within the device's memory; the node that would exceed it
   starts a new part.  The memory estimate is :class:`~hetero_solve.measures.MemoryTracker`,
   i.e. docs/problem.md and :func:`hetero_solve.measures.part_memory`, which counts what Glow's
   ``updateGraphMemInfoByAddingNode`` counts.  A device without a memory limit is not cut.
4. *Devices*: per device, when there are no more parts than instances each part gets its own
   instance; otherwise parts sorted by memory (smallest first) are packed by Glow's pigeonhole
   rule (each instance takes the next k >= ceil(m / n) parts that fit).  When that fails, Glow
   gives every part its own logical device and then reports an error; here the parts are
   spread round-robin over the instances and the error text is kept in
   ``stats["glow_error"]``.  The same happens when one part alone exceeds its device
   (``memoryUsageValidation``): the answer is returned and the validator reports the overflow.

Interpretations: nodes within a BFS level are visited in graph order (Glow sorts them by name
only to be deterministic); Glow's later "adjust" step (``partitionsAdjust``: moving nodes to
cut communication, combining small parts) is not in the seed and is left out.  Glow has no
value-dependent inputs: they are ignored and the validator reports a violation when one lands
in the same part as its consumer on an enforcing device.

Example (the seed 000 graph: the BFS order 1,2,3,4,5,6,7 changes device twice):

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
...                  [[0, 1], [0, 1], [0, 1], [1], [0, 1], [0, 1], [0, 1]])
>>> sol = glow(p)
>>> [[v + 1 for v in nodes] for nodes in sol.parts()]
[[1, 2, 3], [4], [5, 6, 7]]
"""

from __future__ import annotations

from ...measures import MemoryTracker, part_memory
from ...problem import Problem
from ...solution import Solution
from ...units import format_bytes
from ._common import preferred_devices, solution_from_clusters, topological_order

NAME = "glow"


def bfs_order(problem: Problem, nodes: list[int] | None = None) -> list[int]:
    """``getBFSLevel`` visited from the highest level down: the level of a node is its longest
    distance to a sink of the subgraph induced by ``nodes`` (default: all nodes).  Linear in
    the subgraph's size, so cutting every slice costs O(V + E) overall."""
    if nodes is None:
        order = topological_order(problem)
        inside = None
    else:
        inside = set(nodes)
        order = _induced_order(problem, nodes, inside)
    level: dict[int, int] = {}
    for v in reversed(order):
        lv = 0
        for w in problem.succ[v]:
            if inside is None or w in inside:
                lv = max(lv, level[w] + 1)
        level[v] = lv
    return sorted(order, key=lambda v: (-level[v], v))


def _induced_order(problem: Problem, nodes: list[int], inside: set[int]) -> list[int]:
    """A topological order of the subgraph induced by ``nodes`` (Kahn, inside edges only)."""
    indeg = {v: sum(1 for u in problem.pred[v] if u in inside) for v in nodes}
    order = sorted(v for v in nodes if indeg[v] == 0)
    for v in order:                       # the list grows while we walk it
        for w in problem.succ[v]:
            if w in inside:
                indeg[w] -= 1
                if indeg[w] == 0:
                    order.append(w)
    return order


def glow(problem: Problem) -> Solution:
    """Backend slices of the BFS order, then memory cuts, then device instances."""
    dev = preferred_devices(problem)
    # Step 2: slices of the BFS order, a new one at each device change.
    slices: list[list[int]] = []
    for v in bfs_order(problem):
        if not slices or dev[slices[-1][0]] != dev[v]:
            slices.append([])
        slices[-1].append(v)
    # Step 3: memory cuts inside each slice.
    parts: list[list[int]] = []
    for sl in slices:
        cap = problem.devices[dev[sl[0]]].memory
        if cap is None:
            parts.append(sl)
            continue
        current: list[int] = []
        mem = MemoryTracker(problem)
        for v in bfs_order(problem, sl):
            if current and mem.used + mem.delta(v) > cap:
                parts.append(current)
                current, mem = [], MemoryTracker(problem)
            mem.add(v)
            current.append(v)
        parts.append(current)
    part_device = [dev[p[0]] for p in parts]
    memory = [part_memory(problem, p) for p in parts]
    instances, errors = _assign_instances(problem, part_device, memory)
    stats: dict = {"backend_slices": len(slices)}
    if errors:
        stats["glow_error"] = "; ".join(errors)
    return solution_from_clusters(problem, parts, part_device, NAME, instances, stats)


def _assign_instances(problem: Problem, part_device: list[int],
                      memory: list[int]) -> tuple[list[int], list[str]]:
    """Glow's ``assignLogicalDeviceID`` per device, plus the errors Glow would raise."""
    instance = [0] * len(part_device)
    errors: list[str] = []
    for d, device in enumerate(problem.devices):
        mine = [p for p, pd in enumerate(part_device) if pd == d]
        if not mine:
            continue
        cap = device.memory
        if cap is not None:
            for p in mine:
                if memory[p] > cap:
                    errors.append(f"a {device.name} part needs {format_bytes(memory[p])}, over the "
                                  f"device's {format_bytes(cap)}")
        n_dev = device.instances
        if len(mine) <= n_dev:
            for i, p in enumerate(mine):
                instance[p] = i
            continue
        by_size = sorted(mine, key=lambda p: (memory[p], p))
        m, n, start, logical = len(by_size), n_dev, 0, 0
        ok = True
        while m > 0:
            need = (m - 1) // n + 1 if n > 0 else m + 1
            used = 0
            i = start
            while i < len(by_size) and (cap is None or used + memory[by_size[i]] <= cap):
                used += memory[by_size[i]]
                i += 1
            if i - start < need:
                ok = False
                break
            for j in range(start, i):
                instance[by_size[j]] = logical
            logical += 1
            n -= 1
            m -= i - start
            start = i
        if not ok:
            errors.append(f"{device.name}: {len(mine)} parts do not fit in {n_dev} instance(s) of "
                          f"{format_bytes(cap) if cap is not None else 'unlimited'}")
            for i, p in enumerate(mine):
                instance[p] = i % n_dev
    return instance, errors
