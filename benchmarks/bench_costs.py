"""Costs from rule files (issue 30): what the latency objective buys, and what it costs.

    python benchmarks/bench_costs.py                      # corpus table + 1k/10k/100k scale
    python benchmarks/bench_costs.py --sizes 1000 --time-limit 5

Two tables, written to ``benchmarks/results/costs.md`` (with the machine load):

- **corpus**: each corpus model under a typical NPU + CPU rule file with rooflines
  (``benchmarks/rules/npu-cpu-roofline.yaml``: the NPU takes ``npu-static.yaml``'s ops with
  static shapes at 4 TFLOPS / 20 GB/s, 100 us per part, an 8 GB/s link with 20 us per tensor;
  the CPU 200 GFLOPS / 20 GB/s): the predicted latency of the fewest-parts answer, of the
  latency answer (``--objective latency``) and of the whole model on the CPU, with the parts,
  the status and the seconds;
- **scale**: the generated CNN of ``gen_models.py`` at each size (batch 1): seconds to compile with the
  cost model (FLOPs and bytes per node) and without, of the fewest-parts heuristic and of the
  cost-aware heuristic (``algorithms/islands.py``), one run each (the load is printed: on a
  shared machine, read them as upper bounds).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import warnings  # noqa: E402

import onnx  # noqa: E402
import yaml  # noqa: E402

import hetero_solve as hs  # noqa: E402
from hetero_solve.algorithms.greedy import heuristic  # noqa: E402
from hetero_solve.algorithms.islands import cost_islands  # noqa: E402
from hetero_solve.pipeline import prepare  # noqa: E402
from hetero_solve.problem import Objective  # noqa: E402
from hetero_solve.units import format_seconds  # noqa: E402

RULES = HERE / "rules" / "npu-cpu-roofline.yaml"
LATENCY = Objective(order=("latency",))


def corpus_rows(time_limit: float) -> list[str]:
    sys.path.insert(0, str(ROOT / "corpus"))
    import truth as T
    rows = ["| model | nodes | fewest parts: parts, latency | latency answer: parts, latency, "
            "status, s | CPU alone | gain over CPU |",
            "| --- | ---: | --- | --- | ---: | ---: |"]
    for name, entry in T.load_corpus().items():
        path = T.model_file(name, entry)
        if not Path(path).exists():
            continue
        given = {"dims": entry.get("dims") or {}, "shapes": entry.get("shapes") or None}
        try:
            fewest = hs.solve(str(path), str(RULES), time_limit=time_limit, **given)
            t0 = time.perf_counter()
            fast = hs.solve(str(path), str(RULES), time_limit=time_limit, objective=LATENCY,
                            **given)
            seconds = time.perf_counter() - t0
        except hs.HeteroSolveError as e:
            rows.append(f"| {name} | | {' '.join(str(e).split())[:80]} | | | |")
            continue
        single = fast.single_device
        alone = single.latency if single is not None else None
        gain = f"{alone / fast.metrics.latency:.2f}x" if alone else ""
        rows.append(f"| {name} | {fast.problem.n} | {fewest.metrics.partitions}, "
                    f"{format_seconds(fewest.metrics.latency)} | {fast.metrics.partitions}, "
                    f"{format_seconds(fast.metrics.latency)}, {fast.solution.status}, "
                    f"{seconds:.1f} | {format_seconds(alone)} | {gain} |")
        print(rows[-1], flush=True)
    return rows


def scale_rows(sizes: list[int]) -> list[str]:
    import gen_models
    rows = ["| nodes | compile without costs (s) | with costs (s) | heuristic (s) | "
            "cost islands (s) | parts: fewest / islands | latency: fewest / islands |",
            "| ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    plain = yaml.safe_load(RULES.read_text())
    for d in plain["devices"]:
        for key in ("roofline", "part_cost", "link"):
            d.pop(key, None)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    for n in sizes:
        path = out / f"costs-cnn-{n}.onnx"
        if not path.exists():
            onnx.save(gen_models.cnn(n), path)
        mg = hs.load_model(str(path), dims={"batch": 1})
        t0 = time.perf_counter()
        prepare(mg, plain)
        t1 = time.perf_counter()
        p = prepare(mg, str(RULES), objective=LATENCY).problem
        t2 = time.perf_counter()
        start = heuristic(p)
        t3 = time.perf_counter()
        sol = cost_islands(p, start)
        t4 = time.perf_counter()
        m0, m1 = hs.evaluate(p, start), hs.evaluate(p, sol)
        rows.append(f"| {p.n} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | {t4 - t3:.2f} | "
                    f"{m0.partitions} / {m1.partitions} | {format_seconds(m0.latency)} / "
                    f"{format_seconds(m1.latency)} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    warnings.simplefilter("ignore", hs.HeteroSolveWarning)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--no-corpus", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    lines = ["# Costs from rule files: the latency objective on the corpus, and its cost", "",
             f"Machine: {os.cpu_count()} cores, load {load:.1f} at the start "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); rule file "
             f"`benchmarks/rules/{RULES.name}`; `python benchmarks/bench_costs.py "
             f"--sizes {args.sizes} --time-limit {args.time_limit:g}`.", ""]
    if not args.no_corpus:
        lines += ["## Corpus", "", *corpus_rows(args.time_limit), ""]
    lines += ["## Scale (generated CNN)", "",
              *scale_rows([int(x) for x in args.sizes.split(",") if x]), ""]
    target = HERE / "results" / "costs.md"
    target.write_text("\n".join(lines))
    print(f"written {target}")


if __name__ == "__main__":
    main()
