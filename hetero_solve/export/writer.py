"""Write a result to OUT_DIR (the README, "Use") without ever losing a file the tool did not write.

How OUT_DIR is treated (:func:`check_target` decides, before anything is written):

- **absent**: the answer is written into a hidden sibling folder, renamed to OUT_DIR when
  complete (missing parent folders are created, and removed again if the write fails);
- **an empty folder, or a previous answer of hetero-solve**: the answer is written into a
  hidden folder inside OUT_DIR, then moved in file by file, ``partition.json`` last; the files
  of the previous answer that the new one does not have (stale part files) are removed after.
  Nothing else in the folder is touched (``outputs/`` of ``hetero-solve run``, a user's notes);
- **anything else** (a file, a device, a folder holding files hetero-solve did not write, a
  path under a file): refused with an :class:`~hetero_solve.errors.OutputError`.

A previous answer is recognised by its ``partition.json``: a JSON object with ``"version": 1``
whose ``"files"`` lists the plain file names the answer consists of (``partition.json``
included).  Only those names are ever replaced or removed.  Answers written before ``"files"``
existed are recognised by ``version``, ``partitions`` and ``solver``, and their files are
derived from the names this writer uses.  A failure before the last step leaves OUT_DIR as it
was.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import onnx
from google.protobuf.message import DecodeError, EncodeError

from ..answer import ANSWER_NAME, read_answer
from ..errors import OutputError, warn
from ..gcpause import paused_gc
from ..model.parallel import Forked, fork_pays
from ..model.weights import copy_external, external_tensors
from .annotated import build_annotated_model
from .dot import affinity_dot, check_can_draw, partitions_dot, write_pictures
from .manifest import affinity_map, build_manifest
from .submodels import build_direct_model, build_part_model, direct_outputs, part_file

if TYPE_CHECKING:   # export reads a Result; it never needs the class at run time
    from ..result import Result

__all__ = ["write_result", "default_out_dir", "part_file", "check_target", "answer_files", "write_json"]

EXTERNAL_DATA_BYTES = 1_800_000_000   # protobuf's 2 GiB limit, with margin
MANIFEST = ANSWER_NAME
#: Files every answer may hold besides the part models (older answers are read by these names).
FIXED_FILES = (MANIFEST, "affinity.json", "model.annotated.onnx", "affinity.dot", "partitions.dot")
TMP_PREFIX = ".hetero-solve-tmp-"
NAME_MAX = 255   #: bytes in one file name (Linux, macOS, Windows)
PATH_MAX = 4096  #: bytes in a path (Linux)


def default_out_dir(model_path: str) -> Path:
    """``<model stem>.hetero/`` next to the model (``model.hetero`` for an in-memory model)."""
    p = Path(model_path)
    return p.with_name(p.stem + ".hetero") if model_path != "<model>" else Path("model.hetero")


# -- the target --------------------------------------------------------------------------------

def check_target(out_dir: str | os.PathLike) -> Path:
    """``out_dir`` as a path, when it can receive an answer: absent (under folders that exist
    or can be made), an empty folder, or a previous answer of hetero-solve.  Raises
    :class:`OutputError` naming the reason otherwise.  Writes nothing."""
    if isinstance(out_dir, str) and not out_dir.strip():
        raise OutputError(repr(out_dir), "empty output path: name a folder, e.g. -o model.hetero")
    out = Path(out_dir)
    for part in out.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise OutputError(out, f"a name in the path is over {NAME_MAX} bytes, more than file "
                                   "systems allow")
    if len(os.fsencode(os.path.abspath(out))) + NAME_MAX >= PATH_MAX:
        raise OutputError(out, f"the path is too long for its files (over {PATH_MAX - NAME_MAX} "
                               "bytes)")
    if not os.path.lexists(out):
        _check_parents(out)
        return out
    try:
        st = os.stat(out)
    except OSError as e:
        raise OutputError(out, f"cannot use as output folder: {_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(out, f"exists and is {_kind(st.st_mode)}, not a folder: the answer is "
                               "a folder of files (give a new or empty folder)")
    try:
        entries = os.listdir(out)
    except OSError as e:
        raise OutputError(out, f"cannot list the folder: {_reason(e)}") from None
    if entries and answer_files(out) is None:
        shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise OutputError(out, f"the folder holds files hetero-solve did not write ({shown}); "
                               "give a new or empty folder, or a previous answer of hetero-solve")
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(out, "the folder is not writable")
    return out


def _check_parents(out: Path) -> None:
    """The nearest existing ancestor of ``out`` must be a writable folder."""
    parent = out.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    try:
        st = os.stat(parent)
    except OSError as e:
        raise OutputError(out, f"cannot create it: {parent}: {_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(out, f"cannot create it: {parent} is {_kind(st.st_mode)}, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(out, f"cannot create it: {parent} is not writable")


class _NotAnAnswer(Exception):
    """``partition.json`` is not one hetero-solve wrote (unreadable, or not its format)."""


def answer_files(out_dir: str | os.PathLike) -> list[str] | None:
    """The file names of the previous answer in ``out_dir`` (see the module docstring), or
    None when ``out_dir/partition.json`` is absent or not one hetero-solve wrote."""
    try:   # a regular file, bounded, JSON, the keys typed (hetero_solve.answer)
        data = read_answer(Path(out_dir) / MANIFEST, _NotAnAnswer).data
    except _NotAnAnswer:
        return None
    if data.get("version") != 1:
        return None
    files = data.get("files")
    if files is not None:
        if (not isinstance(files, list) or MANIFEST not in files
                or not all(_plain_name(x) for x in files)):
            return None
        return list(dict.fromkeys(files))
    # Written before "files" existed: derived from the names this writer has always used.
    parts = data.get("partitions")
    if not isinstance(parts, list) or not isinstance(data.get("solver"), dict):
        return None
    names = list(FIXED_FILES)
    direct = data.get("direct_outputs")
    extra = [p.get("file") for p in parts if isinstance(p, dict)]
    extra.append(direct.get("file") if isinstance(direct, dict) else None)
    names += [x for x in extra if isinstance(x, str) and _plain_name(x)]
    names += [x + ".data" for x in names if x.endswith(".onnx")]
    return list(dict.fromkeys(names))


def _plain_name(x: object) -> bool:
    return (isinstance(x, str) and 0 < len(x) <= 255 and x not in (".", "..")
            and "/" not in x and "\\" not in x and "\0" not in x)


# -- writing -----------------------------------------------------------------------------------

def write_result(result: "Result", out_dir: str | os.PathLike, *, submodels: bool = True,
                 annotated: bool = True, dots: bool = True, pictures: str | None = None,
                 progress: Callable[[str], None] | None = None) -> Path:
    """Write ``partition.json``, the part models, ``affinity.json``, ``model.annotated.onnx``
    (not for a one-part answer with its part model: that file is the model), ``affinity.dot``
    and ``partitions.dot``; return OUT_DIR.  ``submodels=False`` etc. skip the heavy files
    (benchmarks write the manifest alone).  ``pictures``: ``"svg"`` or
    ``"png"`` also draws ``partitions.svg`` and ``affinity.svg`` (:mod:`.dot`).

    Raises
    ------
    OutputError
        OUT_DIR is not absent, empty or a previous answer (see the module docstring), would
        replace the model or rule file being read, or cannot be written.
    """
    with paused_gc():
        return _write(result, out_dir, submodels=submodels, annotated=annotated, dots=dots,
                      pictures=pictures, progress=progress)


def _write(result: "Result", out_dir: str | os.PathLike, *, submodels: bool, annotated: bool,
           dots: bool, pictures: str | None, progress: Callable[[str], None] | None) -> Path:
    if pictures is not None:
        check_can_draw(pictures)      # before anything is written
    # A one-part answer's part file is the model: its annotated copy would tag every node with
    # the same device and part and write the model a second time (seconds on a large model).
    annotated = annotated and not (submodels and result.solution.num_parts == 1)
    return write_answer(out_dir, lambda tmp: _write_files(
        result, tmp, submodels=submodels, annotated=annotated, dots=dots, pictures=pictures,
        progress=progress), protected=_inputs_of(result))


def write_answer(out_dir: str | os.PathLike, fill: Callable[[Path], None],
                 protected: Iterable[str] = ()) -> Path:
    """Write an answer into ``out_dir`` whole or not at all: ``fill(tmp)`` writes its files
    (``partition.json`` last, listing them) into a new folder beside or inside ``out_dir``,
    which is then moved in (see the module docstring); ``protected`` are files this run reads.

    Returns
    -------
    Path
        ``out_dir``.

    Raises
    ------
    OutputError
        ``out_dir`` cannot receive the answer (:func:`check_target`) or a write failed.
    """
    out = check_target(out_dir)
    replace = os.path.lexists(out)
    created: list[Path] = []
    tmp: Path | None = None
    done = False
    try:
        if not replace:
            _make_parents(out, created)
        tmp = _make_tmp(out if replace else out.parent)
        fill(tmp)
        if replace:
            _move_in(tmp, out, protected=list(protected))
        else:
            os.rename(tmp, out)
        done = True
    except OSError as e:
        raise OutputError(out, f"cannot write the answer: {_reason(e)}") from None
    finally:
        if not done:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            for d in reversed(created):
                try:
                    d.rmdir()
                except OSError:
                    break
    return out


def _write_files(result: "Result", tmp: Path, *, submodels: bool, annotated: bool, dots: bool,
                 pictures: str | None, progress: Callable[[str], None] | None) -> None:
    """Every file of the answer into ``tmp``, ``partition.json`` last: its ``"files"`` lists
    what was written."""
    manifest = build_manifest(result, files=submodels, annotated=annotated)
    mg, problem, solution = result.model_graph, result.problem, result.solution
    # Where the source had no external data, no model built from it has any: every save
    # skips the walk over all its tensors looking for some.
    weights = None if mg.weights_inline else mg.weights_dir
    beside = None
    if submodels and fork_pays(len(mg.names)):
        # a large model: the part models are written by a forked process while this one
        # builds the annotated model and the pictures (two cores, about half the time)
        if progress:
            progress(f"writing {len(manifest['partitions'])} part model(s) in a forked process")
        beside = Forked(_write_parts, result, manifest, tmp, weights, None)
    elif submodels:
        _write_parts(result, manifest, tmp, weights, progress)
    try:
        _write_names(tmp / "affinity.json", affinity_map(problem, solution))
        if annotated:
            if progress:
                progress("writing the annotated model")
            _save(build_annotated_model(mg, problem, solution), tmp / "model.annotated.onnx",
                  weights)
        if dots:
            title = Path(mg.path).stem
            (tmp / "affinity.dot").write_text(affinity_dot(problem, solution, title))
            (tmp / "partitions.dot").write_text(
                partitions_dot(problem, solution, result.metrics.part_memory, title))
        if pictures is not None:
            if progress:
                progress(f"drawing the pictures ({pictures})")
            _files, notes = write_pictures(problem, solution, result.metrics.part_memory, tmp,
                                           pictures, Path(mg.path).stem)
            for note in notes:
                warn(note)
        if beside is not None:
            done = beside.result()
            if done is None or done[0] != "ok":   # the child failed: here, with its errors
                _write_parts(result, manifest, tmp, weights, progress)
    finally:
        if beside is not None:
            beside.cancel()   # stops it only if it is still running (this one failed)
    manifest["files"] = sorted([*os.listdir(tmp), MANIFEST])
    write_json(tmp / MANIFEST, manifest)


def _write_parts(result: "Result", manifest: dict, tmp: Path, weights: str | None,
                 progress: Callable[[str], None] | None) -> None:
    """The part models (and the model of the direct outputs) of ``manifest`` into ``tmp``."""
    mg, problem, solution = result.model_graph, result.problem, result.solution
    mg.prefetch_folded(problem.const_names)
    nodes_of = solution.parts()   # one scan, not one per part
    total, said = len(manifest["partitions"]), None
    for part in manifest["partitions"]:
        # the first part, then at most one line a second (-v prints each: not 77 lines)
        if progress and (said is None or time.perf_counter() - said >= 1.0):
            progress(f"writing part {part['id'] + 1}/{total}")
            said = time.perf_counter()
        model = build_part_model(mg, problem, solution, part["id"],
                                 nodes_of[part["id"]], part["inputs"], part["outputs"])
        _save(model, tmp / part["file"], weights)
    if "direct_outputs" in manifest:
        names, inputs = direct_outputs(mg)
        _save(build_direct_model(mg, names, inputs), tmp / manifest["direct_outputs"]["file"],
              weights)


def _make_parents(out: Path, created: list[Path]) -> None:
    """Create the missing folders above ``out``, appending each to ``created`` (outermost
    first) as soon as it exists, so that a failure half-way can remove them."""
    missing = []
    parent = out.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        created.append(d)


def _make_tmp(parent: Path) -> Path:
    """A new hidden folder in ``parent``, with the modes a plain ``mkdir`` gives (so the
    answer, once renamed, has them too; ``tempfile.mkdtemp`` would make it private)."""
    while True:
        tmp = parent / f"{TMP_PREFIX}{secrets.token_hex(4)}"
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def _move_in(tmp: Path, out: Path, protected: Iterable[str]) -> None:
    """Replace the previous answer in ``out`` (or fill an empty ``out``) with the files in
    ``tmp``; see the module docstring."""
    old = answer_files(out)
    if old is None:
        entries = [x for x in os.listdir(out) if x != tmp.name]
        if entries:   # changed since check_target
            raise OutputError(out, "the folder now holds files hetero-solve did not write "
                                   f"({', '.join(sorted(entries)[:3])})")
        old = []
    new = sorted(os.listdir(tmp), key=lambda x: x == MANIFEST)   # partition.json last
    for name in (*old, *new):
        if any(_same_file(out / name, p) for p in protected):
            raise OutputError(out, f"replacing the previous answer would remove {name}, which "
                                   "this run reads: write the answer elsewhere")
    for name in new:
        target = out / name
        if name not in old and os.path.lexists(target):
            raise OutputError(target, "exists and was not written by hetero-solve: move it away "
                                      "or write the answer elsewhere")
        if os.path.isdir(target) and not os.path.islink(target):
            raise OutputError(target, "is a folder where the answer writes a file")
    for name in new:
        os.replace(tmp / name, out / name)
    for name in set(old).difference(new):     # stale files of the previous answer
        target = out / name
        if os.path.islink(target) or os.path.isfile(target):
            target.unlink()
    tmp.rmdir()


def _inputs_of(result: "Result") -> list[str]:
    """Files this run reads (model, rule file), which a replaced answer must not take."""
    paths = [getattr(result.model_graph, "path", None), getattr(result.rules, "path", None)]
    return [p for p in paths if isinstance(p, str) and not p.startswith("<")]


def _same_file(a: Path, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _save(model: onnx.ModelProto, path: Path, weights_dir: str | None = None) -> None:
    """Write ``model``; its tensors whose data is external (in the source model's files, in
    ``weights_dir``) go to ``<file>.data``, copied file to file, tensor by tensor
    (:func:`~hetero_solve.model.weights.copy_external`: the weights are never read into
    memory); a model still over :data:`EXTERNAL_DATA_BYTES` also puts its inline tensors there.

    Serialized once and written as is: ``ByteSize()`` costs as much as serializing, and
    ``onnx.save_model`` walks every tensor of every node for external data first, which only
    models with external data need."""
    external = external_tensors(model) if weights_dir is not None else []
    if external:
        location = path.name + ".data"
        with open(path.with_name(location), "wb") as out:
            copy_external(external, weights_dir, out, location)
    try:
        data = model.SerializeToString()
    except (ValueError, DecodeError, EncodeError):   # over protobuf's 2 GiB
        data = None
    if data is None or len(data) > EXTERNAL_DATA_BYTES:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=1024)
        same_mode(path.with_name(path.name + ".data"), path)
    else:
        with open(path, "wb") as f:
            f.write(data)


def same_mode(data: Path, model: Path) -> None:
    """Give an external-data file the mode of its ``.onnx`` (onnx creates it 0600, the model
    gets the umask's 0644): whoever can read the model can read its weights."""
    if data.exists():
        os.chmod(data, stat.S_IMODE(model.stat().st_mode))


def write_json(path: Path, data: dict) -> None:
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
