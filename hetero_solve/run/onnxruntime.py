"""The onnxruntime backend: one ``InferenceSession`` per part, loaded once; what a part returns
is handed to the next part as it is (no copy while the tensors stay on one provider's device).
On the CPU that is ``InferenceSession.run`` with numpy arrays (it wraps an input array without
copying and returns arrays over its own buffers: measured faster than I/O binding there, see
``benchmarks/results/session.md``); on a device provider (CUDA, DirectML), and for element
types numpy lacks (bfloat16, float8), I/O binding with ``OrtValue`` objects, which stay in the
device's memory between parts.

Every session here, parts and original alike, is made by :func:`session_options` from one
:class:`~hetero_solve.run.backend.RunOptions`: ``verify`` runs both sides with the same
settings.  Each part runs with the execution providers its device's ``runtime: {onnxruntime:
...}`` names in the rule file, CPU when none is given or available (:func:`resolve_providers`).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from .backend import (NodeTime, PartSpec, RunOptions, TensorInfo, ort_spinning_entries,
                      tensor_infos)
from .common import RunError, ort_line

DEFAULT_PROVIDERS = ["CPUExecutionProvider"]
#: The device name ``IOBinding.bind_output`` takes for a provider's outputs (those not listed
#: keep their outputs in CPU memory).
_OUTPUT_DEVICE = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "cuda",
                  "ROCMExecutionProvider": "cuda", "DmlExecutionProvider": "dml"}


def resolve_providers(device: Mapping) -> tuple[list[str], list[str]]:
    """Execution providers for a device's parts and warnings about the ones dropped.

    The device's ``runtime.onnxruntime`` (a name or a list, in preference order) is kept in
    order where this onnxruntime has it; CPU is always appended as the last resort."""
    import onnxruntime as ort
    wanted = (device.get("runtime") or {}).get("onnxruntime")
    if not wanted:
        return list(DEFAULT_PROVIDERS), []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    have = set(ort.get_available_providers())
    known = set(ort.get_all_providers())
    chosen = [p for p in wanted if p in have]
    warnings = []
    name = device.get("name", "?")
    for p in wanted:
        if p in have:
            continue
        why = ("is not available in this onnxruntime build" if p in known
               else "is not an onnxruntime execution provider")
        warnings.append(f"device {name}: {p} {why}; its parts fall back to "
                        f"{(chosen or DEFAULT_PROVIDERS)[0]}")
    if "CPUExecutionProvider" not in chosen:
        chosen.append("CPUExecutionProvider")
    return chosen, warnings


def session_options(options: RunOptions | None = None, *, profile_prefix: str | None = None):
    """The ``SessionOptions`` of every session: the graph optimisation level of ``options``
    (onnxruntime's default, ``all``, unless asked), its thread count and how its threads
    spin (:data:`~hetero_solve.run.backend.SPINNING`), profiling into
    ``profile_prefix``; onnxruntime's own log at error level on a terminal and silent
    otherwise (its lines are coloured, and its errors reach the user anyway, in one line)."""
    import onnxruntime as ort
    options = options or RunOptions()
    levels = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    if options.optimization not in levels:
        raise RunError(f"--optimization {options.optimization!r}: expected one of "
                       f"{', '.join(levels)}")
    level = 3 if sys.stderr.isatty() else 4
    ort.set_default_logger_severity(level)
    opts = ort.SessionOptions()
    opts.log_severity_level = level
    opts.graph_optimization_level = levels[options.optimization]
    if options.intra_op_threads:
        opts.intra_op_num_threads = int(options.intra_op_threads)
    for key, value in ort_spinning_entries(options.spinning).items():
        opts.add_session_config_entry(key, value)
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return opts


class OrtPartRunner:
    """One onnxruntime session (a part, or the original model for ``verify``), following
    :class:`~hetero_solve.run.backend.PartRunner`."""

    def __init__(self, source: str | bytes, providers: Sequence[str], options: RunOptions, *,
                 label: str, part: int = -1):
        import onnxruntime as ort
        self.label, self.part = label, part
        self._profile_dir = tempfile.mkdtemp(prefix="hetero-solve-profile-") \
            if options.profile else None
        prefix = os.path.join(self._profile_dir, "part") if self._profile_dir else None
        t0 = time.perf_counter()
        try:
            self.session = ort.InferenceSession(source, session_options(options,
                                                                        profile_prefix=prefix),
                                                providers=list(providers))
        except Exception as e:
            raise RunError(f"{label}: onnxruntime cannot load it: {ort_line(e)}") from None
        self.load_seconds = time.perf_counter() - t0
        self.providers = list(self.session.get_providers())
        self.device = _OUTPUT_DEVICE.get(self.providers[0], "cpu")
        self.location = ("onnxruntime", self.device)
        self.inputs: list[TensorInfo] = tensor_infos(self.session.get_inputs())
        self.outputs: list[TensorInfo] = tensor_infos(self.session.get_outputs())
        self.warnings: list[str] = []
        self._names = [o.name for o in self.outputs]
        # I/O binding handles tensors only; strings, sequences and maps go through run().
        self._plain = any(not t.type.startswith("tensor(") or t.type == "tensor(string)"
                          for t in self.inputs + self.outputs)
        raw = any(("bfloat16" in t.type or "float8" in t.type) for t in self.inputs + self.outputs)
        self.binding = not self._plain and (self.device != "cpu" or raw)
        self._binding = self.session.io_binding() if self.binding else None
        self._node_times: list[NodeTime] | None = None

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Run once; outputs are numpy arrays, or ``OrtValue`` objects where the part runs
        with I/O binding (:attr:`binding`)."""
        import onnxruntime as ort
        missing = [t.name for t in self.inputs if t.name not in feeds]
        if missing:
            raise RunError(f"{self.label}: input {missing[0]!r} was not given")
        try:
            if not self.binding:
                values = self.session.run(self._names, {t.name: self.to_numpy(feeds[t.name])
                                                        for t in self.inputs})
                return dict(zip(self._names, values))
            b = self._binding
            b.clear_binding_inputs()
            b.clear_binding_outputs()
            keep = []   # the arrays bound inputs point into, alive until the run ends
            for t in self.inputs:
                value = feeds[t.name]
                if not isinstance(value, ort.OrtValue):
                    value = _ortvalue(value, self.device)
                keep.append(value)
                b.bind_ortvalue_input(t.name, value)
            for name in self._names:
                b.bind_output(name, self.device)
            self.session.run_with_iobinding(b)
            return dict(zip(self._names, b.get_outputs()))
        except RunError:
            raise
        except Exception as e:
            raise RunError(f"{self.label}: onnxruntime failed: {ort_line(e)}") from None

    def to_numpy(self, value: Any) -> Any:
        """An ``OrtValue`` as a numpy array (CPU tensors without a copy); anything else as
        it is."""
        import onnxruntime as ort
        if not isinstance(value, ort.OrtValue):
            return value
        if value.is_tensor() and value.element_type() in _RAW_TYPES:
            return _raw_numpy(value)
        return value.numpy()

    def node_times(self) -> list[NodeTime]:
        """Per-node times of the runs since loading, from onnxruntime's profiler.  The first
        call ends profiling (later runs are not recorded) and removes its file."""
        if self._profile_dir is None:
            return []
        if self._node_times is None:
            path = self.session.end_profiling()
            try:
                self._node_times = parse_profile(Path(path), self.part)
            finally:
                Path(path).unlink(missing_ok=True)
                try:
                    os.rmdir(self._profile_dir)
                except OSError:
                    pass
        return list(self._node_times)


def parse_profile(path: Path, part: int) -> list[NodeTime]:
    """Kernel times per node from an onnxruntime profile (Chrome trace JSON), in the order
    nodes first ran."""
    events = json.loads(path.read_text())
    times: dict[str, list] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        args = e.get("args", {})
        node = e["name"][: -len("_kernel_time")]
        entry = times.setdefault(node, [args.get("op_name", ""), args.get("provider", ""), 0.0, 0])
        entry[2] += float(e.get("dur", 0))
        entry[3] += 1
    return [NodeTime(part, node, op, provider, us, calls)
            for node, (op, provider, us, calls) in times.items()]


#: Element types numpy has no dtype for in onnxruntime's bindings (bfloat16, float8, int4,
#: ...): read from the tensor's memory and viewed as the ``ml_dtypes`` type onnx maps them to.
_RAW_TYPES = {onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT8E4M3FN,
              onnx.TensorProto.FLOAT8E4M3FNUZ, onnx.TensorProto.FLOAT8E5M2,
              onnx.TensorProto.FLOAT8E5M2FNUZ}


def _raw_numpy(value) -> np.ndarray:
    if value.device_name().lower() != "cpu":
        raise RunError(f"a {onnx.TensorProto.DataType.Name(value.element_type())} tensor "
                       f"on {value.device_name()} cannot be read back here")
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.element_type()))
    shape = tuple(value.shape())
    count = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = (ctypes.c_uint8 * count).from_address(value.data_ptr()) if count else b""
    return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape)


