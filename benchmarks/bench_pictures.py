"""Benchmark ``--pictures``: the time to draw an answer's two pictures next to the time to
solve it (issue 31: pictures at most 2x the solve at 1k nodes).

    python benchmarks/bench_pictures.py                         # 1k-node models, png, 3 rounds
    python benchmarks/bench_pictures.py --sizes 1000,3000 --formats png,svg --repeat 5

For every case (a generated model of ``--sizes`` nodes, ``gen_models.py``, with a rule
profile and dims, as ``bench_pipeline.CASES``) and format, each round runs in this process:

- ``solve``: ``hetero_solve.solve`` with its defaults (heuristic, exact refinement, checks);
- ``pictures``: ``export.dot.write_pictures`` of that answer: ``partitions.<fmt>`` and
  ``affinity.<fmt>``, laid out and drawn by matplotlib (the first round also pays
  matplotlib's import, as a command does; reported apart as ``first``).

``ratio`` is the median over rounds of pictures / solve (target <= 2).  The load average is
written down with the numbers (measure on a quiet machine).  Writes
``benchmarks/results/pictures.md`` and ``pictures.json``; models go to ``benchmarks/out/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_pipeline import CASES, RESULTS, ROOT, ensure_model, load_avg, machine_info  # noqa: E402

RATIO_TARGET = 2.0
DEFAULT_CASES = ("tf-seq-npu", "cnn-npu", "layered-gpu")


def measure(case: str, size: int, fmt: str, repeat: int) -> dict:
    import hetero_solve as hs
    from hetero_solve.export.dot import write_pictures
    model, rules, dims, description = CASES[case]
    path = ensure_model(model, size)
    rules_path = ROOT / rules.split("#")[0]
    solves, pictures, first = [], [], None
    for k in range(repeat + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            result = hs.solve(path, rules_path, dims=dims)
            t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            write_pictures(result.problem, result.solution, result.metrics.part_memory,
                           Path(tmp), fmt, path.stem)
            t2 = time.perf_counter()
        if k == 0:
            first = t2 - t1        # matplotlib's import and font cache, once per process
            continue
        solves.append(t1 - t0)
        pictures.append(t2 - t1)
    ratios = [p / s for p, s in zip(pictures, solves)]
    return {"case": case, "size": size, "nodes": result.problem.n, "format": fmt,
            "description": description, "parts": result.metrics.partitions,
            "solve_s": statistics.median(solves), "pictures_s": statistics.median(pictures),
            "first_pictures_s": first, "ratio": statistics.median(ratios)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--formats", default="png")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "pictures"))
    args = parser.parse_args()
    before = load_avg()
    rows = [measure(case, int(size), fmt, args.repeat)
            for case in args.cases.split(",") for size in args.sizes.split(",")
            for fmt in args.formats.split(",")]
    after = load_avg()
    data = {"machine": machine_info(), "load_before": before, "load_after": after,
            "repeat": args.repeat, "rows": rows}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    lines = ["# Pictures against the solve", "",
             f"`python benchmarks/bench_pictures.py --cases {args.cases} --sizes {args.sizes} "
             f"--formats {args.formats} --repeat {args.repeat}`; load average "
             f"{before[0]:.1f} before, {after[0]:.1f} after; medians of {args.repeat} rounds "
             f"in one process (the first round, with matplotlib's import, apart).", "",
             f"Target: pictures <= {RATIO_TARGET:g} x solve.", "",
             "| case | nodes | parts | format | solve s | pictures s | first pictures s | ratio |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['case']} | {r['nodes']} | {r['parts']} | {r['format']} | "
              f"{r['solve_s']:.2f} | {r['pictures_s']:.2f} | {r['first_pictures_s']:.2f} | "
              f"{r['ratio']:.2f} |" for r in rows]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
