"""``hetero_solve.Session`` against one onnxruntime session of the original model (issue 25).

For every committed corpus model x rule profile: the heuristic's answer is written, loaded once
into a ``Session`` and run; the original runs in one ``InferenceSession`` on the CPU.  Both use
the same ``SessionOptions`` (onnxruntime's default optimisation level, one intra-op thread, so
that a loaded machine disturbs them alike).  Runs are paired (original, then session, then
the session with I/O binding on the CPU, in turn) after a warm-up; medians are
reported, and the overhead per part ``(session - original) / parts``.

    python benchmarks/bench_session.py                      # all models x profiles, 21 runs each
    python benchmarks/bench_session.py --runs 7 --models bert-tiny-legacy --out /tmp/s.md

Writes ``benchmarks/results/session.md`` and ``session.json`` (``--out`` for another file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import hetero_solve as hs  # noqa: E402
from hetero_solve.export import write_result  # noqa: E402
from hetero_solve.run.backend import RunOptions  # noqa: E402
from hetero_solve.run.onnxruntime import load_model  # noqa: E402
from corpus import truth as C  # noqa: E402

OPTIONS = RunOptions(intra_op_threads=1)


def measure(name: str, rules: Path, runs: int, tmp: Path) -> dict:
    entry = C.load_corpus()[name]
    path = C.model_file(name, entry)
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes"):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    result = hs.solve(str(path), str(rules), engine="heuristic", **kw)
    out = write_result(result, tmp / f"{name}-{rules.stem}", annotated=False, dots=False)
    feeds = C.random_feeds(onnx.load(str(path), load_external_data=False), entry, seed=0)
    original = load_model(str(path), OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = hs.Session(out, options=OPTIONS)
        bound = hs.Session(out, options=OPTIONS)
    for runner in bound.parts:            # I/O binding with OrtValues on the CPU too
        runner.binding, runner._binding = True, runner.session.io_binding()
    part_feed = {k: v for k, v in feeds.items() if k in session.manifest["graph_inputs"]}
    orig_feed = {t.name: feeds[t.name] for t in original.inputs}
    times = {"original": [], "session": [], "io_binding": []}
    for i in range(runs + 2):             # two warm-up rounds
        t0 = time.perf_counter()
        values = original.run(orig_feed)
        [original.to_numpy(v) for v in values.values()]
        t1 = time.perf_counter()
        session.run(None, part_feed)
        t2 = time.perf_counter()
        bound.run(None, part_feed)
        t3 = time.perf_counter()
        if i >= 2:
            times["original"].append(t1 - t0)
            times["session"].append(t2 - t1)
            times["io_binding"].append(t3 - t2)
    med = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    parts = len(session.parts)
    return {"model": name, "profile": rules.stem, "parts": parts,
            "original_ms": med["original"] * 1e3, "session_ms": med["session"] * 1e3,
            "io_binding_ms": med["io_binding"] * 1e3,
            "overhead_ms": (med["session"] - med["original"]) * 1e3,
            "overhead_per_part_us": (med["session"] - med["original"]) * 1e6 / parts,
            "original_min_ms": low["original"] * 1e3, "session_min_ms": low["session"] * 1e3,
            "io_binding_min_ms": low["io_binding"] * 1e3,
            "overhead_per_part_min_us": (low["session"] - low["original"]) * 1e6 / parts,
            "load_s": session.load_seconds, "original_load_s": original.load_seconds,
            "runs": runs, "times": {k: [round(x * 1e6, 1) for x in v] for k, v in times.items()}}


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "onnxruntime": ort.__version__,
            "commit": commit}


def report(rows: list[dict], info: dict, load: tuple) -> str:
    L = ["# Session against one onnxruntime session of the original", "",
         "`benchmarks/bench_session.py`: every committed corpus model x rule profile, the "
         "heuristic's answer loaded once into `hetero_solve.Session` (onnxruntime, I/O binding) "
         "against the original model in one `InferenceSession`, both on the CPU provider with "
         "the same session options (optimisation level `all`, 1 intra-op thread). "
         f"Medians (and fastest) of {rows[0]['runs'] if rows else 0} paired runs after two "
         "warm-ups. "
         "`I/O binding`: the same parts with every value an `OrtValue` bound through "
         "`IOBinding` (what `Session` does on device providers; on the CPU it uses numpy "
         "arrays over onnxruntime's buffers, which the rows show to be cheaper).", "",
         f"- Machine: {info['cpu']}, {info['cores']} cores; {info['platform']}; Python "
         f"{info['python']}; onnxruntime {info['onnxruntime']}; commit {info['commit']}.",
         f"- Load average while measuring: {load[0]:.1f} at the start, {load[1]:.1f} at the "
         "end (a machine shared with other work: times are noisy, medians of paired runs).", ""]
    multi = [r for r in rows if r["parts"] > 1]
    if multi:
        for key, what in (("overhead_per_part_us", "medians"), ("overhead_per_part_min_us",
                                                                 "fastest runs")):
            per_part = [r[key] for r in multi]
            L.append(f"- Overhead per part ({what}; {len(multi)} rows with more than one "
                     f"part): median {statistics.median(per_part):.0f} µs, quartiles "
                     f"{np.percentile(per_part, 25):.0f}-{np.percentile(per_part, 75):.0f} µs.")
        ratio = [r["session_min_ms"] / r["original_min_ms"] for r in rows]
        hand = [r["io_binding_min_ms"] / r["session_min_ms"] for r in multi]
        L += [f"- Session / original (fastest runs): median {statistics.median(ratio):.2f}x, "
              f"{min(ratio):.2f}x-{max(ratio):.2f}x over {len(rows)} rows; the same parts with "
              f"I/O binding on the CPU / session: median {statistics.median(hand):.2f}x.", ""]
    L += ["| model | profile | parts | original ms | session ms | I/O binding ms | "
          "per part µs | fastest: original / session ms | per part µs | load s |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        L.append(f"| {r['model']} | {r['profile']} | {r['parts']} | {r['original_ms']:.3f} | "
                 f"{r['session_ms']:.3f} | {r['io_binding_ms']:.3f} | "
                 f"{r['overhead_per_part_us']:.0f} | {r['original_min_ms']:.3f} / "
                 f"{r['session_min_ms']:.3f} | {r['overhead_per_part_min_us']:.0f} | "
                 f"{r['load_s']:.2f} |")
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--models", default="", help="comma-separated corpus names (default: all "
                                                 "committed)")
    ap.add_argument("--profiles", default="", help="comma-separated rule profile stems")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "session.md"))
    args = ap.parse_args()
    corpus = C.load_corpus()
    names = [n for n, e in corpus.items() if e.get("stored") == "committed"]
    if args.models:
        names = [n for n in names if n in args.models.split(",")]
    profiles = sorted((ROOT / "rules").glob("*.yaml"))
    if args.profiles:
        profiles = [p for p in profiles if p.stem in args.profiles.split(",")]
    load0 = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for rules in profiles:
                row = measure(name, rules, args.runs, Path(tmp))
                rows.append(row)
                print(f"{name:30s} {rules.stem:12s} parts {row['parts']:3d}  original "
                      f"{row['original_ms']:8.3f} ms  session {row['session_ms']:8.3f} ms  "
                      f"per part {row['overhead_per_part_us']:6.0f} us", flush=True)
    info = machine()
    out = Path(args.out)
    out.write_text(report(rows, info, (load0, os.getloadavg()[0])))
    out.with_suffix(".json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1)
                                        + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
