"""``model.annotated.onnx``: the original model, each placed node tagged with its device and
part (the README, "Use"), and, for onnxruntime's annotation-based partitioning, every node with a
``layer_ann`` naming its device; ``session.layer_assignment_settings`` maps those names to
the execution providers the rule file gives the devices (:func:`layer_assignment_settings`)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import onnx

from ..model.graph import ModelGraph
from ..problem import Problem
from ..solution import Solution
from ..run.onnxruntime import supports_layer_assignment

#: The node metadata key onnxruntime reads for annotation-based partitioning.
LAYER_KEY = "layer_ann"
#: The session configuration key that maps ``layer_ann`` values to execution providers.
LAYER_SETTINGS = "session.layer_assignment_settings"
_SAFE = re.compile(r"[A-Za-z0-9_.\-]+")


def build_annotated_model(mg: ModelGraph, problem: Problem, solution: Solution, *,
                          layers: bool | None = None) -> onnx.ModelProto:
    """The original model, each placed node with ``affinity`` and ``partition`` metadata.

    Parameters
    ----------
    mg : ModelGraph
        The loaded model.
    problem : Problem
        The problem compiled from ``mg``.
    solution : Solution
        A partition of ``problem``.
    layers : bool, optional
        Also tag every main-graph node with ``layer_ann`` (:func:`layer_annotations` of its
        device; a node no part holds, a ``Constant`` or a folded node, takes the device of
        the first node reading it, else the last device).  Default: when the installed
        onnxruntime supports annotation-based partitioning.

    Returns
    -------
    onnx.ModelProto
        A copy of ``mg.model``: ``metadata_props`` ``affinity`` = device name and
        ``partition`` = part id (decimal) on every placed node; unnamed and duplicate-named
        nodes get the generated names ``affinity.json`` uses.
    """
    m = onnx.ModelProto()
    m.CopyFrom(mg.model)
    nodes = m.graph.node
    names = mg.names
    for g, node in enumerate(nodes):
        if node.name != names[g]:
            node.name = names[g]
    part = _graph_parts(problem, solution, len(nodes))
    if layers is None:
        layers = supports_layer_assignment()
    # The entries are made once per (part, device) and per device and copied into each node
    # by ``extend`` (in C): three ``add()`` and six field writes per node in Python took
    # seconds at 100,000 nodes.
    devs = problem.devices
    tags = {p: [_entry("affinity", devs[solution.part_device[p]].name), _entry("partition", str(p))]
            for p in set(part) if p >= 0}
    tags[-1] = []
    if layers:
        labels = [[_entry(LAYER_KEY, x)] for x in layer_annotations([d.name for d in devs])]
        for node, p, d in zip(nodes, part, node_devices(mg, problem, solution, part)):
            node.metadata_props.extend(tags[p] + labels[d])
    else:
        for node, p in zip(nodes, part):
            if p >= 0:
                node.metadata_props.extend(tags[p])
    return m


def _entry(key: str, value: str) -> onnx.StringStringEntryProto:
    return onnx.StringStringEntryProto(key=key, value=value)


def _graph_parts(problem: Problem, solution: Solution, count: int) -> list[int]:
    """The part of each main-graph node, -1 for one no part holds (``Constant``, folded); a
    ``DequantizeLinear`` copied into several quantized units: the part with the lowest id."""
    part = [-1] * count
    order = sorted(range(problem.n), key=solution.part_of.__getitem__) if problem.members \
        else range(problem.n)
    part_of = solution.part_of
    for v in order:
        for g in problem.graph_nodes(v):
            if part[g] < 0:
                part[g] = part_of[v]
    return part


def node_devices(mg: ModelGraph, problem: Problem, solution: Solution,
                 part: list[int] | None = None) -> list[int]:
    """A device index per main-graph node: a placed node's own; any other node (``Constant``,
    folded) that of the first node reading one of its outputs, found in one backward pass
    (readers come later in a topological graph), else the last device (the fallback).
    ``part``: :func:`_graph_parts`, when the caller has it."""
    if part is None:
        part = _graph_parts(problem, solution, len(mg.op_types))
    part_device = solution.part_device
    device = [part_device[p] if p >= 0 else -1 for p in part]
    first_reader: dict[str, int] = {}
    fallback = len(problem.devices) - 1
    inputs, outputs = mg.inputs, mg.outputs
    for g in range(len(device) - 1, -1, -1):
        if device[g] < 0:
            readers = [first_reader[x] for x in outputs[g] if x in first_reader]
            device[g] = device[min(readers)] if readers else fallback
        for x in inputs[g]:
            if x:
                first_reader[x] = g
    return device


def layer_annotations(device_names: Sequence[str]) -> list[str]:
    """The ``layer_ann`` value of each device: its name when every name is made of letters,
    digits, ``_``, ``.`` and ``-`` and none is a prefix of another; else ``<index>:<name>``
    with other characters as ``_``.  onnxruntime's settings string separates entries with
    ``;``, ``,`` and parentheses, and (depending on its version) matches annotations by
    prefix, so no value may contain those characters nor begin another."""
    plain = all(_SAFE.fullmatch(n) for n in device_names) and not any(
        a != b and b.startswith(a) for a in device_names for b in device_names)
    if plain and len(set(device_names)) == len(device_names):
        return list(device_names)
    return [f"{d}:{re.sub(r'[^A-Za-z0-9_.-]', '_', n)}" for d, n in enumerate(device_names)]


def layer_assignment_settings(devices: Sequence[tuple[str, Mapping]]) -> str:
    """``session.layer_assignment_settings`` for devices ``(name, runtime)`` in priority
    order: ``"PROVIDER(annotation, ...); ..."``, each device's annotation under the first
    execution provider its ``runtime: {onnxruntime: ...}`` names (CPU when none), providers
    in the order devices first name them.

    >>> layer_assignment_settings([("NPU", {"onnxruntime": "OpenVINOExecutionProvider"}),
    ...                            ("CPU", {})])
    'OpenVINOExecutionProvider(NPU); CPUExecutionProvider(CPU)'
    """
    labels = layer_annotations([name for name, _ in devices])
    groups: dict[str, list[str]] = {}
    for (name, runtime), label in zip(devices, labels):
        wanted = (runtime or {}).get("onnxruntime") or "CPUExecutionProvider"
        provider = wanted if isinstance(wanted, str) else list(wanted)[0]
        groups.setdefault(provider, []).append(label)
    return "; ".join(f"{p}({', '.join(labels)})" for p, labels in groups.items())
