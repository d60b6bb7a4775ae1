"""Which device each node goes to when memory limits bind: keep as many nodes on their preferred
device as its memory can hold, and move the others down their allowed lists.

Devices are visited in priority order.  The nodes *arriving* at device ``d`` are those that
prefer it plus those moved off earlier devices whose next allowed device is ``d``.  For a device
with a memory limit:

1. nodes no part on one instance can hold (:func:`.network.placeable_nodes`, a minimum
   cut iterated to a fixed point) move on: that is fallback no partition avoids;
2. with a byte *target* for the device (at most ``memory x instances``: the union of the parts
   on a device needs no more than their sum, docs/problem.md), the parametric minimum cut
   (:func:`.network.keep_within`) keeps the arriving nodes whose loss would cost most per
   byte they need, counting the tensors a split makes cross (which a choice by constants
   alone would not see).  A node on its preferred device weighs ``n + 1`` (fallback is what
   the objective counts); a node that already left its preferred device weighs 1 (moving it
   further costs no fallback, only parts).

The heuristic (:func:`~hetero_solve.algorithms.greedy.heuristic`) starts without targets (only
step 1), builds parts, fits them into instances (:mod:`.fit`), and lowers the target of
a device whose parts did not fit by the bytes left over, until they fit.

>>> from hetero_solve.problem import Device, make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1]] * 3, [Device("NPU", memory=30), "CPU"],
...                  tensor_bytes=1, const_bytes=[20, 20, 5])
>>> plan = Placement(p)
>>> plan.devices({})              # every node fits some part on its own: no move yet
[0, 0, 0]
>>> plan.devices({0: 30})         # 45 bytes of constants on a 30-byte NPU: one 20 moves
[1, 0, 0]
"""

from __future__ import annotations

from ..errors import InfeasibleError
from ..measures import part_memory
from ..problem import Problem
from ..units import format_bytes
from .floors import held_bytes
from .network import MemoryNetwork, keep_within, placeable_nodes

MAX_CUT_TESTS = 400     # nodes per device tested by a minimum cut; the others count as fitting
                        # (the fit then moves them if no run can hold them)


class Placement:
    """The device choice under memory limits for one problem (the networks are built once).

    Raises
    ------
    InfeasibleError
        From :meth:`devices`, when a node fits no device it may use: no part holding it on
        any instance of any of its devices fits (the reason is proven by the cut, and named).
    """

    def __init__(self, problem: Problem):
        self.p = problem
        self.networks: dict[int, MemoryNetwork] = {}
        self.unplaceable: dict[int, dict[int, int]] = {}   # device -> node -> least bytes
        for d, dev in enumerate(problem.devices):
            if dev.memory is None:
                continue
            allowed = [v for v in range(problem.n) if d in problem.allowed[v]]
            if not allowed:
                continue
            net = MemoryNetwork(problem, allowed)
            self.networks[d] = net
            self.unplaceable[d] = placeable_nodes(problem, d, allowed, net,
                                                  max_tests=MAX_CUT_TESTS)[1]
        # Per node, the devices some part can hold it on, in priority order.
        self.feasible = [tuple(d for d in a if v not in self.unplaceable.get(d, ()))
                         for v, a in enumerate(problem.allowed)]
        for v, f in enumerate(self.feasible):
            if not f:
                self._refuse(v)
        self._refuse_overfull()
        self.union: dict[int, int] = {}        # device -> memory of its nodes as one set

    def devices(self, targets: dict[int, int]) -> list[int]:
        """A device per node: each node on the first device of its allowed list that keeps it
        (module doc); ``targets``: device -> byte target for the union of its nodes."""
        p = self.p
        n = p.n
        dev = [-1] * n
        arriving: dict[int, list[int]] = {}
        for v in range(n):
            arriving.setdefault(self.feasible[v][0], []).append(v)
        self.union = {}
        for d in range(len(p.devices)):
            keep = arriving.pop(d, [])
            if not keep:
                continue
            target = targets.get(d)
            moving: list[int] = []
            if d in self.networks and target is not None:
                keep_set = set(keep)
                net = self.networks[d]
                heavy = min(n * (n + 1) + 1, 1 << 24)    # nodes with nowhere else to go
                weights = []
                for v in net.nodes:
                    if v not in keep_set:
                        weights.append(0)
                    elif self.next_device(v, d) < 0:
                        weights.append(heavy)
                    else:
                        weights.append(n + 1 if p.allowed[v][0] == d else 1)
                outside = [v for v in net.nodes if v not in keep_set]
                kept, mem = keep_within(p, net, weights, target, outside)
                kept_set = set(kept)
                moving = [v for v in keep if v not in kept_set and self.next_device(v, d) >= 0]
                moved = set(moving)
                keep = [v for v in keep if v not in moved]
                self.union[d] = mem if len(keep) == len(kept) else part_memory(p, keep)
            elif d in self.networks:
                self.union[d] = part_memory(p, keep)
            for v in keep:
                dev[v] = d
            for v in moving:
                arriving.setdefault(self.next_device(v, d), []).append(v)
        return dev

    def next_device(self, v: int, d: int) -> int:
        """The device after ``d`` among those that can hold ``v``, or -1."""
        f = self.feasible[v]
        i = f.index(d)
        return f[i + 1] if i + 1 < len(f) else -1

    def _refuse_overfull(self) -> None:
        """Raise when the nodes that can only go to one device hold more, in constants and
        graph inputs/outputs (counted in whichever of its parts holds them), than all its
        instances together (proven: no partition fits)."""
        p = self.p
        must: dict[int, list[int]] = {}
        for v, f in enumerate(self.feasible):
            if len(f) == 1 and p.devices[f[0]].memory is not None:
                must.setdefault(f[0], []).append(v)
        for d, nodes in must.items():
            dev = p.devices[d]
            need = held_bytes(p, nodes)
            have = dev.memory * dev.instances
            if need > have:
                shown = ", ".join(repr(p.names[v]) for v in nodes[:3])
                more = f" and {len(nodes) - 3} more" if len(nodes) > 3 else ""
                raise InfeasibleError(
                    f"memory: {len(nodes)} node(s) can only run on {dev.name} ({shown}{more}); "
                    f"their constants and graph inputs/outputs alone need {need} bytes "
                    f"({format_bytes(need)}), its {dev.instances} instance(s) hold {have} "
                    f"({format_bytes(have)}): {need - have} bytes missing",
                    [p.names[v] for v in nodes])

    def _refuse(self, v: int) -> None:
        """``v`` fits no device it may use: every one refuses it by memory (proven)."""
        p = self.p
        why = []
        for d in p.allowed[v]:
            need = self.unplaceable[d][v]
            why.append(f"{p.devices[d].name} needs at least {need} bytes ({format_bytes(need)}) "
                       f"in any part holding it, over its {format_bytes(p.devices[d].memory)} "
                       f"per instance")
        raise InfeasibleError(f"memory: node {p.names[v]!r} ({p.op_types[v]}) fits no device: "
                              + "; ".join(why), [p.names[v]])
