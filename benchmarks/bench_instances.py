"""Tarnawski et al.'s (NeurIPS 2020) instances: seconds to the proven optimum of time per
sample with contiguous stages (their DP's model) and without (any part may share an instance),
and the latency objective on the same graphs.

    python benchmarks/bench_instances.py            # print the table
    python benchmarks/bench_instances.py --write    # also write benchmarks/results/instances.md

Each contiguous row runs ``repeats`` times in this process (same seed, same answer) and
reports the median wall seconds; the others stop at the time limit unproven and run once.
``cpu`` is the process's CPU seconds per run.
The machine and its load are noted with the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetero_solve.instances.solve import solve_instance  # noqa: E402

DATA = ROOT / "benchmarks" / "tarnawski2020"
# name -> (file, their DP's time per sample on this machine; None: their DP gives none)
INSTANCES = {
    "BERT-3": ("throughput_bert_l-3_inference.json", 27.9185676799125),
    "BERT-3 training": ("throughput_bert_l-3_training.json", 65.30314912208605),
    "BERT-6": ("throughput_bert_l-6_inference.json", 29.57950580645155),
    "BERT-6 training": ("throughput_bert_l-6_training.json", 72.86496632241122),
    "BERT-12": ("throughput_bert_l-12_inference.json", 147.47798444934838),
    "BERT-12 training": ("throughput_bert_L-12_training.json", 437.9976378578455),
    "ResNet-50": ("throughput_resnet50_inference.json", 124.34884977404485),
    "ResNet-50 training": ("throughput_resnet50_training.json", 255.19441645217384),
    "layers BERT-24": ("throughput_layers_bert24_inference.json", 17.78990625),
    "layers BERT-24 training": ("throughput_layers_bert24_training.json", 41.7458125),
    "layers GNMT": ("throughput_layers_gnmt_inference.json", 32.910658203124996),
    "layers GNMT training": ("throughput_layers_gnmt_training.json", 107.0044140625),
    "layers InceptionV3": ("throughput_layers_inceptionv3_inference.json", None),
    "layers InceptionV3 training": ("throughput_layers_inceptionv3_training.json", None),
    "layers ResNet-50": ("throughput_layers_resnet50_inference.json", 33.774666015625),
    "layers ResNet-50 training": ("throughput_layers_resnet50_training.json", 78.63181250000001),
}
#: every graph: contiguous throughput (their DP's model); these two also the other rows
ROWS = [("throughput", True)]
MORE = {"BERT-3": [("throughput", False), ("latency", False)],
        "ResNet-50": [("throughput", False), ("latency", False)]}


def run(name: str, objective: str, contiguous: bool, limit: float, repeats: int) -> dict:
    path = DATA / INSTANCES[name][0]
    walls, cpu0 = [], time.process_time()
    for _ in range(repeats):
        t = time.perf_counter()
        r = solve_instance(path, objective, contiguous=contiguous, time_limit=limit)
        walls.append(time.perf_counter() - t)
    value = getattr(r.metrics, objective)
    return {"instance": name, "objective": objective, "contiguous": contiguous,
            "value": value, "bound": r.solution.stats["cost_bounds"].get(objective),
            "status": r.solution.status, "parts": r.metrics.partitions,
            "seconds": statistics.median(walls),
            "cpu": (time.process_time() - cpu0) / repeats,
            "dp": INSTANCES[name][1] if objective == "throughput" and contiguous else None}


def table(rows: list[dict]) -> str:
    out = ["| instance | objective | stages | value | lower bound | status | parts | their DP | seconds (median) | cpu s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['instance']} | {r['objective']} | "
                   f"{'contiguous' if r['contiguous'] else 'any'} | {r['value']:.6g} | "
                   f"{r['bound']:.6g} | {r['status']} | {r['parts']} | "
                   f"{'' if r['dp'] is None else format(r['dp'], '.6g')} | {r['seconds']:.2f} | "
                   f"{r['cpu']:.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rows = []
    for name in INSTANCES:
        for objective, contiguous in ROWS + MORE.get(name, []):
            # rows that stop at the time limit run once: their seconds are the limit
            reps = args.repeats if contiguous else 1
            rows.append(run(name, objective, contiguous, args.time_limit, reps))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]
    text = (f"# Tarnawski et al.'s instances (NeurIPS 2020)\n\n"
            f"`python benchmarks/bench_instances.py --write` at {commit}, {platform.machine()}, "
            f"{os.cpu_count()} cores, load average {load:.1f} at the end, time limit "
            f"{args.time_limit:g} s, median of {args.repeats} runs (contiguous rows).\n\n{table(rows)}\n")
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "instances.md").write_text(text)


if __name__ == "__main__":
    main()
