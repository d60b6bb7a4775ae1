"""``hetero-solve export openvino OUT_DIR``: the answer as an OpenVINO model for its HETERO
plugin (docs/runtimes.md).

OpenVINO's HETERO plugin compiles a model whose every op carries ``rt_info["affinity"]`` (a
device name).  The export reads the original model with OpenVINO, fixes its inputs to the
shapes the answer was solved for, folds what is constant (see :func:`prepare_model`), and gives
every op the device of the ONNX node it comes from:

- an op whose output carries the name of an ONNX tensor takes the device of the placed node
  making that tensor (several names on one output, as ``Identity`` leaves them: the earliest
  node in graph order, the one that computes it);
- ops an ONNX node expands into (``Gemm`` becomes ``MatMul``, ``Multiply``, ``Add``; only the
  last carries the name), constants and parameters take the device of their first consumer
  in topological order, results the device of their producer.

Node-level ``rt_info`` strings are not kept by ``ov.save_model``, so the map (op friendly name
-> device) is stored in the model's own ``rt_info`` under ``hetero_solve/affinity`` (JSON) and
the HETERO device priorities under ``hetero_solve/priorities``; :func:`apply_affinity` (or the
four lines in docs/runtimes.md) puts them back on the ops after ``core.read_model``.

OpenVINO is an optional extra: it is imported only by the functions here.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..answer import ANSWER_NAME, read_answer
from ..errors import HeteroSolveError, one_line
from ..interrupt import run_unstoppable
from ..units import instance_label
from ..run.device_map import VIRTUAL_DEVICES
from ..run.device_map import (DeviceMapError, parse_pairs, resolve_device_map, shared_note,
                              shared_targets)

FOLDER = "openvino"
FILES = ("model.xml", "model.bin", "export.json")
RT_AFFINITY = ["hetero_solve", "affinity"]
RT_PRIORITIES = ["hetero_solve", "priorities"]


class ExportError(HeteroSolveError):
    """OUT_DIR holds no answer, the model is not the one it was solved for, a device map is
    malformed, or OpenVINO is missing or refuses the model.  ``str(e)`` is one line."""


@dataclass
class OpenVINOExport:
    """What ``export openvino`` wrote and what OpenVINO made of it.

    ``submodels`` is HETERO's ``HETERO_NUMBER_OF_SUBMODELS`` for the exported model, ``None``
    when it was not compiled (``not_compiled`` says why: a device this OpenVINO lacks, or
    ``compile=False``)."""
    folder: Path
    model: str
    parts: int
    device_map: dict[str, str]
    priorities: list[str]
    ops: dict[str, int]                      # rule-file device -> OpenVINO ops given it
    reshaped: dict[str, list[int]] = field(default_factory=dict)
    submodels: int | None = None
    not_compiled: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def regrouped(self) -> bool:
        """Did HETERO make more submodels than the answer has parts?"""
        return self.submodels is not None and self.submodels > self.parts

    def as_dict(self) -> dict:
        return {"folder": str(self.folder), "model": self.model, "parts": self.parts,
                "submodels": self.submodels, "not_compiled": self.not_compiled,
                "device_map": self.device_map, "priorities": self.priorities,
                "ops": self.ops, "reshaped": self.reshaped, "warnings": list(self.warnings)}


def parse_device_map(items: Sequence[str] | Mapping[str, str] | None,
                     devices: Sequence[str] | Sequence[tuple[str, int]]) -> dict[str, str]:
    """``["NPU=AUTO", "ACC.1=GPU.1", ...]`` (or a mapping) as device instance -> OpenVINO
    device name, every device instance of the answer present
    (:func:`hetero_solve.run.device_map.resolve_device_map`; ``devices`` are names, or
    (name, instances) pairs).

    Raises
    ------
    ExportError
        An item is not ``NAME=DEVICE`` or names no device (instance) of the answer.
    """
    try:
        pairs = parse_pairs(items)
        return resolve_device_map(pairs, [d if isinstance(d, tuple) else (d, 1)
                                          for d in devices])
    except DeviceMapError as e:
        raise ExportError(str(e)) from None


# -- the answer -------------------------------------------------------------------------------

def answer_data(out_dir: str | os.PathLike) -> dict:
    """``OUT_DIR/partition.json`` (:func:`hetero_solve.answer.read_answer`) with the keys the
    export reads."""
    path = Path(out_dir) / ANSWER_NAME
    if not path.is_file():
        raise ExportError(f"{out_dir}: no partition.json here: pass the OUT_DIR hetero-solve "
                          "wrote")
    answer = read_answer(path, lambda why: ExportError(f"{path}: {why}"))
    return answer.need("partitions", "devices", "graph_inputs", "model").data


def find_model(out_dir: Path, manifest: Mapping, model: str | os.PathLike | None) -> Path:
    """The ONNX model to read: ``model`` when given, else the path ``partition.json`` names
    (as given when solving), else the answer's own copy ``model.annotated.onnx`` (the same
    graph, nodes tagged), else the part file of a one-part answer (which has no annotated
    copy: its part is the model, :func:`one_part_file`)."""
    if model is not None:
        if not Path(model).is_file():
            raise ExportError(f"{model}: no such file")
        return Path(model)
    named = Path(str(manifest.get("model", "")))
    only = one_part_file(out_dir, manifest)
    for candidate in (named, out_dir / "model.annotated.onnx", *([only] if only else [])):
        if str(candidate) and candidate.is_file():
            return candidate
    raise ExportError(f"{out_dir}: the model it was solved for ({named}) is not there and the "
                      "answer has no model.annotated.onnx: pass --model PATH")


def one_part_file(out_dir: Path, manifest: Mapping) -> Path | None:
    """The part model of a one-part answer, else None."""
    parts = manifest["partitions"]
    if len(parts) != 1 or not isinstance(parts[0].get("file"), str):
        return None
    return out_dir / parts[0]["file"]


def device_instances(manifest: Mapping) -> list[tuple[str, int]]:
    """The answer's devices as (name, instances), in the rule file's order."""
    return [(d["name"], int(d.get("instances") or 1)) for d in manifest["devices"]]


def touching_instances(manifest: Mapping) -> set[tuple[str, str]]:
    """Pairs of device instances (``ACC.0``, ``CPU``) with a part of one reading a tensor a
    part of the other makes."""
    counts = dict(device_instances(manifest))
    label = {p["id"]: instance_label(p["device"], int(p.get("instance") or 0),
                                     counts.get(p["device"], 1))
             for p in manifest["partitions"]}
    maker = {t: label[p["id"]] for p in manifest["partitions"] for t in p["outputs"]}
    return {(maker[t], label[p["id"]]) for p in manifest["partitions"] for t in p["inputs"]
            if t in maker and maker[t] != label[p["id"]]}


def tensor_devices(onnx_path: Path, manifest: Mapping) -> dict[str, tuple[int, str]]:
    """ONNX tensor name -> (graph index, device instance) of the placed node making it (``NPU``,
    or ``ACC.1`` for instance 1 of a device with several), read from the model's node list
    (weights not loaded); checks the model is the one solved for."""
    import onnx
    try:
        graph = onnx.load(str(onnx_path), load_external_data=False).graph
    except Exception as e:   # noqa: BLE001 (protobuf's DecodeError and friends)
        raise ExportError(f"{onnx_path}: cannot read the ONNX model ({one_line(e)})") from None
    found: dict[str, tuple[int, str]] = {}
    instances = dict(device_instances(manifest))
    only = one_part_file(onnx_path.parent, manifest)
    if only is not None and onnx_path.name == only.name:   # the part is the model: one device
        part = manifest["partitions"][0]
        label = instance_label(part["device"], int(part.get("instance") or 0),
                               instances.get(part["device"], 1))
        return {t: (g, label) for g, node in enumerate(graph.node) for t in node.output if t}
    for part in manifest["partitions"]:
        label = instance_label(part["device"], int(part.get("instance") or 0),
                               instances.get(part["device"], 1))
        for g, name in zip(part["nodes"], part.get("node_names", part["nodes"])):
            node = graph.node[g] if 0 <= g < len(graph.node) else None
            if node is None or (node.name and isinstance(name, str) and node.name != name):
                raise ExportError(f"{onnx_path}: not the model this answer was solved for "
                                  f"(node {g} should be {name!r}): pass --model PATH")
            for t in node.output:
                if t and (t not in found or found[t][0] > g):
                    found[t] = (g, label)
    return found


def input_shapes(onnx_path: Path, manifest: Mapping,
                 shapes: Mapping[str, Sequence[int]] | None = None
                 ) -> tuple[dict[str, list[int]], list[str]]:
    """The graph inputs' static shapes the answer was solved for (``shapes`` given, else
    ``input_shapes`` of ``partition.json`` when it has them, else the declared shapes with its
    ``dims``), and the inputs left as they are because a dim has no value."""
    import onnx
    given = {**(manifest.get("input_shapes") or {}),
             **{k: list(v) for k, v in (shapes or {}).items()}}
    dims = manifest.get("dims") or {}
    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    inits = {t.name for t in graph.initializer}
    shapes, open_ = {}, []
    for vi in graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        if isinstance(given.get(vi.name), list) and all(isinstance(d, int) for d in given[vi.name]):
            shapes[vi.name] = list(given[vi.name])
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            open_.append(vi.name)
            continue
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                 else dims.get(d.dim_param) for d in tt.shape.dim]
        if all(isinstance(d, int) for d in shape):
            shapes[vi.name] = shape
        else:
            open_.append(vi.name)
    return shapes, open_


# -- the OpenVINO model -----------------------------------------------------------------------

def import_openvino():
    """``openvino``, or an :class:`ExportError` saying how to install it."""
    try:
        import openvino
    except ImportError:
        raise ExportError("OpenVINO is not installed: pip install 'hetero-solve[openvino]' "
                          "(or pip install openvino)") from None
    return openvino


def prepare_model(core, onnx_path: Path, shapes: Mapping[str, list[int]]):
    """The model read by OpenVINO, its inputs fixed to ``shapes`` and constants folded.

    Folding matters for HETERO: OpenVINO's ONNX reader computes some attributes at run time
    (``GlobalAveragePool``'s axes are ``ShapeOf -> Range`` of its input).  When HETERO cuts
    such a chain between two submodels, the consumer's outputs become dynamic, and HETERO
    sizes the tensors between submodels from the producer before any inference (0 for a
    dynamic dim): creating an infer request then fails ("Can't set the input tensor ... and
    the tensor (shape=(0.16.0.0))").  Folded, the axes are constants inside the submodel."""
    from openvino.passes import ConstantFolding, Manager
    try:
        model = core.read_model(str(onnx_path))
    except Exception as e:   # noqa: BLE001 (OpenVINO raises RuntimeError for everything)
        raise ExportError(f"{onnx_path}: OpenVINO cannot read it: {_ov_line(e)}") from None
    reshaped = {}
    if shapes:
        names = {n for i in model.inputs for n in i.get_names()}
        wanted = {k: v for k, v in shapes.items() if k in names}
        try:
            model.reshape(wanted)
            reshaped = wanted
        except Exception as e:   # noqa: BLE001
            raise ExportError(f"{onnx_path}: OpenVINO cannot fix the inputs to the solved "
                              f"shapes {wanted}: {_ov_line(e)}") from None
    manager = Manager()
    manager.register_pass(ConstantFolding())
    manager.run_passes(model)
    return model, reshaped


def op_devices(model, tensors: Mapping[str, tuple[int, str]]) -> dict[str, str]:
    """Every op of ``model`` (top level; friendly names, unique: :func:`unique_names`) ->
    device name of the answer; see the module docstring for the rules."""
    ops = list(model.get_ordered_ops())
    name = [op.get_friendly_name() for op in ops]
    device: dict[str, str] = {}
    for op, n in zip(ops, name):
        hits = [tensors[t] for out in op.outputs() for t in out.get_names() if t in tensors]
        if hits:
            device[n] = min(hits)[1]
    position = {n: i for i, n in enumerate(name)}
    for op, n in zip(reversed(ops), reversed(name)):   # expansions, constants, parameters
        if n in device or op.get_type_name() == "Result":
            continue
        consumers = [t.get_node().get_friendly_name()
                     for out in op.outputs() for t in out.get_target_inputs()]
        placed = sorted((position[c], device[c]) for c in consumers if c in device)
        if placed:   # with its first consumer
            device[n] = placed[0][1]
    first = next(iter(device.values()), None)
    for op, n in zip(ops, name):   # results and dead ends: with their producer
        if n not in device:
            sources = [i.get_source_output().get_node().get_friendly_name() for i in op.inputs()]
            device[n] = next((device[s] for s in sources if s in device), first)
    return device


def unique_names(model) -> None:
    """Make the ops' friendly names unique (the stored map is keyed by them); a repeated name
    gets ``_<k>``."""
    seen: set[str] = set()
    for op in model.get_ordered_ops():
        name, k = op.get_friendly_name(), 1
        while name in seen:
            k += 1
            name = f"{op.get_friendly_name()}_{k}"
        if name != op.get_friendly_name():
            op.set_friendly_name(name)
        seen.add(name)


def apply_affinity(model) -> dict[str, str]:
    """Put the stored affinity map (``hetero_solve/affinity`` of the model's ``rt_info``) back
    on the ops of a model read from ``model.xml``; returns it.

    >>> model = ov.Core().read_model("out/openvino/model.xml")       # doctest: +SKIP
    >>> apply_affinity(model)                                          # doctest: +SKIP
    """
    affinity = json.loads(model.get_rt_info(RT_AFFINITY).astype(str))
    for op in model.get_ordered_ops():
        op.get_rt_info()["affinity"] = affinity[op.get_friendly_name()]
    return affinity


def hetero_submodels(core, model, priorities: Sequence[str]) -> int:
    """``HETERO_NUMBER_OF_SUBMODELS`` of ``model`` (affinities set) compiled by HETERO."""
    try:
        compiled = run_unstoppable(lambda: _compile_hetero(core, model, priorities))
    except Exception as e:   # noqa: BLE001
        raise ExportError(f"OpenVINO HETERO cannot compile the model: {_ov_line(e)}") from None
    return int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))


