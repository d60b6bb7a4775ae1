"""Fold choices on the real-model corpus (issue 24): status before/after and check of every
written answer.

    python benchmarks/bench_folds.py --label after                     # this tree
    python benchmarks/bench_folds.py --label before --code /tmp/base   # another tree's hetero_solve/
    python benchmarks/bench_folds.py --table before after              # writes results/folds.md

Models: ``corpus/corpus.yaml``'s committed ones and those ``corpus/build.py`` cached.
Profiles: the three memory-limited ones of ``bench_real.py`` (``benchmarks/rules/mem-*.yaml``).
Per model x profile, in a fresh process running the code under ``--code``: ``solve`` (default
engine, ``--time-limit``, the corpus's dims and shapes), ``partition.json`` written (no part
models), then ``check_affinity`` of that ``partition.json`` on the same model and rules (what
``hetero-solve check MODEL RULES --affinity OUT/partition.json`` does; the library call takes the
corpus's whole input shapes, which the command's flags cannot give).  Rows go to
``benchmarks/out/folds/LABEL.json``; ``--table`` compares two labels in ``results/folds.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out" / "folds"
PROFILES = sorted((ROOT / "benchmarks" / "rules").glob("mem-*.yaml"))

WORKER = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import hetero_solve as hs
from hetero_solve.model import load_model
from hetero_solve.rules import load_rules
model, rules, out, dims, shapes, limit = sys.argv[1:7]
dims, shapes = json.loads(dims), json.loads(shapes)
row = {}
t = time.perf_counter()
try:
    res = hs.solve(model, rules, dims=dims or None, shapes=shapes or None, time_limit=float(limit))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300]})); sys.exit(0)
row["seconds"] = round(time.perf_counter() - t, 2)
res.write(out, submodels=False, annotated=False, dots=False)
m = json.load(open(f"{out}/partition.json"))
folds = m["solver"].get("folds") or {}
row.update(status=m["status"], objective=m["objective"], lower_bound=m["lower_bound"],
           unfolded=len(m.get("unfolded", [])), candidates=len(folds.get("candidates", [])),
           placed=folds.get("placed"), proven_all=folds.get("proven", folds.get("all_choices_compared")))
rs = load_rules(rules)
mg = load_model(model, dims=dims or None, shapes=shapes or None, rule_dims=rs.dims)
rep = hs.check_affinity(mg, rs, f"{out}/partition.json", optimum=False, engine="heuristic")
row["check"] = "valid" if rep.valid else "INVALID: " + "; ".join(str(v) for v in rep.violations[:2])
print(json.dumps(row))
"""


def models() -> list[tuple[str, Path, dict]]:
    spec = yaml.safe_load((ROOT / "corpus" / "corpus.yaml").read_text())["models"]
    out = []
    for name, e in spec.items():
        where = ROOT / "corpus" / ("models" if e.get("stored") == "committed" else "cache/models")
        path = where / f"{name}.onnx"
        if path.exists():
            out.append((name, path, e))
    return out


def run(label: str, code: Path, limit: float, only: list[str] | None) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    dest = OUT / f"{label}.json"
    rows = json.loads(dest.read_text()) if dest.exists() else {}
    env = {**os.environ, "PYTHONPATH": str(code)}
    for name, path, e in models():
        if only and name not in only:
            continue
        for prof in PROFILES:
            key = f"{name} | {prof.stem}"
            if key in rows:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                p = subprocess.run(
                    [sys.executable, "-c", WORKER, str(path), str(prof), f"{tmp}/out",
                     json.dumps(e.get("dims") or {}), json.dumps(e.get("shapes") or {}), str(limit)],
                    capture_output=True, text=True, env=env, timeout=600)
                try:
                    row = json.loads(p.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    row = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
                row["wall"] = round(time.perf_counter() - t, 2)
            rows[key] = row
            print(key, row, flush=True)
            dest.write_text(json.dumps(rows, indent=1))


def table(before: str, after: str) -> None:
    a = json.loads((OUT / f"{before}.json").read_text())
    b = json.loads((OUT / f"{after}.json").read_text())
    keys = [k for k in b if k in a]
    lines = [f"# Fold choices on the real-model corpus (issue 24): `{before}` against `{after}`",
             "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared with other "
             f"engineers' runs (load {os.getloadavg()[0]:.1f} when the table was written); "
             "default engine, `--time-limit 10`, `benchmarks/bench_folds.py`.",
             "", "| model | profile | before: status (lb) | objective | check | after: status (lb) "
             "| objective | unfolded | check |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    count = {before: [0, 0, 0], after: [0, 0, 0]}   # rows, optimal, check rejects

    def cell(r):
        if "error" in r:
            return "error", "", r["error"][:60]
        o = r["objective"]
        return (f"{r['status']} ({r['lower_bound'].get('partitions')})",
                f"{o['fallback']}, {o['partitions']}, {o['transfer']}", r["check"][:70])

    for k in keys:
        for lab, r in ((before, a[k]), (after, b[k])):
            if "error" not in r:
                count[lab][0] += 1
                count[lab][1] += r["status"] == "optimal"
                count[lab][2] += r["check"] != "valid"
        m, prof = k.split(" | ")
        s1, o1, c1 = cell(a[k])
        s2, o2, c2 = cell(b[k])
        lines.append(f"| {m} | {prof} | {s1} | {o1} | {c1} | {s2} | {o2} | "
                     f"{b[k].get('unfolded', '')} | {c2} |")
    lines += ["", "| code | answers | optimal | rejected by check of their own partition.json |",
              "| --- | --- | --- | --- |"]
    for lab in (before, after):
        lines.append(f"| {lab} | {count[lab][0]} | {count[lab][1]} | {count[lab][2]} |")
    (ROOT / "benchmarks" / "results" / "folds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-4:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--code", type=Path, default=ROOT, help="tree whose hetero_solve/ runs")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--table", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.table:
        table(*args.table)
    else:
        run(args.label, args.code.resolve(), args.time_limit, args.models)


if __name__ == "__main__":
    main()
