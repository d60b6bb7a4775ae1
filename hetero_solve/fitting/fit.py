"""Fit a partition into device memory: cut parts that are too large into runs, and place
parts on device instances.

The greedy builds parts as if memory were unlimited.  A part on a device with a memory limit
then either fits an instance as it is, or is cut into *runs*: contiguous stretches of a
topological order of its nodes.  A part of the greedy is convex (any path between two of its
nodes stays inside), so its runs, numbered in that order, keep every edge going forward: the
partition stays acyclic, and value inputs stay separated (runs are subsets of parts that
separate them).

Only the run's boundary and constants count (docs/problem.md, "Memory of a part"): a run
may hold nodes whose activations would not fit on their own, as long as the tensors between them
stay inside.  A run is extended node by node while its constants and inputs fit (both only grow
as a run grows in topological order; its outputs can shrink), and the longest stretch that fits
is taken.

Instances, per device, tried in turn (the first that places every part wins):

1. *whole parts, most free instance first*, in part order: no part is cut;
2. *independent pieces*: a part that does not fit is split into its weakly connected
   components (no tensor crosses such a split), first-fit decreasing;
3. *cut to the room left*: each part goes to the instance with the most room and is cut where
   that instance is full, continuing on the next roomiest one, so a model larger than one
   card becomes consecutive runs on consecutive cards;
4. *cut to the capacity, then first-fit decreasing* over every run of the device.

Strategies 3 and 4 cut runs two ways (:class:`~.cuts.Cutter`): along a branch-by-branch order, then
growing each run by the node that raises its memory least.  Consecutive runs of one part on
one instance merge again (merging never raises memory).

When none places everything, the bytes left over per device are reported, and the caller
moves nodes off that device (:mod:`.placement`).

>>> from hetero_solve.problem import Device, make_problem
>>> from hetero_solve.solution import Solution
>>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4, [Device("CARD", 10, 2)],
...                  tensor_bytes=1, const_bytes=[4, 4, 4, 4])
>>> fitted, over = fit_memory(p, Solution([0, 0, 0, 0], [0], [0]))
>>> fitted.parts(), fitted.part_instance, over
([[0, 1], [2, 3]], [0, 1], {})
"""

from __future__ import annotations

from ..measures import part_memories, part_memory
from ..problem import Problem
from ..solution import Solution, normalize
from .cuts import DP_NODES, Cutter, components, dp_runs
from .packing import first_fit


class _Piece:
    """A part of the answer: nodes of one part (``slot``) of the partition being fitted, on
    that part's device (``device == -1``) or, for nodes moved off it, on ``device``."""

    __slots__ = ("slot", "nodes", "memory", "instance", "device")

    def __init__(self, slot: int, nodes: list[int], memory: int, device: int = -1):
        self.slot, self.nodes, self.memory, self.instance = slot, nodes, memory, -1
        self.device = device


def _whole(parts, mems, cap: int, instances: int) -> list[_Piece] | None:
    """Each part whole on the instance with the most room, in part order."""
    where, left = first_fit([mems[slot] for slot, _ in parts], cap, instances,
                            decreasing=False, into="roomiest")
    if left:
        return None
    out = []
    for (slot, nodes), i in zip(parts, where):
        piece = _Piece(slot, nodes, mems[slot])
        piece.instance = i
        out.append(piece)
    return out


def _components_first_fit(problem: Problem, parts, mems, cap: int, instances: int
                          ) -> list[_Piece] | None:
    """Parts that do not fit split into their independent components (no tensor crosses),
    then first-fit decreasing over the instances."""
    pieces = []
    for slot, nodes in parts:
        if mems[slot] <= cap:
            pieces.append(_Piece(slot, nodes, mems[slot]))
            continue
        comps = components(problem, nodes)
        if len(comps) == 1:
            return None
        for comp in comps:
            pieces.append(_Piece(slot, comp, part_memory(problem, comp)))
    return pieces if _pack(pieces, cap, instances) == 0 else None


def _pack(pieces: list[_Piece], cap: int, instances: int) -> int:
    """First-fit decreasing (:func:`~.packing.first_fit`); the bytes that found no room."""
    where, left = first_fit([x.memory for x in pieces], cap, instances)
    for piece, i in zip(pieces, where):
        piece.instance = i
    return left


def _cut_to_room(problem: Problem, parts, cap: int, instances: int, pick: str
                 ) -> tuple[list[_Piece] | None, int]:
    """Each part, in order, goes to the instance with the most room; where that instance is
    full the part is cut and continues on the next roomiest one.  Returns the pieces (None
    when they do not fit) and the bytes left over."""
    free = [cap] * instances
    out: list[_Piece] = []
    for k, (slot, nodes) in enumerate(parts):
        cut = Cutter(problem, nodes, pick)
        while not cut.done():
            i = max(range(instances), key=free.__getitem__)
            run = cut.take(free[i])
            if run is None:
                return None, _rest(problem, cut.left, parts[k + 1:])
            piece = _Piece(slot, *run)
            piece.instance = i
            out.append(piece)
            free[i] -= piece.memory
    return out, 0


