"""``summary.md``: per algorithm (solved, valid, optimal, mean gap to the best known) and per
problem (parts of every algorithm), with every invalid or failed run and its reason, and the
machine the study ran on.

Definitions (also written into the summary):

- *solved*: the algorithm returned a partition (status ``optimal`` or ``feasible``);
- *valid*: the validator found no violation;
- *objective*: the rule file's objective (docs/problem.md) of the answer, compared as its sort
  key (lexicographic terms, or the weighted sum);
- *proven optimum* of a problem: the objective of a valid answer whose status is ``optimal``
  (the exact engines prove it for the rule file's objective);
- *optimal*: valid runs whose objective equals the proven optimum;  *proved*: valid runs whose
  status is ``optimal`` (the algorithm proved it itself);
- *parts proven*: valid runs whose parts equal some run's lower bound while being at least as
  good as that run on the objective's terms ranked before ``partitions`` (the solutions the
  bound speaks about): their number of parts is proven minimal even when the rest of the
  objective (transfer, say) is not;
- *best objective*: valid runs whose objective is the best any algorithm found;
- *fewest parts*: valid runs with the fewest parts any valid answer has (the *best known*);
- *gap*: parts minus the best known, over the algorithm's valid runs.  Under a weighted
  objective fewer parts can cost nodes off their preferred device: the per-problem table shows
  that fallback next to the parts.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from statistics import mean
from .runner import rss_source
from ..units import format_bytes

from ..units import format_seconds

SOLVED = ("optimal", "feasible")


def problem_key(r: dict) -> tuple[str, str]:
    return (r["model"], r["rules"])


def _key(r: dict) -> tuple | None:
    obj = r.get("objective")
    return tuple(obj) if obj is not None else None


def _parts_proven(r: dict, bound_runs: list[dict]) -> bool:
    """Do ``r``'s parts meet a lower bound that covers ``r``?  A run's bound holds for every
    solution at least as good as that run on the objective terms ranked before the parts."""
    for b in bound_runs:
        if r.get("parts") != b["lower_bound"]:
            continue
        terms = b.get("objective_before_parts") or []
        if all(r.get(t) is not None and b.get(t) is not None and r[t] <= b[t] for t in terms):
            return True
    return False


def analyse(records: list[dict], algorithms: list[str]) -> dict:
    """Per-problem best parts / best objective / proven optimum, per-algorithm aggregates."""
    problems: "OrderedDict[tuple[str, str], dict]" = OrderedDict()
    for r in records:
        pk = problem_key(r)
        info = problems.setdefault(pk, {"runs": {}, "nodes": r.get("nodes"), "best": None,
                                        "best_key": None, "lower_bound": None,
                                        "optimum_key": None, "objective_spec": None,
                                        "inconsistent": []})
        info["runs"][r["algorithm"]] = r
        info["nodes"] = info["nodes"] if info["nodes"] is not None else r.get("nodes")
        info["objective_spec"] = info["objective_spec"] or r.get("objective_spec")
    for pk, info in problems.items():
        runs = info["runs"].values()
        valid = [r for r in runs if r.get("valid") and r.get("parts") is not None]
        if valid:
            info["best"] = min(r["parts"] for r in valid)
        keyed = [_key(r) for r in valid if _key(r) is not None]
        if keyed:
            info["best_key"] = min(keyed)
        bounds = [r["lower_bound"] for r in runs
                  if r.get("status") in SOLVED and r.get("lower_bound") is not None]
        if bounds:
            info["lower_bound"] = max(bounds)
        info["bound_runs"] = [r for r in runs if r.get("status") in SOLVED
                              and r.get("lower_bound") is not None]
        proved = [r for r in valid if r.get("status") == "optimal" and _key(r) is not None]
        if proved:
            info["optimum_key"] = min(_key(r) for r in proved)
            # A bug detector: a proof of optimality that another valid answer beats.
            info["inconsistent"] = [r["algorithm"] for r in proved
                                    if _key(r) > info["best_key"]]
    per_alg: "OrderedDict[str, dict]" = OrderedDict()
    for alg in algorithms:
        rs = [info["runs"][alg] for info in problems.values() if alg in info["runs"]]
        valid = [r for r in rs if r.get("valid")]
        gaps = []
        optimal = best_hits = best_obj = parts_proven = 0
        for r in valid:
            info = problems[problem_key(r)]
            parts_proven += _parts_proven(r, info["bound_runs"])
            gaps.append(r["parts"] - info["best"])
            best_hits += r["parts"] == info["best"]
            best_obj += _key(r) is not None and _key(r) == info["best_key"]
            optimal += info["optimum_key"] is not None and _key(r) == info["optimum_key"]
        solved = [r for r in rs if r.get("status") in SOLVED]
        seconds = [r["seconds"] for r in solved if r.get("seconds") is not None]
        peaks = [r["peak_memory"] for r in solved if r.get("peak_memory") is not None]
        per_alg[alg] = {
            "runs": len(rs), "solved": len(solved), "valid": len(valid),
            "optimal": optimal, "proved": sum(1 for r in valid if r.get("status") == "optimal"),
            "best_objective": best_obj, "best": best_hits, "parts_proven": parts_proven,
            "mean_gap": float(mean(gaps)) if gaps else None, "max_gap": max(gaps) if gaps else None,
            "mean_seconds": float(mean(seconds)) if seconds else None,
            "max_seconds": max(seconds) if seconds else None,
            "max_peak": max(peaks) if peaks else None,
            "invalid": len(solved) - len(valid),
            "other": {s: sum(1 for r in rs if r.get("status") == s)
                      for s in ("failed", "skipped", "unavailable")},
        }
    return {"problems": problems, "algorithms": per_alg}


def render(records: list[dict], algorithms: list[str], *, config: dict,
           machine: dict | None = None) -> str:
    """The study's summary in Markdown: what ran, per algorithm, per problem, then what did not
    go well and the machine."""
    a = analyse(records, algorithms)
    lines = (_head(records, algorithms, a, config) + _per_algorithm(a)
             + _per_problem(a, algorithms) + _latency(a, algorithms) + _open_dims(records)
             + _failures(records)
             + _inconsistencies(a) + _machine(machine))
    return "\n".join(lines)


def _limit(records: list[dict], config: dict) -> str:
    """Which limit the runs used (CP-SAT and SAT only): work (no clock, reproducible) or wall
    time, and how many runs the clock ended first."""
    if config.get("work_limit") is not None:
        return (f"Work limit {config['work_limit']} deterministic s (CP-SAT and SAT only; no "
                f"clock: the same answers on any machine)")
    cut = sum(1 for r in records if r.get("deterministic") is False)
    return (f"Time limit {config.get('time_limit')} s of wall clock (CP-SAT and SAT only; "
            f"{cut} run(s) ended by the clock, whose answers may depend on the load)")


def _head(records: list[dict], algorithms: list[str], a: dict, config: dict) -> list[str]:
    """The title, what was run and how."""
    lines: list[str] = ["# Study summary", ""]
    n_models = len({r["model"] for r in records})
    n_rules = len({r["rules"] for r in records})
    lines += [
        f"{len(a['problems'])} problems ({n_models} models × {n_rules} rule files), "
        f"{len(algorithms)} algorithms, {len(records)} runs.  {_limit(records, config)}, "
        f"seed {config.get('seed')}, "
        f"executor {config.get('executor')} with {config.get('jobs')} job(s).  "
        f"Peak memory: {_memory_note(config.get('memory'))}.", ""]
    if config.get("command"):
        lines += ["Command:", "", f"    {config['command']}", ""]
    if config.get("note"):
        lines += [config["note"], ""]
    return lines


def _per_algorithm(a: dict) -> list[str]:
    """The table of each algorithm's counts, and what its columns mean."""
    lines: list[str] = []
    lines += ["## Per algorithm", "",
              "| algorithm | runs | solved | valid | optimal | proved | parts proven "
              "| best objective | fewest parts | mean gap | max gap | mean s | max s "
              "| max peak memory | failed / skipped / unavailable |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: | ---: | --- |"]
    for alg, s in a["algorithms"].items():
        other = " / ".join(str(s["other"][k]) for k in ("failed", "skipped", "unavailable"))
        lines.append(
            f"| {alg} | {s['runs']} | {s['solved']} | {s['valid']} | {s['optimal']} | "
            f"{s['proved']} | {s['parts_proven']} | {s['best_objective']} | {s['best']} | "
            f"{_num(s['mean_gap'], 2)} | "
            f"{_num(s['max_gap'])} | {_num(s['mean_seconds'], 4)} | {_num(s['max_seconds'], 4)} | "
            f"{_bytes(s['max_peak'])} | {other} |")
    lines += ["", "*solved*: returned a partition; *valid*: no violation found by the validator; "
              "*optimal*: valid, and its objective (the rule file's, docs/problem.md) equals a "
              "proven optimum (a valid answer with status `optimal`); *proved*: the algorithm "
              "proved it itself; *parts proven*: valid, and its parts meet a proven lower bound "
              "that covers it (at least as good on the objective's terms before `partitions`), "
              "so its number of parts is minimal even if, say, its transfer is not proven; "
              "*best objective*: valid and as good as the best answer any "
              "algorithm found; *fewest parts*: valid with the fewest parts of any valid answer "
              "(the best known); *gap*: parts − best known, over the algorithm's valid runs.  "
              "Every baseline keeps each node on its preferred device; under a weighted "
              "objective an exact engine may trade parts for fallback (shown as `fb`).", ""]
    return lines