def _ortvalue(value: Any, device: str):
    """A numpy array as an ``OrtValue`` on ``device`` (on the CPU it shares the array's
    memory); ``ml_dtypes`` arrays (bfloat16, float8) with their ONNX element type."""
    import onnxruntime as ort
    arr = np.ascontiguousarray(value)
    if arr.dtype.kind == "V":
        elem = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
        bits = arr.view(np.uint8 if arr.dtype.itemsize == 1 else np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, elem)
    return ort.OrtValue.ortvalue_from_numpy(arr, device, 0)


def with_provider_options(providers: Sequence[str], runtime: Mapping) -> list:
    """``providers`` as ``InferenceSession`` takes them, each with the options the device's
    ``runtime.onnxruntime_options`` gives it: ``(name, {option: "value"})`` (onnxruntime
    reads option values as strings; true/false as 1/0)."""
    given = (runtime or {}).get("onnxruntime_options") or {}

    def text(value) -> str:
        return ("1" if value else "0") if isinstance(value, bool) else str(value)
    return [(p, {k: text(v) for k, v in given[p].items()}) if given.get(p) else p
            for p in providers]


def load_part(part: PartSpec, options: RunOptions) -> OrtPartRunner:
    """The backend's entry point: ``part`` in a session on its device's providers, with their
    options from the rule file; a provider this onnxruntime lacks is dropped with a warning
    in the runner's ``warnings``."""
    providers, warnings = resolve_providers({"name": part.device, "runtime": part.runtime})
    if not part.file.is_file():
        raise RunError(f"part {part.id}: {part.file}: no such file")
    runner = OrtPartRunner(str(part.file), with_provider_options(providers, part.runtime),
                           options, part=part.id,
                           label=f"part {part.id} ({part.file.name}, {part.device})")
    runner.warnings = warnings
    return runner


