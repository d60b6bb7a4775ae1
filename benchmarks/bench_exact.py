"""Exact refinement on generated graphs: heuristic parts, exact parts, lower bound, status,
seconds and peak memory, for 1,000, 5,000 and 20,000 nodes.

    python benchmarks/bench_exact.py                       # the full table (about 15 minutes)
    python benchmarks/bench_exact.py --sizes 1000 --quick  # a smoke run
    python benchmarks/bench_exact.py --write               # also write benchmarks/results/exact.md

Each row runs in its own process (peak RSS is that process's), with the default objective
``[fallback, partitions, transfer]`` and the time limits of issue 3: 30 s up to 5,000 nodes,
60 s at 20,000.  ``status`` is the whole objective's; ``parts`` says whether the number of
parts is proven and how (``bound``: the heuristic meets the lower bound, ``sequence``: search
over device sequences, ``cpsat``/``sat``: the solvers).  Targets: proven optimal within 30 s up
to 5,000 nodes; at 20,000 nodes, within 60 s, optimal or strictly better than the heuristic.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024

# name -> (generator, keyword arguments)
GRAPHS = {
    "cnn": ("cnn_like", {}),
    "transformer": ("transformer_like", {}),
    "layered": ("random_layered", {}),
    "layered-3dev": ("random_layered", {"devices": 3}),
    "cnn-3dev": ("cnn_like", {"devices": 3}),
    "cnn-memory": ("cnn_like", {"memory": 12 * MIB, "instances": 2}),   # 12 MiB per 1,000 nodes
    "cnn-memory-tight": ("cnn_like", {"memory": 8 * MIB, "instances": 2}),  # forces fallback
}
DEFAULT = ["cnn", "transformer", "layered", "layered-3dev", "cnn-3dev", "cnn-memory",
           "cnn-memory-tight"]
# memory-limited rows (issue 14): limits per 1,000 nodes forcing no, some and many fallbacks
GRAPHS.update({
    "cnn-memory-small": ("cnn_like", {"memory": 3 * MIB, "instances": 1}),
    "transformer-memory": ("transformer_like", {"memory": 12 * MIB, "instances": 3}),
    "transformer-memory-tight": ("transformer_like", {"memory": 4 * MIB, "instances": 3}),
    "transformer-memory-small": ("transformer_like", {"memory": 3 * MIB, "instances": 1}),
    "layered-memory": ("random_layered", {"memory": 8 * MIB, "instances": 2}),
    "layered-memory-tight": ("random_layered", {"memory": 6 * MIB, "instances": 2}),
    "layered-memory-small": ("random_layered", {"memory": 2 * MIB, "instances": 2}),
})
MEMORY = ["cnn-memory", "cnn-memory-tight", "cnn-memory-small", "transformer-memory",
          "transformer-memory-tight", "transformer-memory-small", "layered-memory",
          "layered-memory-tight", "layered-memory-small"]
MEMORY_LIMITS = {1000: 10.0, 5000: 60.0, 20000: 60.0}   # the targets: 10 s, 60 s


def run_one(graph: str, n: int, time_limit: float, seed: int) -> dict:
    """In a child process: generate, heuristic, refine; return the row."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))   # test-only generators (tests/support/)
    from support import generators
    from hetero_solve.algorithms.greedy import heuristic
    from hetero_solve.exact import refine
    from hetero_solve.solution import evaluate
    from hetero_solve.validate import validate

    gen, kw = GRAPHS[graph]
    if "memory" in kw:      # scale the limit with the model: binding, but not crushing
        kw = {**kw, "memory": kw["memory"] * n // 1000}
    p = getattr(generators, gen)(n, seed=seed, **kw)
    t0 = time.perf_counter()
    h = heuristic(p)
    t1 = time.perf_counter()
    s = refine(p, h, time_limit=time_limit, seed=seed)
    t2 = time.perf_counter()
    assert validate(p, s) == []
    stages = {st["stage"]: st for st in s.stats["stages"]}
    parts = stages.get("partitions", {})
    # when the number of parts was settled: heuristic + the stages up to partitions
    parts_at = t1 - t0 + sum(st["seconds"] for st in s.stats["stages"][
        :[st["stage"] for st in s.stats["stages"]].index("partitions") + 1])
    hm, sm = evaluate(p, h), evaluate(p, s)
    fb = stages.get("fallback", {})
    return {
        "fallback_lb": s.stats.get("bounds", {}).get("fallback"),
        "fallback_proven": fb.get("proven", False), "fallback_method": fb.get("method", ""),
        "proven_terms": s.stats.get("proven", []),
        "graph": graph, "nodes": p.n, "units": s.stats.get("contracted_units"),
        "heuristic": h.num_parts, "exact": s.num_parts, "lower_bound": s.lower_bound,
        "parts_proven": parts.get("proven", False), "parts_method": parts.get("method", ""),
        "status": s.status, "fallback": (hm.fallback, sm.fallback),
        "transfer": (hm.transfer, sm.transfer),
        "heuristic_s": round(t1 - t0, 2), "exact_s": round(t2 - t1, 2),
        "parts_s": round(parts_at, 2),
        "deterministic_s": s.stats.get("deterministic_seconds"),
        "deterministic": s.stats.get("deterministic"),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "time_limit": time_limit,
    }


MEM_RULES = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))


