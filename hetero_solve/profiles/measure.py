"""``hetero-solve profile``: each node's time on each device of a rule file that this machine
can run, measured through the runtime's own profiler, or imported from a profiler's file
(docs/costs.md, "Profiles").

Which runtime measures a device: its ``runtime:`` in the rule file, as ``hetero-solve run``
runs it: ``openvino: DEVICE`` (an OpenVINO device) or ``onnxruntime: PROVIDER`` (the first
provider listed; a device whose first provider this onnxruntime lacks would run elsewhere,
so it is not measured).  A device with neither is not measured.  For each measured device:

1. the whole model as one part timed through ``Session.run`` (what ``hetero-solve run``
   calls) in paired rounds with the other devices (:func:`.rounds.paired_rounds`), before
   any profiler runs: its median, and what a run right after another device's costs more
   (the switch cost);
2. ``warmup`` runs, then ``repeats`` runs with the profiler on: per runtime node, the median;
   the runtime nodes mapped back to ONNX nodes (:mod:`.onnxruntime`, :mod:`.openvino`);
3. what a second one-node part adds to a one-node session (the per-part cost: the runtime's
   call and ``Session``'s bookkeeping), and what a cut costs (:func:`boundary_link`);
4. node times made to add up to the whole run minus the per-part and switch costs
   (:func:`.attribute.attribute`): predicted and measured agree on the model in one part.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..errors import HeteroSolveError
from ..export.writer import write_result
from ..pipeline import solve
from ..readers import read_bytes
from ..run.backend import RunOptions
from ..run.inputs import InputSpec, index_bounds, random_inputs
from ..run.session import Session
from . import onnxruntime as ort_profile
from . import openvino as ov_profile
from .attribute import attribute
from .rounds import paired_rounds, quartiles
from ..times.fusion import volumes
from ..times.profile import DeviceProfile, Profile, ProfileError, model_info

Tick = Callable[[str, int], None]


class ProfileRunError(HeteroSolveError):
    """Nothing can be measured (``str(e)`` is one line saying why for each device)."""


@dataclass(frozen=True)
class Target:
    """How one rule-file device is measured: ``kind`` is ``onnxruntime`` (``what``: the
    providers) or ``openvino`` (``what``: the OpenVINO device)."""

    device: str
    kind: str
    what: Any

    @property
    def label(self) -> str:
        first = self.what[0] if isinstance(self.what, list) else self.what
        return f"{self.kind}:{first}"


@dataclass
class Plan:
    """The devices that will be measured, and why each other one will not."""

    targets: list[Target] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def plan(devices: Sequence) -> Plan:
    """What measures each device of a rule file (module doc), from what this machine has."""
    out = Plan()
    ort_have = _ort_providers()
    ov_have: list[str] | None = None
    for d in devices:
        runtime = dict(d.runtime or {})
        if runtime.get("openvino"):
            if ov_have is None:
                ov_have = ov_profile.available_devices()
            want = str(runtime["openvino"])
            if not ov_have:
                out.skipped[d.name] = f"OpenVINO ({want}) is not installed"
            elif want.split(".")[0] not in ov_have and want not in ov_have:
                out.skipped[d.name] = (f"OpenVINO has no {want} here (it has "
                                       f"{', '.join(ov_have)})")
            else:
                out.targets.append(Target(d.name, "openvino", want))
        elif runtime.get("onnxruntime"):
            want = runtime["onnxruntime"]
            first = want if isinstance(want, str) else list(want)[0]
            if first not in ort_have:
                out.skipped[d.name] = f"{first} is not in this onnxruntime"
            else:
                providers = [first] + (["CPUExecutionProvider"]
                                       if first != "CPUExecutionProvider" else [])
                out.targets.append(Target(d.name, "onnxruntime", providers))
        else:
            out.skipped[d.name] = ("no runtime: key in the rule file says what runs it "
                                   "(runtime: {onnxruntime: PROVIDER} or {openvino: DEVICE})")
    return out


def _ort_providers() -> list[str]:
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    return list(ort.get_available_providers())


def model_feeds(mg, seed: int = 0, ranges: Mapping[str, tuple[float, float]] | None = None
                ) -> dict:
    """Random inputs for ``mg`` at the shapes it was loaded with (``hetero-solve run``'s)."""
    bounds = index_bounds(mg.model)
    specs = []
    for x in mg.graph_inputs:
        t = mg.types[x]
        if t.shape is None or not t.static:
            raise ProfileRunError(f"input {x!r} has shape {list(t.shape or [])}: give its "
                                  "dims (--dim NAME=VALUE or --shape) to profile at a size")
        specs.append(InputSpec(x, t.elem_type, t.shape, bounds.get(x)))
    return random_inputs(specs, mg.dims, seed=seed, ranges=ranges)


def measure(mg, model: str, targets: Sequence[Target], *, warmup: int = 3, repeats: int = 20,
            optimization: str = "all", threads: int = 0, seed: int = 0,
            ranges: Mapping[str, tuple[float, float]] | None = None,
            tick: Tick = lambda what, n: None, spinning: str = "stop") -> Profile:
    """A profile of ``model`` (loaded as ``mg``) on each target (module doc), every runtime
    run with the execution settings of ``RunOptions(optimization, threads, spinning)``
    (recorded in the profile: what ``run`` then applies).  ``tick(what, n)`` is called as
    work is done: ``n`` runs of ``what`` (for a progress bar: :func:`runs_needed` runs in
    all).

    The whole-model run times are taken with every target's session loaded, in paired
    rounds (:func:`.rounds.paired_rounds`: each target in turn, warmed, then a burst whose
    median is the round's figure), as ``solve --measure`` and the benchmarks measure answers:
    a load that comes and goes hits every target alike.  ``total_seconds`` is the median
    figure, the whole model run over and over; what its first run after another target's
    turn takes more is the device's ``switch_cost`` (what a part pays after a part on another
    runtime: caches and threads the other one took), which the cost model adds to each
    part's fixed cost; the nodes add up to ``total_seconds`` less both costs."""
    feeds = model_feeds(mg, seed, ranges)
    devices: dict[str, DeviceProfile] = {}
    options = RunOptions(optimization=optimization, intra_op_threads=threads,
                         spinning=spinning)
    with tempfile.TemporaryDirectory(prefix="hetero-solve-profile-") as tmp:
        tiny = _tiny_parts(tmp, any(d.name for d in mg.input_dims))
        found = []
        for k, t in enumerate(targets):
            runtime = ({"onnxruntime": list(t.what)} if t.kind == "onnxruntime"
                       else {"openvino": t.what})
            # What Session runs: the model exported as one part on the device (folded
            # constants, the part file's own input dims), timed and profiled as it is.
            out = one_part(mg, t.device, runtime, Path(tmp) / f"answer{k}")
            manifest = json.loads((out / "partition.json").read_text())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                session = Session(out, options=options)
            given = {x: feeds[x] for x in manifest["graph_inputs"] if x in feeds}
            found.append((t, runtime, out, manifest, session, given))
        # the whole-model times first, before any profiler has run in this process (the
        # sessions timed after onnxruntime's and OpenVINO's profilers ran were slower: a
        # 860-node OCR model 10.8 ms on onnxruntime against 6.5 ms in the same sessions' way
        # without them)
        turns = {t.device: (session, given) for t, _, _, _, session, given in found}
        whole = paired_rounds(turns, repeats, BURST, warmup=warmup,
                              tick=lambda device: tick(device, 1),
                              min_seconds=WHOLE_SECONDS, max_rounds=10 * repeats)
        profiled = []
        for t, runtime, out, manifest, session, given in found:
            step = lambda: tick(t.device, 1)   # noqa: E731
            path = str(out / manifest["partitions"][0]["file"])
            if t.kind == "onnxruntime":
                recs = ort_profile.measure(mg, path, t.what, feeds, warmup=warmup,
                                           repeats=repeats, options=options, tick=step)
                floor = ort_profile.profiler_floor(t.what, options)
            else:
                recs = ov_profile.measure(mg, path, t.what, feeds, warmup=warmup,
                                          repeats=repeats, rule_device=t.device,
                                          options=options, tick=step)
                floor = 0.0
            profiled.append((t, runtime, recs, floor, session, given))
        found = profiled
        for k, (t, runtime, recs, floor, session, given) in enumerate(found):
            low, wall, high = quartiles(whole.figures[t.device])
            cost, per_tensor = part_cost(tiny, t.device, runtime, options)
            cost = min(cost, wall)
            # at most half of what the nodes take (a few noisy rounds must not leave them 0)
            switch = min(whole.switch_cost(t.device), (wall - cost) / 2)
            link = boundary_link(mg, t.device, runtime, Path(tmp) / f"cut{k}", session, given,
                                 options, warmup, repeats, cost, per_tensor)
            tick(t.device, 1)
            a = attribute(mg, recs, wall - cost - switch, measured=f"{wall * 1e3:.3f} ms",
                          floor=floor)
            devices[t.device] = DeviceProfile(
                a.node_seconds, part_cost=cost, runtime=t.label, repeats=repeats,
                warmup=warmup, total_seconds=wall, attributed=a.attributed, spread=a.spread,
                tensor_cost=per_tensor, shares=a.shares, link=link,
                total_spread=[low, high], switch_cost=switch)
    return Profile(model_info(mg, model), devices, execution=options.execution())


#: Timed runs of the whole model in each round (their median is the round's figure).
BURST = 3
#: The whole-model rounds last at least this long (at most ten times ``repeats`` rounds).
WHOLE_SECONDS = 3.0

#: A probe cut crosses at most this many tensors (the boundary cost per byte is measured
#: where few tensors carry many bytes).
PROBE_TENSORS = 2


def probe_cut(mg, problem) -> tuple[int, int, int] | None:
    """Where to cut the model in two to measure what a boundary costs: ``(k, tensors,
    bytes)`` with the nodes ``0..k`` (in the problem's topological order) in the first part,
    the cut crossing the most bytes among those crossing at most :data:`PROBE_TENSORS`
    tensors, between a tenth and nine tenths of the nodes; ``None`` when there is none."""
    n = problem.n
    if n < 4:
        return None
    delta_bytes = [0] * (n + 1)
    delta_count = [0] * (n + 1)
    for t, u in enumerate(problem.tensor_producer):
        if u < 0 or not problem.tensor_consumers[t]:
            continue
        last = max(problem.tensor_consumers[t])
        if last > u:     # crosses every cut k with u <= k < last
            delta_bytes[u] += problem.tensor_bytes[t]
            delta_bytes[last] -= problem.tensor_bytes[t]
            delta_count[u] += 1
            delta_count[last] -= 1
    best = None
    nbytes = count = 0
    for k in range(n - 1):
        nbytes += delta_bytes[k]
        count += delta_count[k]
        if not (n // 10 <= k <= n - 1 - n // 10) or not 0 < count <= PROBE_TENSORS:
            continue
        if best is None or nbytes > best[2]:
            best = (k, count, nbytes)
    return best


def boundary_link(mg, device: str, runtime: Mapping, folder: Path, whole: Session,
                  feeds: Mapping[str, Any], options: RunOptions, warmup: int, repeats: int,
                  part_cost: float, tensor_cost: float) -> dict | None:
    """What a tensor crossing a cut costs on ``device`` each way (docs/costs.md, "Boundary
    costs"): the model cut in two where few tensors carry many bytes (:func:`probe_cut`), both
    parts on the device, against the model in one part (``whole``), in paired rounds; what the
    cut adds beyond a part's cost, less ``tensor_cost`` per tensor and side, is shared per
    byte over both sides (the producing part writes each crossing tensor out, the reading part
    takes it in: a layout reorder, a copy, the fusion lost across the cut; a fused edge's
    bytes count twice, as the cost model moves them).  ``{"latency":
    tensor_cost, "bandwidth": bytes per second, or None when the cut added nothing}``;
    ``None`` when the model has no such cut."""
    from ..pipeline import replace_answer
    from ..solution import Solution
    from ..export.writer import write_result
    rules = {"version": 1, "devices": [{"name": device, "ops": {"supported": "all"},
                                        "value_inputs": "ignore", "runtime": dict(runtime)}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = solve(mg, rules, engine="heuristic")
        cut = probe_cut(mg, result.problem)
        if cut is None:
            return None
        k, tensors, _ = cut
        # what the cut's tensors move: their bytes, twice for a fused edge (times/fusion.py),
        # as the cost model prices them with the link measured here
        p = result.problem
        moved = volumes(p)
        nbytes = sum(moved[t] for t, u in enumerate(p.tensor_producer)
                     if 0 <= u <= k and p.tensor_consumers[t] and
                     max(p.tensor_consumers[t]) > k)
        sol = Solution(part_of=[0 if v <= k else 1 for v in range(result.problem.n)],
                       part_device=[0, 0], part_instance=[0, 0], algorithm="probe cut",
                       status="feasible")
        try:
            split = replace_answer(result, sol)
        except HeteroSolveError:
            return None
        out = write_result(split, folder, annotated=False, dots=False)
        session = Session(out, options=options)
    paired = []
    for r in range(warmup + repeats):
        times = []
        for s in ((whole, session) if r % 2 == 0 else (session, whole)):
            t0 = time.perf_counter()
            s.run(None, feeds)
            times.append(time.perf_counter() - t0)
        if r >= warmup:
            paired.append(times[1] - times[0] if r % 2 == 0 else times[0] - times[1])
    added = statistics.median(paired) - part_cost - 2 * tensors * tensor_cost
    bandwidth = 2 * nbytes / added if added > 0 and nbytes > 0 else None
    return {"latency": tensor_cost, "bandwidth": bandwidth}


def interleaved(sessions: Sequence[tuple[Session, Mapping[str, Any]]], warmup: int,
                repeats: int, ticks: Sequence[Callable[[], None]] = ()) -> list[list[float]]:
    """The seconds of ``repeats`` calls of each ``session.run(None, feeds)``, taken in
    rounds (each session once per round, in turn) after ``warmup`` rounds."""
    seconds: list[list[float]] = [[] for _ in sessions]
    for k in range(warmup + repeats):
        for j, (session, feeds) in enumerate(sessions):
            t0 = time.perf_counter()
            session.run(None, feeds)
            if k >= warmup:
                seconds[j].append(time.perf_counter() - t0)
            if j < len(ticks):
                ticks[j]()
    return seconds


def one_part(mg, device: str, runtime: Mapping, folder: Path) -> Path:
    """The answer that puts every node of ``mg`` on ``device`` (one part), written to
    ``folder`` as ``hetero-solve solve`` writes it."""
    rules = {"version": 1, "devices": [{"name": device, "ops": {"supported": "all"},
                                        "value_inputs": "ignore", "runtime": dict(runtime)}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = solve(mg, rules, engine="heuristic")
    return write_result(result, folder, annotated=False, dots=False)


def timed(session: Session, feeds: Mapping[str, Any], warmup: int, repeats: int,
          tick: Callable[[], None] = lambda: None) -> float:
    """The median seconds of ``repeats`` calls of ``session.run`` after ``warmup``."""
    seconds = []
    for k in range(warmup + repeats):
        t0 = time.perf_counter()
        session.run(None, feeds)
        if k >= warmup:
            seconds.append(time.perf_counter() - t0)
        tick()
    return statistics.median(seconds)


def tiny_session(folder: Path, parts: Sequence[tuple[str, tuple, tuple]], device: str,
                 runtime: Mapping, options: RunOptions) -> tuple[Session, list[str]]:
    """A ``Session`` over ``parts`` (file in ``folder``, inputs, outputs; run in order, all
    on ``device`` with the rule file's ``runtime``) and its graph inputs."""
    made = {o for _, _, outs in parts for o in outs}
    manifest = {"partitions": [{"id": k, "device": device, "file": file, "inputs": list(ins),
                                "outputs": list(outs)}
                               for k, (file, ins, outs) in enumerate(parts)],
                "graph_inputs": sorted({x for _, ins, _ in parts for x in ins} - made),
                "graph_outputs": list(parts[-1][2]),
                "devices": [{"name": device, "runtime": dict(runtime)}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(folder, manifest=manifest, options=options)
    return session, manifest["graph_inputs"]


#: Calls of the one- and two-part sessions whose medians give the per-part cost.
PART_REPEATS = 200


def part_cost(tiny: Path, device: str, runtime: Mapping, options: RunOptions
              ) -> tuple[float, float]:
    """What one more part costs a ``Session`` run on ``device`` (the median time of two
    one-node parts, ``Identity`` of one float each (:func:`_tiny_parts`), minus that of one),
    and what each further tensor in and out of a part costs (half of what a part passing two
    tensors takes more than one passing one)."""
    x = {"x": np.ones(1, np.float32), "x2": np.ones(1, np.float32)}
    shapes = [[("a.onnx", ("x",), ("y",))],
              [("a.onnx", ("x",), ("y",)), ("b.onnx", ("y",), ("z",))],
              [("c.onnx", ("x", "x2"), ("y", "y2"))]]
    sessions = []
    for parts in shapes:
        session, inputs = tiny_session(tiny, parts, device, runtime, options)
        sessions.append((session, {k: x[k] for k in inputs}))
    # paired rounds (one call of each in turn): a drift of the machine hits all three alike
    one, two, wide = interleaved(sessions, 10, PART_REPEATS)
    added = statistics.median(b - a for a, b in zip(one, two))
    further = statistics.median(c - a for a, c in zip(one, wide)) / 2
    return max(added, 0.0), max(further, 0.0)


def _tiny_parts(folder: str, dynamic: bool) -> Path:
    """``a.onnx`` (x -> y), ``b.onnx`` (y -> z), one ``Identity`` each, and ``c.onnx`` (x -> y,
    x2 -> y2) in ``folder``;
    with ``dynamic``, of a symbolic size (as the parts of a model with symbolic input dims
    are written: OpenVINO then plans every call, which a part pays each time)."""
    path = Path(folder) / "tiny"
    path.mkdir()
    dims = ["n"] if dynamic else [1]
    for name, pairs in {"a.onnx": [("x", "y")], "b.onnx": [("y", "z")],
                        "c.onnx": [("x", "y"), ("x2", "y2")]}.items():
        graph = helper.make_graph(
            [helper.make_node("Identity", [x], [y], name=f"identity_{y}") for x, y in pairs],
            "part", [helper.make_tensor_value_info(x, TensorProto.FLOAT, dims) for x, _ in pairs],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, dims) for _, y in pairs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        onnx.save(model, str(path / name))
    return path


def runs_needed(targets: Sequence[Target], warmup: int, repeats: int) -> int:
    """The ticks :func:`measure` makes in all (a progress bar's total)."""
    return len(targets) * (warmup + repeats + (1 + repeats) + 1)


def import_file(mg, model: str, device: str, runtime: Mapping, path: str,
                optimization: str = "all") -> DeviceProfile:
    """One device's times from a profiler's file: onnxruntime's trace JSON, or OpenVINO's
    per-layer report (benchmark_app ``-report_type detailed_counters``), told apart by their
    content.  Without a measured run time the per-part cost is 0 and only what no ONNX node
    could be named for is spread."""
    head = read_bytes(path, lambda why: ProfileError(path, why), limit=1 << 30)[:4096]
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if text.startswith(("[", "{")):
        want = (runtime or {}).get("onnxruntime") or "CPUExecutionProvider"
        providers = [want] if isinstance(want, str) else list(want)
        providers = [p for p in providers if p in _ort_providers()] or ["CPUExecutionProvider"]
        recs, wall, runs = ort_profile.import_trace(mg, path, model, providers, optimization)
        a = attribute(mg, recs, wall, measured=f"model_run {wall * 1e3:.3f} ms"
                      if wall else "")
        return DeviceProfile(a.node_seconds, part_cost=None,
                             runtime=f"onnxruntime-trace:{Path(path).name}", repeats=runs,
                             total_seconds=wall, attributed=a.attributed, spread=a.spread,
                             shares=a.shares)
    if "layerName" in text:
        recs, runs = ov_profile.import_report(mg, path, model)
        a = attribute(mg, recs)
        return DeviceProfile(a.node_seconds, part_cost=None,
                             runtime=f"openvino-report:{Path(path).name}", repeats=runs,
                             total_seconds=None, attributed=a.attributed, spread=a.spread,
                             shares=a.shares)
    raise ProfileError(path, "neither an onnxruntime profile (JSON trace events) nor an "
                             "OpenVINO per-layer report (layerName;execStatus;...)")