def _compile_hetero(core, model, priorities: Sequence[str]):
    """OpenVINO compiling ``model`` under HETERO (seconds for a large model, in native code
    that cannot be stopped: :func:`~hetero_solve.interrupt.run_unstoppable` runs it)."""
    return core.compile_model(model, "HETERO", {"MULTI_DEVICE_PRIORITIES": ",".join(priorities)})


def missing_devices(core, names: Sequence[str]) -> list[str]:
    """The OpenVINO device names of ``names`` this OpenVINO cannot compile for here."""
    have = set(core.available_devices)
    return [n for n in names
            if n not in have and n.split(".")[0] not in have
            and n.split(":")[0] not in VIRTUAL_DEVICES]


# -- the command ------------------------------------------------------------------------------

@dataclass
class AffinityModel:
    """An OpenVINO model with every op's affinity set (and stored in its ``rt_info``)."""
    model: Any
    placed: dict[str, str]          # op friendly name -> device instance (NPU, ACC.1)
    priorities: list[str]           # OpenVINO device names, the rule file's priority order
    reshaped: dict[str, list[int]]


def affinity_model(core, onnx_path: Path, tensors: Mapping[str, tuple[int, str]],
                   mapping: Mapping[str, str], devices: Sequence[str],
                   shapes: Mapping[str, list[int]]) -> AffinityModel:
    """``onnx_path`` read by OpenVINO (:func:`prepare_model`), every op given the OpenVINO
    device ``mapping`` names for the device instance :func:`op_devices` finds for it
    (``devices``: the device instances in the rule file's order)."""
    ov_model, reshaped = prepare_model(core, onnx_path, shapes)
    unique_names(ov_model)
    placed = op_devices(ov_model, tensors)
    affinity = {n: mapping[d] for n, d in placed.items()}
    for op in ov_model.get_ordered_ops():
        op.get_rt_info()["affinity"] = affinity[op.get_friendly_name()]
    used = set(placed.values())
    priorities = list(dict.fromkeys(mapping[d] for d in devices if d in used))
    ov_model.set_rt_info(json.dumps(affinity), RT_AFFINITY)
    ov_model.set_rt_info(",".join(priorities), RT_PRIORITIES)
    return AffinityModel(ov_model, placed, priorities, reshaped)


