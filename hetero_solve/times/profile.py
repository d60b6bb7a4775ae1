"""The profile file: measured per-node times of one model on named devices (docs/costs.md,
"Profiles").

A profile belongs to a **model** (its node names, op types and the graph input shapes it was
measured at); a rule file belongs to hardware.  ``hetero-solve profile`` writes one, and
``--costs PROFILE.json`` reads it.  Stable API (what the cost model reads):

- :func:`read_profile` ``(path, model_graph=None) -> Profile``: checks the file, and, given the
  loaded model, that it is a profile *of that model*; every problem is one
  :class:`ProfileError` line;
- ``Profile.devices[name]`` (rule-file device name) is a :class:`DeviceProfile`:
  ``.node_seconds`` (ONNX node name -> seconds per run, the median of ``.repeats`` runs; a node
  absent has no measured time: use another cost source for it; ``0.0``: the runtime spent
  nothing on it, e.g. folded or fused away), ``.part_cost`` (seconds each part placed on the
  device costs beyond its nodes: the runtime's per-call overhead, with one input and one
  output), ``.switch_cost`` (seconds a part on the device takes more right after a part on
  another device), ``.tensor_cost`` (seconds per further tensor in or out of a part: a link's
  latency),
  ``.link`` (what a tensor crossing a cut costs each way, per tensor and per byte: the
  device's link in the cost model),
  ``.runtime`` (what measured it), ``.attributed`` (share of the measured time that went to named ONNX nodes) and
  ``.spread`` (how the rest was shared out);
- ``Profile.execution``: the execution settings the times were measured with (threads,
  how onnxruntime's threads spin, ...: ``RunOptions.execution()``), which an answer priced
  with the profile records and runs with; ``None`` when not known;
- :func:`write_profile` ``(profile, path)``; :func:`model_info` ``(model_graph, file)`` (what a
  new profile records about its model); :meth:`Profile.node_time` for one lookup.

The file is JSON (times in seconds)::

    {"format": "hetero-solve-profile", "version": 1,
     "model": {"file": "resnet.onnx", "nodes": 130, "fingerprint": "sha256:...",
               "input_shapes": {"image": [1, 3, 32, 32]}},
     "execution": {"threads": 0, "spinning": "stop", "optimization": "all", ...},
     "devices": {"CPU": {"runtime": "onnxruntime:CPUExecutionProvider", "repeats": 20,
                         "warmup": 3, "part_cost": 1.1e-05, "tensor_cost": 2e-06,
                         "total_seconds": 0.0021,
                         "attributed": 0.97, "spread": "...",
                         "node_seconds": {"conv1": 0.00012, "relu1": 4e-06}}}}

The fingerprint hashes every node's (unique) name and op type in graph order; the input shapes
are checked apart so that a profile measured at another batch size says so.

>>> p = Profile(ModelInfo("m.onnx", 2, "sha256:0", {}),
...             {"CPU": DeviceProfile({"a": 1e-3, "b": 0.0}, part_cost=2e-5, runtime="x")})
>>> p.node_time("CPU", "a"), p.devices["CPU"].part_cost, p.node_time("CPU", "zzz")
(0.001, 2e-05, None)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import HeteroSolveError
from ..readers import read_json

FORMAT = "hetero-solve-profile"
VERSION = 1


class ProfileError(HeteroSolveError):
    """A profile file that cannot be used: ``str(e)`` is one line naming the file, the key and
    the reason."""

    def __init__(self, path: object, reason: str, key: str = ""):
        self.path, self.key, self.reason = str(path), key, reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class ModelInfo:
    """The model a profile belongs to: its file name (informative), node count, fingerprint
    (:func:`fingerprint`) and the graph input shapes it was measured at."""

    file: str
    nodes: int
    fingerprint: str
    input_shapes: dict[str, list] = field(default_factory=dict)


@dataclass
class DeviceProfile:
    """One device's measured times (module doc).

    Attributes
    ----------
    node_seconds : dict of str to float
        ONNX node name -> seconds per run (median over the repeats).
    part_cost : float or None
        Seconds each part on this device costs beyond its nodes (call overhead); ``None``
        when not measured (an imported profiler file): the rule file's ``part_cost`` applies.
    runtime : str
        What measured it: ``onnxruntime:<provider>``, ``openvino:<device>``, or the file
        imported (``onnxruntime-json:<file>``).
    repeats, warmup : int
        Measured runs (medians over these) and runs discarded first.
    total_seconds : float or None
        Median time of the whole model in one call, as measured (``None`` when unknown).
    attributed : float
        Share (0..1) of the profiler's time that was attributed to named ONNX nodes.
    spread : str
        How the rest was shared out (e.g. in proportion to the attributed times).
    tensor_cost : float
        Seconds each further tensor a part reads or writes costs on this device (the
        runtime's copy in or out, beyond the one input and one output ``part_cost`` was
        measured with): a link's latency per tensor.  0 when not measured.
    shares : dict of str to float
        How the node times were found, as shares of their sum: ``measured`` (kernel times
        given to the ONNX nodes the runtime names for them), ``fused`` (kernel times given
        to the convolution or matrix product they were fused onto) and ``spread`` (time no
        kernel names, shared out).  Empty when not known.
    link : dict or None
        What a tensor crossing between two parts costs on this device, each way:
        ``{"latency": seconds per tensor, "bandwidth": bytes per second or None}`` (the
        runtime's copy, layout reorder and lost fusion at a cut, measured on a cut of the
        model itself: docs/costs.md, "Boundary costs"); it is the device's ``link`` in the
        cost model.  ``None`` when not measured.
    total_spread : list of float or None
        The middle half ``[q1, q3]`` of the whole-model times ``total_seconds`` is the median
        of: how far one run of the device moves (its noise).  ``None`` when not measured.
    switch_cost : float
        Seconds a part on this device takes more when it runs right after a part on another
        device (what the other runtime's turn left: caches, threads gone to sleep); measured
        as the whole model's first run after another device's, less its median (at most
        half of what its nodes take).  The cost
        model adds it to each part's fixed cost; 0 when not measured.
    """

    node_seconds: dict[str, float]
    part_cost: float | None = 0.0
    runtime: str = ""
    repeats: int = 0
    warmup: int = 0
    total_seconds: float | None = None
    attributed: float = 1.0
    spread: str = ""
    tensor_cost: float = 0.0
    shares: dict[str, float] = field(default_factory=dict)
    link: dict | None = None
    total_spread: list[float] | None = None
    switch_cost: float = 0.0

    def noise(self) -> float:
        """Half the middle half of the whole-model times, relative to their median (0 when
        not measured)."""
        if not self.total_spread or not self.total_seconds:
            return 0.0
        return max(self.total_spread[1] - self.total_spread[0], 0.0) / 2 / self.total_seconds

    def as_dict(self) -> dict:
        return {"runtime": self.runtime, "repeats": self.repeats, "warmup": self.warmup,
                **({"part_cost": self.part_cost} if self.part_cost is not None else {}),
                "tensor_cost": self.tensor_cost,
                **({"switch_cost": self.switch_cost} if self.switch_cost else {}),
                **({"link": dict(self.link)} if self.link else {}),
                "total_seconds": self.total_seconds,
                **({"total_spread": list(self.total_spread)} if self.total_spread else {}),
                "attributed": self.attributed, "spread": self.spread,
                **({"shares": dict(self.shares)} if self.shares else {}),
                "node_seconds": dict(self.node_seconds)}


@dataclass
class Profile:
    """Measured times of one model on named devices (module doc)."""

    model: ModelInfo
    devices: dict[str, DeviceProfile]
    path: str = ""
    #: The execution settings the times were measured with
    #: (:meth:`hetero_solve.run.backend.RunOptions.execution`); ``None``: not known (an
    #: imported profiler file, a profile written before they were recorded).
    execution: dict | None = None

    def node_time(self, device: str, node: str) -> float | None:
        """Seconds of ``node`` on ``device``, ``None`` when the profile has none."""
        d = self.devices.get(device)
        return None if d is None else d.node_seconds.get(node)

    def as_dict(self) -> dict:
        m = self.model
        return {"format": FORMAT, "version": VERSION,
                "model": {"file": m.file, "nodes": m.nodes, "fingerprint": m.fingerprint,
                          "input_shapes": {k: list(v) for k, v in m.input_shapes.items()}},
                **({"execution": dict(self.execution)} if self.execution else {}),
                "devices": {name: d.as_dict() for name, d in self.devices.items()}}


# -- the model a profile belongs to ------------------------------------------------------------

def fingerprint(names, op_types) -> str:
    """``sha256:<hex>`` of every node's name and op type, in graph order."""
    h = hashlib.sha256()
    for name, op in zip(names, op_types):
        h.update(f"{name}\t{op}\n".encode())
    return "sha256:" + h.hexdigest()


def input_shapes(mg) -> dict[str, list]:
    """The graph input shapes of a loaded model as a profile records them (an int per known
    dim, the dim's name or ``None`` otherwise)."""
    out = {}
    for x in mg.graph_inputs:
        shape = mg.types[x].shape
        out[x] = None if shape is None else list(shape)
    return out


def model_info(mg, file: str | os.PathLike) -> ModelInfo:
    """What a profile of the loaded model ``mg`` (a :class:`~hetero_solve.model.ModelGraph`)
    records about it; ``file`` is kept as its base name."""
    return ModelInfo(Path(file).name, len(mg.names), fingerprint(mg.names, mg.op_types),
                     input_shapes(mg))


def check_model(profile: Profile, mg, path: str = "") -> None:
    """Raise :class:`ProfileError` unless ``profile`` was measured on the model ``mg`` at its
    input shapes (a dim the model leaves symbolic matches any measured value)."""
    where = path or profile.path or "profile"
    names = set(mg.names)
    for dev, d in profile.devices.items():
        unknown = [n for n in d.node_seconds if n not in names]
        if unknown:
            raise ProfileError(where, f"node {unknown[0]!r} is not in the model "
                               f"{Path(mg.path).name if mg.path else ''} ({len(unknown)} of "
                               f"{len(d.node_seconds)} profiled nodes are not): a profile of "
                               f"another model? Profile this one with hetero-solve profile",
                               f"devices.{dev}.node_seconds")
    if profile.model.nodes != len(mg.names) or \
            profile.model.fingerprint != fingerprint(mg.names, mg.op_types):
        raise ProfileError(where, f"profiled on a model of {profile.model.nodes} nodes "
                           f"({profile.model.file}), this one has {len(mg.names)} or other op "
                           "types (the fingerprint differs): profile this model again",
                           "model.fingerprint")
    have = input_shapes(mg)
    for x, measured in profile.model.input_shapes.items():
        if x not in have:
            raise ProfileError(where, f"graph input {x!r} is not an input of this model",
                               f"model.input_shapes.{x}")
        now = have[x]
        if measured is None or now is None:
            continue
        if len(measured) != len(now) or any(
                isinstance(a, int) and isinstance(b, int) and a != b
                for a, b in zip(measured, now)):
            raise ProfileError(where, f"measured at {x} {_shape(measured)}, the model is loaded "
                               f"at {_shape(now)}: give --shape {x}={_shape(measured, ',')} "
                               "(or --dim), or profile at these shapes",
                               f"model.input_shapes.{x}")


def _shape(dims, sep: str = ", ") -> str:
    text = sep.join("?" if d is None else str(d) for d in dims)
    return text if sep == "," else f"[{text}]"


# -- reading and writing -----------------------------------------------------------------------

def read_profile(path: str | os.PathLike, model_graph=None) -> Profile:
    """A profile file, checked (module doc); with ``model_graph`` (a loaded
    :class:`~hetero_solve.model.ModelGraph`) also checked to belong to that model.

    Raises
    ------
    ProfileError
        The file cannot be read, is not a profile, has a time that is missing, negative, not
        a number or not finite, or belongs to another model (node names, op types or input
        shapes differ).
    """
    path = str(path)
    data = read_json(path, lambda why: ProfileError(path, why))
    profile = profile_of(data, path)
    if model_graph is not None:
        check_model(profile, model_graph, path)
    return profile


def profile_of(data: Any, path: str = "profile") -> Profile:
    """A profile from its JSON data (as :func:`read_profile` reads it), checked."""
    def fail(key: str, reason: str):
        return ProfileError(path, reason, key)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise fail("", f"not a hetero-solve profile (no \"format\": \"{FORMAT}\"): write one "
                       "with hetero-solve profile MODEL RULES -o PROFILE.json")
    if data.get("version") != VERSION:
        raise fail("version", f"version {data.get('version')!r} is not one this hetero-solve "
                              f"reads ({VERSION})")
    m = _mapping(data, "model", fail)
    nodes = m.get("nodes")
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 0:
        raise fail("model.nodes", f"expected a node count, got {nodes!r}")
    fp = m.get("fingerprint")
    if not isinstance(fp, str) or not fp:
        raise fail("model.fingerprint", f"expected a string, got {fp!r}")
    shapes = m.get("input_shapes") or {}
    if not isinstance(shapes, dict) or not all(
            s is None or (isinstance(s, list) and all(
                d is None or isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool))
                for d in s)) for s in shapes.values()):
        raise fail("model.input_shapes", "expected input name -> list of dims")
    info = ModelInfo(str(m.get("file") or ""), nodes, fp, dict(shapes))
    devices = {}
    for name, d in _mapping(data, "devices", fail).items():
        key = f"devices.{name}"
        if not isinstance(d, dict):
            raise fail(key, f"expected a mapping, got {type(d).__name__}")
        ns = d.get("node_seconds")
        if not isinstance(ns, dict):
            raise fail(f"{key}.node_seconds", "missing: expected ONNX node name -> seconds")
        times = {str(n): _seconds(t, f"{key}.node_seconds.{n}", fail) for n, t in ns.items()}
        total = d.get("total_seconds")
        devices[str(name)] = DeviceProfile(
            times, part_cost=(None if d.get("part_cost", None) is None and "part_cost" not in d
                              else _seconds(d.get("part_cost"), f"{key}.part_cost", fail)),
            runtime=str(d.get("runtime") or ""), repeats=_count(d, "repeats", key, fail),
            warmup=_count(d, "warmup", key, fail),
            total_seconds=None if total is None else _seconds(total, f"{key}.total_seconds",
                                                              fail),
            attributed=_share(d.get("attributed", 1.0), f"{key}.attributed", fail),
            spread=str(d.get("spread") or ""),
            tensor_cost=_seconds(d.get("tensor_cost", 0.0), f"{key}.tensor_cost", fail),
            shares=_shares(d.get("shares"), f"{key}.shares", fail),
            link=_link(d.get("link"), f"{key}.link", fail),
            total_spread=_spread(d.get("total_spread"), f"{key}.total_spread", fail),
            switch_cost=_seconds(d.get("switch_cost", 0.0), f"{key}.switch_cost", fail))
    execution = data.get("execution")
    if execution is not None and not isinstance(execution, dict):
        raise fail("execution", f"expected a mapping of execution settings, got "
                                f"{type(execution).__name__}")
    return Profile(info, devices, path, execution)