def load_model(model: str | os.PathLike | onnx.ModelProto, options: RunOptions | None = None,
               providers: Sequence[str] = DEFAULT_PROVIDERS) -> OrtPartRunner:
    """A whole model (the original, for ``verify``) in one session with ``options``; by path
    when there is one, so onnxruntime reads external data itself (no 2 GiB limit)."""
    if isinstance(model, onnx.ModelProto):
        return OrtPartRunner(model.SerializeToString(), providers, options or RunOptions(),
                             label="the model: the original model")
    return OrtPartRunner(str(model), providers, options or RunOptions(),
                         label=f"{model}: the original model")


def run_original_timed(model: str | os.PathLike | onnx.ModelProto,
                       feeds: Mapping[str, np.ndarray], options: RunOptions | None = None,
                       repeat: int = 0) -> tuple[dict[str, np.ndarray], float, float]:
    """The unpartitioned model on onnxruntime's CPU provider with ``options``: its outputs,
    the seconds to load (create the session) and to run: the first run's, or with
    ``repeat`` the median of that many warm runs after it."""
    runner = load_model(model, options)
    given = {t.name: feeds[t.name] for t in runner.inputs}
    t0 = time.perf_counter()
    values = runner.run(given)
    seconds = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        runner.run(given)
        times.append(time.perf_counter() - t0)
    if times:
        seconds = statistics.median(times)
    return ({k: runner.to_numpy(v) for k, v in values.items()}, runner.load_seconds, seconds)


def run_original(model: str | os.PathLike | onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                 options: RunOptions | None = None) -> dict[str, np.ndarray]:
    """:func:`run_original_timed` without the times."""
    return run_original_timed(model, feeds, options)[0]


# -- annotation-based partitioning (onnxruntime's layer_ann) ----------------------------------

#: What onnxruntime needs for ``layer_ann`` node annotations (microsoft/onnxruntime#27595) and
#: for reporting where nodes went (#26781).
LAYER_ASSIGNMENT_NEEDS = ("onnxruntime with session.layer_assignment_settings "
                          "(microsoft/onnxruntime#27595, in its 1.25 documentation)")


@functools.lru_cache(maxsize=None)
def supports_layer_assignment() -> bool:
    """Whether the installed onnxruntime partitions by ``layer_ann`` node annotations and
    reports node assignments: it must reject a malformed ``session.layer_assignment_settings``
    (a version without the feature ignores the unknown key) and have
    ``get_provider_graph_assignment_info``."""
    import onnxruntime as ort
    if not hasattr(ort.InferenceSession, "get_provider_graph_assignment_info"):
        return False
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "probe",
                                   [x], [onnx.helper.make_tensor_value_info(
                                       "y", onnx.TensorProto.FLOAT, [1])])
    probe = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    probe.ir_version = 7
    opts = session_options()
    opts.add_session_config_entry("session.layer_assignment_settings", "no parenthesis")
    try:
        ort.InferenceSession(probe.SerializeToString(), opts, providers=DEFAULT_PROVIDERS)
    except Exception as e:
        return "layering" in str(e).lower()
    return False


def provider_assignment(model: str | os.PathLike, session_config: Mapping[str, str],
                        providers: Sequence[str]) -> dict[str, str]:
    """Node name -> the execution provider onnxruntime assigned it, for ``model`` loaded with
    ``session_config`` entries (``partition.json``'s ``onnxruntime.session_config``) and
    ``providers``; graph optimisations off, so that nodes keep their names."""
    import onnxruntime as ort
    opts = session_options(RunOptions(optimization="disabled"))
    for key, value in session_config.items():
        opts.add_session_config_entry(key, value)
    opts.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    try:
        sess = ort.InferenceSession(str(model), opts, providers=list(providers))
    except Exception as e:
        raise RunError(f"{model}: onnxruntime cannot load it: {ort_line(e)}") from None
    return {node.name: sub.ep_name for sub in sess.get_provider_graph_assignment_info()
            for node in sub.get_nodes()}