def run_real(name: str, time_limit: float, seed: int) -> list[dict]:
    """In a child process: one corpus model on every memory-limited profile (load once)."""
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))   # the machine is shared
    sys.path.insert(0, str(ROOT))
    from corpus import truth as T
    from hetero_solve.algorithms.greedy import heuristic
    from hetero_solve.compile import compile_problem
    from hetero_solve.errors import InfeasibleError
    from hetero_solve.exact import refine
    from hetero_solve.exact.analysis import device_sets
    from hetero_solve.fitting.floors import binding_devices
    from hetero_solve.model.load import load_model
    from hetero_solve.rules import load_rules
    from hetero_solve.solution import evaluate
    from hetero_solve.validate import validate

    entry = T.load_corpus()[name]
    path = T.model_file(name, entry)
    mg = load_model(str(path), dims=dict(entry.get("dims") or {}))
    rows = []
    for rules_path in MEM_RULES:
        row = {"model": name, "rules": rules_path.stem}
        try:
            p = compile_problem(mg, load_rules(str(rules_path)))
            row["nodes"] = p.n
            row["binds"] = bool(binding_devices(p, device_sets(p, fixed=False)))
            t0 = time.perf_counter()
            try:
                h = heuristic(p)
            except InfeasibleError as e:
                row["heuristic_error"] = str(e)[:120]
                h = None
            t1 = time.perf_counter()
            if h is None:
                from hetero_solve.pipeline import _exact_rescue
                s = _exact_rescue(p, InfeasibleError("greedy"), "auto", time_limit, seed,
                                  lambda _m: None)
            else:
                s = refine(p, h, time_limit=time_limit, seed=seed)
            t2 = time.perf_counter()
            assert validate(p, s) == []
            sm = evaluate(p, s)
            hm = evaluate(p, h) if h is not None else None
            stages = {st["stage"]: st for st in s.stats.get("stages", [])}
            row.update({
                "heuristic": (hm.fallback, hm.partitions) if hm else None,
                "exact": (sm.fallback, sm.partitions),
                "fallback_lb": s.stats.get("bounds", {}).get("fallback"),
                "parts_lb": s.lower_bound, "proven": s.stats.get("proven", []),
                "status": s.status,
                "methods": {k: v.get("method") for k, v in stages.items()},
                "heuristic_s": round(t1 - t0, 2), "exact_s": round(t2 - t1, 2),
                "deterministic_s": s.stats.get("deterministic_seconds"),
                "deterministic": s.stats.get("deterministic")})
        except Exception as e:     # noqa: BLE001 - a benchmark reports, it does not stop
            row["error"] = f"{type(e).__name__}: {e}"[:200]
        rows.append(row)
    return rows