def _mapping(data: dict, key: str, fail) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise fail(key, "missing: expected a mapping" if value is None
                   else f"expected a mapping, got {type(value).__name__}")
    return value


def _seconds(value: Any, key: str, fail) -> float:
    if value is None:
        raise fail(key, "missing time (null): give seconds, or leave the node out")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(key, f"expected seconds (a number), got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise fail(key, f"expected seconds >= 0, got {value!r}")
    return float(value)


def _spread(value: Any, key: str, fail) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise fail(key, f"expected [first quartile, third quartile] in seconds, got {value!r}")
    low, high = (_seconds(v, key, fail) for v in value)
    if low > high:
        raise fail(key, f"expected the first quartile <= the third, got {value!r}")
    return [low, high]


def _link(value: Any, key: str, fail) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise fail(key, f"expected {{latency: seconds, bandwidth: bytes per second}}, got "
                        f"{type(value).__name__}")
    latency = _seconds(value.get("latency", 0.0), f"{key}.latency", fail)
    bandwidth = value.get("bandwidth")
    if bandwidth is not None:
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or \
                not math.isfinite(bandwidth) or bandwidth <= 0:
            raise fail(f"{key}.bandwidth", f"expected bytes per second > 0 (or null), got "
                                           f"{bandwidth!r}")
        bandwidth = float(bandwidth)
    return {"latency": latency, "bandwidth": bandwidth}


def _shares(value: Any, key: str, fail) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(key, f"expected a mapping of shares, got {type(value).__name__}")
    return {str(k): _share(v, f"{key}.{k}", fail) for k, v in value.items()}


def _share(value: Any, key: str, fail) -> float:
    x = _seconds(value, key, fail)
    if x > 1:
        raise fail(key, f"expected a share between 0 and 1, got {value!r}")
    return x


def _count(d: Mapping, name: str, key: str, fail) -> int:
    value = d.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(f"{key}.{name}", f"expected a count >= 0, got {value!r}")
    return value


def write_profile(profile: Profile, path: str | os.PathLike) -> None:
    """Write ``profile`` as JSON to ``path`` (through a temporary file, so an interrupted
    write leaves nothing half-written)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(profile.as_dict(), indent=1) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
