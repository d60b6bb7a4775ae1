"""``partition.json`` (the README, "Use") and ``affinity.json``, as Python values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..problem import Problem
from ..measures import part_boundaries, quotient_edges
from ..measures.costs import instance_loads
from ..solution import OpenSizes, Solution, open_sizes
from .submodels import DIRECT_FILE, direct_outputs, part_file, unused_inputs
from ..run.onnxruntime import supports_layer_assignment
from .annotated import LAYER_SETTINGS, layer_assignment_settings

#: The annotated model's file name in OUT_DIR.
ANNOTATED_FILE = "model.annotated.onnx"

if TYPE_CHECKING:   # export reads a Result; it never needs the class at run time
    from ..result import Result


def affinity_map(problem: Problem, solution: Solution) -> dict[str, str]:
    """Node name -> device name for every placed node, in graph order.

    Parameters
    ----------
    problem : Problem
        The compiled problem (its ``names`` are the generated names of unnamed nodes too).
    solution : Solution
        A partition of ``problem``.

    Returns
    -------
    dict of str to str
        What ``affinity.json`` holds: OpenVINO's QueryNetwork map.
    """
    device_names = [d.name for d in problem.devices]
    if not problem.members:
        return dict(zip(problem.names, [device_names[d] for d in solution.node_device()]))
    # every node of a quantized unit gets its device, under its own name, in graph order; a
    # DequantizeLinear copied into several units, the device of its first part
    names = problem.info.member_names
    placed = sorted((g, solution.part_of[v], v) for v in range(problem.n)
                    for g in problem.graph_nodes(v))
    out: dict[str, str] = {}
    for g, p, v in placed:
        out.setdefault(names.get(g, problem.names[v]), device_names[solution.part_device[p]])
    return out


def input_shapes(mg) -> dict[str, list[int]]:
    """Graph input -> its shape, for each input whose shape is fully known once the dims and
    whole shapes (``--dim``, ``--shape``, the rule file's ``dims``) are applied: the shapes
    the answer was computed for, which ``run`` and ``verify`` reuse."""
    out = {}
    for x in mg.graph_inputs:
        t = mg.tensor_type(x)
        if t.static:
            out[x] = [int(d) for d in t.shape]
    return out


def build_manifest(result: "Result", files: bool = True, annotated: bool = False) -> dict:
    """The content of ``partition.json``.

    Parameters
    ----------
    result : Result
        A solved (or checked) partition.
    files : bool, default True
        Whether part models are written: without them every ``file`` is ``None``.
    annotated : bool, default False
        Whether ``model.annotated.onnx`` is written: with it, and an onnxruntime that
        partitions by node annotations, ``onnxruntime`` holds the session configuration that
        runs the annotated model with this answer's devices (:func:`onnxruntime_settings`).

    Returns
    -------
    dict
        The manifest, keys in the order they are written.
    """
    p, sol, mg, metrics = result.problem, result.solution, result.model_graph, result.metrics
    model = mg is not None      # else an instance file: no model, no part files
    stats = dict(sol.stats)
    sizes = open_sizes(p, sol)
    head = _head(result, sizes, stats.pop("cost_bounds", {}))
    head["partitions"] = _parts(result, sizes, files)
    head["edges"] = [list(e) for e in sorted(quotient_edges(p, sol.part_of))]
    solver = {"algorithm": sol.algorithm,
              "heuristic_partitions": stats.pop("heuristic_partitions", None),
              "seconds": round(sum(result.seconds.values()), 4),
              # the pipeline's seconds per stage; the refinement's own stage records
              # (what each proved, how) stay under "stages"
              "stage_seconds": {k: round(v, 4) for k, v in result.seconds.items()},
              **stats}
    if not model:
        return head | {
            "devices": [{"name": d.name, "memory": d.memory, "instances": d.instances,
                         "memory_used": [metrics.instance_memory.get((i, j), 0)
                                         for j in range(d.instances)]}
                        for i, d in enumerate(p.devices)],
            "warnings": list(result.warnings), "explain": result.explanation,
            "solver": solver}
    return head | _model_sections(result, files, annotated) | {
        "warnings": list(result.warnings),
        "explain": result.explanation,
        "solver": solver,
    }


def _head(result: "Result", sizes: OpenSizes | None, cost_bounds: dict) -> dict:
    """The manifest's first keys: what was solved, the answer's figures and bounds."""
    p, sol, mg, metrics = result.problem, result.solution, result.model_graph, result.metrics
    stats = sol.stats
    lower_bound = {"partitions": sol.lower_bound,
                   **({"fallback": stats["bounds"]["fallback"]}
                      if "fallback" in stats.get("bounds", {}) else {}), **cost_bounds}
    head = {"version": 1}
    head |= ({"model": mg.path, "rules": result.rules.path} if mg is not None else
             {"instance": result.instance, "format": p.info.format})
    head |= {"status": sol.status, "objective": metrics.as_dict()}
    if sizes is not None:
        head["open_sizes"] = sizes.as_dict()
    if result.single_device is not None:
        head["single_device"] = result.single_device.as_dict(p)
    if result.measured is not None:      # measured before answering (solve --measure)
        head["measured"] = result.measured
    head |= {"objective_spec": p.objective.describe(), "lower_bound": lower_bound}
    if p.costs is not None:
        head |= {"time_unit": p.costs.unit or "as in the instance",
                 "contiguous": p.costs.contiguous}
    return head


def _parts(result: "Result", sizes: OpenSizes | None, files: bool) -> list[dict]:
    """The manifest's ``partitions``: each part's device, nodes, boundary, memory, load."""
    p, sol, mg, metrics = result.problem, result.solution, result.model_graph, result.metrics
    model = mg is not None
    costs = p.costs is not None
    loads = instance_loads(p, sol.part_of, sol.part_device, sol.part_instance) if costs else {}
    parts = []
    boundaries = part_boundaries(p, sol.part_of) if model else {}
    lower = set(sizes.parts) if sizes is not None else set()
    for k, nodes in enumerate(sol.parts()):
        dev = p.devices[sol.part_device[k]].name
        graph_nodes = sorted({g for v in nodes for g in p.graph_nodes(v)})
        part = {"id": k, "device": dev, "instance": sol.part_instance[k], "nodes": graph_nodes}
        if model:
            ins, outs = boundaries.get(k, ([], []))
            part |= {"node_names": [mg.names[g] for g in graph_nodes], "inputs": ins,
                     "outputs": outs, "memory": metrics.part_memory[k],
                     "file": part_file(k, dev) if files else None}
        else:
            part |= {"node_names": [p.names[v] for v in nodes], "memory": metrics.part_memory[k]}
        if k in lower:   # counts a tensor of unknown size as 1 element (docs/problem.md)
            part["memory_is_lower_bound"] = True
        if costs:
            part["instance_load"] = loads[(sol.part_device[k], sol.part_instance[k])]
        parts.append(part)
    return parts


def _model_sections(result: "Result", files: bool, annotated: bool) -> dict:
    """The keys only a model's answer has: folding, devices with their runtimes, the graph's
    inputs and outputs, sizes, execution settings."""
    p, mg, metrics = result.problem, result.model_graph, result.metrics
    extra = {}
    names, inputs = direct_outputs(mg)
    if names:   # constant or passed-through graph outputs: no part makes them, this model does
        extra["direct_outputs"] = {"names": names, "inputs": inputs,
                                   "file": DIRECT_FILE if files else None}
    unused = unused_inputs(mg)
    if unused:   # inputs of the original that nothing reads: run accepts and ignores them
        extra["unused_inputs"] = unused
    if annotated:
        extra.update(onnxruntime_settings(result))
    return {
        "folded": sorted(p.info.folded),
        # foldable nodes the answer places instead (they are in parts; check places them too)
        "unfolded": sorted(p.info.unfolded),
        "constant_nodes": sorted(p.info.constant_nodes),
        "devices": [{"name": d.name, "memory": d.memory, "instances": d.instances,
                     "value_inputs": "enforce" if d.enforce_values else "ignore",
                     "runtime": r.runtime,
                     "memory_used": [metrics.instance_memory.get((i, j), 0)
                                     for j in range(d.instances)]}
                    for i, (d, r) in enumerate(zip(p.devices, result.rules.devices))],
        "graph_inputs": list(mg.graph_inputs),
        "graph_outputs": list(mg.graph_outputs),
        **extra,
        "dims": dict(mg.dims),
        "input_shapes": input_shapes(mg),
        # the settings the answer's measured times were taken with: what run applies
        **({"execution": dict(p.info.execution)} if p.info.execution else {}),
    }


def onnxruntime_settings(result: "Result") -> dict:
    """``{"onnxruntime": {"model": ..., "session_config": {...}}}``: the session configuration
    entries under which onnxruntime places the annotated model's nodes (``layer_ann``) on the
    execution providers the rule file gives their devices; empty when the installed
    onnxruntime does not partition by annotations."""
    if not supports_layer_assignment():
        return {}
    devices = [(d.name, r.runtime) for d, r in zip(result.problem.devices, result.rules.devices)]
    return {"onnxruntime": {"model": ANNOTATED_FILE,
                            "session_config": {LAYER_SETTINGS: layer_assignment_settings(devices)}}}