def real_models() -> list[str]:
    """Corpus models present here (committed, or built into the cache)."""
    sys.path.insert(0, str(ROOT))
    from corpus import truth as T
    return [n for n, e in T.load_corpus().items() if T.model_file(n, e).exists()]


def real_table(rows: list[dict]) -> str:
    head = ("| model | profile | nodes | memory binds | heuristic (fallback, parts) "
            "| exact (fallback, parts) | fallback bound | parts bound | proven | status "
            "| seconds (heur + exact) | det. s |\n"
            "| --- | --- | ---: | --- | --- | --- | ---: | ---: | --- | --- | ---: | ---: |")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['rules']} | {r.get('nodes', '')} | | | "
                         f"error: {r['error'][:80]} | | | | | | |")
            continue
        h = r["heuristic"]
        lines.append(
            f"| {r['model']} | {r['rules']} | {r['nodes']} | {'yes' if r['binds'] else 'no'} "
            f"| {f'{h[0]}, {h[1]}' if h else 'failed'} | {r['exact'][0]}, {r['exact'][1]} "
            f"| {'' if r['fallback_lb'] is None else r['fallback_lb']} | {r['parts_lb']} "
            f"| {', '.join(r['proven']) or 'nothing'} | {r['status']} "
            f"| {r['heuristic_s']} + {r['exact_s']} | {r['deterministic_s']} |")
    return "\n".join(lines)


def memory_table(rows: list[dict]) -> str:
    head = ("| graph | nodes | limit s | heuristic (fallback, parts) | exact (fallback, parts) "
            "| fallback bound | fallback proven | parts bound | parts proven | status "
            "| seconds (heur + exact) | det. s |\n"
            "| --- | ---: | ---: | --- | --- | ---: | --- | ---: | --- | --- | ---: | ---: |")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['graph']} | {r['nodes']} | | | error: {r['error'][:80]} "
                         "| | | | | | | |")
            continue
        fbp = f"yes ({r['fallback_method']})" if r["fallback_proven"] else "no"
        pp = f"yes ({r['parts_method']})" if r["parts_proven"] else "no"
        lines.append(
            f"| {r['graph']} | {r['nodes']:,} | {r['time_limit']:g} "
            f"| {r['fallback'][0]}, {r['heuristic']} | {r['fallback'][1]}, {r['exact']} "
            f"| {'' if r['fallback_lb'] is None else r['fallback_lb']} | {fbp} "
            f"| {r['lower_bound']} | {pp} | {r['status']} "
            f"| {r['heuristic_s']} + {r['exact_s']} | {r['deterministic_s']} |")
    return "\n".join(lines)


def machine() -> str:
    import ortools
    import pysat
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, {cpu}; Python {platform.python_version()}, "
            f"OR-Tools {ortools.__version__}, python-sat {pysat.__version__}; "
            f"load average at start {load[0]:.1f}")


