"""``partition.json`` as the runner reads it: the keys running needs, part files that are plain
names inside OUT_DIR, and each part as a :class:`~hetero_solve.run.backend.PartSpec`."""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from ..answer import ANSWER_NAME, read_answer
from ..errors import ModelError
from ..readers import did_you_mean
from .backend import PartSpec
from .common import RunError, ort_line

MANIFEST_KEYS = ("partitions", "graph_inputs", "graph_outputs")
PART_KEYS = ("id", "device", "inputs", "outputs", "file")


def load_manifest(out_dir: str | os.PathLike) -> dict:
    """``OUT_DIR/partition.json``, checked for the keys running needs."""
    path = Path(out_dir) / ANSWER_NAME
    if not Path(out_dir).is_dir():
        raise ModelError(out_dir, "no such directory" + did_you_mean(out_dir)
                         + ": pass the OUT_DIR hetero-solve wrote")
    if not path.exists():
        raise ModelError(out_dir, "no partition.json here: pass the OUT_DIR hetero-solve wrote")
    # A regular file (a FIFO would block), bounded; JSON errors with line and column.
    answer = read_answer(path, lambda why: ModelError(path, f"cannot read partition.json: {why}"))
    answer.need(*MANIFEST_KEYS).need_in_parts(*(k for k in PART_KEYS if k != "file"))
    manifest = answer.data
    for part in answer.parts:
        if not part.file:
            raise ModelError(path, f"part {part.id} has no model file (written with "
                                   "--no-models?): solve again without --no-models to run it")
    direct = manifest.get("direct_outputs")
    files = [p["file"] for p in manifest["partitions"]]
    files += [direct["file"]] if isinstance(direct, dict) and direct.get("file") else []
    for name in files:
        _check_file_name(path, name)
    return manifest


def _check_file_name(manifest: Path, name) -> None:
    """A part file is a plain name inside OUT_DIR, as hetero-solve writes it: a manifest edited
    to point elsewhere (``../model.onnx``, an absolute path) must not make ``run`` load it."""
    if (not isinstance(name, str) or name in (".", "..") or "/" in name or "\\" in name
            or "\0" in name or os.path.isabs(name)):
        raise ModelError(manifest, f"part file {name!r} is not a file name inside OUT_DIR "
                                   "(hetero-solve writes plain names such as "
                                   "'part_0_NPU.onnx'); was partition.json edited?")


def load_part_model(out_dir: Path, part: dict, *, load_external_data: bool = True) -> onnx.ModelProto:
    path = out_dir / part["file"]
    if not path.is_file():
        raise RunError(f"part {part['id']}: {path}: no such file")
    try:
        return onnx.load(str(path), load_external_data=load_external_data)
    except Exception as e:
        raise RunError(f"part {part['id']} ({part['file']}): {path}: cannot read "
                       f"({ort_line(e)})") from None


def part_specs(out_dir: str | os.PathLike, manifest: dict) -> list[PartSpec]:
    """Every part of ``manifest`` in id order, with its device's ``runtime:`` (the rule
    file's, as ``partition.json`` keeps it under ``devices``)."""
    out_dir = Path(out_dir)
    runtimes = {d.get("name"): dict(d.get("runtime") or {}) for d in manifest.get("devices", [])}
    counts = {d.get("name"): int(d.get("instances") or 1) for d in manifest.get("devices", [])}
    return [PartSpec(id=int(p["id"]), device=p["device"], file=out_dir / p["file"],
                     inputs=tuple(p["inputs"]), outputs=tuple(p["outputs"]),
                     instance=int(p.get("instance") or 0),
                     runtime=runtimes.get(p["device"], {}),
                     instances=counts.get(p["device"], 1))
            for p in sorted(manifest["partitions"], key=lambda p: p["id"])]
