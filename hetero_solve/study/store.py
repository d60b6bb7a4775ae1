"""Where a study keeps its results: one JSON file per run under ``DIR/runs/``, written as soon
as the run ends (atomically), so an interrupted study loses nothing finished and a restart
reuses every run whose key is already there.  ``results.csv`` is rebuilt from those files.

A run's key hashes what determines its answer: the model file's bytes, the rule file's bytes
and those of its includes, the ``--dim`` values, the algorithm, the time limit and seed for the
algorithms that use them, the memory measure, and the hetero-solve version.  Renaming a file keeps its runs;
editing it reruns them.  Code changes within one version are not seen: start a fresh ``DIR``
(or delete ``DIR/runs``) to measure new code.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

import yaml

FORMAT = 5          # bump when a run's meaning changes: old runs are then recomputed

COLUMNS = ["model", "rules", "algorithm", "nodes", "edges", "parts", "fallback", "transfer",
           "lower_bound", "status", "seconds", "peak_memory", "valid", "reason",
           "objective", "objective_spec", "memory_method", "time_limit", "seed", "dims",
           "missing_dims"]

# Outcomes that say nothing about the algorithm on this input: never reused.
NOT_DONE = ("unavailable",)


def file_digest(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def rules_digest(path: str | os.PathLike, _seen: frozenset[str] = frozenset()) -> str:
    """The rule file's bytes and, recursively, those of the files it includes."""
    path = Path(path).resolve()
    h = hashlib.sha256(path.read_bytes())
    if str(path) in _seen:
        return h.hexdigest()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError):
        return h.hexdigest()        # the compile step reports the bad file
    includes = data.get("include", []) if isinstance(data, dict) else []
    for inc in includes if isinstance(includes, list) else []:
        target = path.parent / str(inc)
        if target.is_file():
            h.update(rules_digest(target, _seen | {str(path)}).encode())
    return h.hexdigest()


def run_key(model_digest: str, rules_digest_: str, dims: dict[str, int], algorithm: str,
            time_limit: float | None, seed: int | None, memory: str = "rss",
            shapes: dict[str, list[int]] | None = None, objective: str | None = None) -> str:
    from .. import __version__
    fields = {"format": FORMAT, "version": __version__,
              "model": model_digest, "rules": rules_digest_,
              "dims": sorted(dims.items()), "algorithm": algorithm,
              "time_limit": time_limit, "seed": seed, "memory": memory}
    if shapes:   # only when given: the keys of studies without --shape stay as they were
        fields["shapes"] = sorted((k, list(v)) for k, v in shapes.items())
    if objective:   # likewise for --objective
        fields["objective"] = objective
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


class RunStore:
    """``DIR/runs/<key>.json``, one per finished run."""

    def __init__(self, out_dir: str | os.PathLike):
        self.dir = Path(out_dir) / "runs"
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def load(self, key: str) -> dict | None:
        """The finished run, or None (absent, unreadable, or an outcome never reused)."""
        try:
            record = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        if record.get("status") in NOT_DONE:
            return None
        return record

    def save(self, record: dict) -> None:
        target = self.path(record["key"])
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        os.replace(tmp, target)     # atomic: a killed study never leaves half a file


def write_csv(path: str | os.PathLike, records: Iterable[dict]) -> None:
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in records:
            row = {c: r.get(c) for c in COLUMNS}
            if row["seconds"] is not None:
                row["seconds"] = f"{row['seconds']:.6f}"
            if isinstance(row["objective"], list):     # the sort key, e.g. 0/3/192
                row["objective"] = "/".join(f"{x:g}" for x in row["objective"])
            if row["dims"] is not None and not isinstance(row["dims"], str):
                row["dims"] = " ".join(f"{k}={v}" for k, v in sorted(row["dims"].items()))
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    os.replace(tmp, path)


def read_csv(path: str | os.PathLike) -> list[dict]:
    """``results.csv`` back as dicts with numbers and booleans typed."""
    ints = ("nodes", "edges", "parts", "fallback", "transfer", "lower_bound", "peak_memory", "seed")
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            r: dict = dict(row)
            for c in ints:
                r[c] = int(r[c]) if r.get(c) not in (None, "") else None
            for c in ("seconds", "time_limit"):
                r[c] = float(r[c]) if r.get(c) not in (None, "") else None
            r["valid"] = {"True": True, "False": False}.get(r.get("valid") or "", None)
            obj = r.get("objective")
            r["objective"] = [float(x) for x in obj.split("/")] if obj else None
            out.append(r)
    return out
