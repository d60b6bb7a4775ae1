"""A user-defined partition (hand-set affinities, another tool's answer): reading the map and
judging it against a compiled problem, for ``check`` (:mod:`hetero_solve.user_partition`) and for
the solve's own answer when it places foldable nodes (:func:`judge_answer`).

Accepted maps (JSON file or dict), node names as ``affinity.json`` and ``partition.json`` use
them (unnamed nodes: ``<OpType>_<index>``):

- **node -> device**: ``{"conv1": "NPU", "softmax": "CPU"}`` (``affinity.json``, OpenVINO's
  QueryNetwork map).  ``"NPU.1"`` names instance 1 of a device with several instances.
- **node -> part**: ``{"conv1": 0, "softmax": 1}``; a part's device is the first device, in
  priority order, that takes all its nodes (else the one taking the most: the others are
  reported).  ``{"conv1": {"part": 0, "device": "NPU", "instance": 0}}`` sets it explicitly.
- **a partition.json** (``{"partitions": [{"id", "device", "instance", "node_names"}]}``):
  hetero-solve's own output, edited by hand.

How a node -> device map becomes parts (``split``):

- ``"acyclic"`` (default): OpenVINO HETERO's regions (below) when they form no cycle; when
  they do, each region is cut where a path leaves the device and comes back: a node's *level*
  is the number of device changes on the longest path reaching it, and a part is a connected
  set of nodes with the same device and level.  Every edge between parts then goes to a higher
  level, so the parts always form a DAG (hetero-solve's own ``affinity.json`` is accepted).
- ``"regions"`` (OpenVINO HETERO): every edge between nodes of different devices is a
  boundary, so each connected same-device region is one part.  Such regions can form a cycle
  (A -> B -> A), which is reported with the node edges that close it.
- ``"fewest"``: the fewest parts that keep every node on the user's device (the solver with
  each node's allowed devices restricted to the user's one).  Only support, pins and memory
  can then fail.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from .algorithms.regions import acyclic_regions, regions
from .answer import answer_of
from .errors import HeteroSolveError
from .exact.folds import named, unfold, unplaced_requirements
from .fitting.packing import first_fit
from .model import ModelGraph
from .problem import Problem
from .readers import read_json
from .solution import Solution, evaluate
from .validate import Violation, validate

MAX_NAMED = 5


class AffinityError(HeteroSolveError):
    """The map cannot be read or does not fit the model and rules (unknown or missing node,
    unknown device, bad value).  Names the file, the entry and the reason."""

    def __init__(self, source: str, reason: str):
        self.source = source
        super().__init__(f"{source}: {reason}")


@dataclass
class Entry:
    """What the map says about one node."""
    device: str | None = None
    part: int | None = None
    instance: int | None = None


@dataclass
class UserMap:
    """A parsed map: node name -> :class:`Entry`; ``mode`` is ``"device"`` or ``"part"``."""
    source: str
    mode: str
    entries: dict[str, Entry]
    #: A partition.json's nodes listed in a second part: node -> that part (only a
    #: DequantizeLinear shared by quantized units may be, one copy per unit).
    repeated: dict[str, int] = field(default_factory=dict)


# -- reading maps -----------------------------------------------------------------------------

def read_affinity(source: str | os.PathLike | Mapping) -> UserMap:
    """Parse a map (see the module docstring) without looking at the model yet."""
    if isinstance(source, Mapping):
        label, data = "<affinity>", source
    elif not isinstance(source, (str, os.PathLike)):
        raise AffinityError("<affinity>", "expected a JSON object: node name -> device name or "
                                          f"part id (got {type(source).__name__})")
    else:
        label = str(source)
        # A regular file (no FIFO), bounded, UTF-8; JSON errors with line and column.
        data = read_json(source, lambda why: AffinityError(label, why))
    if not isinstance(data, Mapping):
        raise AffinityError(label, "expected a JSON object: node name -> device name or part id")
    # a partition.json: its parts (one written by hetero-solve also says its version)
    if "partitions" in data and (isinstance(data["partitions"], list) or "version" in data):
        return _from_manifest(label, data)
    entries: dict[str, Entry] = {}
    for name, value in data.items():
        entries[str(name)] = _entry(label, str(name), value)
    # An empty map is checked against the model like any other: it names every node of a
    # model with nothing to place (only constants and passed-through inputs), and for any
    # other model the resolution lists the nodes it misses.
    with_part = [n for n, e in entries.items() if e.part is not None]
    if with_part and len(with_part) != len(entries):
        other = next(n for n, e in entries.items() if e.part is None)
        raise AffinityError(label, f"node {with_part[0]!r} has a part id but {other!r} does not: "
                                   "give every node a part id, or none (node -> device)")
    return UserMap(label, "part" if with_part else "device", entries)


def _entry(label: str, name: str, value: Any) -> Entry:
    where = f"[{name!r}]"
    if isinstance(value, bool):
        raise AffinityError(label, f"{where}: expected a device name or a part id, got {value}")
    if isinstance(value, str):
        if not value:
            raise AffinityError(label, f"{where}: empty device name")
        return Entry(device=value)
    if isinstance(value, int):
        if value < 0:
            raise AffinityError(label, f"{where}: part id {value} is negative")
        return Entry(part=value)
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in ("device", "part", "instance")]
        if unknown:
            raise AffinityError(label, f"{where}.{unknown[0]}: unknown key (expected device, "
                                       "part, instance)")
        e = Entry(device=value.get("device"), part=value.get("part"),
                  instance=value.get("instance"))
        if e.device is None and e.part is None:
            raise AffinityError(label, f"{where}: needs a device or a part")
        if e.device is not None and not (isinstance(e.device, str) and e.device):
            raise AffinityError(label, f"{where}.device: expected a device name")
        for key in ("part", "instance"):
            x = getattr(e, key)
            if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 0):
                raise AffinityError(label, f"{where}.{key}: expected an integer >= 0, got {x!r}")
        return e
    raise AffinityError(label, f"{where}: expected a device name or a part id, "
                               f"got {type(value).__name__}")


def _from_manifest(label: str, data: Mapping) -> UserMap:
    """A ``partition.json`` (read by :func:`hetero_solve.answer.answer_of`): its parts by
    node name, device and instance."""
    answer = answer_of(data, lambda why: AffinityError(label, why))
    answer.need_in_parts("node_names")
    entries: dict[str, Entry] = {}
    repeated: dict[str, int] = {}
    for i, part in enumerate(answer.parts):
        pid = i if part.id is None else part.id
        for n in part.node_names:
            if n in entries:
                repeated[n] = pid     # an error unless the model shares it (_resolve)
                continue
            entries[n] = Entry(device=part.device, part=pid, instance=part.instance)
    return UserMap(label, "part", entries, repeated)


# -- resolving against the model --------------------------------------------------------------

def _named(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _resolve(umap: UserMap, mg: ModelGraph, problem: Problem,
             warnings: list[str]) -> list[tuple[int | None, int | None, int | None]]:
    """Per problem node: (device index, user part id, instance), checking names."""
    label = umap.source
    index = {name: v for v, name in enumerate(problem.names)}
    all_names = set(mg.names)
    unknown = [n for n in umap.entries if n not in all_names]
    if unknown:
        raise AffinityError(label, f"no node named {_named(unknown)} in {mg.path}")
    shared = _check_units(umap, mg, problem)
    for n, pid in umap.repeated.items():
        if n not in shared:
            raise AffinityError(label, f"node {n!r} is in part {umap.entries[n].part} and "
                                       f"in part {pid}")
    members = problem.info.member_names
    in_unit = set(members.values())
    unplaced = [n for n in umap.entries if n not in index and n not in in_unit]
    if unplaced:
        warnings.append(f"{label}: {_named(unplaced)} are Constant or folded nodes: they belong "
                        "to no part, their entries are ignored")
    missing = [n for n in problem.names if n not in umap.entries]
    if missing:
        raise AffinityError(label, f"{len(missing)} node(s) missing from the map: {_named(missing)}")
    devices = {d.name: i for i, d in enumerate(problem.devices)}
    out: list[tuple[int | None, int | None, int | None]] = []
    for v, name in enumerate(problem.names):
        e = umap.entries[name]
        d, inst = None, e.instance
        if e.device is not None:
            d, inst_from_name = _device(label, name, e.device, devices, problem)
            if inst_from_name is not None:
                if inst is not None and inst != inst_from_name:
                    raise AffinityError(label, f"[{name!r}]: {e.device!r} and instance {inst} "
                                               "disagree")
                inst = inst_from_name
        if inst is not None:
            if d is None:
                raise AffinityError(label, f"[{name!r}]: an instance needs a device")
            have = problem.devices[d].instances
            if inst >= have:
                raise AffinityError(label, f"[{name!r}]: {problem.devices[d].name} has {have} "
                                           f"instance(s), not an instance {inst}")
        out.append((d, e.part, inst))
    return out


def _check_units(umap: UserMap, mg: ModelGraph, problem: Problem) -> set[str]:
    """A node of a quantized unit the map names goes where the unit's op goes
    (docs/problem.md: a part boundary never cuts a unit); returns the names of shared
    DequantizeLinear nodes, copied into each unit that reads them, which may go anywhere their
    readers go."""
    if not problem.members:
        return set()
    owners: dict[int, list[int]] = {}
    for v, gs in problem.members.items():
        for g in gs:
            owners.setdefault(g, []).append(v)
    shared = {mg.names[g] for g, vs in owners.items() if len(vs) > 1}
    for g, vs in owners.items():
        name, anchor = mg.names[g], problem.names[vs[0]]
        if len(vs) > 1 or name == anchor or name not in umap.entries or anchor not in umap.entries:
            continue
        if umap.entries[name] != umap.entries[anchor]:
            raise AffinityError(umap.source, f"[{name!r}]: {mg.op_types[g]} of the quantized unit "
                                             f"of {anchor!r} must go with it (a part boundary "
                                             "never cuts a quantized unit)")
    return shared


def _device(label: str, node: str, text: str, devices: dict[str, int],
            problem: Problem) -> tuple[int, int | None]:
    if text in devices:
        return devices[text], None
    base, dot, num = text.rpartition(".")
    if dot and base in devices and num.isdigit():
        return devices[base], int(num)
    known = ", ".join(d.name for d in problem.devices)
    raise AffinityError(label, f"[{node!r}]: unknown device {text!r} (the rules have {known})")


# -- building the user's partition ------------------------------------------------------------

def _part_devices(problem: Problem, part_of: list[int], k: int,
                  given: dict[int, int]) -> list[int]:
    """Device per part: the given one, else the first device (priority order) taking every node
    of the part, else the device taking the most of them (the rest become violations)."""
    members: list[list[int]] = [[] for _ in range(k)]
    for v, p in enumerate(part_of):
        members[p].append(v)
    out = []
    for p in range(k):
        if p in given:
            out.append(given[p])
            continue
        counts = [sum(1 for v in members[p] if d in problem.allowed[v])
                  for d in range(len(problem.devices))]
        best = max(range(len(counts)), key=lambda d: (counts[d], -d))
        out.append(best)
    return out


def _instances(problem: Problem, part_of: list[int], part_device: list[int],
               given: dict[int, int]) -> list[int]:
    """Instance per part: the given one; else first-fit decreasing by part memory over the
    device's instances (the least loaded when none fits: the validator then names the
    overflow); instance 0 without memory limits."""
    k = len(part_device)
    tmp = Solution(part_of, part_device, [0] * k)
    mem = evaluate(problem, tmp).part_memory
    out = [given.get(p, 0) for p in range(k)]
    for d, dev in enumerate(problem.devices):
        if dev.memory is None or dev.instances == 1:
            continue
        loads = [0] * dev.instances
        for p, i in given.items():
            if part_device[p] == d and 0 <= i < dev.instances:    # else a violation later
                loads[i] += mem[p]
        qs = [p for p in range(k) if part_device[p] == d and p not in given]
        where, _ = first_fit([mem[p] for p in qs], dev.memory, dev.instances, full="least",
                             loads=loads)
        for p, i in zip(qs, where):
            out[p] = i
    return out


def user_solution(problem: Problem, umap: UserMap,
                  resolved: list[tuple[int | None, int | None, int | None]],
                  split: str = "acyclic") -> Solution:
    """The partition a map describes (``split``: how a device map becomes parts)."""
    label = umap.source
    if umap.mode == "device":
        cut = regions if split == "regions" else acyclic_regions
        part_of = cut(problem, [(d, i) for d, _p, i in resolved])
        k = max(part_of, default=-1) + 1
        given_dev = {}
        given_inst = {}
        for v, (d, _p, i) in enumerate(resolved):
            given_dev[part_of[v]] = d
            if i is not None:
                given_inst[part_of[v]] = i
    else:
        ids = sorted({p for _d, p, _i in resolved})
        renum = {p: j for j, p in enumerate(ids)}
        part_of = [renum[p] for _d, p, _i in resolved]
        k = len(ids)
        given_dev: dict[int, int] = {}
        given_inst: dict[int, int] = {}
        owner: dict[int, str] = {}
        for v, (d, p, i) in enumerate(resolved):
            q = part_of[v]
            for table, value, what in ((given_dev, d, "device"), (given_inst, i, "instance")):
                if value is None:
                    continue
                if q in table and table[q] != value:
                    shown = (problem.devices[value].name, problem.devices[table[q]].name) \
                        if what == "device" else (value, table[q])
                    raise AffinityError(label, f"part {p}: node {problem.names[v]!r} says "
                                               f"{what} {shown[0]}, node {owner[q]!r} says {shown[1]}")
                table[q] = value
                owner.setdefault(q, problem.names[v])
    part_device = _part_devices(problem, part_of, k, given_dev)
    part_instance = _instances(problem, part_of, part_device, given_inst)
    return Solution(part_of, part_device, part_instance, algorithm="user", status="feasible",
                    stats={"user_map": label, "mode": umap.mode})


# -- the check --------------------------------------------------------------------------------

def place_folds(umap: UserMap, problem: Problem) -> Problem:
    """The problem the map answers: ``problem`` with the foldable nodes the map puts in parts
    placed (:func:`hetero_solve.exact.folds.unfold`; ``partition.json`` lists them under
    ``unfolded``).  A foldable node the map leaves out stays folded.

    Raises
    ------
    AffinityError
        The map places a foldable node but not a foldable node reading its outputs (whose
        input would then no longer be constant).
    """
    ks = named(problem, umap.entries)
    if not ks:
        return problem
    missing = unplaced_requirements(problem, ks)
    if missing:
        k, j = (problem.fold_options[x].name for x in missing[0])
        raise AffinityError(umap.source, f"foldable node {k!r} is in a part, and foldable node "
                                         f"{j!r} reads its outputs: put {j!r} in a part too, "
                                         "or neither")
    return unfold(problem, ks)


def judge(mg: ModelGraph, base: Problem, umap: UserMap, split: str = "acyclic",
          warnings: list[str] | None = None
          ) -> tuple[Problem, list[tuple[int | None, int | None, int | None]], Solution,
                     list[Violation]]:
    """How ``check`` judges a map: the problem it answers (:func:`place_folds` of the
    compiled ``base``), each node's entry, the partition it describes and its violations
    (:func:`~hetero_solve.validate.validate`, part ids in any order).  ``warnings`` receives
    the notes on ignored entries."""
    problem = place_folds(umap, base)
    resolved = _resolve(umap, mg, problem, [] if warnings is None else warnings)
    sol = user_solution(problem, umap, resolved, split)
    return problem, resolved, sol, validate(problem, sol, require_order=False)


def judge_answer(mg: ModelGraph, base: Problem, problem: Problem,
                 sol: Solution) -> list[Violation]:
    """What ``hetero-solve check MODEL RULES --affinity OUT/partition.json`` says of an answer
    ``sol`` to ``problem`` (``base``, as compiled, with some foldable nodes placed): the parts
    by node name, device and instance as ``partition.json`` writes them, judged by
    :func:`judge`.  Empty when check accepts it."""
    entries = {}
    for v, p in enumerate(sol.part_of):
        entries[problem.names[v]] = Entry(device=problem.devices[sol.part_device[p]].name,
                                          part=p, instance=sol.part_instance[p])
    try:
        return judge(mg, base, UserMap("partition.json", "part", entries))[3]
    except AffinityError as e:
        return [Violation("structure", str(e))]
