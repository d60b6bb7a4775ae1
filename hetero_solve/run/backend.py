"""What a runtime must provide so that :class:`hetero_solve.Session` runs parts on it.

A *backend* loads one part file and returns a :class:`PartRunner`; the session loads every part
once, runs them in id order and passes tensors between them by name.  onnxruntime is the
default backend (:mod:`hetero_solve.run.onnxruntime`); OpenVINO plugs in the same way
(``hetero_solve/run/openvino.py``).  A backend is a module named in :data:`BACKENDS` with a
function ``load_part(part: PartSpec, options: RunOptions) -> PartRunner``; it is imported only
when a session asks for it, so a backend's runtime is never needed by the rest of the package.

Values between parts.  ``PartRunner.run`` takes numpy arrays or values that a runner of the
same ``location`` returned, and returns either (onnxruntime returns ``OrtValue`` objects that
stay where its provider put them).  The session hands a value to the next part as it is when
both runners have the same ``location``, and through ``to_numpy`` of the runner that made it
otherwise; graph outputs always leave through ``to_numpy``.  So a tensor that stays on one
provider is never copied between parts.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ..units import instance_label

#: Backend name -> module holding its ``load_part``.  Imported on first use only.
BACKENDS: dict[str, str] = {
    "onnxruntime": "hetero_solve.run.onnxruntime",
    "openvino": "hetero_solve.run.openvino",
}


@dataclass(frozen=True)
class TensorInfo:
    """A part's input or output as the runtime declares it, like onnxruntime's ``NodeArg``.

    ``type`` is ONNX's spelling (``tensor(float)``), ``shape`` a tuple of ints, dim names and
    ``None`` (unknown), or ``None`` when the rank is unknown."""
    name: str
    type: str
    shape: tuple | None


@dataclass(frozen=True)
class PartSpec:
    """One part as ``partition.json`` lists it, with what a backend needs to load it.

    ``runtime`` is the device's ``runtime:`` mapping from the rule file (as ``partition.json``
    keeps it under ``devices``), e.g. ``{"onnxruntime": ["CUDAExecutionProvider"]}``;
    ``instances`` the device's instance count (``label``: ``NPU``, or ``ACC.1`` for instance 1
    of several)."""
    id: int
    device: str
    file: Path
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    instance: int = 0
    runtime: Mapping[str, Any] = field(default_factory=dict)
    instances: int = 1

    @property
    def label(self) -> str:
        """The device instance as every output shows it (``NPU``, ``ACC.1``)."""
        return instance_label(self.device, self.instance, self.instances)


#: onnxruntime's graph optimisation levels by the names ``--optimization`` takes.
OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")


#: How onnxruntime's intra-op threads wait (``RunOptions.spinning``): ``stop``: they spin
#: inside a run and stop when it returns (``session.force_spinning_stop``), so they take no core
#: from the part that runs next; ``on``: onnxruntime's default, they go on spinning after a
#: run (measured here: ~35 ms of a core after each run, which an OpenVINO part right after
#: one ran 1.77x slower for); ``off``: they never spin (``session.intra_op.allow_spinning``
#: 0: every parallel section wakes them, slower on models of many small nodes).
SPINNING = ("stop", "on", "off")


@dataclass(frozen=True)
class RunOptions:
    """Settings every part of a session is loaded with (and, for ``verify``, the original).

    ``optimization``: onnxruntime's graph optimisation level (``all`` is its default);
    ``profile``: record per-node times; ``intra_op_threads``: threads per part, onnxruntime's
    intra-op threads and OpenVINO's ``INFERENCE_NUM_THREADS`` (0 = the runtime's default);
    ``spinning``: how onnxruntime's threads wait (:data:`SPINNING`); ``backend_options``:
    free settings a backend documents (OpenVINO's device map, say).

    The settings that change how fast a part runs are its *execution settings*
    (:meth:`execution`): a profile records those it was measured with, ``partition.json``
    those of the profile its answer was priced with, and a ``Session`` of that answer runs
    with them unless told otherwise (docs/costs.md, "Execution settings")."""
    optimization: str = "all"
    profile: bool = False
    intra_op_threads: int = 0
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    spinning: str = "stop"

    def execution(self) -> dict:
        """The execution settings as a profile and ``partition.json`` record them:
        ``threads`` (per part, 0 = the runtime's default), ``spinning``
        (:data:`SPINNING`), ``optimization`` (onnxruntime's graph optimisation level), and
        what each runtime is set to from them (fixed here, recorded so that a reader knows
        what ran): onnxruntime's thread pool (one per part, its threads stopped between
        runs unless ``spinning`` is ``on``), OpenVINO's latency hint with one stream."""
        return {"threads": int(self.intra_op_threads), "spinning": self.spinning,
                "optimization": self.optimization,
                "onnxruntime": {"thread_pool": "per part",
                                **ort_spinning_entries(self.spinning)},
                "openvino": {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}}

    @classmethod
    def of_execution(cls, settings: Mapping[str, Any] | None, **kw) -> "RunOptions":
        """Options that run with recorded execution ``settings`` (:meth:`execution`'s; keys
        it lacks keep their defaults); ``kw`` sets the other fields."""
        s = dict(settings or {})
        given = {}
        if isinstance(s.get("threads"), int) and not isinstance(s.get("threads"), bool):
            given["intra_op_threads"] = s["threads"]
        if s.get("spinning") in SPINNING:
            given["spinning"] = s["spinning"]
        if s.get("optimization") in OPTIMIZATION_LEVELS:
            given["optimization"] = s["optimization"]
        return cls(**{**given, **kw})


def ort_spinning_entries(spinning: str) -> dict[str, str]:
    """The onnxruntime session config entries of a :data:`SPINNING` setting."""
    if spinning not in SPINNING:
        raise ValueError(f"spinning {spinning!r}: expected one of {', '.join(SPINNING)}")
    return {"stop": {"session.force_spinning_stop": "1"},
            "off": {"session.intra_op.allow_spinning": "0"},
            "on": {}}[spinning]


def execution_differences(recorded: Mapping[str, Any] | None,
                          used: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The execution settings (``threads``, ``spinning``, ``optimization``) in which
    ``recorded`` (a profile's, an answer's) and ``used`` (a run's) differ, as (key, recorded
    value, used value); [] when nothing was recorded."""
    if not recorded:
        return []
    return [(key, recorded[key], used.get(key)) for key in ("threads", "spinning", "optimization")
            if key in recorded and recorded[key] != used.get(key)]


def execution_warning(where: str, recorded: Mapping[str, Any] | None,
                      used: Mapping[str, Any]) -> str | None:
    """One line when a run's execution settings differ from those its times were measured
    with (both named), else None."""
    diff = execution_differences(recorded, used)
    if not diff:
        return None
    def text(key, value) -> str:
        return f"{key} {value}" + (" (the runtime's default)"
                                   if key == "threads" and value == 0 else "")
    then = ", ".join(text(k, r) for k, r, _ in diff)
    now = ", ".join(text(k, u) for k, _, u in diff)
    return (f"{where}: the answer's times were measured with {then}; this run uses {now}: "
            f"its parts may not run as fast as predicted")


@dataclass(frozen=True)
class NodeTime:
    """One node's run time in one part, from the runtime's profiler (microseconds, summed
    over the runs since the part was loaded)."""
    part: int
    node: str
    op_type: str
    provider: str
    microseconds: float
    calls: int


@runtime_checkable
class PartRunner(Protocol):
    """One loaded part, ready to run many times.

    Attributes
    ----------
    inputs, outputs : list of TensorInfo
        What the part reads and makes, as its runtime declares them.
    providers : list of str
        What actually runs it (onnxruntime's providers in use, an OpenVINO device name).
    location : hashable
        Where its values live: two runners with equal ``location`` take each other's values
        as they are (``("onnxruntime", "cpu")``).
    load_seconds : float
        Time taken to load (create the session, compile the model).
    """
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    providers: list[str]
    location: Hashable
    load_seconds: float

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Run once on ``feeds`` (every input by name); every output by name."""
        ...

    def to_numpy(self, value: Any) -> np.ndarray:
        """A value this runner returned, as a numpy array (a copy only when it must move)."""
        ...

    def node_times(self) -> list[NodeTime]:
        """Per-node times since loading when loaded with ``profile=True``, else ``[]``."""
        ...


def backend_of(part: PartSpec) -> str:
    """The backend a part runs on by default: ``openvino`` when its device's ``runtime:``
    names OpenVINO and not onnxruntime, else ``onnxruntime``."""
    runtime = part.runtime or {}
    return "openvino" if runtime.get("openvino") and not runtime.get("onnxruntime") \
        else "onnxruntime"


def part_backend(part: PartSpec, backend: str | Mapping[str, str] = "auto") -> str:
    """The backend ``part`` runs on when a session is given ``backend`` (a name, or device
    name -> name): ``auto`` (and a device a mapping does not name) is :func:`backend_of`."""
    name = backend if isinstance(backend, str) else backend.get(part.device, "auto")
    return backend_of(part) if name == "auto" else name


def check_backend(backend: str | Mapping[str, str]) -> None:
    """Refuse a backend name that is neither ``auto`` nor one of :data:`BACKENDS` (a mapping:
    each of its values), before anything is loaded or drawn, naming the closest one.

    Raises
    ------
    ValueError
        With the name, the closest name and every choice.
    """
    choices = ("auto", *BACKENDS)
    for name in ([backend] if isinstance(backend, str) else list(backend.values())):
        if name not in choices:
            close = difflib.get_close_matches(str(name), choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown backend {name!r}{hint}: expected one of "
                             f"{', '.join(choices)}")


def load_backend(name: str):
    """The ``load_part`` function of backend ``name`` (one of :data:`BACKENDS`).

    Raises
    ------
    ValueError
        ``name`` is no backend.
    ImportError
        Its runtime is not installed (the message says what to install).
    """
    check_backend(name)
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r} is chosen per part: ask part_backend() first")
    return importlib.import_module(BACKENDS[name]).load_part


def tensor_infos(args: Sequence[Any]) -> list[TensorInfo]:
    """onnxruntime ``NodeArg`` objects (or anything with ``name``, ``type``, ``shape``) as
    :class:`TensorInfo`."""
    return [TensorInfo(a.name, a.type, None if a.shape is None else tuple(a.shape))
            for a in args]