def _per_problem(a: dict, algorithms: list[str]) -> list[str]:
    """The parts of every answer per problem, with the marks the legend explains."""
    lines: list[str] = []
    specs: "OrderedDict[str, list[str]]" = OrderedDict()
    for (model, rules), info in a["problems"].items():
        if info["objective_spec"]:
            names = specs.setdefault(info["objective_spec"], [])
            if _short(rules) not in names:
                names.append(_short(rules))
    lines += ["## Parts per problem", "",
              "A number is a valid answer's parts; `*` marks a proven optimum of the rule file's "
              "objective; `°` parts proven minimal (the rest of the objective not proven); "
              "`†` a static-shape device refused nodes only because input dims have no value "
              "(the answer is for the dims left open: see *Dims with no value* below); "
              "`(fb n)` n nodes off their preferred device; `n✗kind` an answer the "
              "validator rejects (first violation's kind); `—` no answer (failed, skipped or "
              "unavailable: see below).  *best*: the fewest parts of a valid answer; *LB*: the best "
              "lower bound on parts any run proved (for solutions as good on the objective's "
              "earlier terms).", ""]
    if specs:
        lines += ["Objectives: " + "; ".join(f"{', '.join(v)}: {k}" for k, v in specs.items())
                  + ".", ""]
    head = "| model | rules | nodes | best | LB | " + " | ".join(algorithms) + " |"
    lines += [head, "| --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in algorithms) + " |"]
    for (model, rules), info in a["problems"].items():
        cells = []
        for alg in algorithms:
            r = info["runs"].get(alg)
            if r is None:
                cells.append("")
            elif r.get("status") not in SOLVED:
                cells.append("—")
            elif r.get("valid"):
                if info["optimum_key"] is not None and _key(r) == info["optimum_key"]:
                    mark = "*"
                elif _parts_proven(r, info["bound_runs"]):
                    mark = "°"
                else:
                    mark = ""
                fb = f" (fb {r['fallback']})" if r.get("fallback") else ""
                open_dims = "†" if r.get("missing_dims") else ""
                cells.append(f"{r['parts']}{mark}{open_dims}{fb}")
            else:
                kind = (r.get("reason") or "invalid").split(":")[0]
                cells.append(f"{_num(r.get('parts'))}✗{kind}")
        best = "" if info["best"] is None else str(info["best"])
        lines.append(f"| {_short(model)} | {_short(rules)} | {_num(info['nodes'])} | {best} | "
                     f"{_num(info['lower_bound'])} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _latency(a: dict, algorithms: list[str]) -> list[str]:
    """The predicted latency of every valid answer per problem, when some run has a cost
    model (docs/costs.md); nothing otherwise."""
    problems = [(pk, info) for pk, info in a["problems"].items()
                if any(r.get("latency") is not None for r in info["runs"].values())]
    if not problems:
        return []
    lines = ["## Predicted latency per problem", "",
             "Each valid answer's predicted latency under the rule file's costs (docs/costs.md; "
             "time per sample in parentheses when it differs); `*` the fastest of the row; `—` "
             "no valid answer.", "",
             "| model | rules | " + " | ".join(algorithms) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in algorithms) + " |"]
    for (model, rules), info in problems:
        runs = info["runs"]
        times = [r["latency"] for r in runs.values()
                 if r.get("valid") and r.get("latency") is not None]
        fastest = min(times) if times else None
        cells = []
        for alg in algorithms:
            r = runs.get(alg)
            if r is None:
                cells.append("")
            elif not r.get("valid") or r.get("latency") is None:
                cells.append("—")
            else:
                t = r["latency"]
                per = r.get("throughput")
                more = f" ({format_seconds(per)})" if per is not None and per != t else ""
                cells.append(f"{format_seconds(t)}{'*' if t == fastest else ''}{more}")
        lines.append(f"| {_short(model)} | {_short(rules)} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _open_dims(records: list[dict]) -> list[str]:
    """The dims each problem left without a value, as ``solve`` says them."""
    lines: list[str] = []
    open_dims = OrderedDict((problem_key(r), r["missing_dims"]) for r in records
                            if r.get("missing_dims"))
    if open_dims:
        lines += ["## Dims with no value", "",
                  "As `solve` says them; give the values (`--dim`, a rule file's `dims`, "
                  "`--shape`) to study the model as it will run.", ""]
        lines += [f"- {_short(model)} × {_short(rules)}: {_escape(text)}"
                  for (model, rules), text in open_dims.items()]
        lines.append("")
    return lines


def _failures(records: list[dict]) -> list[str]:
    """The runs with no valid answer, grouped when they fail the same way everywhere."""
    lines: list[str] = []
    bad = [r for r in records if not (r.get("status") in SOLVED and r.get("valid"))]
    if bad:
        lines += ["## Invalid, failed, skipped and unavailable runs", ""]
        # Runs that fail the same way everywhere (an engine missing from the build) fold into
        # one line; the others are listed one by one.
        groups: "OrderedDict[tuple, list[dict]]" = OrderedDict()
        for r in bad:
            what = "invalid" if r.get("status") in SOLVED else r.get("status")
            groups.setdefault((r["algorithm"], what, r.get("reason") or ""), []).append(r)
        for (alg, what, reason), rs in groups.items():
            if len(rs) > 1 and what != "invalid":
                lines.append(f"- **{alg}**: {what} on {len(rs)} problems: {_escape(reason)}")
                continue
            for r in rs:
                lines.append(f"- {_short(r['model'])} × {_short(r['rules'])}, **{alg}**: "
                             f"{what}: {_escape(reason)}")
        lines.append("")
    return lines


def _inconsistencies(a: dict) -> list[str]:
    """Proven optima another valid answer beats (a bug somewhere)."""
    lines: list[str] = []
    incons = [(pk, info["inconsistent"]) for pk, info in a["problems"].items() if info["inconsistent"]]
    if incons:
        lines += ["## Inconsistencies (a bug somewhere)", ""]
        for (model, rules), who in incons:
            lines.append(f"- {_short(model)} × {_short(rules)}: {', '.join(who)} proved an "
                         f"optimum that another valid answer beats")
        lines.append("")
    return lines


def _machine(machine: dict | None) -> list[str]:
    """What the numbers were measured on."""
    lines: list[str] = []
    if machine:
        lines += ["## Machine", ""]
        for k, v in machine.items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    return lines


def machine_info() -> dict:
    """What the numbers depend on: CPU, cores, memory, versions, date."""
    info: dict = {}
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["CPU"] = cpu
    cores = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = cores
    info["cores"] = f"{cores} logical ({usable} usable by this process)"
    try:
        import psutil
        info["memory"] = f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    except ImportError:
        pass
    info["OS"] = platform.platform()
    info["Python"] = sys.version.split()[0]
    info["packages"] = ", ".join(f"{n} {v}" for n, v in _versions().items())
    commit = _git_commit()
    if commit:
        info["hetero-solve commit"] = commit
    info["date"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return info


def _versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    import hetero_solve
    out["hetero-solve"] = hetero_solve.__version__
    for dist in ("onnx", "onnxruntime", "ortools", "python-sat", "numpy", "matplotlib",
                 "dask", "distributed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parents[2]
    try:
        res = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def _memory_note(method: str | None) -> str:
    rss = ("peak increase of the worker's resident set size during the run (psutil, sampled "
           "every 5 ms; includes native solver memory; 0 when the run reused memory the worker "
           "already held)") if rss_source() == "psutil" else (
           "growth of the worker's peak resident set size during the run (resource.getrusage; "
           "includes native solver memory; 0 when the run stayed below the worker's earlier "
           "peak)")
    return {"rss": rss,
            "tracemalloc": "tracemalloc peak of Python allocations, from a second, traced run "
                           "(native solver memory not included)",
            "none": "not measured"}.get(method or "", str(method))


def _num(x, digits: int = 0) -> str:
    if x is None:
        return ""
    if digits and isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _bytes(x) -> str:
    if x is None:
        return ""
    return format_bytes(x)


def _short(path: str) -> str:
    return Path(path).name


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