def table(rows: list[dict]) -> str:
    head = ("| graph | nodes | units | heuristic | exact | lower bound | parts proven | parts at s "
            "| status | fallback (heur → exact) | transfer (heur → exact) "
            "| seconds (heur + exact) | det. s | peak MB | target |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- | --- | ---: | ---: "
            "| ---: | --- |")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['graph']} | {r['nodes']} | | | | | error: {r['error']} "
                         "| | | | | | | | |")
            continue
        met = r["parts_proven"] and r["parts_s"] <= r["time_limit"] \
            if r["nodes"] <= 5000 else (r["parts_proven"] or r["exact"] < r["heuristic"])
        proven = f"yes ({r['parts_method']})" if r["parts_proven"] else f"no ({r['parts_method']})"
        lines.append(
            f"| {r['graph']} | {r['nodes']:,} | {r['units'] or ''} | {r['heuristic']} "
            f"| {r['exact']} | {r['lower_bound']} | {proven} | {r['parts_s']} | {r['status']} "
            f"| {r['fallback'][0]} → {r['fallback'][1]} "
            f"| {r['transfer'][0]:,} → {r['transfer'][1]:,} "
            f"| {r['heuristic_s']} + {r['exact_s']} | {r['deterministic_s']} | {r['peak_mb']} "
            f"| {'met' if met else 'missed'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default=",".join(DEFAULT))
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="time limits of 5 s")
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/exact.md")
    ap.add_argument("--one", nargs=3, metavar=("GRAPH", "N", "LIMIT"), help=argparse.SUPPRESS)
    ap.add_argument("--memory", action="store_true",
                    help="the memory-limited graphs (10 s at 1,000 nodes, 60 s above)")
    ap.add_argument("--real", action="store_true",
                    help="corpus models on benchmarks/rules/mem-*.yaml (10 s each)")
    ap.add_argument("--models", default="", help="with --real: these models only")
    ap.add_argument("--one-real", nargs=2, metavar=("MODEL", "LIMIT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]), float(args.one[2]), args.seed)))
        return
    if args.one_real:
        print(json.dumps(run_real(args.one_real[0], float(args.one_real[1]), args.seed)))
        return
    if args.memory:
        info = machine()
        print(info, flush=True)
        rows = []
        for graph in MEMORY:
            for n in map(int, args.sizes.split(",")):
                limit = MEMORY_LIMITS.get(n, 60.0)
                cmd = [sys.executable, __file__, "--seed", str(args.seed), "--one", graph,
                       str(n), str(limit)]
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    row = {"graph": graph, "nodes": n,
                           "error": (res.stderr.strip().splitlines() or ["?"])[-1]}
                else:
                    row = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(json.dumps(row), flush=True)
        out = memory_table(rows)
        print(out)
        if args.write:
            (ROOT / "benchmarks" / "results" / "exact-memory.json").write_text(
                json.dumps({"machine": info, "load_at_end": os.getloadavg()[0], "rows": rows},
                           indent=1) + "\n")
        return
    if args.real:
        info = machine()
        print(info, flush=True)
        rows = []
        for name in (args.models.split(",") if args.models else real_models()):
            cmd = [sys.executable, __file__, "--seed", str(args.seed), "--one-real", name, "10"]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                got = [{"model": name, "rules": "all", "error": res.stderr.strip().splitlines()[-1]}]
            else:
                got = json.loads(res.stdout.strip().splitlines()[-1])
            for row in got:
                print(json.dumps(row), flush=True)
            rows += got
        print(real_table(rows))
        out = ROOT / "benchmarks" / "results" / "exact-real.json"
        if args.write:
            out.write_text(json.dumps({"machine": info, "rows": rows}, indent=1) + "\n")
            print(f"written {out}")
        return
    info = machine()
    print(info, flush=True)
    rows = []
    for graph in args.graphs.split(","):
        for n in map(int, args.sizes.split(",")):
            limit = 5.0 if args.quick else (30.0 if n <= 5000 else 60.0)
            cmd = [sys.executable, __file__, "--seed", str(args.seed), "--one", graph, str(n),
                   str(limit)]
            t = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                row = {"graph": graph, "nodes": n, "error": res.stderr.strip().splitlines()[-1]}
            else:
                row = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{graph} {n}: {row} ({time.perf_counter() - t:.1f}s)", flush=True)
    out = table(rows)
    print(out)
    if args.write:
        path = ROOT / "benchmarks" / "results" / "exact.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()
        path.write_text(
            "# Exact refinement: generated graphs\n\n"
            f"Machine: {info}; at end {load[0]:.1f}.  Seconds are wall-clock and move with the "
            "load average; CP-SAT's deterministic seconds (`det. s`) do not.\n\n"
            "Command: `python benchmarks/bench_exact.py --write` (default objective "
            "`[fallback, partitions, transfer]`, seed 1, time limit 30 s up to 5,000 nodes and "
            "60 s at 20,000).  `status` is the whole objective's; `parts proven` says how the "
            "number of parts was proven and `parts at s` when (heuristic plus the stages up to "
            "`partitions`; the rest of the time goes to the transfer tie-breaker).  `target`: up "
            "to 5,000 nodes, parts proven within 30 s; at 20,000, parts proven or strictly "
            "fewer than the heuristic within 60 s.\n\n"
            + out + "\n")
        print(f"written {path}")


if __name__ == "__main__":
    main()