def _cut_and_pack(problem: Problem, parts, mems, cap: int, instances: int, pick: str
                  ) -> tuple[list[_Piece] | None, int]:
    """Each part that does not fit cut into runs of at most ``cap`` (each as long as it can
    be), then first-fit decreasing over the instances."""
    pieces: list[_Piece] = []
    for k, (slot, nodes) in enumerate(parts):
        if mems[slot] <= cap:
            pieces.append(_Piece(slot, nodes, mems[slot]))
            continue
        cut = Cutter(problem, nodes, pick)
        while not cut.done():
            run = cut.take(cap)
            if run is None:
                return None, _rest(problem, cut.left, parts[k + 1:])
            pieces.append(_Piece(slot, *run))
    left = _pack(pieces, cap, instances)
    return (pieces if not left else None), left


def _cut_and_spill(problem: Problem, parts, cap: int, instances: int, pick: str, spill
                   ) -> list[_Piece] | None:
    """As :func:`_cut_to_room`, but a node that no run can start with (no instance has room
    for any run beginning with it) moves to ``spill(v)``, a device without a memory limit,
    in a part of its own between the runs before and after it (nodes moved one after another
    share that part).  Acyclic: the node's predecessors are in earlier runs or parts, its
    successors in later ones.  None when a node has nowhere to go."""
    free = [cap] * instances
    out: list[_Piece] = []
    for slot, nodes in parts:
        cut = Cutter(problem, nodes, pick)
        gap: _Piece | None = None        # the part of moved nodes since the last run
        while not cut.done():
            i = max(range(instances), key=free.__getitem__)
            run = cut.take(free[i])
            if run is not None:
                piece = _Piece(slot, *run)
                piece.instance = i
                out.append(piece)
                free[i] -= piece.memory
                gap = None
                continue
            v = cut.drop_front()
            d = spill(v)
            if d < 0 or problem.devices[d].memory is not None:
                return None
            gap = _moved(problem, out, gap, slot, v, d)
    return out


def _moved(problem: Problem, out: list[_Piece], gap: _Piece | None, slot: int, v: int,
           d: int) -> _Piece:
    """Move ``v`` to device ``d`` between the runs of part ``slot``: into ``gap`` (the part of
    nodes moved since the last run) when it is on ``d`` and takes ``v`` (no value edge inside
    on an enforcing device), else into a new part appended to ``out``.  Returns the gap."""
    if gap is not None and gap.device == d and not (
            problem.devices[d].enforce_values
            and any(u in gap.nodes for u in problem.value_pred[v])):
        gap.nodes.append(v)
        return gap
    gap = _Piece(slot, [v], 0, device=d)
    gap.instance = 0
    out.append(gap)
    return gap


def _dp_place(problem: Problem, parts, mems, cap: int, instances: int, spill=None
              ) -> list[_Piece] | None:
    """Every part that does not fit cut by :func:`~.cuts.dp_runs` (at most ``instances`` runs
    each), then first-fit decreasing over the instances; moved nodes go to ``spill(v)``."""
    pieces: list[_Piece] = []
    movable = None
    if spill is not None:
        def movable(v: int) -> bool:
            d = spill(v)
            return d >= 0 and problem.devices[d].memory is None
    for slot, nodes in parts:
        if mems[slot] <= cap:
            pieces.append(_Piece(slot, nodes, mems[slot]))
            continue
        if len(nodes) > DP_NODES:
            return None
        steps = dp_runs(problem, nodes, cap, instances, movable)
        if steps is None:
            return None
        gap = None
        for kind, run, size in steps:
            if kind == "run":
                pieces.append(_Piece(slot, run, size))
                gap = None
                continue
            gap = _moved(problem, pieces, gap, slot, run[0], spill(run[0]))
    runs = [x for x in pieces if x.device < 0]
    if _pack(runs, cap, instances):
        return None
    return pieces


def _rest(problem: Problem, first, later_parts) -> int:
    """Bytes not placed: the unplaced nodes of one part and every later part, each as one
    part (an estimate of how much must go elsewhere)."""
    return part_memory(problem, first) + sum(part_memory(problem, nodes)
                                             for _, nodes in later_parts)


