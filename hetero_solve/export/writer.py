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

from .dot import affinity_dot, partitions_dot

if TYPE_CHECKING:
    from ..pipeline import Result

EXTERNAL_DATA_BYTES = 1_800_000_000   # protobuf's 2 GiB limit, with margin


def part_file(p: int, device: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in device)
    return f"part{p}_{safe}.onnx"


def write_result(result: "Result", out_dir: str | os.PathLike, *, submodels: bool = True,
                 annotated: bool = True, dots: bool = True,
                 progress: Callable[[str], None] | None = None) -> Path:
    """Write ``partition.json``, the part models, ``affinity.json``, ``model.annotated.onnx``,
    ``affinity.dot`` and ``partitions.dot``; return OUT_DIR.  ``submodels=False`` etc. skip
    the heavy files (benchmarks write the manifest alone)."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        manifest = result.manifest(files=submodels)
        if submodels:
            result.model_graph.prefetch_folded(result.problem.const_names)
            nodes_of = result.parts()   # one scan, not one per part
            for part in manifest["partitions"]:
                if progress:
                    progress(f"writing part {part['id'] + 1}/{len(manifest['partitions'])}")
                model = result.part_model(part["id"], nodes_of[part["id"]],
                                          (part["inputs"], part["outputs"]))
                _save(model, tmp / part["file"])
            if "direct_outputs" in manifest:
                _save(result.direct_model(), tmp / manifest["direct_outputs"]["file"])
        _write_json(tmp / "partition.json", manifest)
        _write_names(tmp / "affinity.json", result.affinity())
        if annotated:
            if progress:
                progress("writing the annotated model")
            _save(result.annotated_model(), tmp / "model.annotated.onnx")
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