def export_openvino(out_dir: str | os.PathLike,
                    device_map: Sequence[str] | Mapping[str, str] | None = None, *,
                    model: str | os.PathLike | None = None,
                    shapes: Mapping[str, Sequence[int]] | None = None,
                    compile: bool = True, core: Any = None) -> OpenVINOExport:
    """Write ``OUT_DIR/openvino/model.xml`` and ``model.bin`` (``hetero-solve export openvino``).

    Parameters
    ----------
    out_dir : path
        A folder hetero-solve wrote (its ``partition.json``).
    device_map : list of "NAME=DEVICE" or mapping, optional
        Rule-file device or device instance -> OpenVINO device name (default: the rule
        file's names); a device with several instances maps instance ``i`` to ``DEVICE.i``
        (:mod:`hetero_solve.run.device_map`).
    model : path, optional
        The ONNX model solved for, when ``partition.json``'s path no longer finds it.
    shapes : mapping, optional
        Whole input shapes (``--shape``), for inputs whose anonymous dims the answer's
        ``dims`` cannot fix (the shapes given to ``solve`` are not in ``partition.json``).
    compile : bool, default True
        Compile the model under HETERO to report its submodel count (when every mapped device
        exists in this OpenVINO).
    core : openvino.Core, optional
        The OpenVINO core to use (one with plugins registered under other names, say).

    Returns
    -------
    OpenVINOExport
    """
    ov = import_openvino()
    out = Path(out_dir)
    manifest = answer_data(out)
    devices = device_instances(manifest)
    mapping = parse_device_map(device_map, devices)
    onnx_path = find_model(out, manifest, model)
    fixed, open_ = input_shapes(onnx_path, manifest, shapes)
    core = core if core is not None else ov.Core()
    made = affinity_model(core, onnx_path, tensor_devices(onnx_path, manifest), mapping,
                          list(mapping), fixed)
    counts: dict[str, int] = {}
    for name in made.placed.values():
        counts[name] = counts.get(name, 0) + 1
    used = [label for label in mapping if label in counts]
    single = {d for d, n in devices if n <= 1}
    result = OpenVINOExport(out / FOLDER, str(onnx_path), len(manifest["partitions"]),
                            {label: target for label, target in mapping.items()
                             if label in counts or label in single},
                            made.priorities, counts, made.reshaped)
    given = parse_pairs(device_map)
    for target, labels in shared_targets(mapping, used, touching_instances(manifest)).items():
        result.warnings.append(shared_note(target, labels, given))
    if open_:
        result.warnings.append(f"inputs {', '.join(open_)} keep their dynamic dims (no value "
                               "in the answer's dims: give the shapes solved for with --shape)")
    lacking = missing_devices(core, made.priorities)
    if not compile:
        result.not_compiled = "not asked (--no-compile)"
    elif lacking:
        result.not_compiled = (f"this OpenVINO has no device {lacking[0]} (it has "
                               f"{', '.join(core.available_devices)}); map it with "
                               f"--device-map NAME={core.available_devices[0]} or AUTO to "
                               "count HETERO's submodels here")
    else:
        result.submodels = hetero_submodels(core, made.model, made.priorities)
    if result.regrouped:
        result.warnings.append(f"OpenVINO HETERO regroups the {result.parts} part(s) into "
                               f"{result.submodels} submodels: it joins the connected ops of "
                               "each OpenVINO device into one region, then cuts every cycle "
                               "those regions make, at more edges than needed (docs/"
                               "runtimes.md, \"Why HETERO makes more submodels\"); each part "
                               "compiled on its own keeps the parts (run --backend openvino)")
    _save(ov, made.model, out, result, manifest_digest(out))
    return result


def manifest_digest(out_dir: Path) -> str:
    """SHA-256 of the answer's ``partition.json`` (``export.json`` records which answer the
    export was made from: a later solve into the same folder makes it stale)."""
    return hashlib.sha256((out_dir / "partition.json").read_bytes()).hexdigest()


def _save(ov, model, out: Path, result: OpenVINOExport, digest: str) -> None:
    """Write the folder beside its final place and move it in whole: never half-written; a
    previous export (only our files in it) is replaced."""
    final = out / FOLDER
    if final.exists() and (not final.is_dir() or final.is_symlink()
                           or not set(os.listdir(final)) <= set(FILES)):
        raise ExportError(f"{final}: exists and holds files the export did not write; move it "
                          "away")
    tmp = out / f".{FOLDER}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        ov.save_model(model, str(tmp / "model.xml"), compress_to_fp16=False)
        info = {**result.as_dict(), "folder": FOLDER, "partition_sha256": digest}
        (tmp / "export.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _ov_line(e: BaseException) -> str:
    """OpenVINO's multi-line exception text as its last meaningful line."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    useful = [x for x in lines if not x.startswith("Exception from")]
    return one_line((useful or lines or [type(e).__name__])[-1])
