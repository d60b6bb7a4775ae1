"""The OpenVINO backend of :mod:`hetero_solve.run`: each part file compiled by OpenVINO on its
device, so the parts hetero-solve proved are kept (HETERO, handed an affinity map, regroups
them: docs/runtimes.md).

Which OpenVINO device runs a part: ``RunOptions.backend_options["device_map"]`` (rule-file
device or device instance -> OpenVINO device name, e.g. ``{"NPU": "NPU", "CPU": "CPU"}``, or
``["ACC=GPU", "ACC.2=CPU"]``; a device with several instances runs instance ``i`` on
``DEVICE.i``: :mod:`hetero_solve.run.device_map`), else the device's ``runtime: {openvino:
DEVICE}`` in the rule file, else the rule file's name (``NAME.i`` for an instance) when this
OpenVINO has such a device, else ``CPU`` with a warning (as the onnxruntime backend falls back
to its CPU provider).  Other ``backend_options``:

- ``config``: properties for every ``compile_model`` (``{"PERFORMANCE_HINT": "LATENCY"}``);
- ``precise`` (default True): OpenVINO's CPU plugin computes in bfloat16 where the CPU has it;
  ``precise`` asks it for float32, so the parts reproduce the original's outputs.

OpenVINO is an optional extra (``pip install 'hetero-solve[openvino]'``); this module imports
it when the first part is loaded.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from ..errors import HeteroSolveError, one_line
from .device_map import parse_pairs, per_instance, target_of
from ..units import instance_label
from .backend import NodeTime, PartSpec, RunOptions, TensorInfo

#: OpenVINO element type names -> ONNX's type spelling (``TensorInfo.type``).
_TYPES = {"f32": "float", "f16": "float16", "f64": "double", "bf16": "bfloat16", "i64": "int64",
          "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64", "u32": "uint32",
          "u16": "uint16", "u8": "uint8", "boolean": "bool", "string": "string"}
#: Device names OpenVINO serves without hardware of their own.
_VIRTUAL = ("AUTO", "MULTI", "HETERO", "BATCH")

_CORE: Any = None


class OpenVINORunError(HeteroSolveError):
    """A part OpenVINO cannot read, compile or run (``str(e)`` is one line naming it)."""


def _core(precise: bool):
    """One OpenVINO core per process (plugins load once); CPU asked for float32 when
    ``precise``."""
    global _CORE
    if _CORE is None:
        try:
            import openvino as ov
        except ImportError:
            raise ImportError("the OpenVINO backend needs OpenVINO: pip install "
                              "'hetero-solve[openvino]'") from None
        _CORE = ov.Core()
    if precise:
        _CORE.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return _CORE


def device_for(part: PartSpec, options: RunOptions,
               available: list[str]) -> tuple[str, list[str]]:
    """The OpenVINO device of ``part`` (see the module docstring) and the warning a fallback
    to the CPU makes (``Session`` shows it once per device)."""
    mapped = parse_pairs(options.backend_options.get("device_map"))
    label = instance_label(part.device, part.instance, part.instances)
    if label in mapped or part.device in mapped:
        return target_of(mapped, part.device, part.instance, part.instances), []
    name = str((part.runtime or {}).get("openvino")
               or per_instance(part.device, part.instance, part.instances))
    if name in available or name.split(".")[0] in available or name.split(":")[0] in _VIRTUAL:
        return name, []
    return "CPU", [f"device {label}: OpenVINO has no such device here (no {name}; it has "
                   f"{', '.join(available)}); its parts run on CPU (map it to one of those "
                   f"with a device map, e.g. {part.device}=AUTO)"]


class OpenVINOPart:
    """One part compiled by OpenVINO (a :class:`~hetero_solve.run.backend.PartRunner`)."""

    def __init__(self, part: PartSpec, compiled, device: str, load_seconds: float,
                 profile: bool):
        self.part = part
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.providers = [device]
        self.location = ("openvino", device)
        self.load_seconds = load_seconds
        self.profile = profile
        self.warnings: list[str] = []
        self._times: dict[tuple[str, str], list[float]] = {}
        declared = set(part.inputs) | set(part.outputs)
        self.inputs = [_info(port, declared) for port in compiled.inputs]
        self.outputs = [_info(port, declared) for port in compiled.outputs]
        # every declared name a port carries (a part may output t and an alias of t)
        self._out_names = [[n for n in port.get_names() if n in declared] or [port.any_name]
                           for port in compiled.outputs]

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run once on ``feeds`` (every input by name); every output by name."""
        given = {info.name: np.asarray(feeds[info.name]) for info in self.inputs}
        try:
            values = self.request.infer(given)
        except Exception as e:   # noqa: BLE001 (OpenVINO raises RuntimeError for everything)
            raise OpenVINORunError(f"part {self.part.id} ({self.part.file.name}, "
                                   f"{self.providers[0]}): OpenVINO failed: {_line(e)}") from None
        out: dict[str, np.ndarray] = {}
        for port, names in zip(self.compiled.outputs, self._out_names):
            value = np.array(values[port], copy=True)
            for name in names:
                out[name] = value
        if self.profile:
            for info in self.request.get_profiling_info():
                key = (info.node_name, info.node_type)
                self._times.setdefault(key, []).append(info.real_time.total_seconds() * 1e6)
        return out

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def node_times(self) -> list[NodeTime]:
        """Per-node times (OpenVINO's performance counters) summed over the runs so far."""
        return [NodeTime(self.part.id, node, op_type, self.providers[0], sum(us), len(us))
                for (node, op_type), us in self._times.items()]


def load_part(part: PartSpec, options: RunOptions) -> OpenVINOPart:
    """Read ``part.file`` with OpenVINO and compile it on its device (the backend entry point
    :func:`hetero_solve.run.backend.load_backend` returns)."""
    backend = options.backend_options
    core = _core(bool(backend.get("precise", True)))
    device, warnings = device_for(part, options, list(core.available_devices))
    config = dict(backend.get("config") or {})
    if options.profile:
        config["PERF_COUNT"] = True
    if options.intra_op_threads and device.startswith("CPU"):
        config.setdefault("INFERENCE_NUM_THREADS", int(options.intra_op_threads))
    if device.startswith("CPU"):
        # what RunOptions.execution() records: one request at a time, as fast as it can
        config.setdefault("PERFORMANCE_HINT", "LATENCY")
        config.setdefault("NUM_STREAMS", 1)
    t0 = time.perf_counter()
    try:
        model = core.read_model(str(part.file))
        compiled = core.compile_model(model, device, config)
    except Exception as e:   # noqa: BLE001
        raise OpenVINORunError(f"part {part.id} ({part.file.name}, {device}): OpenVINO cannot "
                               f"load it: {_line(e)}") from None
    runner = OpenVINOPart(part, compiled, device, time.perf_counter() - t0, options.profile)
    runner.warnings = warnings
    return runner


def _info(port, declared: set[str]) -> TensorInfo:
    """A compiled model's port as :class:`TensorInfo`: the declared name it carries, ONNX's
    type spelling, dims as ints (None where dynamic)."""
    name = next((n for n in sorted(port.get_names()) if n in declared), port.any_name)
    kind = _TYPES.get(port.get_element_type().get_type_name(), "undefined")
    shape = port.get_partial_shape()
    dims = None if shape.rank.is_dynamic else tuple(
        d.get_length() if d.is_static else None for d in shape)
    return TensorInfo(name, f"tensor({kind})", dims)


def _line(e: BaseException) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    useful = [x for x in lines if not x.startswith("Exception from")]
    return one_line((useful or lines or [type(e).__name__])[-1])
