"""Run an exported partition with onnxruntime: the parts in id order, tensors passed between
them by name (SPEC section 7).  Each part runs with the execution providers its device names in
the rule file (``runtime: {onnxruntime: ...}``), CPU when none is given or available."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_PROVIDERS = ["CPUExecutionProvider"]


@dataclass
class PartRun:
    id: int
    device: str
    providers: list[str]
    seconds: float
    bytes_in: int
    bytes_out: int


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    parts: list[PartRun] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.parts)


def load_manifest(out_dir: str | os.PathLike) -> dict:
    path = Path(out_dir) / "partition.json"
    if not path.exists():
        from .errors import ModelError
        raise ModelError(out_dir, "no partition.json here: pass the OUT_DIR hetero-solve wrote")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def providers_for(device: dict) -> list[str]:
    """Execution providers a device asks for, keeping only those this onnxruntime has."""
    import onnxruntime as ort
    wanted = (device.get("runtime") or {}).get("onnxruntime")
    if not wanted:
        return list(DEFAULT_PROVIDERS)
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    have = set(ort.get_available_providers())
    chosen = [p for p in wanted if p in have]
    if "CPUExecutionProvider" not in chosen:
        chosen.append("CPUExecutionProvider")
    return chosen


def run_partitioned(out_dir: str | os.PathLike, feeds: dict[str, np.ndarray]) -> RunResult:
    """Run every part in id order on ``feeds`` (the original model's inputs); return the
    original model's outputs and per-part timings."""
    import onnxruntime as ort
    out_dir = Path(out_dir)
    manifest = load_manifest(out_dir)
    devices = {d["name"]: d for d in manifest.get("devices", [])}
    env: dict[str, np.ndarray] = dict(feeds)
    runs: list[PartRun] = []
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    for part in sorted(manifest["partitions"], key=lambda p: p["id"]):
        providers = providers_for(devices.get(part["device"], {}))
        sess = ort.InferenceSession(str(out_dir / part["file"]), opts, providers=providers)
        missing = [x for x in part["inputs"] if x not in env]
        if missing:
            raise KeyError(f"part {part['id']} needs {missing}, which no earlier part or input made")
        inputs = {x: env[x] for x in part["inputs"]}
        names = [o.name for o in sess.get_outputs()]
        t0 = time.perf_counter()
        values = sess.run(names, inputs)
        seconds = time.perf_counter() - t0
        env.update(zip(names, values))
        runs.append(PartRun(part["id"], part["device"], providers, seconds,
                            sum(int(np.asarray(v).nbytes) for v in inputs.values()),
                            sum(int(np.asarray(v).nbytes) for v in values)))
    outputs = {}
    for name in manifest["graph_outputs"]:
        if name not in env:
            raise KeyError(f"graph output {name!r} was produced by no part")
        outputs[name] = env[name]
    return RunResult(outputs, runs)


def run_original(model_path: str | os.PathLike, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The unpartitioned model on onnxruntime's CPU provider, for comparison."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(model_path), opts, providers=DEFAULT_PROVIDERS)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))
