"""Benchmark the whole command next to the floor, each in a fresh process.

    python benchmarks/bench_command.py                                # every case, 100k, 3 pairs
    python benchmarks/bench_command.py --cases layered-gpu,cnn-npu --sizes 10000,100000 --repeat 5

For every case of ``bench_pipeline.CASES`` (model x rule profile x dims) and size:

- ``command``: the wall clock of ``python -m hetero_solve MODEL RULES --dim ... -o DIR
  --verbose`` as a user runs it: interpreter start-up, imports, exact refinement with its
  defaults, every default output written (part models, annotated model, dots), the summary
  printed, the process gone.  ``DIR`` is removed before each run (the writer's "absent" path).
  ``--verbose`` prints one line per stage on stderr; this process stamps each line as it
  arrives, which splits the wall clock into stages (a handful of lines: nothing measurable).
- ``floor``: a fresh process that imports onnx and times ``onnx.load`` +
  ``onnx.shape_inference.infer_shapes(data_prop=True)`` of the same file inside (interpreter
  start-up and imports not counted: the floor is the least any tool that reads and
  shape-infers the model pays).

``--baseline DIR`` (another checkout of hetero-solve, e.g. ``git worktree add /tmp/before
main``) also runs the command with that tree's code in each round, so that a change is
measured as the median of paired differences.

Floor and command alternate (``--repeat`` rounds), so that load on the machine hits both
alike; ``ratio`` is the median over pairs of command / floor, target <= 2.  ``heur + exact``
is the span from the heuristic's start to validation's (the greedy answer, then the exact
refinement with its bounds); ``exact`` alone is ``partition.json``'s ``solver.exact_seconds``.

Before measuring, the package's bytecode is compiled (``compileall``, as ``pip install``
does): with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``, every run would compile
hetero-solve's sources again, a start-up no installed copy pays.

Writes ``benchmarks/results/command.md`` and ``command.json``; generated models and rule
variants go to ``benchmarks/out/`` (gitignored).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_pipeline import CASES, OUT, RESULTS, ROOT, ensure_model, load_avg, machine_info  # noqa: E402

RATIO_TARGET = 2.0
HEURISTIC_BOUNDS_TARGET_S = 0.5

#: Progress lines of the command (``pipeline.solve`` and ``cli/solve.py``), in order; a stage
#: runs from its line to the next one.
MARKS = (("startup", None), ("rules", "reading rules"), ("load", "loading the model"),
         ("compile", "compiling rules"), ("heur + exact", "greedy heuristic"),
         ("validate", "validating"), ("write + exit", "writing "))

FLOOR_CODE = """
import json, sys, time
import onnx, onnx.shape_inference
t0 = time.perf_counter()
m = onnx.load(sys.argv[1])
t1 = time.perf_counter()
onnx.shape_inference.infer_shapes(m, data_prop=True)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "infer": t2 - t1}))
"""


def rules_file(spec: str) -> Path:
    """A case's rule file; ``file#no-memory`` is written to ``benchmarks/out/rules/`` with
    every device's ``memory`` removed (the shipped profile, edited at run time)."""
    path, _, variant = spec.partition("#")
    if not variant:
        return ROOT / path
    if variant != "no-memory":
        raise ValueError(f"unknown rules variant {variant!r}")
    import yaml
    with open(ROOT / path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    for d in data["devices"]:
        d.pop("memory", None)
    out = OUT / "rules" / f"{Path(path).stem}-no-memory.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _env(root: Path = ROOT) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _reap(proc: subprocess.Popen) -> tuple[int, float]:
    """Wait for ``proc``: its exit code and the CPU seconds (user + system) it and the
    children it waited for used.  CPU time moves far less than wall time with the load of a
    shared machine, so paired CPU seconds show a change the wall clock hides."""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def run_floor(model: Path) -> dict:
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", FLOOR_CODE, str(model)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()
    rc, cpu = _reap(proc)
    wall = time.perf_counter() - t
    if rc != 0:
        raise RuntimeError(f"floor failed on {model}:\n{err[-3000:]}")
    res = json.loads(out)
    return {**res, "floor": res["load"] + res["infer"], "wall": wall, "cpu": cpu}


def run_command(model: Path, rules: Path, dims: dict[str, int], out_dir: Path,
                root: Path = ROOT) -> dict:
    """One run of the command with the code of the checkout ``root``."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "hetero_solve", str(model), str(rules)]
    for k, v in dims.items():
        cmd += ["--dim", f"{k}={v}"]
    cmd += ["-o", str(out_dir), "--verbose"]
    stamps: list[tuple[float, str]] = []
    t = time.perf_counter()
    # cwd: ``-m`` puts the working folder first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(cmd, env=_env(root), cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    for line in proc.stderr:
        stamps.append((time.perf_counter() - t, line.rstrip("\n")))
    rc, cpu = _reap(proc)
    wall = time.perf_counter() - t
    if rc != 0:
        raise RuntimeError(f"command failed (exit {rc}): {' '.join(cmd)}\n"
                           + "\n".join(x for _, x in stamps[-20:]))
    manifest = json.loads((out_dir / "partition.json").read_text())
    at = {}
    for stage, text in MARKS[1:]:
        at[stage] = next((s for s, line in stamps if text in line), None)
    stages, prev, prev_stage = {}, 0.0, "startup"
    for stage, _ in MARKS[1:]:
        if at[stage] is None:
            continue
        stages[prev_stage] = at[stage] - prev
        prev, prev_stage = at[stage], stage
    stages[prev_stage] = wall - prev
    solver = manifest["solver"]
    return {"wall": wall, "cpu": cpu, "stages": stages, "parts": len(manifest["partitions"]),
            "refined": refinement_ran(solver), "time_limit": solver.get("time_limit"),
            "status": manifest["status"], "objective": manifest["objective"],
            "lower_bound": manifest["lower_bound"], "exact": solver.get("exact_seconds"),
            "files": {name: (out_dir / name).stat().st_size for name in manifest["files"]
                      if (out_dir / name).exists()}}


def refinement_ran(solver: dict) -> bool:
    """Did a solver search (CP-SAT or SAT), rather than bounds alone proving the heuristic's
    answer?  From the exact stage's records in ``partition.json``; where a record has no
    ``method``, from the exact stage's seconds (over 1 s: a search ran)."""
    stages = solver.get("stages")
    if isinstance(stages, list) and stages and all(isinstance(x, dict) and "method" in x
                                                  for x in stages):
        return any(x["method"] != "bound" for x in stages)
    return (solver.get("exact_seconds") or 0.0) > 1.0


def measure(case: str, size: int, repeat: int, say, baseline: Path | None = None) -> dict:
    model_name, rules_spec, dims, _ = CASES[case]
    model = ensure_model(model_name, size)
    rules = rules_file(rules_spec)
    out_dir = OUT / "runs" / f"command-{case}-{size}.hetero"
    pairs = []
    load_before = load_avg()[0]
    for r in range(repeat):
        f = run_floor(model)
        b = run_command(model, rules, dims, out_dir.with_name(out_dir.name + "-baseline"),
                        root=baseline) if baseline is not None else None
        c = run_command(model, rules, dims, out_dir)
        pairs.append({"floor": f, "command": c, "baseline": b, "load_avg": load_avg()[0]})
        say(f"  {case} {size:,}: pair {r + 1}/{repeat}: command {c['wall']:.2f} s, floor "
            f"{f['floor']:.2f} s = {c['wall'] / f['floor']:.2f} x, cpu {c['cpu']:.2f} s"
            + (f", baseline {b['wall']:.2f} s (cpu {b['cpu']:.2f} s)" if b else "") + f" (load avg {load_avg()[0]:.1f})")
    return {"case": case, "size": size, "model": str(model.relative_to(ROOT)),
            "rules": str(rules.relative_to(ROOT)), "dims": dims,
            "file_bytes": model.stat().st_size, "pairs": pairs,
            "load_avg_before": load_before, "load_avg_after": load_avg()[0]}


def _med(xs):
    return statistics.median(xs)


def summarize(m: dict) -> dict:
    cmds = [p["command"]["wall"] for p in m["pairs"]]
    floors = [p["floor"]["floor"] for p in m["pairs"]]
    stage_names = [s for s, _ in MARKS]
    stages = {s: _med([p["command"]["stages"].get(s, 0.0) for p in m["pairs"]])
              for s in stage_names}
    first = m["pairs"][0]["command"]
    base = [p["baseline"] for p in m["pairs"] if p.get("baseline")]
    if base:
        extra = {"baseline": _med([b["wall"] for b in base]),
                 "baseline_ratio": _med([b["wall"] / p["floor"]["floor"]
                                         for b, p in zip(base, m["pairs"])]),
                 "saved": _med([b["wall"] - p["command"]["wall"]
                                for b, p in zip(base, m["pairs"])]),
                 "baseline_cpu": _med([b["cpu"] for b in base]),
                 "cpu_saved": _med([b["cpu"] - p["command"]["cpu"]
                                    for b, p in zip(base, m["pairs"])]),
                 "baseline_stages": {s: _med([b["stages"].get(s, 0.0) for b in base])
                                     for s in stage_names},
                 "same_answer": all((b["objective"], b["lower_bound"], b["status"])
                                    == (p["command"]["objective"], p["command"]["lower_bound"],
                                        p["command"]["status"])
                                    for b, p in zip(base, m["pairs"]))}
    else:
        extra = {}
    refined = any(p["command"].get("refined") for p in m["pairs"])
    limit = first.get("time_limit") or 0.0
    bounds = [f + limit if refined else RATIO_TARGET * f for f in floors]
    extra["refined"] = refined
    extra["bound"] = _med(bounds)
    extra["within"] = _med([c / b for c, b in zip(cmds, bounds)])
    extra["cpu"] = _med([p["command"]["cpu"] for p in m["pairs"]])
    return {**extra, "command": _med(cmds), "command_min": min(cmds), "command_max": max(cmds),
            "floor": _med(floors), "floor_load": _med([p["floor"]["load"] for p in m["pairs"]]),
            "floor_infer": _med([p["floor"]["infer"] for p in m["pairs"]]),
            "ratio": _med([c / f for c, f in zip(cmds, floors)]), "stages": stages,
            "exact": _med([p["command"]["exact"] or 0.0 for p in m["pairs"]]),
            "parts": first["parts"], "status": first["status"], "objective": first["objective"],
            "lower_bound": first["lower_bound"], "files": first["files"],
            "load_avg": [p["load_avg"] for p in m["pairs"]]}


def fmt(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def report(results: list[dict], machine: dict, args, started: str, load_before: float) -> str:
    L = ["# Whole-command benchmark", "",
         f"Run {started} with `python benchmarks/bench_command.py --sizes {args.sizes} "
         f"--repeat {args.repeat}" + (f" --cases {args.cases}" if args.cases else "")
         + (f" --baseline-rev {args.baseline_rev}" if args.baseline_rev else "")
         + (f" --out {args.out}" if args.out != str(RESULTS / "command.md") else "") + "`.", "",
         f"- Machine: {machine.get('cpu', '?')}, {machine.get('cores')} cores, "
         f"{machine.get('ram_gib', '?')} GiB RAM; {machine.get('platform')}",
         f"- Python {machine['python']}, onnx {machine['onnx']}, onnxruntime "
         f"{machine['onnxruntime']}, numpy {machine['numpy']}, protobuf {machine['protobuf']}; "
         f"hetero-solve at {machine.get('commit', '?')}",
         f"- Load average (1 min) before the run {load_before:.1f}; after each pair "
         f"{min(x for r in results for x in summarize(r)['load_avg']):.1f} to "
         f"{max(x for r in results for x in summarize(r)['load_avg']):.1f}."]
    if args.shared_note:
        L.append(f"- **Caveat: {args.shared_note}**")
    L += ["",
          "`command` = wall clock of `python -m hetero_solve MODEL RULES --dim ... -o DIR "
          "--verbose` in a fresh process (start-up, imports, exact refinement with its default "
          "10 s limit, every default output written); `floor` = `onnx.load` + "
          "`infer_shapes(data_prop=True)` timed inside a fresh process; floor and command "
          f"alternate; medians of {args.repeat} pairs, `ratio` = median of command / floor per "
          f"pair (target <= {RATIO_TARGET:g}). `heur + exact` = from the heuristic's start to "
          "validation (target on the layered DAG: <= "
          f"{HEURISTIC_BOUNDS_TARGET_S:g} s); `exact` = `solver.exact_seconds` of "
          "partition.json.", "",
          f"`search` = a solver searched (a stage record of partition.json with a method other "
          f"than a bound): then the bound is floor + `--time-limit` (issue 22), else "
          f"{RATIO_TARGET:g} x floor; `/ bound` = median over pairs of command / that bound "
          "(<= 1 meets it).", "",
          "| case | size | parts | status | command s (min-max) | floor s = load + infer | "
          "ratio | search | bound s | / bound | heur + exact s (exact) |",
          "| --- | ---: | ---: | --- | ---: | ---: | ---: | :---: | ---: | ---: | ---: |"]
    for r in results:
        s = summarize(r)
        L.append(f"| {r['case']} | {r['size']:,} | {s['parts']:,} | {s['status']} | "
                 f"{fmt(s['command'])} ({fmt(s['command_min'])}-{fmt(s['command_max'])}) | "
                 f"{fmt(s['floor'])} = {fmt(s['floor_load'])} + {fmt(s['floor_infer'])} | "
                 f"{s['ratio']:.2f} | {'yes' if s['refined'] else 'no'} | {fmt(s['bound'])} | "
                 f"{s['within']:.2f}{'' if s['within'] <= 1 else ' **over**'} | "
                 f"{fmt(s['stages']['heur + exact'])} ({fmt(s['exact'])}) |")
    if any(p.get("baseline") for r in results for p in r["pairs"]):
        L += ["", f"## Against the baseline (another checkout, at {args.baseline_commit})", "",
              "Each round ran floor, baseline command, command; `saved` = median of the paired "
              "differences; `cpu` = user + system seconds of the process and the children it "
              "waited for (steadier than wall time on a loaded machine).  `same answer`: objective, lower bound and status equal.", "",
              "| case | size | baseline s | ratio | command s | ratio | saved s | baseline cpu s "
              "| command cpu s | cpu saved s | same answer |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
        for r in results:
            s = summarize(r)
            L.append(f"| {r['case']} | {r['size']:,} | {fmt(s['baseline'])} | "
                     f"{s['baseline_ratio']:.2f} | {fmt(s['command'])} | {s['ratio']:.2f} | "
                     f"{fmt(s['saved'])} | {fmt(s['baseline_cpu'])} | {fmt(s['cpu'])} | "
                     f"{fmt(s['cpu_saved'])} | {'yes' if s['same_answer'] else '**no**'} |")
        L += ["", "Baseline stages (medians, seconds):", "",
              "| case | size | " + " | ".join(s for s, _ in MARKS) + " |",
              "| --- | ---: | " + " | ".join("---:" for _ in MARKS) + " |"]
        for r in results:
            s = summarize(r)
            L.append(f"| {r['case']} | {r['size']:,} | "
                     + " | ".join(fmt(s["baseline_stages"][k]) for k, _ in MARKS) + " |")
    L += ["", "## Where the command's time goes (medians, seconds)", "",
          "From the stamps of the `--verbose` lines: `startup` = interpreter, imports and "
          "argument parsing; `write + exit` = the files, the summary and the process exit.", "",
          "| case | size | " + " | ".join(s for s, _ in MARKS) + " | command |",
          "| --- | ---: | " + " | ".join("---:" for _ in MARKS) + " | ---: |"]
    for r in results:
        s = summarize(r)
        L.append(f"| {r['case']} | {r['size']:,} | "
                 + " | ".join(fmt(s["stages"][k]) for k, _ in MARKS) + f" | {fmt(s['command'])} |")
    L += ["", "Answers and files:", ""]
    for r in results:
        s = summarize(r)
        big = sorted(s["files"].items(), key=lambda kv: -kv[1])[:3]
        L.append(f"- {r['case']} {r['size']:,} (`{r['model']}`, `{r['rules']}`, dims {r['dims']}): "
                 f"objective {s['objective']}, lower bound {s['lower_bound']}; "
                 f"{len(s['files'])} files, largest "
                 + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in big))
    return "\n".join(L) + "\n"


def checkout(rev: str) -> Path:
    """A detached worktree of ``rev`` in ``benchmarks/out/before-REV`` (made once)."""
    where = OUT / f"before-{rev}"
    if not (where / "hetero_solve").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    return where


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="", help=f"comma-separated, default all: {', '.join(CASES)}")
    ap.add_argument("--out", default=str(RESULTS / "command.md"))
    ap.add_argument("--shared-note", default="", help="a caveat printed in the results")
    ap.add_argument("--baseline", default="",
                    help="another checkout of hetero-solve to run paired with this one")
    ap.add_argument("--baseline-rev", default="",
                    help="a git revision to run paired with this tree (checked out, detached, "
                         "in benchmarks/out/before-REV; instead of --baseline)")
    args = ap.parse_args(argv)
    if args.baseline_rev:
        args.baseline = str(checkout(args.baseline_rev))
    baseline = Path(args.baseline).resolve() if args.baseline else None
    args.baseline_commit = subprocess.run(
        ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip() if baseline else ""
    cases = args.cases.split(",") if args.cases else list(CASES)
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c!r}; known: {', '.join(CASES)}")
    for root in (ROOT, baseline):
        if root is not None:   # as an installed copy has it (see the module doc)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "hetero_solve")],
                           check=True, stdout=subprocess.DEVNULL)
    started = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    load_before = load_avg()[0]
    machine = machine_info()
    say = lambda s: print(s, flush=True)  # noqa: E731
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        for case in cases:
            say(f"{case} at {size:,} nodes")
            results.append(measure(case, size, args.repeat, say, baseline))
    md = report(results, machine, args, started, load_before)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    out.with_suffix(".json").write_text(json.dumps(
        {"machine": machine, "started": started, "args": _portable(vars(args)), "results": results},
        indent=1))
    print(md)
    print(f"wrote {out}, {out.with_suffix('.json')}")


def _portable(args: dict) -> dict:
    """The arguments as a reader elsewhere can use them: the baseline checkout named by its
    commit, not by this machine's path."""
    out = dict(args)
    if out.get("baseline"):
        out["baseline"] = f"checkout at {out.get('baseline_commit')}"
    return out


if __name__ == "__main__":
    main()
