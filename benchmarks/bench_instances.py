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
INSTANCES = {"BERT-3": ("throughput_bert_l-3_inference.json", 27.9186),
             "ResNet-50": ("throughput_resnet50_inference.json", 124.349)}
ROWS = [("throughput", True), ("throughput", False), ("latency", False)]


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
                   f"{r['dp'] if r['dp'] is not None else ''} | {r['seconds']:.2f} | "
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
        for objective, contiguous in ROWS:
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
