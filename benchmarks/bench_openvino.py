"""hetero-solve's parts next to OpenVINO HETERO's own split (issue 25), on every committed corpus
model x every profile.

    python benchmarks/bench_openvino.py                       # everything (~20 min on 2 loaded cores)
    python benchmarks/bench_openvino.py --models bert-tiny-legacy --rules rules/npu-static.yaml
    python benchmarks/bench_openvino.py --engine heuristic    # quicker

Per model x profile:

- **ours**: ``hetero_solve.solve`` (default engine and time limit, the corpus's dims and shapes):
  parts and status; then the answer as an affinity map handed to HETERO exactly as ``hetero-solve
  export openvino`` writes it, and HETERO's ``HETERO_NUMBER_OF_SUBMODELS``;
- **naive**: every node on its first supporting device (``allowed[v][0]``: what HETERO's
  automatic mode does with per-device QueryNetwork answers, and onnxruntime's provider order),
  hetero-solve's model of HETERO's grouping of it (connected same-device regions,
  ``algorithms/regions.py``), and HETERO's real submodel count for it (the same ONNX -> OpenVINO
  op mapping as the export).

Every rule-file device is compiled by a real plugin on this CPU-only machine: OpenVINO's CPU
plugin is registered a second time under ``CPU<NAME>`` for each device that is not ``CPU``
(OpenVINO accepts a plugin under any name containing its own), so HETERO sees as many distinct
devices as the profile has and splits as it would on the real ones.  Writes
``benchmarks/results/openvino.md`` and ``openvino.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CI", "true")   # no OpenVINO import-time telemetry from a benchmark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

import hetero_solve as hs  # noqa: E402
from hetero_solve.algorithms.regions import regions  # noqa: E402
from hetero_solve.export import write_result  # noqa: E402
from hetero_solve.export.openvino import (affinity_model, export_openvino,  # noqa: E402
                                          hetero_submodels, input_shapes, tensor_devices,
                                          _ov_line)

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RULES = sorted((ROOT / "rules").glob("*.yaml")) + \
    sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))


def committed_models() -> list[tuple[str, dict]]:
    entries = yaml.safe_load((ROOT / "corpus" / "corpus.yaml").read_text())["models"]
    return [(name, e) for name, e in entries.items()
            if e.get("stored") == "committed" and (ROOT / "corpus" / "models" / f"{name}.onnx").is_file()]


def alias(device: str) -> str:
    """The OpenVINO device name a rule-file device is compiled on here."""
    return "CPU" if device == "CPU" else "CPU" + "".join(c for c in device.upper() if c.isalnum())


def make_core(device_names):
    import openvino as ov
    core = ov.Core()
    lib = Path(ov.__file__).parent / "libs" / "libopenvino_intel_cpu_plugin.so"
    for name in sorted({alias(d) for d in device_names} - {"CPU"}):
        core.register_plugin(str(lib), name)
    return core


def naive(result, rules: Path, onnx_path: Path, core, shapes) -> dict:
    """Every node on its first supporting device: our regions (and whether they are a valid
    partition: acyclic, value inputs, memory) and HETERO's submodels."""
    p = result.problem
    preferred = [p.allowed[v][0] for v in range(p.n)]
    ours_regions = len(set(regions(p, preferred)))
    names = [d.name for d in p.devices]
    report = hs.check_affinity(result.model_graph, str(rules),
                               {p.names[v]: names[preferred[v]] for v in range(p.n)},
                               split="regions", optimum=False)
    by_device: dict[str, list[int]] = {}
    for v in range(p.n):
        by_device.setdefault(p.devices[preferred[v]].name, []).append(p.graph_index[v])
    fake = {"partitions": [{"device": d, "nodes": g, "node_names": [None] * len(g)}
                           for d, g in by_device.items()]}
    devices = [d.name for d in p.devices]
    mapping = {d: alias(d) for d in devices}
    made = affinity_model(core, onnx_path, tensor_devices(onnx_path, fake), mapping, devices,
                          shapes)
    return {"naive_regions": ours_regions, "naive_valid": report.valid,
            "naive_submodels": hetero_submodels(core, made.model, made.priorities)}


def measure(name: str, entry: dict, rules: Path, engine: str) -> dict:
    onnx_path = ROOT / "corpus" / "models" / f"{name}.onnx"
    row = {"model": name, "rules": rules.stem}
    t0 = time.perf_counter()
    result = hs.solve(onnx_path, rules, dims=entry.get("dims"), shapes=entry.get("shapes"),
                      engine=engine)
    row.update(nodes=result.problem.n, parts=result.metrics.partitions,
               status=result.solution.status, solve_seconds=round(time.perf_counter() - t0, 2))
    core = make_core([d.name for d in result.problem.devices])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "answer"
        write_result(result, out)
        mapping = {d.name: alias(d.name) for d in result.problem.devices}
        try:
            t0 = time.perf_counter()
            exported = export_openvino(out, mapping, shapes=entry.get("shapes"), core=core)
            row.update(ours_submodels=exported.submodels,
                       compile_seconds=round(time.perf_counter() - t0, 2))
            manifest = json.loads((out / "partition.json").read_text())
            fixed, _ = input_shapes(onnx_path, manifest, entry.get("shapes"))
            row.update(naive(result, rules, onnx_path, core, fixed))
        except Exception as e:   # noqa: BLE001 (OpenVINO refuses the model: say so)
            row["error"] = _ov_line(e)
    return row


def table(rows: list[dict]) -> str:
    head = ("| model | profile | nodes | ours: parts | status | HETERO submodels of ours | "
            "naive: regions (valid?) | naive: HETERO submodels | note |")
    lines = [head, "|" + " --- |" * 9]
    for r in rows:
        lines.append(f"| {r['model']} | {r['rules']} | {r.get('nodes', '')} | "
                     f"{r.get('parts', '')} | {r.get('status', '')} | "
                     f"{r.get('ours_submodels', '')} | {r.get('naive_regions', '')}"
                     f"{'' if 'naive_valid' not in r else ' (valid)' if r['naive_valid'] else ' (invalid)'} | "
                     f"{r.get('naive_submodels', '')} | {r.get('error', '')} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--rules", nargs="*", type=Path)
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--out", type=Path, default=RESULTS / "openvino.md")
    args = ap.parse_args()
    import openvino as ov
    models = [(n, e) for n, e in committed_models() if not args.models or n in args.models]
    rules = args.rules or DEFAULT_RULES
    rows = []
    for name, entry in models:
        for r in rules:
            rows.append(measure(name, entry, r, args.engine))
            print(json.dumps(rows[-1]), flush=True)
    load = os.getloadavg()
    import subprocess
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    head = (f"# hetero-solve's parts next to OpenVINO HETERO's submodels\n\n"
            f"`python benchmarks/bench_openvino.py` (engine {args.engine}) at {commit}; OpenVINO "
            f"{ov.__version__}, Python {platform.python_version()}, {os.cpu_count()} cores, "
            f"load average {load[0]:.1f} at the end. See the script's docstring for what each "
            "column is.\n\n")
    args.out.write_text(head + table(rows) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
