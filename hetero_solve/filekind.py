"""What kind of file a path names, from its first bytes: an ONNX model, a rule file (YAML), or
something else.  Used to name a model given where rules are expected, and the reverse."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

HEAD_BYTES = 4096
#: A rule file or catalog is YAML text with one of these top-level keys at a line start.
_RULE_KEYS = re.compile(rb"^(version|devices|include|value_inputs)[ \t]*:", re.MULTILINE)
#: An instance file (Tarnawski et al.'s JSON: ``hetero_solve.instances``) is a JSON object
#: with their top-level keys, or nodes with their per-node keys, in its first kilobytes.
_INSTANCE_KEYS = re.compile(rb'"(maxSizePerFPGA|maxFPGAs|maxCPUs|supportedOnFpga|fpgaLatency)"\s*:')


def content_kind(path: str | os.PathLike) -> str:
    """``"model"`` (an ONNX model), ``"rules"`` (a rule file or catalog), ``"instance"`` (an
    instance file without a model), ``"other"``, or ``"missing"``.  Only regular files are
    opened (a FIFO or a device is ``"other"``), and only their first few kilobytes are read.

    An ONNX model is a protobuf ``ModelProto``: every writer puts field 1 (``ir_version``, a
    small varint) first, so the file starts with the bytes 0x08 and 1..127.  A rule file is
    text with ``version:`` or ``devices:`` at the start of a line.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "other"
    try:
        with open(p, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return "other"
    if len(head) >= 2 and head[0] == 0x08 and 1 <= head[1] < 0x80:
        return "model"
    if b"\x00" not in head and _RULE_KEYS.search(head):
        return "rules"
    if head.lstrip().startswith(b"{") and _INSTANCE_KEYS.search(head):
        return "instance"
    return "other"


def looks_like_json(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file whose first non-blank byte opens a JSON object or
    array (or whose name ends in ``.json``)."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return True
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            return False
        with open(p, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    return head.lstrip()[:1] in (b"{", b"[")
