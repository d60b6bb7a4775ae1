"""The time limit as a promise, and determinism (issues 24 and 29): the real-model corpus x the
memory-limited profiles of ``bench_real.py`` (``benchmarks/rules/mem-*.yaml``).

    python benchmarks/bench_budget.py                    # every model present, -t 5, 3 + 3 runs
    python benchmarks/bench_budget.py --models rapidocr-det --time-limit 10 --runs 2
    python benchmarks/bench_budget.py --work-limit 2.5   # no clock: identical answers expected

Per model x profile, ``hetero-solve MODEL RULES -t LIMIT --no-models --json`` runs ``--runs``
times alone and ``--runs`` times beside a CPU hog (another process spinning on one core, at
the same priority), one after the other.  Each run's **solve** seconds (model prepared to
answer ready: ``solver.stage_seconds`` heuristic + exact + validate, what ``--time-limit``
promises), the whole command's wall and CPU seconds (a subprocess: imports, load, solve,
write; on a shared machine the CPU time says what the command itself costs), the
deterministic work spent and whether the clock ended it (``solver.deterministic``,
``stopped_by``) are recorded; ``partition.json`` without its timing fields is hashed, and the
row says whether every run the deterministic budget ended gave the same one.

Writes ``benchmarks/results/budget.md`` (tables, machine and load noted) and ``budget.json``.

``--monotone 2.5 5 10`` instead runs each pair once per limit (alone) and says whether a
larger limit ever gave a worse answer (objective ``[fallback, partitions, transfer]``, the
order of every memory profile): ``budget-monotone.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PROFILES = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))
#: Fields of partition.json (anywhere in it) that are wall-clock measurements.
TIMING = {"seconds", "stage_seconds", "exact_seconds", "wall"}
#: The stages of the solve (what --time-limit promises).
SOLVE = ("heuristic", "exact", "validate")
RUN_TIMEOUT = 600


def strip_timing(value):
    """``value`` without its timing fields (at any depth)."""
    if isinstance(value, dict):
        return {k: strip_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def digest(manifest: dict) -> str:
    body = strip_timing({k: v for k, v in manifest.items() if k != "out_dir"})
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def models() -> dict[str, tuple[Path, dict]]:
    corpus = yaml.safe_load((ROOT / "corpus" / "corpus.yaml").read_text())["models"]
    found = {}
    for name, entry in corpus.items():
        where = ROOT / "corpus" / ("models" if entry.get("stored") == "committed"
                                   else "cache/models") / f"{name}.onnx"
        if where.exists():
            found[name] = (where, entry)
    return found


def command(path: Path, entry: dict, rules: Path, limit: float, out: Path,
            work: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "hetero_solve", str(path), str(rules),
           "--work-limit" if work else "-t", str(limit),
           "--no-models", "--json", "-q", "-o", str(out)]
    for k, v in (entry.get("dims") or {}).items():
        cmd += ["--dim", f"{k}={v}"]
    for k, v in (entry.get("shapes") or {}).items():
        cmd += ["--shape", f"{k}={','.join(map(str, v))}"]
    return cmd


def one_run(cmd: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if p.returncode != 0:
        return {"wall": wall, "error": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}
    m = json.loads(p.stdout)
    s = m.get("solver", {})
    st = s.get("stage_seconds", {})
    return {"wall": wall, "cpu": cpu, "load": st.get("load", 0.0),
            "solve": sum(st.get(k, 0.0) for k in SOLVE),
            "work": s.get("deterministic_seconds"),
            "digest": digest(m), "deterministic": s.get("deterministic", True),
            "status": m.get("status"), "objective": m.get("objective"),
            "warned": "time limit ended the search" in p.stderr}


class Hog:
    """Another process spinning on one core while the runs go on."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def measure(name: str, path: Path, entry: dict, rules: Path, limit: float, runs: int,
            work: bool = False) -> dict:
    row = {"model": name, "rules": rules.stem, "limit": limit, "alone": [], "hog": []}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("alone", "hog"):
            for i in range(runs):
                cmd = command(path, entry, rules, limit, Path(tmp) / f"{kind}{i}", work)
                if kind == "hog":
                    with Hog():
                        row[kind].append(one_run(cmd))
                else:
                    row[kind].append(one_run(cmd))
    done = [r for r in row["alone"] + row["hog"] if "digest" in r]
    kept = [r for r in done if r["deterministic"]]
    row["identical"] = len({r["digest"] for r in kept}) <= 1 and len(done) == 2 * runs
    row["cut"] = sum(1 for r in done if not r["deterministic"])
    return row


