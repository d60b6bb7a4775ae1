"""hetero-solve on the real-model corpus (issues 13 and 14): every model x every profile.

    python benchmarks/bench_real.py                          # every model present x every profile
    python benchmarks/bench_real.py --models bert-tiny-legacy rapidocr-det --rules rules/npu-static.yaml
    python benchmarks/bench_real.py --engine heuristic       # quick
    python benchmarks/bench_real.py --fresh                  # ignore the cached rows

Models: ``corpus/corpus.yaml``, the committed ones (``corpus/models/``) and those
``corpus/build.py`` put in the cache (``corpus/cache/models/``, skipped when absent).
Profiles: ``rules/*.yaml`` and ``benchmarks/rules/mem-*.yaml`` (issue 14's memory-limited ones).

Per model (once): static tensors, hetero-solve's (``load_model`` with the corpus's dims) against
onnxruntime's ground truth (``corpus/truth/``), shapes that differ (must be none), misses by op.
Per model x profile: parts, fallback, status, lower bound, seconds (``hetero_solve.solve``,
default engine and time limit), ``onnx.checker`` (full check) of every part file, onnxruntime
agreement of the parts run in id order with the original (max abs difference, random inputs
within the corpus's ranges), and **never worse**: our answer against the trivial map (every
node on its preferred device, one part per connected same-device region, as
``hetero-solve check`` splits it) when the validator accepts that map.

Each model runs in its own process; each finished row is cached in ``benchmarks/out/real/``
under a key of the model's sha256, the profile's text, the engine settings and the source of
``hetero_solve/``, so an interrupted run resumes and a rerun after a code change redoes only
what changed.  Writes ``benchmarks/results/real.md`` (tables, machine and load noted) and
``real.json`` (every row).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from corpus import truth as T  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "real"
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RULES = sorted((ROOT / "rules").glob("*.yaml")) + \
    sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))
MODEL_TIMEOUT = 3600     # seconds for one model's worker (all its profiles)
#: Address-space limit of a worker: a solve that needs more fails with MemoryError (reported
#: in its row) instead of driving the shared machine into the OOM killer.
WORKER_MEMORY = 6 * 1024 ** 3


# -- cache keys ------------------------------------------------------------------------------

def code_digest() -> str:
    """A digest of hetero_solve/'s source: rows computed by other code are recomputed."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "hetero_solve").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    for p in sorted((ROOT / "constraints").glob("*.yaml")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def row_key(entry: dict, rules: Path | None, settings: dict, code: str) -> str:
    h = hashlib.sha256()
    h.update(entry["sha256"].encode())
    h.update(json.dumps({k: entry.get(k) for k in ("dims", "shapes", "ranges")},
                        sort_keys=True).encode())
    if rules is not None:
        h.update(rules.read_bytes())
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(code.encode())
    return h.hexdigest()[:20]


def cached(path: Path, key: str) -> dict | None:
    if path.exists():
        try:
            row = json.loads(path.read_text())
        except ValueError:
            return None
        if row.get("key") == key:
            return row
    return None


def store(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(row, indent=1, sort_keys=True))
    tmp.replace(path)


# -- the measurements (in the worker) --------------------------------------------------------

def _kwargs(entry: dict, fn) -> dict:
    import inspect
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes") and "shapes" in inspect.signature(fn).parameters:
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    return kw


def measure_shapes(name: str, entry: dict) -> dict:
    """hetero-solve's static tensors against the ground truth."""
    import hetero_solve as hs
    import onnx
    path = T.model_file(name, entry)
    truth = T.load_truth(T.truth_file(name))
    row = {"model": name, "nodes": len(truth["ops"])}
    t0 = time.perf_counter()
    try:
        mg = hs.load_model(str(path), **_kwargs(entry, hs.load_model))
    except Exception as e:     # noqa: BLE001 - a benchmark reports, it does not stop
        return {**row, "error": f"{type(e).__name__}: {e}"[:300]}
    row["load_seconds"] = round(time.perf_counter() - t0, 3)
    cmp = T.compare(truth, lambda t: mg.tensor_type(t).shape)
    beyond = T.beyond_inference(onnx.load(str(path), load_external_data=False))
    row.update(cmp.as_dict())
    row["wrong_examples"] = {k: v for k, v in list(row.pop("wrong").items())[:3]}
    row["wrong"] = len(cmp.wrong)
    row["missed_beyond_inference"] = sum(1 for t in cmp.missed if t in beyond)
    row["no_inference_ops"] = sorted(set(beyond.values()))
    row["whole_shapes_given"] = "shapes" in _kwargs(entry, hs.load_model)
    row["needs_whole_shapes"] = T.needs_whole_shapes(entry)
    return row


