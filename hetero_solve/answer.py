"""``partition.json`` read back: the one reader of an answer hetero-solve wrote (``run``,
``verify``, ``export openvino``, ``check --affinity OUT/partition.json``, ``solve --json``
and the writer replacing a previous answer).  The writer is
:func:`hetero_solve.export.manifest.build_manifest`; its keys are described in the
README ("Use": OUT_DIR) and docs/run-verify-check.md.

The keys readers rely on are checked against :data:`ANSWER_FILE`, built with the kit that
defines the rule-file format (:mod:`hetero_solve.rules.schema`), so every problem is one line
with the key path and the reason; the other keys are kept as written.  Each reader passes
``error(reason)`` making its own error (naming the file), and says which keys it needs
(:meth:`Answer.need`, :meth:`Answer.need_in_parts`).

>>> a = answer_of({"partitions": [{"id": 0, "device": "CPU", "node_names": ["a"]}]},
...               ValueError)
>>> a.parts[0].device, a.parts[0].node_names, a.parts[0].instance
('CPU', ('a',), None)
>>> answer_of({"partitions": [{"id": -1}]}, ValueError)
Traceback (most recent call last):
...
ValueError: partitions[0].id: expected a whole number >= 0, got -1
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .readers import read_json
from .rules.schema import AnyValue, DefinitionError, Int, Key, ListOf, Record, Str

#: The answer's file name in OUT_DIR.
ANSWER_NAME = "partition.json"

_NAMES = ListOf(item=Str(), what="a list of names")

PART = Record(keys={
    "id": Key(Int(minimum=0, doc="The part's id (parts run in id order).")),
    "device": Key(Str(min_length=1, doc="The device's name.")),
    "instance": Key(Int(minimum=0, doc="The device instance.")),
    "node_names": Key(ListOf(item=Str(), what="a list of node names",
                             doc="The ONNX nodes the part holds.")),
    "inputs": Key(_NAMES), "outputs": Key(_NAMES),
    "file": Key(Str(min_length=1, doc="The part's model in OUT_DIR (null: --no-models).")),
}, what="an object (a part)", extra=True)

#: What readers rely on in ``partition.json``; other keys are kept unchecked.
ANSWER_FILE = Record(keys={
    "version": Key(Int(minimum=1)),
    "model": Key(Str(doc="The model solved for, as given.")),
    "partitions": Key(ListOf(item=PART, what="a list of parts"), required=True),
    "devices": Key(ListOf(item=Record(keys={"name": Key(Str(min_length=1), required=True),
                                           "runtime": Key(AnyValue())},
                                     what="an object (a device)", extra=True),
                          what="a list of devices")),
    "graph_inputs": Key(_NAMES), "graph_outputs": Key(_NAMES),
    "files": Key(_NAMES),
}, what="a JSON object (an answer of hetero-solve)", extra=True)


@dataclass(frozen=True)
class AnswerPart:
    """One entry of ``partitions`` (``None``: the key is absent)."""

    id: int | None
    device: str | None
    instance: int | None
    node_names: tuple[str, ...] | None
    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    file: str | None


@dataclass(frozen=True)
class Answer:
    """``partition.json`` as read: ``parts`` typed, ``data`` every key as written."""

    data: dict
    parts: tuple[AnswerPart, ...]
    error: Callable[[str], Exception]

    def need(self, *keys: str) -> "Answer":
        """Refuse an answer without one of ``keys`` (a reader's needs); returns itself."""
        for key in keys:
            if key not in self.data:
                raise self.error(f"missing key {key!r}: not an answer of hetero-solve")
        return self

    def need_in_parts(self, *keys: str) -> "Answer":
        """Refuse a part without one of ``keys``; returns itself."""
        for i, part in enumerate(self.data["partitions"]):
            missing = [k for k in keys if part.get(k) is None]
            if missing:
                raise self.error(f"partitions[{i}] misses {', '.join(missing)}")
        return self


def answer_of(data: Any, error: Callable[[str], Exception]) -> Answer:
    """``data`` (a parsed ``partition.json``) checked against :data:`ANSWER_FILE`.

    Raises
    ------
    Exception
        ``error(text)``: the text names the key path and the reason.
    """
    data = dict(data) if isinstance(data, Mapping) else data
    try:
        ANSWER_FILE.check(data, "")    # no defaults to fill in: the data stays as written
    except DefinitionError as e:
        where = f"{e.key}: " if e.key else ""
        raise error(f"{where}{e.reason}") from None
    parts = tuple(AnswerPart(
        id=p.get("id"), device=p.get("device"), instance=p.get("instance"),
        node_names=_names(p.get("node_names")), inputs=_names(p.get("inputs")),
        outputs=_names(p.get("outputs")), file=p.get("file"))
        for p in data["partitions"])
    return Answer(data, parts, error)


def read_answer(path: str | os.PathLike, error: Callable[[str], Exception]) -> Answer:
    """The ``partition.json`` at ``path`` (a file, or the OUT_DIR holding it): a regular
    file, bounded, JSON (:func:`hetero_solve.readers.read_json`), checked by
    :func:`answer_of`.  ``error(reason)`` makes the caller's error (naming the file)."""
    path = Path(path)
    if path.is_dir():
        path = path / ANSWER_NAME
    return answer_of(read_json(path, error), error)


def _names(value: list | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


__all__ = ["ANSWER_NAME", "ANSWER_FILE", "Answer", "AnswerPart", "answer_of", "read_answer"]