def table(rows: list[dict], limit: float, runs: int, work: bool = False) -> str:
    same = sum(1 for row in rows if row["identical"])
    flag = f"--work-limit {limit:g}" if work else f"-t {limit:g}"
    lines = [f"# The solve and the whole command against `{flag}`, and determinism "
             f"(issues 24, 29)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}; load average before: {rows[0]['loadavg']:.1f}, "
             f"after: {os.getloadavg()[0]:.1f} (shared with other engineers' jobs).",
             f"Corpus models present x memory profiles {', '.join(p.stem for p in PROFILES)}: "
             f"{len(rows)} pairs, {runs} runs alone then {runs} beside a CPU hog (one process "
             f"spinning), `hetero-solve MODEL RULES {flag} --no-models --json` as a "
             f"subprocess. *Solve*: model prepared to answer ready (`stage_seconds` heuristic "
             f"+ exact + validate, what `--time-limit` promises); *command*: imports, load, "
             f"solve, write; *CPU*: the command's CPU seconds (on a loaded machine, about "
             f"what a quiet one would take).",
             "",
             "| | runs | solve median (s) | solve max (s) | command median (s) | command max "
             "(s) | CPU median (s) | CPU max (s) | ended by the clock |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, key in (("alone", "alone"), ("beside a CPU hog", "hog")):
        done = [r for row in rows for r in row[key] if "load" in r]
        if not done:
            continue
        sv = [r["solve"] for r in done]
        w = [r["wall"] for r in done]
        c = [r["cpu"] for r in done]
        lines.append(f"| {kind} | {len(w)} | {statistics.median(sv):.2f} | {max(sv):.2f} | "
                     f"{statistics.median(w):.1f} | {max(w):.1f} | {statistics.median(c):.1f} "
                     f"| {max(c):.1f} | {sum(1 for r in done if not r['deterministic'])} |")
    lines += ["",
              f"Identical `partition.json` (timing fields aside) across every run the "
              f"deterministic budget ended: **{same} of {len(rows)} pairs**; runs the clock "
              f"ended first: {sum(row['cut'] for row in rows)} of "
              f"{sum(len(row['alone']) + len(row['hog']) for row in rows)}.",
              "",
              "| model | profile | objective | status | solve alone (s) | solve hog (s) | "
              "command alone (s) | command hog (s) | work (det. s) | load (s) | identical | "
              "clock |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: | --- | ---: |"]
    for row in rows:
        ok = [r for r in row["alone"] + row["hog"] if "digest" in r]
        err = [r["error"] for r in row["alone"] + row["hog"] if "error" in r]
        first = ok[0] if ok else {}
        lines.append(
            f"| {row['model']} | {row['rules']} | {first.get('objective', err[:1])} | "
            f"{first.get('status', '-')} | {_col(row['alone'], 'solve', 2)} | "
            f"{_col(row['hog'], 'solve', 2)} | {_col(row['alone'], 'wall')} | "
            f"{_col(row['hog'], 'wall')} | {_col(ok, 'work', 2)} | "
            f"{first.get('load', 0):.1f} | {'yes' if row['identical'] else '**no**'} | "
            f"{row['cut']} |")
    return "\n".join(lines) + "\n"


def _col(runs: list[dict], key: str, digits: int = 1) -> str:
    return " ".join(f"{r[key]:.{digits}f}" if r.get(key) is not None else "-" for r in runs)


def monotone(names, found, profiles, limits: list[float]) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path, entry = found[name]
            for rules in profiles:
                runs = [one_run(command(path, entry, rules, t, Path(tmp) / f"{name}{t}"))
                        for t in limits]
                keys = [tuple(r["objective"][k] for k in ("fallback", "partitions", "transfer"))
                        if "objective" in r else None for r in runs]
                worse = any(a is not None and b is not None and b > a
                            for a, b in zip(keys, keys[1:]))
                rows.append((name, rules.stem, keys, [r.get("status") for r in runs], worse))
                print(name, rules.stem, keys, worse, file=sys.stderr, flush=True)
                lines = [f"# A larger --time-limit never gives a worse answer? (issue 24)", "",
                         f"Limits {', '.join(f'{t:g}' for t in limits)} s, once each, alone; "
                         f"load average now {os.getloadavg()[0]:.1f}. Objective "
                         f"[fallback, partitions, transfer].", "",
                         f"Worse with more time: **{sum(r[4] for r in rows)} of {len(rows)} "
                         f"pairs**.", "",
                         "| model | profile | " + " | ".join(f"-t {t:g}" for t in limits)
                         + " | worse |", "| --- | --- |" + " --- |" * (len(limits) + 1)]
                for n, p, ks, sts, w in rows:
                    lines.append(f"| {n} | {p} | " + " | ".join(
                        f"{list(k) if k else '-'} {st or ''}" for k, st in zip(ks, sts))
                        + f" | {'**yes**' if w else 'no'} |")
                (RESULTS / "budget-monotone.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--rules", nargs="+", type=Path)
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--work-limit", type=float, help="instead of --time-limit: no clock")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="budget")
    ap.add_argument("--monotone", nargs="+", type=float, metavar="LIMIT")
    args = ap.parse_args(argv)
    found = models()
    names = args.models or sorted(found)
    if args.monotone:
        monotone(names, found, args.rules or PROFILES, sorted(args.monotone))
        return 0
    rows = []
    for name in names:
        path, entry = found[name]
        for rules in args.rules or PROFILES:
            load = os.getloadavg()[0]
            work = args.work_limit is not None
            limit = args.work_limit if work else args.time_limit
            row = measure(name, path, entry, rules, limit, args.runs, work)
            row["loadavg"] = load
            rows.append(row)
            print(f"{name} {rules.stem}: identical={row['identical']} solve="
                  f"{[round(r.get('solve', -1), 2) for r in row['alone'] + row['hog']]}",
                  file=sys.stderr, flush=True)
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / f"{args.out}.json").write_text(json.dumps(rows, indent=1))
            (RESULTS / f"{args.out}.md").write_text(table(rows, limit, args.runs, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