def measure_profile(name: str, entry: dict, rules: Path, engine: str, time_limit: float) -> dict:
    """Solve, validate, export, check, run; compare with the trivial all-on-preferred map."""
    import numpy as np
    import onnx
    import hetero_solve as hs
    from hetero_solve.run.onnxruntime import run_original
    from hetero_solve.run.session import run_partitioned
    from hetero_solve.solution import objective_key
    from hetero_solve.user_partition import check_affinity

    path = T.model_file(name, entry)
    row: dict = {"model": name, "rules": rules.stem}
    t0 = time.perf_counter()
    try:
        res = hs.solve(str(path), str(rules), engine=engine, time_limit=time_limit,
                       **_kwargs(entry, hs.solve))
    except Exception as e:     # noqa: BLE001
        row.update(status="error", error=f"{type(e).__name__}: {e}"[:300],
                   seconds=round(time.perf_counter() - t0, 2))
        return row
    row["seconds"] = round(time.perf_counter() - t0, 2)
    m, sol = res.metrics, res.solution
    row.update(parts=m.partitions, fallback=m.fallback, transfer=m.transfer,
               status=sol.status, lower_bound=sol.lower_bound,
               heuristic_parts=sol.stats.get("heuristic_parts",
                                             sol.stats.get("heuristic_partitions")),
               violations=[str(v) for v in hs.validate(res.problem, sol)][:3],
               warnings=[w[:200] for w in res.warnings][:5])
    # the trivial map: every node on its preferred device, regions as parts
    try:
        p = res.problem
        names = [d.name for d in p.devices]
        trivial = {p.names[v]: names[p.preferred(v)] for v in range(p.n)}
        rep = check_affinity(res.model_graph, str(rules), trivial, optimum=False)
        row["trivial"] = {"valid": rep.valid, **rep.metrics.as_dict()}
        if rep.valid:
            ours, theirs = objective_key(p, sol), objective_key(p, rep.solution)
            row["never_worse"] = bool(ours <= theirs)
    except Exception as e:     # noqa: BLE001
        row["trivial"] = {"error": f"{type(e).__name__}: {e}"[:200]}
    # export, checker, run
    with tempfile.TemporaryDirectory() as d:
        try:
            out = hs.write_result(res, Path(d) / "out", annotated=False, dots=False)
        except Exception as e:     # noqa: BLE001
            row["export_error"] = f"{type(e).__name__}: {e}"[:300]
            return row
        manifest = json.loads((out / "partition.json").read_text())
        bad = []
        for part in manifest["partitions"]:
            try:
                onnx.checker.check_model(str(out / part["file"]), full_check=True)
            except Exception as e:     # noqa: BLE001
                bad.append(f"{part['file']}: {str(e).splitlines()[0][:160]}")
        row["checker_failed"], row["checker_total"] = len(bad), len(manifest["partitions"])
        row["checker_examples"] = bad[:2]
        model = onnx.load(str(path))
        feeds = T.random_feeds(model, entry, seed=0)
        try:
            got = run_partitioned(out, feeds, manifest=manifest).outputs
            want = run_original(str(path), feeds)
            diffs = []
            for k in want:
                if got[k].shape != want[k].shape:
                    raise ValueError(f"output {k}: shape {got[k].shape} != {want[k].shape}")
                a, b = got[k], want[k]
                if a.size and np.issubdtype(a.dtype, np.number):
                    diffs.append(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
            row["max_abs_diff"] = max(diffs, default=0.0)
        except Exception as e:     # noqa: BLE001
            row["run_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def worker(args) -> int:
    """One model, every asked profile; rows stored as they finish.  ``_current`` names the
    case in progress, so that the parent can report a worker killed in the middle of one."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    corpus = T.load_corpus()
    name, entry = args.worker, corpus[args.worker]
    settings = {"engine": args.engine, "time_limit": args.time_limit}
    code = args.code
    path = OUT / name / "_shapes.json"
    key = row_key(entry, None, {}, code)
    if args.fresh or cached(path, key) is None:
        store(path, {**measure_shapes(name, entry), "key": key})
    for rules in args.rules:
        rules = Path(rules)
        path = OUT / name / f"{rules.stem}.json"
        key = row_key(entry, rules, settings, code)
        if not args.fresh and cached(path, key) is not None:
            continue
        print(f"  {name} x {rules.stem}", file=sys.stderr, flush=True)
        (OUT / name / "_current").write_text(json.dumps({"rules": str(rules), "key": key}))
        try:
            row = measure_profile(name, entry, rules, args.engine, args.time_limit)
        except MemoryError:
            row = {"model": name, "rules": rules.stem, "status": "error",
                   "error": f"MemoryError: over the worker's {WORKER_MEMORY >> 30} GiB"}
        store(path, {**row, "key": key})
    (OUT / name / "_current").unlink(missing_ok=True)
    return 0


# -- the report --------------------------------------------------------------------------------

def machine() -> dict:
    import numpy
    import onnx
    import onnxruntime
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "numpy": numpy.__version__,
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip()
            or os.environ.get("HETERO_BENCH_COMMIT", "?")}


def _fmt_diff(r: dict) -> str:
    if "run_error" in r:
        return "run fails"
    d = r.get("max_abs_diff")
    return "-" if d is None else f"{d:.1e}"


def _verdict(r: dict) -> str:
    t = r.get("trivial", {})
    if "error" in t:
        return "?"
    if not t.get("valid"):
        return "n/a (trivial invalid)"
    return "yes" if r.get("never_worse") else \
        f"**WORSE** (trivial {t['partitions']} parts, {t['fallback']} fallback)"


def report(shapes: list[dict], rows: list[dict], info: dict, args, load: tuple) -> str:
    L = ["# Real-model corpus: shapes against onnxruntime, partitions per profile", ""]
    L.append(f"`python benchmarks/bench_real.py` at commit {info['commit']} "
             f"({time.strftime('%Y-%m-%d')}); engine `{args.engine}`, time limit "
             f"{args.time_limit:g} s per solve.")
    L.append(f"- Machine: {info['cpu']}, {info['cores']} cores; {info['platform']}; Python "
             f"{info['python']}, onnx {info['onnx']}, onnxruntime {info['onnxruntime']}, numpy "
             f"{info['numpy']}.")
    L.append(f"- Load average at start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}: the 2 cores "
             "are shared by six engineers, so seconds are indicative only.")
    L.append("- Models: `corpus/corpus.yaml` (provenance, licenses, dims in `corpus/README.md`); "
             "ground truth: every main-graph tensor's shape in onnxruntime on three random "
             "inputs (`corpus/truth.py`).")
    L.append("")
    L.append("## Static tensors: hetero-solve against the runtime")
    L.append("")
    L.append("`truth`: tensors whose runtime shape is the same on three inputs (all of them, "
             "here); `ours`: tensors hetero-solve calls static; `wrong`: static with a shape "
             "that differs from the runtime's (must be 0); `missed`: static at run time, not "
             "for us, by producing op (`†`: depend on an op without ONNX shape inference).")
    L.append("")
    L.append("| model | stored | nodes | truth | ours | % | wrong | missed (top ops) |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    tot_t = tot_o = tot_w = 0
    for s in shapes:
        if "error" in s:
            L.append(f"| {s['model']} | | {s.get('nodes', '')} | | | | | load fails: {s['error']} |")
            continue
        tot_t += s["static_truth"]
        tot_o += s["static_ours"] - s["wrong"] - len(s.get("extra", []))
        tot_w += s["wrong"]
        pct = 100.0 * s["static_ours"] / s["static_truth"] if s["static_truth"] else 100.0
        ops = ", ".join(f"{op} {n}" for op, n in sorted(s["missed_ops"].items(),
                                                         key=lambda kv: (-kv[1], kv[0]))[:4])
        extra = []
        if s["missed"]:
            extra.append(f"{s['missed']}: {ops}")
        if s["missed_beyond_inference"]:
            extra.append(f"† {s['missed_beyond_inference']} ({', '.join(s['no_inference_ops'])})")
        if s["needs_whole_shapes"] and not s["whole_shapes_given"]:
            extra.append("whole input shapes not given (no `shapes=` in the library yet)")
        if s["wrong"]:
            ex = next(iter(s["wrong_examples"].items()))
            extra.append(f"wrong e.g. `{ex[0]}` {ex[1][0]} vs {ex[1][1]}")
        L.append(f"| {s['model']} | {s['stored']} | {s['nodes']} | {s['static_truth']} | "
                 f"{s['static_ours']} | {pct:.1f} | {s['wrong']} | {'; '.join(extra)} |")
    if tot_t:
        L.append(f"| **all** (ours right) | | | **{tot_t}** | **{tot_o}** | "
                 f"**{100.0 * tot_o / tot_t:.1f}** | **{tot_w}** | |")
    L.append("")
    profiles = list(dict.fromkeys(r["rules"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["rules"]): r for r in rows}
    L.append("## Parts per profile")
    L.append("")
    L.append("`parts/fallback`; `!` marks a case with a problem (invalid, checker, outputs "
             "differ, worse than the trivial map, error): see the details below.")
    L.append("")
    L.append("| model | " + " | ".join(profiles) + " |")
    L.append("| --- | " + " | ".join("---:" for _ in profiles) + " |")
    for mname in models:
        cells = []
        for pname in profiles:
            r = by.get((mname, pname))
            if r is None:
                cells.append("")
            elif r.get("status") == "error":
                cells.append("error !")
            else:
                flag = "!" if _problem(r) else ""
                cells.append(f"{r['parts']}/{r['fallback']}{flag}")
        L.append(f"| {mname} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("## Details")
    L.append("")
    L.append("`lb`: lower bound on parts; `checker`: part files failing `onnx.checker` "
             "(full check) / parts; `diff`: max abs difference of the outputs, parts vs "
             "original; `never worse`: against the trivial all-on-preferred map (regions as "
             "parts) when it is valid.")
    L.append("")
    L.append("| model | profile | parts | fallback | status | lb | s | checker | diff | "
             "never worse | notes |")
    L.append("| --- | --- | ---: | ---: | --- | ---: | ---: | --- | ---: | --- | --- |")
    for r in rows:
        if r.get("status") == "error":
            L.append(f"| {r['model']} | {r['rules']} | | | error | | {r.get('seconds', '')} | | | | "
                     f"{_cell(r['error'])} |")
            continue
        notes = []
        if r.get("violations"):
            notes.append("INVALID: " + "; ".join(r["violations"]))
        if r.get("checker_examples"):
            notes.append(r["checker_examples"][0])
        for k in ("run_error", "export_error"):
            if k in r:
                notes.append(r[k])
        checker = f"{r.get('checker_failed', '?')}/{r.get('checker_total', '?')}"
        L.append(f"| {r['model']} | {r['rules']} | {r['parts']} | {r['fallback']} | "
                 f"{r['status']} | {r['lower_bound']} | {r['seconds']} | {checker} | "
                 f"{_fmt_diff(r)} | {_verdict(r)} | {_cell('; '.join(notes))} |")
    L.append("")
    L.append("## Summary")
    L.append("")
    n = len(rows)
    ok = [r for r in rows if r.get("status") != "error"]
    L.append(f"- {n} cases ({len(models)} models x {len(profiles)} profiles); "
             f"{n - len(ok)} errors; {sum(1 for r in ok if r.get('violations'))} invalid; "
             f"{sum(1 for r in ok if r.get('checker_failed'))} with part files failing the "
             f"checker; {sum(1 for r in ok if 'run_error' in r or (r.get('max_abs_diff') or 0) > 1e-3)} "
             "whose parts do not reproduce the outputs (diff > 1e-3 or run fails); "
             f"{sum(1 for r in ok if r.get('never_worse') is False)} worse than the trivial map; "
             f"{sum(1 for r in ok if r.get('status') == 'optimal')} proven optimal.")
    if tot_t:
        L.append(f"- Static tensors: {tot_o} of {tot_t} runtime-static tensors resolved with "
                 f"the runtime's shape ({100.0 * tot_o / tot_t:.1f} %); {tot_w} called static "
                 "with a wrong shape.")
    L.append("")
    return "\n".join(L)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:220]


def _problem(r: dict) -> bool:
    return bool(r.get("violations") or r.get("checker_failed") or "run_error" in r
                or "export_error" in r or (r.get("max_abs_diff") or 0) > 1e-3
                or r.get("never_worse") is False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", help="model names (default: every one present)")
    ap.add_argument("--rules", nargs="+", type=Path, default=DEFAULT_RULES,
                    help="profiles (default: rules/*.yaml and benchmarks/rules/mem-*.yaml)")
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--fresh", action="store_true", help="recompute cached rows")
    ap.add_argument("--out", type=Path, default=RESULTS / "real",
                    help="report stem: writes OUT.md and OUT.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--code", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    corpus = T.load_corpus()
    names = args.models or list(corpus)
    unknown = [n for n in names if n not in corpus]
    if unknown:
        raise SystemExit(f"not in corpus.yaml: {', '.join(unknown)}")
    present = [n for n in names if T.model_file(n, corpus[n]).exists()]
    missing = [n for n in names if n not in present]
    if missing:
        print(f"skipping {len(missing)} models not built (run corpus/build.py): "
              f"{', '.join(missing)}", file=sys.stderr)
    load = os.getloadavg()
    code = code_digest()
    for i, n in enumerate(present):
        print(f"[{i + 1}/{len(present)}] {n}", file=sys.stderr, flush=True)
        cmd = [sys.executable, __file__, "--worker", n, "--code", code, "--engine", args.engine,
               "--time-limit", str(args.time_limit), "--rules", *map(str, args.rules)]
        if args.fresh:
            cmd.append("--fresh")
        for _attempt in range(len(args.rules) + 1):   # a killed worker: record, go on
            try:
                done = subprocess.run(cmd, timeout=MODEL_TIMEOUT,
                                      env=dict(os.environ, PYTHONPATH=str(ROOT)))
                why = f"worker exited with {done.returncode}" if done.returncode else None
            except subprocess.TimeoutExpired:
                why = f"worker timed out after {MODEL_TIMEOUT} s"
            current = OUT / n / "_current"
            if why is None or not current.exists():
                break
            print(f"  {n}: {why}", file=sys.stderr)
            case = json.loads(current.read_text())
            store(OUT / n / f"{Path(case['rules']).stem}.json",
                  {"model": n, "rules": Path(case["rules"]).stem, "status": "error",
                   "error": why, "key": case["key"]})
            current.unlink()

    settings = {"engine": args.engine, "time_limit": args.time_limit}
    shapes, rows = [], []
    for n in present:
        s = cached(OUT / n / "_shapes.json", row_key(corpus[n], None, {}, code))
        if s is not None:
            shapes.append({**s, "stored": corpus[n].get("stored")})
        for rules in args.rules:
            r = cached(OUT / n / f"{rules.stem}.json", row_key(corpus[n], rules, settings, code))
            if r is not None:
                rows.append(r)
    info = machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md = args.out.with_suffix(".md")
    text = report(shapes, rows, info, args, load)
    old = md.read_text() if md.exists() else ""
    if "<!-- qdq:" in old and "<!-- end qdq -->" in old:   # bench_qdq.py's section stays
        a, b = old.index("<!-- qdq:"), old.index("<!-- end qdq -->") + len("<!-- end qdq -->")
        text = text.rstrip("\n") + "\n\n" + old[a:b] + "\n"
    md.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"machine": info, "load_average": load, "settings": settings, "code": code,
         "shapes": shapes, "rows": rows}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out.with_suffix('.md')} and .json ({len(rows)} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
