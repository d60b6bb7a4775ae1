"""OpenVINO's per-layer counters (``PERF_COUNT`` / ``ov.properties.enable_profiling``) read
back to ONNX nodes.

``request.get_profiling_info()`` gives one record per layer of the compiled (runtime) model:
``node_name``, ``node_type``, ``exec_type``, ``status`` and ``real_time``; benchmark_app's
``-report_type detailed_counters`` writes the same as ``layerName;execStatus;layerType;
execType;realTime (ms);cpuTime (ms)`` lines.  A layer of the runtime model
(``compiled.get_runtime_model()``) lists in its ``originalLayersNames`` rt_info the ops of the
model as OpenVINO read it that were fused into it (a ``Convolution`` with its bias ``Add``,
``Relu`` and fake-quantize steps).  Those ops are mapped to ONNX nodes (:func:`op_nodes`): an
op whose output carries an ONNX tensor's name belongs to the node making that tensor; an op
OpenVINO's reader made inside a node (``Gemm`` read as ``MatMul``, ``Multiply``, ``Add``) to
the first op after it that carries one.  Layers with no original op (layout reorders the
plugin added) stand for the ONNX nodes of the next layer that has some.

An imported report is matched against the runtime model this OpenVINO compiles for the same
model on ``CPU`` (the layer names are the plugin's; a report from another version or device
may name layers this one does not make: those are matched by name only).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..readers import read_text
from ..run.backend import PartSpec, RunOptions
from ..run.openvino import load_part
from .attribute import RuntimeNode, medians
from ..times.profile import ProfileError


def _ov():
    """OpenVINO, imported on first use (an optional extra)."""
    try:
        import openvino as ov
    except ImportError:
        raise ImportError("OpenVINO is not installed (pip install 'hetero-solve[openvino]')"
                          ) from None
    return ov


def op_nodes(mg, ov_model) -> dict[str, list[int]]:
    """Friendly name of each op of ``ov_model`` (OpenVINO's reading of the ONNX model of
    ``mg``) -> the ONNX nodes it belongs to (module doc); parameters, constants and results
    belong to none."""
    ops = list(ov_model.get_ordered_ops())
    direct: dict[str, list[int]] = {}
    for op in ops:
        made = set()
        for port in op.outputs():
            made.update(n for n in port.get_names() if n in mg.producer)
        direct[op.get_friendly_name()] = sorted({mg.producer[n] for n in made})
    out: dict[str, list[int]] = {}
    for op in reversed(ops):          # consumers first: an op without names takes theirs
        name = op.get_friendly_name()
        if direct[name] or op.get_type_name() in ("Parameter", "Constant", "Result"):
            out[name] = direct[name]
            continue
        found: list[int] = []
        for port in op.outputs():
            for target in port.get_target_inputs():
                found = out.get(target.get_node().get_friendly_name(), [])
                if found:
                    break
            if found:
                break
        out[name] = found
    return out


def layer_members(mg, compiled, ov_model) -> dict[str, tuple[list[int], bool]]:
    """Runtime layer name -> (ONNX nodes, found through a neighbour) for a compiled model."""
    of_op = op_nodes(mg, ov_model)
    runtime = compiled.get_runtime_model()
    layers = list(runtime.get_ordered_ops())
    out: dict[str, tuple[list[int], bool]] = {}
    for layer in layers:
        info = layer.get_rt_info()
        names = info["originalLayersNames"].astype(str) if "originalLayersNames" in info else ""
        members = sorted({v for x in names.split(",") if x for v in of_op.get(x, [])})
        if not members:
            members = of_op.get(layer.get_friendly_name(), [])
        out[layer.get_friendly_name()] = (members, False)
    for layer in reversed(layers):    # added layers: the next layer's nodes
        name = layer.get_friendly_name()
        if out[name][0] or layer.get_type_name() in ("Parameter", "Result"):
            continue
        for port in layer.outputs():
            for target in port.get_target_inputs():
                near = out.get(target.get_node().get_friendly_name(), ([], False))[0]
                if near:
                    out[name] = (near, True)
                    break
            if out[name][0]:
                break
    return out


def records(runs: Sequence[dict[str, tuple[str, float]]],
            members: Mapping[str, tuple[list[int], bool]], mg=None) -> list[RuntimeNode]:
    """One :class:`RuntimeNode` per layer, its median time over ``runs``; a layer the
    runtime model does not name is matched to an ONNX node or tensor of the same name."""
    ops = {name: op for run in runs for name, (op, _) in run.items()}
    out = []
    for name, seconds in medians({k: s for k, (_, s) in run.items()} for run in runs).items():
        found, near = members.get(name, (None, False))
        if found is None:
            found = []
            if mg is not None:
                node_of = {n: i for i, n in enumerate(mg.names)}
                found = [node_of[name]] if name in node_of else \
                    [mg.producer[name]] if name in mg.producer else []
        out.append(RuntimeNode(name, ops.get(name, ""), seconds, list(found), near))
    return out


def info_run(infos) -> dict[str, tuple[str, float]]:
    """One run's ``get_profiling_info()`` as layer name -> (layer type, seconds); a name seen
    twice is numbered (``name#2``)."""
    run: dict[str, tuple[str, float]] = {}
    for info in infos:
        name = info.node_name
        k = 2
        while name in run:
            name, k = f"{info.node_name}#{k}", k + 1
        run[name] = (info.node_type, info.real_time.total_seconds())
    return run


# -- benchmark_app's report --------------------------------------------------------------------

def read_report(path: str) -> list[dict[str, tuple[str, float]]]:
    """benchmark_app's per-layer report (``-report_type detailed_counters`` or
    ``average_counters``: ``layerName;execStatus;layerType;execType;realTime (ms);cpuTime
    (ms)``) as runs of layer name -> (layer type, seconds); a layer listed again starts the
    next infer request's counters."""
    text = read_text(path, lambda why: ProfileError(path, why))
    runs: list[dict[str, tuple[str, float]]] = [{}]
    header = False
    for k, row in enumerate(csv.reader(io.StringIO(text), delimiter=";"), 1):
        if not row or not any(c.strip() for c in row):
            continue
        if row[0].strip() == "layerName":
            header = True
            if len(row) < 5 or not row[4].startswith("realTime"):
                raise ProfileError(path, f"line {k}: expected the columns layerName;execStatus;"
                                         "layerType;execType;realTime (ms);cpuTime (ms)")
            continue
        if not header or row[0].strip() in ("Total", "Full Total") or len(row) < 5:
            continue
        name, layer_type = row[0].strip(), row[2].strip()
        try:
            ms = float(row[4])
        except ValueError:
            raise ProfileError(path, f"line {k}: layer {name!r}: realTime (ms) {row[4]!r} is "
                                     "not a number") from None
        if ms < 0 or ms != ms:
            raise ProfileError(path, f"line {k}: layer {name!r}: realTime (ms) {row[4]!r} is "
                                     "not a time >= 0")
        if name in runs[-1]:
            runs.append({})
        runs[-1][name] = (layer_type, ms * 1e-3)
    if not header:
        raise ProfileError(path, "not an OpenVINO per-layer report: no line "
                                 "layerName;execStatus;layerType;execType;realTime (ms);... "
                                 "(benchmark_app -report_type detailed_counters writes one)")
    return [r for r in runs if r]


def import_report(mg, path: str, model: str, device: str = "CPU"
                  ) -> tuple[list[RuntimeNode], int]:
    """An OpenVINO per-layer report of ``model``: its records and the number of runs."""
    runs = read_report(path)
    ov = _ov()
    core = ov.Core()
    ov_model = core.read_model(model)
    compiled = core.compile_model(_static(ov, core.read_model(model), mg), device)
    return records(runs, layer_members(mg, compiled, ov_model), mg), len(runs)


def _static(ov, model, mg):
    """``model`` with its inputs fixed to the shapes ``mg`` was loaded at (where known)."""
    shapes = {}
    for port in model.inputs:
        name = next((n for n in port.get_names() if n in mg.graph_inputs), None)
        shape = mg.types[name].shape if name else None
        if shape is not None and all(isinstance(d, int) for d in shape):
            shapes[port] = ov.PartialShape(list(shape))
    if shapes:
        model.reshape(shapes)
    return model


# -- measuring ---------------------------------------------------------------------------------

def measure(mg, model: str, device: str, feeds: Mapping[str, Any], *, warmup: int,
            repeats: int, rule_device: str = "", options: RunOptions | None = None,
            tick: Callable[[], None] = lambda: None) -> list[RuntimeNode]:
    """Profile ``model`` on the OpenVINO ``device`` through the backend ``hetero-solve run``
    uses, with ``options`` (the execution settings): per-layer medians of ``repeats``
    profiled runs after ``warmup``."""
    ov = _ov()
    spec = PartSpec(0, rule_device or device, Path(model), tuple(mg.graph_inputs),
                    tuple(mg.graph_outputs), runtime={"openvino": device})
    backend = {**dict((options or RunOptions()).backend_options),
               "device_map": {rule_device or device: device}}
    runner = load_part(spec, dataclasses.replace(options or RunOptions(), profile=True,
                                                 backend_options=backend))
    given = {t.name: feeds[t.name] for t in runner.inputs}
    runs = []
    for k in range(warmup + repeats):
        runner.run(given)
        if k >= warmup:
            runs.append(info_run(runner.request.get_profiling_info()))
        tick()
    members = layer_members(mg, runner.compiled, ov.Core().read_model(model))
    return records(runs, members, mg)


def available_devices() -> list[str]:
    """OpenVINO's devices on this machine ([] without OpenVINO)."""
    try:
        ov = _ov()
    except ImportError:
        return []
    return list(ov.Core().available_devices)
