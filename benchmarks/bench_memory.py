"""The heuristic under memory limits (issue 14), and the memory bounds: real models and
generated graphs.

    python benchmarks/bench_memory.py                          # corpus x mem-* profiles + generated
    python benchmarks/bench_memory.py --code /tmp/before --json before.json   # another checkout
    python benchmarks/bench_memory.py --compare before.json    # a before/after table

Per case: the heuristic's fallback, parts and seconds (``hetero_solve.algorithms.greedy.
heuristic``, no exact solver), and the solver-free lower bounds: fallback
(:func:`hetero_solve.fitting.bounds.memory_bounds`) and parts (:func:`hetero_solve.exact.
bounds.lower_bounds`, on the preferred devices when the answer has no fallback).

Real models: every model of ``corpus/corpus.yaml`` present (committed or in the cache, see
``corpus/build.py``) x ``benchmarks/rules/mem-*.yaml``.  Generated: ``cnn_like``,
``transformer_like`` and ``random_layered`` at 1,000 and 5,000 nodes with the memory limits of
``bench_exact.py`` (scaled with the size).

``--solve`` (issue 37) runs the whole default pipeline instead (``hetero_solve.solve``, engine
``auto``, ``--time-limit`` 10 s unless ``--time-limit`` says otherwise) on the corpus rows only:
status, the terms proven, parts, fallback, the parts and fallback bounds, seconds, and whether
a figure counts a tensor of unknown size.

``--code DIR`` measures the ``hetero_solve`` package found in DIR instead (for example an older
commit: ``git archive COMMIT hetero_solve | tar -x -C DIR``); the bounds are then skipped when
that code has none.  Writes markdown to stdout (and ``--json`` rows).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
GENERATED = {   # name -> (generator, keywords, sizes); memory per 1,000 nodes as bench_exact.py
    "cnn-memory-tight": ("cnn_like", {"memory": 8 * MIB, "instances": 2}),
    "cnn-memory-small": ("cnn_like", {"memory": 3 * MIB, "instances": 1}),
    "transformer-memory-tight": ("transformer_like", {"memory": 4 * MIB, "instances": 3}),
    "transformer-memory-small": ("transformer_like", {"memory": 3 * MIB, "instances": 1}),
    "layered-memory-tight": ("random_layered", {"memory": 6 * MIB, "instances": 2}),
}
SIZES = (1000, 5000)


def _row(key: tuple, p, hs) -> dict:
    t0 = time.perf_counter()
    try:
        sol = hs.heuristic(p)
    except Exception as e:     # noqa: BLE001 - a benchmark reports
        return {"case": key, "error": f"{type(e).__name__}: {e}"[:200]}
    seconds = time.perf_counter() - t0
    m = hs.evaluate(p, sol)
    row = {"case": key, "nodes": p.n, "fallback": m.fallback, "parts": m.partitions,
           "valid": not hs.validate(p, sol), "heuristic_s": round(seconds, 2)}
    try:
        from hetero_solve.exact.analysis import device_sets
        from hetero_solve.exact.bounds import lower_bounds
        from hetero_solve.fitting.bounds import memory_bounds
        from hetero_solve.fitting.floors import binding_devices
    except ImportError:
        return row
    t0 = time.perf_counter()
    R = device_sets(p, fixed=False)
    row["fallback_lb"] = memory_bounds(p, R).fallback
    Rb = device_sets(p, fixed=True) if m.fallback == 0 else R
    row["parts_lb"] = lower_bounds(p, Rb, binding_devices(p, Rb)).lb
    row["bounds_s"] = round(time.perf_counter() - t0, 2)
    return row


def corpus_rows(hs) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from corpus import truth as T
    import inspect
    rows = []
    profiles = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))
    for name, entry in T.load_corpus().items():
        path = T.model_file(name, entry)
        if not path.exists():
            continue
        kw = {"dims": dict(entry.get("dims") or {})}
        if entry.get("shapes") and "shapes" in inspect.signature(hs.solve).parameters:
            kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
        for rules in profiles:
            try:
                # the pipeline up to the problem (the profile's dims included), no solving
                r = hs.solve(str(path), str(rules), engine="heuristic", **kw)
            except Exception as e:     # noqa: BLE001
                rows.append({"case": (name, rules.stem), "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            rows.append(_row((name, rules.stem), r.problem, hs))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def solve_rows(hs, time_limit: float) -> list[dict]:
    """The default pipeline on every corpus model present x ``mem-*`` profile."""
    sys.path.insert(0, str(ROOT))
    from corpus import truth as T
    import inspect
    rows = []
    profiles = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))
    for name, entry in T.load_corpus().items():
        path = T.model_file(name, entry)
        if not path.exists() or entry.get("bytes", 0) > 500_000_000:
            continue
        kw = {"dims": dict(entry.get("dims") or {})}
        if entry.get("shapes") and "shapes" in inspect.signature(hs.solve).parameters:
            kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
        for rules in profiles:
            key = (name, rules.stem)
            t0 = time.perf_counter()
            try:
                r = hs.solve(str(path), str(rules), time_limit=time_limit, **kw)
            except Exception as e:     # noqa: BLE001
                rows.append({"case": key, "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            sol, m = r.solution, r.metrics
            bounds = sol.stats.get("bounds", {})
            rows.append({
                "case": key, "nodes": r.problem.n, "status": sol.status,
                "proven": list(sol.stats.get("proven", [])), "parts": m.partitions,
                "parts_lb": sol.lower_bound, "fallback": m.fallback,
                "fallback_lb": bounds.get("fallback", 0 if "fallback" in sol.stats.get("proven", []) else None),
                "transfer": m.transfer, "seconds": round(time.perf_counter() - t0, 2),
                "open_sizes": bool(getattr(r.problem.info, "open_sizes", None)),
                "deterministic": sol.stats.get("deterministic", True)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def solve_table(rows: list[dict], before: dict | None) -> list[str]:
    head = "| case | profile | nodes | status | fallback | bound | parts | bound | s |"
    if before is not None:
        head = ("| case | profile | nodes | status before | status | fallback before | fallback | "
                "bound | parts before | parts | bound | s before | s |")
    out = [head, "| " + " | ".join(["---"] * 2 + ["---:"] * (head.count("|") - 3)) + " |"]
    for r in rows:
        a, b = r["case"]
        if "error" in r:
            out.append(f"| {a} | {b} | | error: {r['error'][:80]} |")
            continue
        if before is None:
            cells = [a, b, r["nodes"], r["status"], r["fallback"], r["fallback_lb"], r["parts"],
                     r["parts_lb"], r["seconds"]]
        else:
            old = before.get(tuple(r["case"]), {})
            cells = [a, b, r["nodes"], old.get("status", ""), r["status"], old.get("fallback", ""),
                     r["fallback"], r["fallback_lb"], old.get("parts", ""), r["parts"],
                     r["parts_lb"], old.get("seconds", ""), r["seconds"]]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return out


def generated_rows(hs) -> list[dict]:
    sys.path.insert(0, str(ROOT / "tests"))   # test-only generators (tests/support/)
    from support import generators
    rows = []
    for name, (gen, kw) in GENERATED.items():
        for n in SIZES:
            kw_n = {**kw, "memory": kw["memory"] * n // 1000}
            try:
                p = getattr(generators, gen)(n, seed=0, **kw_n)
            except Exception as e:     # noqa: BLE001
                rows.append({"case": (name, str(n)), "error": f"{type(e).__name__}: {e}"[:200]})
                continue
            rows.append(_row((name, str(n)), p, hs))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict], before: dict | None) -> list[str]:
    head = "| case | profile | nodes | fallback | bound | parts | bound | heuristic s |"
    sep = "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    if before is not None:
        head = ("| case | profile | nodes | fallback before | fallback | bound | parts before | "
                "parts | bound | heuristic s |")
        sep = "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    out = [head, sep]
    for r in rows:
        a, b = r["case"]
        if "error" in r:
            out.append(f"| {a} | {b} | | error: {r['error'][:80]} |")
            continue
        cells = [a, b, str(r["nodes"])]
        if before is not None:
            old = before.get(tuple(r["case"]), {})
            cells += [str(old.get("fallback", "")), str(r["fallback"]),
                      str(r.get("fallback_lb", "")), str(old.get("parts", "")), str(r["parts"]),
                      str(r.get("parts_lb", "")), str(r["heuristic_s"])]
        else:
            cells += [str(r["fallback"]), str(r.get("fallback_lb", "")), str(r["parts"]),
                      str(r.get("parts_lb", "")), str(r["heuristic_s"])]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", type=Path, help="measure the hetero_solve package in this directory")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--compare", type=Path, help="rows of an earlier run: a before/after table")
    ap.add_argument("--skip-generated", action="store_true")
    ap.add_argument("--solve", action="store_true",
                    help="the whole default pipeline on the corpus rows (issue 37)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    sys.path.insert(0, str(args.code or ROOT))
    warnings.filterwarnings("ignore")
    import hetero_solve as hs
    if args.solve:
        rows = solve_rows(hs, args.time_limit)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=0))
        before = None
        if args.compare:
            before = {tuple(r["case"]): r for r in json.loads(args.compare.read_text())}
        print("\n".join(solve_table(rows, before)))
        ok = [r for r in rows if "error" not in r]
        print(f"\nrows {len(ok)}; optimal {sum(r['status'] == 'optimal' for r in ok)}; "
              f"fallback and parts proven {sum({'fallback', 'partitions'} <= set(r['proven']) for r in ok)}; "
              f"total fallback {sum(r['fallback'] for r in ok)}, parts {sum(r['parts'] for r in ok)}; "
              f"clock-ended {sum(not r['deterministic'] for r in ok)}")
        return
    rows = corpus_rows(hs) + ([] if args.skip_generated else generated_rows(hs))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=0))
    before = None
    if args.compare:
        before = {tuple(r["case"]): r for r in json.loads(args.compare.read_text())}
    print(f"Machine: {os.cpu_count()} cores shared by the team; timings indicative.\n")
    print("\n".join(table(rows, before)))
    ok = [r for r in rows if "error" not in r]
    worse = "n/a"
    if before is not None:
        worse = str(sum(1 for r in ok if (r["fallback"], r["parts"]) > (
            before.get(tuple(r["case"]), {}).get("fallback", float("inf")),
            before.get(tuple(r["case"]), {}).get("parts", float("inf")))))
    print(f"\nTotal fallback: {sum(r['fallback'] for r in ok)}; cases worse than before: {worse}")

if __name__ == "__main__":
    main()
