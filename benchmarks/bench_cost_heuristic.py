"""The cost heuristic against the proven optimum (issue 38 item 4): how far the start the
pipeline builds under a cost objective (fewest parts, cost islands, and under throughput the
pipeline stages of ``algorithms/stages.py``) is from what the exact engine proves, and how
long the heuristic takes.

    python benchmarks/bench_cost_heuristic.py                 # print the tables
    python benchmarks/bench_cost_heuristic.py --write         # also benchmarks/results/cost-heuristic.md
    python benchmarks/bench_cost_heuristic.py --scale 100000  # cost islands' seconds at these sizes

Rows: each committed corpus model under the roofline rule file of ``bench_costs.py``
(``benchmarks/rules/npu-cpu-roofline.yaml``) for latency and for throughput, and the sixteen
literature graphs (``benchmarks/tarnawski2020/``, contiguous throughput). Per row: the
heuristic's value, the exact engine's (``--work-limit``, deterministic), its status and
bound, the best single device, and heuristic / exact. The summary gives the geometric mean of
heuristic / exact over the rows whose exact answer is proven. Scale: the generated CNN of
``gen_models.py``, cost islands alone, median of ``--repeats`` runs (take the figures with
the machine to itself; the load is printed beside them).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import hetero_solve as hs  # noqa: E402
from hetero_solve.budget import Budget  # noqa: E402
from hetero_solve.instances.tarnawski import load_instance  # noqa: E402
from hetero_solve.pipeline import initial_solution, prepare, solve_problem  # noqa: E402
from hetero_solve.problem import Objective  # noqa: E402
from hetero_solve.solution import objective_term  # noqa: E402

RULES = HERE / "rules" / "npu-cpu-roofline.yaml"
LITERATURE = HERE / "tarnawski2020"


def row(name: str, problem, objective: str, work: float) -> dict:
    t = time.perf_counter()
    start = initial_solution(problem)
    seconds = time.perf_counter() - t
    heur = objective_term(problem, start, objective)
    p, sol, metrics, single = solve_problem(problem, budget=Budget.of(work_limit=work))
    exact = getattr(metrics, objective)
    return {"name": name, "objective": objective, "nodes": problem.n, "heuristic": heur,
            "how": start.algorithm, "seconds": seconds, "exact": exact, "status": sol.status,
            "bound": sol.stats.get("cost_bounds", {}).get(objective),
            "single": None if single is None else getattr(single, objective),
            "ratio": heur / exact if exact else 1.0}


def corpus_rows(work: float) -> list[dict]:
    sys.path.insert(0, str(ROOT / "corpus"))
    import truth as T
    rows = []
    for name, entry in T.load_corpus().items():
        path = T.model_file(name, entry)
        if not Path(path).exists():
            continue
        mg = hs.load_model(str(path), dims=entry.get("dims") or {},
                           shapes=entry.get("shapes") or None)
        for objective in ("latency", "throughput"):
            try:
                problem = prepare(mg, str(RULES), objective=Objective(order=(objective,))).problem
            except hs.HeteroSolveError as e:
                print(f"{name}: {e}", file=sys.stderr)
                break
            rows.append(row(name, problem, objective, work))
            print(line(rows[-1]), flush=True)
    return rows


def literature_rows(work: float) -> list[dict]:
    rows = []
    for path in sorted(LITERATURE.glob("throughput_*.json")):
        problem = load_instance(path, Objective(order=("throughput",)), contiguous=True)
        rows.append(row(path.stem[len("throughput_"):], problem, "throughput", work))
        print(line(rows[-1]), flush=True)
    return rows


HEADER = ["| problem | objective | nodes | heuristic (how) | s | exact | status | bound | "
          "single device | heuristic / exact |",
          "| --- | --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |"]


def line(r: dict) -> str:
    g = lambda x: "" if x is None else f"{x:.6g}"  # noqa: E731
    return (f"| {r['name']} | {r['objective']} | {r['nodes']} | {g(r['heuristic'])} "
            f"({r['how']}) | {r['seconds']:.2f} | {g(r['exact'])} | {r['status']} | "
            f"{g(r['bound'])} | {g(r['single'])} | {r['ratio']:.4f} |")


def geomean(rows: list[dict]) -> tuple[float, int]:
    proven = [r["ratio"] for r in rows if r["status"] == "optimal" and r["ratio"] > 0]
    if not proven:
        return float("nan"), 0
    return math.exp(sum(math.log(x) for x in proven) / len(proven)), len(proven)


def scale(sizes: list[int], repeats: int) -> list[str]:
    import onnx
    import gen_models
    from hetero_solve.algorithms.greedy import heuristic
    from hetero_solve.algorithms.islands import cost_islands
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    lines = ["| nodes | cost islands (s, median) | runs | spread (s) | load before / after |",
             "| ---: | ---: | ---: | --- | --- |"]
    for n in sizes:
        path = out / f"costs-cnn-{n}.onnx"
        if not path.exists():
            onnx.save(gen_models.cnn(n), path)
        mg = hs.load_model(str(path), dims={"batch": 1})
        p = prepare(mg, str(RULES), objective=Objective(order=("latency",))).problem
        start = heuristic(p)
        before = os.getloadavg()[0]
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            cost_islands(p, start)
            runs.append(time.perf_counter() - t)
        lines.append(f"| {p.n} | {statistics.median(runs):.3f} | {repeats} | "
                     f"{min(runs):.3f}-{max(runs):.3f} | {before:.2f} / {os.getloadavg()[0]:.2f} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    warnings.simplefilter("ignore", hs.HeteroSolveWarning)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-limit", type=float, default=30.0)
    ap.add_argument("--scale", default="", help="comma-separated sizes (generated CNN)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.scale:
        text = "\n".join(scale([int(x) for x in args.scale.split(",")], args.repeats))
        print(text)
        return
    load = os.getloadavg()[0]
    corpus = corpus_rows(args.work_limit)
    literature = literature_rows(args.work_limit)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=False,
                            capture_output=True, text=True).stdout.strip()
    parts = [f"# The cost heuristic against the proven optimum\n\n"
             f"`python benchmarks/bench_cost_heuristic.py --work-limit {args.work_limit:g}` at "
             f"{commit}, {os.cpu_count()} cores, load {load:.1f} at the start and "
             f"{os.getloadavg()[0]:.1f} at the end (the heuristic's seconds are one run each: "
             f"upper bounds on a shared machine).\n"]
    for title, rows in (("Corpus, roofline costs", corpus), ("Literature graphs", literature)):
        gm, k = geomean(rows)
        parts.append(f"## {title}\n\n" + "\n".join(HEADER + [line(r) for r in rows]) +
                     f"\n\nGeometric mean of heuristic / exact over the {k} proven rows: "
                     f"{gm:.4f}.\n")
    text = "\n".join(parts)
    print(text)
    if args.write:
        (HERE / "results" / "cost-heuristic.md").write_text(text)


if __name__ == "__main__":
    main()
