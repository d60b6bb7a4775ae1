"""Write a result to OUT_DIR (SPEC section 7), atomically.

Everything is written into a temporary sibling directory first and moved into place at the
end, so a failure leaves OUT_DIR as it was (absent, or the previous result).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import onnx

from ..gcpause import paused_gc
from .annotated import build_annotated_model
from .dot import affinity_dot, partitions_dot
from .manifest import affinity_map, build_manifest
from .submodels import build_direct_model, build_part_model, direct_outputs, part_file

if TYPE_CHECKING:   # export reads a Result; it never needs the class at run time
    from ..result import Result

__all__ = ["write_result", "default_out_dir", "part_file"]

EXTERNAL_DATA_BYTES = 1_800_000_000   # protobuf's 2 GiB limit, with margin


def default_out_dir(model_path: str) -> Path:
    """``<model stem>.hetero/`` next to the model (``model.hetero`` for an in-memory model)."""
    p = Path(model_path)
    return p.with_name(p.stem + ".hetero") if model_path != "<model>" else Path("model.hetero")


def write_result(result: "Result", out_dir: str | os.PathLike, *, submodels: bool = True,
                 annotated: bool = True, dots: bool = True,
                 progress: Callable[[str], None] | None = None) -> Path:
    """Write ``partition.json``, the part models, ``affinity.json``, ``model.annotated.onnx``,
    ``affinity.dot`` and ``partitions.dot``; return OUT_DIR.  ``submodels=False`` etc. skip
    the heavy files (benchmarks write the manifest alone)."""
    with paused_gc():
        return _write(result, out_dir, submodels=submodels, annotated=annotated, dots=dots,
                      progress=progress)


def _write(result: "Result", out_dir: str | os.PathLike, *, submodels: bool, annotated: bool,
           dots: bool, progress: Callable[[str], None] | None) -> Path:
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        manifest = build_manifest(result, files=submodels)
        mg, problem, solution = result.model_graph, result.problem, result.solution
        if submodels:
            mg.prefetch_folded(problem.const_names)
            nodes_of = solution.parts()   # one scan, not one per part
            for part in manifest["partitions"]:
                if progress:
                    progress(f"writing part {part['id'] + 1}/{len(manifest['partitions'])}")
                model = build_part_model(mg, problem, solution, part["id"],
                                         nodes_of[part["id"]], part["inputs"], part["outputs"])
                _save(model, tmp / part["file"])
            if "direct_outputs" in manifest:
                names, inputs = direct_outputs(mg)
                _save(build_direct_model(mg, names, inputs),
                      tmp / manifest["direct_outputs"]["file"])
        _write_json(tmp / "partition.json", manifest)
        _write_names(tmp / "affinity.json", affinity_map(problem, solution))
        if annotated:
            if progress:
                progress("writing the annotated model")
            _save(build_annotated_model(mg, problem, solution), tmp / "model.annotated.onnx")
        if dots:
            title = Path(result.model_graph.path).stem
            (tmp / "affinity.dot").write_text(affinity_dot(result.problem, result.solution, title))
            (tmp / "partitions.dot").write_text(
                partitions_dot(result.problem, result.solution, result.metrics.part_memory, title))
        _replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _save(model: onnx.ModelProto, path: Path) -> None:
    if model.ByteSize() > EXTERNAL_DATA_BYTES:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=1024)
    else:
        onnx.save_model(model, str(path))


def _write_json(path: Path, data: dict) -> None:
    """One line per top-level key, and per element of a list of objects (the parts): easy to
    read and to diff, and written by json's C encoder (``indent=`` falls back to the pure-Python
    one, seconds at 100,000 nodes)."""
    dumps = json.dumps
    items = list(data.items())
    lines = ["{"]
    for k, (key, value) in enumerate(items):
        comma = "," if k + 1 < len(items) else ""
        if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            lines.append(f" {dumps(key)}: [")
            lines.append(",\n".join("  " + dumps(x) for x in value))
            lines.append(f" ]{comma}")
        else:
            lines.append(f" {dumps(key)}: {dumps(value)}{comma}")
    lines.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _write_names(path: Path, data: dict[str, str]) -> None:
    """A flat name -> name mapping (affinity.json), one entry per line, as json.dumps with
    ``indent=1`` would write it."""
    if not data:
        path.write_text("{}\n", encoding="utf-8")
        return
    enc = json.encoder.encode_basestring_ascii     # the C function json.dumps ends in
    body = ",\n".join([f" {enc(k)}: {enc(v)}" for k, v in data.items()])
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n" + body + "\n}\n")


def _replace(tmp: Path, out: Path) -> None:
    old = None
    if out.exists():
        if not out.is_dir():
            raise FileExistsError(f"{out} exists and is not a directory")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