def _place(problem: Problem, parts, mems, cap: int, instances: int, spill=None
           ) -> tuple[list[_Piece] | None, int]:
    """The parts of one device on its instances, and 0; or, when no strategy (module doc)
    places them all, the fewest bytes any left over, with the pieces where ``spill`` moved
    the nodes no run could hold (None without ``spill`` or when a node has nowhere to go)."""
    placed = _whole(parts, mems, cap, instances)
    if placed is not None:
        return placed, 0
    placed = _components_first_fit(problem, parts, mems, cap, instances)
    if placed is not None:      # components of a part on one instance: no path between them
        return _merge(placed, any_order=True), 0
    left = None
    for strategy in (_cut_to_room, _cut_and_pack):
        for pick in ("order", "smallest"):
            if strategy is _cut_to_room:
                placed, over = strategy(problem, parts, cap, instances, pick)
            else:
                placed, over = strategy(problem, parts, mems, cap, instances, pick)
            if placed is not None:
                return _merge(placed), 0
            left = over if left is None else min(left, over)
    if spill is None:
        placed = _dp_place(problem, parts, mems, cap, instances)
        if placed is not None:
            return _merge(placed), 0
        return None, max(1, left or 0)
    # One dynamic programme for both: it moves nodes only when no cut places them all.
    dp = _dp_place(problem, parts, mems, cap, instances, spill)
    if dp is not None and all(x.device < 0 for x in dp):
        return _merge(dp), 0
    options = [dp] + [_cut_and_spill(problem, parts, cap, instances, pick, spill)
                      for pick in ("order", "smallest")]
    options = [o for o in options if o is not None]
    if not options:
        return None, max(1, left or 0)
    best = min(options, key=lambda o: (sum(len(x.nodes) for x in o if x.device >= 0), len(o)))
    return _merge(best), max(1, left or 0)


def fit_memory(problem: Problem, sol: Solution, spill=None
               ) -> tuple[Solution | None, dict[int, int]]:
    """Cut and place the parts of ``sol`` (a partition built without memory limits, parts
    convex and numbered in topological order) on the instances of their devices.

    Parameters
    ----------
    problem : Problem
    sol : Solution
        Parts on devices; instances are ignored and chosen here.
    spill : callable, optional
        ``spill(v, d)``: the device node ``v`` may move to from device ``d`` (-1: none).  When
        given, a node that no run on ``d`` can start with moves there (a fallback) instead of
        failing, provided that device has no memory limit.

    Returns
    -------
    (Solution or None, dict)
        The partition with every device instance within its memory, normalized, and the
        bytes left over per device whose parts did not all fit (empty when none was moved).
        With ``spill``, a partition is returned even then (with the nodes moved); without,
        or when a node has nowhere to go, ``None``.
    """
    k = sol.num_parts
    mems, _ = part_memories(problem, sol.part_of, k)
    members = sol.parts()
    by_device: dict[int, list[tuple[int, list[int]]]] = {}
    for slot in range(k):
        by_device.setdefault(sol.part_device[slot], []).append((slot, members[slot]))
    pieces: list[_Piece] = []
    overflow: dict[int, int] = {}
    failed = False
    for d, parts in by_device.items():
        dev = problem.devices[d]
        if dev.memory is None:
            for slot, nodes in parts:
                piece = _Piece(slot, nodes, mems[slot])
                piece.instance = 0
                pieces.append(piece)
            continue
        move = (lambda v, d=d: spill(v, d)) if spill is not None else None
        placed, left = _place(problem, parts, mems, dev.memory, dev.instances, move)
        if left:
            overflow[d] = left
        if placed is None:
            failed = True
        else:
            pieces.extend(placed)
    if failed:
        return None, overflow
    # Parts in slot order, each slot's runs in their order: every edge goes forward.
    pieces.sort(key=lambda x: x.slot)
    part_of = [0] * problem.n
    for q, piece in enumerate(pieces):
        for v in piece.nodes:
            part_of[v] = q
    fitted = Solution(part_of, [sol.part_device[x.slot] if x.device < 0 else x.device
                                for x in pieces],
                      [x.instance for x in pieces], algorithm=sol.algorithm, stats=dict(sol.stats))
    return normalize(problem, fitted), overflow


def _merge(pieces: list[_Piece], any_order: bool = False) -> list[_Piece]:
    """Consecutive runs of one part on one instance become one run again (its memory is at
    most their sum, so the instance still holds it); with ``any_order`` (independent pieces
    of a part, no path between them) every piece of a part on one instance joins."""
    out: list[_Piece] = []
    joined: dict[tuple[int, int], _Piece] = {}
    for piece in sorted(pieces, key=lambda x: x.slot):   # stable: runs keep their order
        last = out[-1] if out else None
        if any_order:
            last = joined.get((piece.slot, piece.instance))
        if last is not None and last.slot == piece.slot and last.instance == piece.instance \
                and last.device == piece.device:
            last.nodes = last.nodes + piece.nodes
            last.memory += piece.memory             # an upper bound; not used after placing
        else:
            out.append(piece)
            joined[(piece.slot, piece.instance)] = piece
    return out
