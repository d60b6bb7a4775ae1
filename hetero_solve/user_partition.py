"""Check a user-defined partition (hand-set affinities, another tool's answer), as Glow
validates user-defined partitions, and export it when it is valid.

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

Either way the report also gives the fewest parts the user's device assignment allows and the
optimum hetero-solve finds with a free hand.  Violations come from the one validator,
:func:`hetero_solve.validate.validate`; a valid map is renumbered topologically and becomes a
:class:`~hetero_solve.result.Result`, exported like a solved one.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import onnx

from .errors import HeteroSolveError
from .model import ModelGraph
from .engines import check_engine
from .pipeline import initial_solution, prepare, refine, solve_prepared
from .result import Result
from .problem import Objective, Problem
from .answer import answer_of
from .readers import read_json
from .rules import Rules
from .algorithms.regions import acyclic_regions, regions
from .fitting.packing import first_fit
from .solution import Metrics, Solution, evaluate, normalize, objective_key
from .validate import Violation, validate

SPLITS = ("acyclic", "regions", "fewest")
MAX_NAMED = 5
Progress = Callable[[str], None]


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


@dataclass
class CheckReport:
    """The verdict on a user map.

    ``solution`` is the user's partition (as validated; renumbered topologically when valid),
    ``violations`` every violation found, ``result`` the exportable result when valid.
    ``device_partitions``: the fewest parts keeping the user's devices (None when a node is on
    a device that refuses it, or that search failed); ``optimum``: what ``hetero_solve.solve``
    finds (None when not asked for)."""
    source: str
    mode: str
    split: str
    problem: Problem
    solution: Solution
    metrics: Metrics
    violations: list[Violation]
    result: Result | None = None
    device_partitions: int | None = None
    device_status: str | None = None
    optimum: Result | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.violations

    @property
    def partitions(self) -> int:
        return self.metrics.partitions

    @property
    def optimum_partitions(self) -> int | None:
        return None if self.optimum is None else self.optimum.metrics.partitions

    def write(self, out_dir: str | os.PathLike, **kw) -> Path:
        """Export a valid map like a solved one (``partition.json``, part models, ...)."""
        if self.result is None:
            raise AffinityError(self.source, "the map is not valid: nothing to export")
        return self.result.write(out_dir, **kw)

    def as_dict(self) -> dict:
        opt = self.optimum
        return {
            "source": self.source, "mode": self.mode, "split": self.split, "valid": self.valid,
            "partitions": self.partitions, "objective": self.metrics.as_dict(),
            "violations": [v.as_dict() for v in self.violations],
            "device_partitions": self.device_partitions, "device_status": self.device_status,
            "optimum": None if opt is None else {"partitions": opt.metrics.partitions,
                                                 "status": opt.solution.status,
                                                 "objective": opt.metrics.as_dict()},
            "warnings": list(self.warnings)}


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


def fewest_for_devices(problem: Problem, node_device: list[int], *, engine: str = "auto",
                       time_limit: float = 10.0, seed: int = 0,
                       progress: Progress | None = None) -> Solution:
    """The fewest parts that keep node ``v`` on ``node_device[v]`` (the solver with allowed
    devices restricted to those).  Raises :class:`~hetero_solve.errors.InfeasibleError` when
    memory cannot hold them."""
    restricted = dataclasses.replace(problem, allowed=[(d,) for d in node_device])
    sol = initial_solution(restricted, engine=engine, time_limit=time_limit, seed=seed,
                           progress=progress)
    sol = refine(restricted, sol, engine=engine, time_limit=time_limit, seed=seed,
                 progress=progress)
    return normalize(problem, sol)


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
    from .exact.folds import named, unfold, unplaced_requirements
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


def check_affinity(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
                   rules: str | os.PathLike | dict | Rules,
                   affinity: str | os.PathLike | Mapping, *, dims: Mapping[str, int] | None = None,
                   shapes: Mapping[str, list[int]] | None = None, split: str = "acyclic", optimum: bool = True, engine: str = "auto",
                   time_limit: float = 10.0, seed: int = 0,
                   progress: Progress | None = None, objective: Objective | None = None,
                   costs=None) -> CheckReport:
    """Validate a user-defined map against ``model`` and ``rules`` (``hetero-solve check``).
    ``objective`` overrides the rule file's (the comparison's ranking); ``costs``: measured
    times, as :func:`hetero_solve.solve` takes them.

    Bad input (unreadable files, unknown or missing nodes, unknown devices) raises a
    :class:`~hetero_solve.errors.HeteroSolveError`; violations of the five conditions are
    listed in the report.  ``optimum``: also run ``hetero_solve.solve`` for comparison.
    Nothing is written; :meth:`CheckReport.write` exports a valid map.

    >>> rep = check_affinity("examples/seed000.onnx", "rules/seed000.yaml",
    ...                      {"1": 0, "2": 0, "4": 1, "3": 2, "5": 2, "6": 2, "7": 2})  # doctest: +SKIP
    >>> rep.valid, rep.partitions, rep.optimum_partitions                                # doctest: +SKIP
    (True, 3, 3)
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    check_engine(engine)
    say = progress or (lambda _msg: None)
    umap = read_affinity(affinity)
    prepared = prepare(model, rules, dims=dims, shapes=shapes, progress=say, objective=objective,
                       costs=costs)
    mg, rule_set, base = prepared.model_graph, prepared.rules, prepared.problem
    warnings = list(base.info.warnings)
    say("validating the map")
    problem, resolved, sol, violations = judge(mg, base, umap, split, warnings)
    node_device = sol.node_device()
    refused = any(node_device[v] not in problem.allowed[v] for v in range(problem.n))

    device_sol, device_status = None, None
    if not refused:
        say("searching the fewest parts for these devices")
        try:
            device_sol = fewest_for_devices(problem, node_device, engine=engine,
                                            time_limit=time_limit, seed=seed, progress=say)
            device_status = device_sol.status
        except HeteroSolveError as e:
            warnings.append(f"no split keeps every node on its device: {e}")
    if umap.mode == "device" and split == "fewest":
        named = next((problem.names[v] for v, r in enumerate(resolved) if r[2] is not None), None)
        if named is not None:
            raise AffinityError(umap.source, f"[{named!r}] names a device instance: instances "
                                             "need --split acyclic or regions (the fewest-parts "
                                             "search places instances itself)")
        if device_sol is not None:
            sol = device_sol
            sol.algorithm = "user"
            sol.stats = {"user_map": umap.source, "mode": umap.mode, "split": split}
            violations = validate(problem, sol, require_order=False)
    else:
        split = "given" if umap.mode == "part" else split

    best = None
    if optimum:
        say("solving for the optimum")
        try:
            best = solve_prepared(prepared, engine=engine, time_limit=time_limit, seed=seed,
                                  progress=say)
        except HeteroSolveError as e:
            warnings.append(f"hetero-solve found no partition to compare with: {e}")

    result = None
    if not violations:
        sol = normalize(problem, sol)
        metrics = evaluate(problem, sol)
        if best is not None:
            sol.lower_bound = best.solution.lower_bound
            sol.stats["optimum_partitions"] = best.metrics.partitions
            if (best.solution.status == "optimal"   # over every fold choice (its problem)
                    and objective_key(problem, sol) <= objective_key(best.problem, best.solution)):
                sol.status = "optimal"
        result = Result(mg, rule_set, problem, sol, metrics, {}, list(warnings))
    else:
        metrics = evaluate(problem, sol)
    return CheckReport(umap.source, umap.mode, split, problem, sol, metrics, violations, result,
                       None if device_sol is None else device_sol.num_parts, device_status,
                       best, warnings)
