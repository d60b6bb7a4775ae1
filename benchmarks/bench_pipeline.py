"""Benchmark the pipeline at scale: seconds and peak memory per stage, next to the floor.

    python benchmarks/bench_pipeline.py                          # 1k, 10k, 100k; best-of/median of 3
    python benchmarks/bench_pipeline.py --sizes 1000,10000 --repeat 5 --cases cnn-npu,tf-seq-npu
    python benchmarks/bench_pipeline.py --sizes 1000 --repeat 1 --no-profile    # smoke test

For every case (model x rule profile x dims) and size, each measurement runs in a fresh
subprocess, so that process-wide peak memory (RSS high-water mark) belongs to that run alone:

- ``floor``: ``onnx.load(path)`` + ``onnx.shape_inference.infer_shapes(model, data_prop=True)``
  on the same file, the least any tool that reads and shape-infers the model pays;
- ``pipeline``: our stages, called as ``hetero_solve.solve`` calls them, with ``load`` split
  into ``read_model``, ``check_model`` and ``analyse_model`` (flattening, shapes, folding); then
  ``Result.write(out, submodels=False, annotated=False, dots=False)`` (``partition.json`` and
  ``affinity.json``).  The first repetition also runs ``hetero_solve.solve(...,
  engine="heuristic")`` afterwards and checks it gives the same partition.

``--repeat`` times (floor and pipeline interleaved, so noise hits both alike); times reported
are medians.  Then once more with ``tracemalloc`` on (Python-heap peak per stage; tracemalloc
slows allocation-heavy code, so those runs give memory only, never times).  Then, at the
largest size, once under ``cProfile`` per stage (``--profile-cases``).

Writes ``benchmarks/results/pipeline.md`` (tables), ``pipeline.json`` (raw numbers) and
``pipeline-profile.txt``; generated models go to ``benchmarks/out/`` (gitignored).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
RESULTS = HERE / "results"

#: case id -> (model, rule file relative to the repository root, dims given on top of the
#: rule file's own ``dims``, description).  ``file#no-memory``: the file with every device's
#: ``memory`` removed (read and edited at run time, so it follows the shipped profile).
CASES: dict[str, tuple[str, str, dict[str, int], str]] = {
    "cnn-npu": ("cnn", "rules/npu-static.yaml", {"batch": 1},
                "CNN, rules/npu-static.yaml, batch=1"),
    "cnn-npu-nomem": ("cnn", "rules/npu-static.yaml#no-memory", {"batch": 1},
                      "CNN, rules/npu-static.yaml with its NPU memory limit removed, batch=1 "
                      "(parts decided by refused ops only)"),
    "cnn-gpu": ("cnn", "rules/gpu-cpu.yaml", {"batch": 1},
                "CNN, rules/gpu-cpu.yaml, batch=1"),
    "tf-seq-npu": ("transformer", "rules/npu-static.yaml", {"batch": 1, "seq": 128},
                   "transformer, rules/npu-static.yaml, batch=1 seq=128 (shape chains fold)"),
    "tf-seq-gpu": ("transformer", "rules/gpu-cpu.yaml", {"batch": 1, "seq": 128},
                   "transformer, rules/gpu-cpu.yaml, batch=1 seq=128 (shape chains fold)"),
    "tf-noseq-npu": ("transformer", "rules/npu-static.yaml", {"batch": 1},
                     "transformer, rules/npu-static.yaml, batch=1, seq symbolic (chains stay)"),
    "tf-noseq-gpu": ("transformer", "rules/gpu-cpu.yaml", {"batch": 1},
                     "transformer, rules/gpu-cpu.yaml, batch=1, seq symbolic (chains stay)"),
    "layered-gpu": ("layered", "rules/gpu-cpu.yaml", {"batch": 1},
                    "wide random layered DAG, rules/gpu-cpu.yaml, batch=1 (reshape chains fold; "
                    "1 part)"),
    "tf-noseq-values": ("transformer", "benchmarks/rules/gpu-values.yaml", {"batch": 1},
                        "transformer, benchmarks/rules/gpu-values.yaml (GPU enforces value "
                        "inputs), batch=1, seq symbolic: value-input splits"),
}
PROFILE_CASES = ("cnn-npu", "cnn-npu-nomem", "tf-seq-npu", "tf-noseq-values")
HEURISTIC_TARGET_S = 1.0
FLOOR_RATIO_TARGET = 1.5
STAGES = ("rules", "read", "check", "flatten", "shapes", "compile", "heuristic", "validate", "write")
LOAD_STAGES = ("read", "check", "flatten", "shapes")
MiB = 2 ** 20
GC_OFF = False   # --gc-off: workers run with the cyclic garbage collector disabled (experiment)


# ============================================================================================
# worker side: one measurement in this process
# ============================================================================================

def _rss_hwm() -> int:
    """Process RSS high-water mark in bytes (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_now() -> int:
    try:
        import psutil
        return psutil.Process().memory_info().rss
    except ImportError:  # pragma: no cover
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Recorder:
    """Times a stage; records RSS after it and, with tracemalloc, the Python-heap peak during it."""

    def __init__(self, trace: bool, profile: bool):
        self.trace = trace
        self.profile = profile
        self.stages: dict[str, dict] = {}
        self.profiles: dict[str, str] = {}

    def run(self, name: str, fn):
        import tracemalloc
        rec: dict = {}
        prof = None
        if self.trace:
            tracemalloc.reset_peak()
            start_mem = tracemalloc.get_traced_memory()[0]
        if self.profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        t = time.perf_counter()
        out = fn()
        rec["seconds"] = time.perf_counter() - t
        if prof is not None:
            prof.disable()
            self.profiles[name] = _format_profile(prof)
        if self.trace:
            cur, peak = tracemalloc.get_traced_memory()
            rec["py_peak"] = peak - start_mem     # above what was live when the stage began
            rec["py_after"] = cur
        rec["rss_hwm"] = _rss_hwm()
        rec["rss_after"] = _rss_now()
        self.stages[name] = rec
        return out


def _format_profile(prof, top: int = 25) -> str:
    import io
    import pstats
    out = []
    for key in ("cumulative", "tottime"):
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.strip_dirs().sort_stats(key).print_stats(top)
        text = s.getvalue()
        # drop pstats' preamble lines up to the column header
        lines = text.splitlines()
        for k, line in enumerate(lines):
            if "function calls" in line:
                head = line.strip()
            if line.lstrip().startswith("ncalls"):
                lines = lines[k:]
                break
        out.append(f"--- top {top} by {key} ({head})\n" + "\n".join(lines).rstrip())
    return "\n\n".join(out)


class SubTimer:
    """Wraps module-level functions (called a few times per run, so the wrapper costs nothing
    measurable) to split a stage further."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, module, attr: str, label: str | None = None) -> None:
        fn = getattr(module, attr)
        label = label or attr
        me = self

        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                me.seconds[label] = me.seconds.get(label, 0.0) + time.perf_counter() - t
                me.calls[label] = me.calls.get(label, 0) + 1

        setattr(module, attr, wrapper)


def worker_floor(path: str, trace: bool) -> dict:
    import tracemalloc
    if trace:
        tracemalloc.start()
    t = time.perf_counter()
    import onnx
    import onnx.shape_inference
    import_s = time.perf_counter() - t
    rec = Recorder(trace, False)
    base = {"rss_after_import": _rss_now(), "rss_hwm_after_import": _rss_hwm()}
    model = rec.run("load", lambda: onnx.load(path))
    rec.run("infer", lambda: onnx.shape_inference.infer_shapes(model, data_prop=True))
    return {"import_s": import_s, **base, "stages": rec.stages}


def worker_pipeline(case: str, path: str, out_dir: str, trace: bool, profile: bool,
                    verify: bool) -> dict:
    import tracemalloc
    if trace:
        tracemalloc.start()
    t = time.perf_counter()
    import onnx  # noqa: F401
    import importlib
    compile_mod = importlib.import_module("hetero_solve.compile")
    greedy_mod = importlib.import_module("hetero_solve.algorithms.greedy")
    from hetero_solve.compile import compile_problem
    writer_mod = importlib.import_module("hetero_solve.export.writer")
    shapes_mod = importlib.import_module("hetero_solve.model.shapes")
    from hetero_solve.model.load import analyse_model, check_model, read_model
    from hetero_solve.model.parallel import fork_pays
    sequential_load = os.environ.get("BENCH_SEQUENTIAL_LOAD") == "1" or trace or profile
    from hetero_solve.result import Result
    from hetero_solve.solution import evaluate
    from hetero_solve.validate import check
    from hetero_solve.algorithms.greedy import heuristic
    import_s = time.perf_counter() - t
    base = {"rss_after_import": _rss_now(), "rss_hwm_after_import": _rss_hwm(),
            "ort_imported_before": "onnxruntime" in sys.modules}

    sub = SubTimer()
    for attr in ("light_copy", "infer", "_types", "find_foldable", "folded_readers",
                 "control_flow_hints", "_without", "_nonstatic", "_subgraph_nodes"):
        sub.wrap(shapes_mod, attr, f"shapes.{attr.lstrip('_')}")
    sub.wrap(compile_mod, "resolve_pins", "compile.resolve_pins")
    sub.wrap(compile_mod, "_allowed_devices", "compile.allowed_devices")
    sub.wrap(greedy_mod, "greedy", "heuristic.greedy")
    sub.wrap(greedy_mod, "objective_term", "heuristic.objective_term")
    sub.wrap(writer_mod, "_write_json", "write.json_dump")

    _model, rules_spec, dims, _ = CASES[case]
    rec = Recorder(trace, profile)
    rules = rec.run("rules", lambda: read_rules(rules_spec))
    # solve() pauses the cyclic GC for the whole pipeline; so does this measurement.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    model, shown, data = rec.run("read", lambda: read_model(path))
    if fork_pays(len(model.graph.node)) and not sequential_load:
        # The product's path: check and first inference in forked processes while this one
        # flattens.  The three stages overlap, so all their time is reported under "shapes".
        rec.run("check", lambda: None)
        rec.run("flatten", lambda: None)
        mg = rec.run("shapes", lambda: analyse_model(model, shown, data, dims,
                                                     rule_dims=rules.dims, defer_check=True))
    else:
        rec.run("check", lambda: check_model(model, shown, data))
        rec.run("flatten", lambda: None)   # analyse_model flattens: counted under "shapes"
        mg = rec.run("shapes", lambda: analyse_model(model, shown, data, dims,
                                                     rule_dims=rules.dims, check=False))
    base["ort_imported_after_load"] = "onnxruntime" in sys.modules
    problem = rec.run("compile", lambda: compile_problem(mg, rules))
    sol = rec.run("heuristic", lambda: heuristic(problem))

    def validate_stage():
        metrics = evaluate(problem, sol)
        check(problem, sol, metrics=metrics)
        mg.ensure_valid()   # as solve() does: the forked checker's answer, waited for last
        return metrics

    metrics = rec.run("validate", validate_stage)
    s = {k: v["seconds"] for k, v in rec.stages.items()}
    seconds = {"rules": s["rules"], "load": sum(s[k] for k in LOAD_STAGES),
               "compile": s["compile"], "heuristic": s["heuristic"], "exact": 0.0,
               "validate": s["validate"]}
    result = Result(mg, rules, problem, sol, metrics, seconds,
                    list(problem.info.warnings),
                    explanation=sol.stats.pop("explain", None))
    rec.run("write", lambda: writer_mod.write_result(result, out_dir, submodels=False, annotated=False,
                                                     dots=False))
    if gc_was_enabled:
        gc.enable()

    info = {
        "graph_nodes": len(mg.names), "placeable": problem.n, "folded": len(mg.folded),
        "constant_nodes": len(mg.constant_nodes), "initializers": len(mg.initializers),
        "tensors": len(problem.tensor_names), "consts": len(problem.const_names),
        "edges": sum(len(x) for x in problem.succ),
        "value_edges": sum(len(x) for x in problem.value_pred),
        "parts": sol.num_parts, "metrics": metrics.as_dict(),
        "parts_per_device": _parts_per_device(problem, sol),
        "instance_memory": {f"{problem.devices[d].name}[{k}]": (
            f"{used / MiB:.1f} MiB" + (f" of {problem.devices[d].memory / MiB:.0f} MiB"
                                       if problem.devices[d].memory is not None else ""))
            for (d, k), used in sorted(metrics.instance_memory.items())},
        "warnings": [w[:200] for w in result.warnings],
        "manifest_bytes": (Path(out_dir) / "partition.json").stat().st_size,
        "affinity_bytes": (Path(out_dir) / "affinity.json").stat().st_size,
    }
    res = {"import_s": import_s, **base, "stages": rec.stages, "info": info,
           "sub_seconds": dict(sub.seconds), "sub_calls": dict(sub.calls),
           "rss_hwm_pipeline": _rss_hwm()}
    if profile:
        res["profiles"] = rec.profiles
    if not trace and not profile:
        # The heuristic alone, twice more in the same process: its best of 3 is less exposed to
        # a noisy machine than one call (same problem, same answer; nothing is cached).
        runs = [rec.stages["heuristic"]["seconds"]]
        for _ in range(2):
            t = time.perf_counter()
            heuristic(problem)
            runs.append(time.perf_counter() - t)
        res["heuristic_runs"] = runs
    if verify:
        import hetero_solve
        del result, problem, mg, model
        t = time.perf_counter()
        r = hetero_solve.solve(path, read_rules(rules_spec), dims=dims, engine="heuristic")
        res["solve_s"] = time.perf_counter() - t
        res["solve_stages"] = dict(r.seconds)
        res["solve_same_partition"] = (r.solution.part_of == sol.part_of
                                       and r.solution.part_device == sol.part_device)
    return res


def read_rules(spec: str):
    """Load a case's rules: a path relative to the repository root, optionally ``#no-memory``."""
    from hetero_solve.rules import load_rules
    path, _, variant = spec.partition("#")
    if not variant:
        return load_rules(ROOT / path)
    import yaml
    with open(ROOT / path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if variant == "no-memory":
        for d in data["devices"]:
            d.pop("memory", None)
    else:
        raise ValueError(f"unknown rules variant {variant!r}")
    return load_rules(data, base_dir=(ROOT / path).parent)


def _parts_per_device(problem, sol) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in sol.part_device:
        name = problem.devices[d].name
        out[name] = out.get(name, 0) + 1
    return out


def worker_main(args) -> None:
    if args.gc_off:
        import gc
        gc.disable()
    if args.worker == "floor":
        res = worker_floor(args.path, args.trace)
    else:
        res = worker_pipeline(args.case, args.path, args.out_dir, args.trace, args.cprofile,
                              args.verify)
    res["rss_hwm_end"] = _rss_hwm()
    with open(args.result_file, "w") as f:
        json.dump(res, f)


# ============================================================================================
# parent side: generate, spawn, aggregate, report
# ============================================================================================

def machine_info() -> dict:
    info: dict = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cores"] = os.cpu_count()
    try:
        import psutil
        info["ram_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    code = ("import onnx, onnxruntime, numpy, google.protobuf as pb;"
            "from google.protobuf.internal import api_implementation as a;"
            "import json; print(json.dumps({'onnx': onnx.__version__, 'onnxruntime': onnxruntime.__version__,"
            "'numpy': numpy.__version__, 'protobuf': pb.__version__ + ' (' + a.Type() + ')'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    info.update(json.loads(out.stdout))
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "hetero_solve"],
                               capture_output=True, text=True).stdout.strip()
        info["commit"] = head + (" (hetero_solve modified)" if dirty else "")
    except OSError:
        pass
    return info


def load_avg() -> tuple[float, float, float]:
    return os.getloadavg()


def spawn(kind: str, case: str, path: Path, *, trace=False, profile=False, verify=False,
          out_dir: Path | None = None) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_file = f.name
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--case", case,
           "--path", str(path), "--result-file", result_file]
    if out_dir is not None:
        cmd += ["--out-dir", str(out_dir)]
    cmd += ["--trace"] * trace + ["--cprofile"] * profile + ["--verify"] * verify
    cmd += ["--gc-off"] * GC_OFF
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} worker failed for {case} {path.name} "
                               f"(exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        with open(result_file) as f:
            res = json.load(f)
    finally:
        os.unlink(result_file)
    res["wall_s"] = wall
    return res


def ensure_model(model: str, size: int) -> Path:
    env = dict(os.environ)
    subprocess.run([sys.executable, str(HERE / "gen_models.py"), "--models", model, "--sizes", str(size),
                    "-o", str(OUT)], check=True, env=env, stdout=subprocess.DEVNULL)
    return OUT / f"{model}-{size}.onnx"


def measure(case: str, size: int, repeat: int, profile: bool, verify_max: int, say) -> dict:
    model = CASES[case][0]
    path = ensure_model(model, size)
    out_dir = OUT / "runs" / f"{case}-{size}.hetero"
    floors, pipes = [], []
    for r in range(repeat):
        floors.append(spawn("floor", case, path))
        pipes.append(spawn("pipeline", case, path, out_dir=out_dir,
                           verify=(r == 0 and size <= verify_max)))
        p = pipes[-1]
        say(f"  {case} {size}: run {r + 1}/{repeat}: pipeline "
            f"{sum(v['seconds'] for v in p['stages'].values()):.2f} s, floor "
            f"{sum(v['seconds'] for v in floors[-1]['stages'].values()):.2f} s "
            f"(load avg {load_avg()[0]:.1f})")
    mem_floor = spawn("floor", case, path, trace=True)
    mem_pipe = spawn("pipeline", case, path, out_dir=out_dir, trace=True)
    prof = spawn("pipeline", case, path, out_dir=out_dir, profile=True) if profile else None
    return {"case": case, "size": size, "path": str(path.relative_to(ROOT)),
            "file_bytes": path.stat().st_size, "floor": floors, "pipeline": pipes,
            "mem_floor": mem_floor, "mem_pipeline": mem_pipe,
            "profiles": prof.get("profiles") if prof else None,
            "load_avg_after": load_avg()}


def _med(xs):
    return statistics.median(xs)


def summarize(m: dict) -> dict:
    """Medians over repetitions, per stage and for totals."""
    st = {k: _med([p["stages"][k]["seconds"] for p in m["pipeline"]]) for k in STAGES}
    totals = [sum(p["stages"][k]["seconds"] for k in STAGES) for p in m["pipeline"]]
    floor_load = [f["stages"]["load"]["seconds"] for f in m["floor"]]
    floor_inf = [f["stages"]["infer"]["seconds"] for f in m["floor"]]
    floors = [a + b for a, b in zip(floor_load, floor_inf)]
    ratios = [t / f for t, f in zip(totals, floors)]
    subs: dict[str, float] = {}
    for key in m["pipeline"][0]["sub_seconds"]:
        subs[key] = _med([p["sub_seconds"].get(key, 0.0) for p in m["pipeline"]])
    info = m["pipeline"][0]["info"]
    return {"stages": st, "load": sum(st[k] for k in LOAD_STAGES),
            "total": _med(totals), "total_min": min(totals), "total_max": max(totals),
            "floor_load": _med(floor_load), "floor_infer": _med(floor_inf),
            "floor": _med(floors), "floor_min": min(floors), "floor_max": max(floors),
            "ratio": _med(ratios), "sub": subs,
            "sub_calls": m["pipeline"][0]["sub_calls"], "info": info,
            "import_s": _med([p["import_s"] for p in m["pipeline"]]),
            "heur_best": min(min(p["heuristic_runs"]) for p in m["pipeline"]),
            "solve_s": m["pipeline"][0].get("solve_s"),
            "solve_same": m["pipeline"][0].get("solve_same_partition")}


def fmt_s(x: float) -> str:
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_mib(b: float) -> str:
    return f"{b / MiB:.0f}" if b >= 10 * MiB else f"{b / MiB:.1f}"


def report(results: list[dict], machine: dict, args, started: str, load_before) -> str:
    L: list[str] = []
    L.append("# Pipeline benchmark")
    L.append("")
    L.append(f"Run {started} with `python benchmarks/bench_pipeline.py --sizes {args.sizes} "
             f"--repeat {args.repeat}" + (f" --cases {args.cases}" if args.cases else "")
             + (" --gc-off" if args.gc_off else "") + "`.")
    L.append("")
    L.append(f"- Machine: {machine.get('cpu', '?')}, {machine.get('cores')} cores, "
             f"{machine.get('ram_gib', '?')} GiB RAM; {machine.get('platform')}")
    L.append(f"- Python {machine['python']}, onnx {machine['onnx']}, onnxruntime "
             f"{machine['onnxruntime']}, numpy {machine['numpy']}, protobuf {machine['protobuf']}; "
             f"hetero-solve at {machine.get('commit', '?')}")
    la = [r["load_avg_after"][0] for r in results]
    L.append(f"- Load average (1 min) before the run {load_before[0]:.1f}, after each "
             f"measurement {min(la):.1f} to {max(la):.1f}.")
    if args.gc_off:
        L.append("- **Experiment: `--gc-off`, every worker ran with `gc.disable()`.**")
    if args.shared_note:
        L.append(f"- **Caveat: {args.shared_note}**")
    L.append("- From 20,000 nodes the product runs onnx's checker (at niceness 19) and the first "
             "shape inference in forked processes while it flattens the graph and computes its "
             "structure (hetero_solve/model/parallel.py, model/structure.py); those timed runs "
             "report the overlapping check + flatten + structure + shapes under `shapes` "
             "(`check` and `flatten` show 0; `compile` then reuses the structure; any wait for "
             "the checker's answer is in `validate`, where `solve()` takes it).  Profiles and "
             "memory runs use the sequential path.")
    L.append("")
    L.append("Times are medians of the repetitions, each repetition a fresh process (seconds). "
             "`total` = rules + load (read + check + flatten + shapes) + compile + heuristic + "
             "validate + write (manifest and affinity.json only); interpreter start-up and "
             "imports are not included (import of hetero_solve + onnx: "
             f"{fmt_s(_med([summarize(r)['import_s'] for r in results]))} s). "
             "`floor` = `onnx.load` + `onnx.shape_inference.infer_shapes(data_prop=True)` on "
             "the same file in a fresh process of the same run. `heur` target: <= "
             f"{HEURISTIC_TARGET_S:g} s at 100,000 nodes; `ratio` = total / floor, target <= "
             f"{FLOOR_RATIO_TARGET:g}.")
    L.append("")
    by_case: dict[str, list[dict]] = {}
    for r in results:
        by_case.setdefault(r["case"], []).append(r)

    # -- summary of targets
    L.append("## Targets")
    L.append("")
    L.append("At the largest size.  `heuristic`: median of the staged calls, and the best of "
             "all calls (3 per process: the staged one and two more on the same problem).")
    L.append("")
    L.append("| case | size | parts | heuristic s (best) | <= 1 s | total s | floor s | ratio | <= 1.5 x floor |")
    L.append("| --- | ---: | ---: | ---: | :---: | ---: | ---: | ---: | :---: |")
    for case, rs in by_case.items():
        r = max(rs, key=lambda r: r["size"])
        s = summarize(r)
        ok = s["stages"]["heuristic"] <= HEURISTIC_TARGET_S
        best_ok = s["heur_best"] <= HEURISTIC_TARGET_S
        L.append(f"| {case} | {r['size']:,} | {s['info']['parts']:,} | {fmt_s(s['stages']['heuristic'])} "
                 f"({fmt_s(s['heur_best'])}) | "
                 f"{'yes' if ok else ('best only' if best_ok else '**no**')} | "
                 f"{fmt_s(s['total'])} | {fmt_s(s['floor'])} | {s['ratio']:.2f} | "
                 f"{'yes' if s['ratio'] <= FLOOR_RATIO_TARGET else '**no**'} |")
    L.append("")

    for case, rs in by_case.items():
        L.append(f"## {case}: {CASES[case][3]}")
        L.append("")
        L.append("### Seconds per stage")
        L.append("")
        L.append("| size | nodes | placeable | parts | rules | read | check | flatten | shapes | "
                 "compile | heur | validate | write | total (min-max) | floor: load + infer | "
                 "ratio | heur <= 1 s |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                 "---: | ---: | ---: | ---: | ---: | :---: |")
        for r in rs:
            s = summarize(r)
            i = s["info"]
            st = s["stages"]
            L.append(
                f"| {r['size']:,} | {i['graph_nodes']:,} | {i['placeable']:,} | {i['parts']:,} | "
                + " | ".join(fmt_s(st[k]) for k in STAGES)
                + f" | {fmt_s(s['total'])} ({fmt_s(s['total_min'])}-{fmt_s(s['total_max'])}) | "
                f"{fmt_s(s['floor'])} = {fmt_s(s['floor_load'])} + {fmt_s(s['floor_infer'])} | "
                f"{s['ratio']:.2f} | {'yes' if st['heuristic'] <= HEURISTIC_TARGET_S else 'no'} |")
        L.append("")
        L.append("### Inside the stages (medians, seconds; calls in brackets)")
        L.append("")
        keys = [k for k in rs[0]["pipeline"][0]["sub_seconds"]]
        for r in rs[1:]:
            keys += [k for k in r["pipeline"][0]["sub_seconds"] if k not in keys]
        L.append("| size | " + " | ".join(keys) + " |")
        L.append("| ---: | " + " | ".join("---:" for _ in keys) + " |")
        for r in rs:
            s = summarize(r)
            cells = []
            for k in keys:
                if k in s["sub"]:
                    cells.append(f"{fmt_s(s['sub'][k])} ({s['sub_calls'][k]})")
                else:
                    cells.append("-")
            L.append(f"| {r['size']:,} | " + " | ".join(cells) + " |")
        L.append("")
        L.append("### Memory (MiB)")
        L.append("")
        L.append("Per stage `py/rss`: `py` = tracemalloc peak of Python allocations during the "
                 "stage, above what was live when it began (protobuf's C++ / upb arenas and "
                 "onnxruntime are invisible to it); `rss` = the process RSS high-water mark "
                 "(`ru_maxrss`) right after the stage (process-wide, monotone: a stage raised "
                 "the peak only if its value is above the previous one).  From the tracemalloc "
                 "run (times there are not used).  `base` = RSS after imports.")
        L.append("")
        L.append("| size | file | floor rss: base / load / infer | pipeline base | "
                 + " | ".join(STAGES) + " | py live at end |")
        L.append("| ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in STAGES) + " | ---: |")
        for r in rs:
            mf, mp = r["mem_floor"], r["mem_pipeline"]
            cells = []
            for k in STAGES:
                x = mp["stages"][k]
                cells.append(f"{fmt_mib(x['py_peak'])} / {fmt_mib(x['rss_hwm'])}")
            # RSS high-water marks from the timed runs too (no tracemalloc overhead)
            L.append(f"| {r['size']:,} | {fmt_mib(r['file_bytes'])} | "
                     f"{fmt_mib(mf['rss_hwm_after_import'])} / {fmt_mib(mf['stages']['load']['rss_hwm'])} / "
                     f"{fmt_mib(mf['stages']['infer']['rss_hwm'])} | {fmt_mib(mp['rss_hwm_after_import'])} | "
                     + " | ".join(cells) + f" | {fmt_mib(mp['stages']['write']['py_after'])} |")
        L.append("")
        L.append("Peak RSS of the whole timed runs (no tracemalloc), median: "
                 + ", ".join(f"{r['size']:,}: pipeline {fmt_mib(_med([p['rss_hwm_pipeline'] for p in r['pipeline']]))}"
                             f" vs floor {fmt_mib(_med([f['rss_hwm_end'] for f in r['floor']]))}"
                             for r in rs) + ".")
        L.append("")
        notes = []
        for r in rs:
            s = summarize(r)
            i = s["info"]
            w = "; ".join(w[:120] for w in i["warnings"]) or "none"
            notes.append(f"- {r['size']:,}: {i['graph_nodes']:,} graph nodes ({i['constant_nodes']:,} "
                         f"Constant, {i['folded']:,} folded), {i['initializers']:,} initializers, "
                         f"{i['edges']:,} edges, {i['value_edges']:,} value edges, {i['tensors']:,} "
                         f"tensors, {i['consts']:,} constants; parts per device "
                         f"{i['parts_per_device']}; objective {i['metrics']}; partition.json "
                         f"{fmt_mib(i['manifest_bytes'])} MiB, affinity.json "
                         f"{fmt_mib(i['affinity_bytes'])} MiB; memory used per device "
                         f"instance {i['instance_memory']}; "
                         + (f"`hetero_solve.solve()` {fmt_s(s['solve_s'])} s, same partition: "
                            f"{s['solve_same']}; " if s["solve_s"] is not None else "")
                         + f"warnings: {w}")
        L.append("Facts:")
        L.append("")
        L.extend(notes)
        L.append("")
    return "\n".join(L) + "\n"


def profile_report(results: list[dict], machine: dict, started: str) -> str:
    L = [f"cProfile of the pipeline stages (run {started}; {machine.get('cpu')}, "
         f"{machine.get('cores')} cores; Python {machine['python']}, onnx {machine['onnx']}).",
         "One profiler per stage, in a separate process from the timed runs (cProfile adds "
         "overhead per Python call, so absolute times here are inflated; the ranking is what "
         "matters).", ""]
    for r in results:
        if not r.get("profiles"):
            continue
        for stage, text in r["profiles"].items():
            if stage not in ("read", "check", "flatten", "shapes", "compile", "heuristic",
                             "validate", "write"):
                continue
            L.append("=" * 100)
            L.append(f"{r['case']} ({CASES[r['case']][3]}), {r['size']:,} nodes: stage {stage}")
            L.append("=" * 100)
            L.append(text)
            L.append("")
    return "\n".join(L) + "\n"


def parent_main(args) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = args.cases.split(",") if args.cases else list(CASES)
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c!r}; known: {', '.join(CASES)}")
    prof_cases = (list(CASES) if args.profile_cases == "all"
                  else args.profile_cases.split(",")) if args.profile else []
    prof_size = max(sizes)
    started = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    load_before = load_avg()
    machine = machine_info()
    print(f"machine: {machine}", flush=True)
    say = lambda s: print(s, flush=True)  # noqa: E731
    results = []
    for size in sizes:
        for case in cases:
            say(f"{case} at {size:,} nodes")
            results.append(measure(case, size, args.repeat,
                                   profile=(case in prof_cases and size == prof_size),
                                   verify_max=args.verify_max, say=say))
    results.sort(key=lambda r: (cases.index(r["case"]), r["size"]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    md = report(results, machine, args, started, load_before)
    out_md = Path(args.out)
    out_md.write_text(md)
    raw = {"machine": machine, "started": started, "args": vars(args), "results": [
        {k: v for k, v in r.items() if k != "profiles"} for r in results]}
    out_md.with_suffix(".json").write_text(json.dumps(raw, indent=1))
    if any(r.get("profiles") for r in results):
        Path(args.profile_out).write_text(profile_report(results, machine, started))
    print(md)
    print(f"wrote {out_md}, {out_md.with_suffix('.json')}"
          + (f", {args.profile_out}" if prof_cases else ""))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="", help=f"comma-separated, default all: {', '.join(CASES)}")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the cProfile runs at the largest size")
    ap.add_argument("--profile-cases", default=",".join(PROFILE_CASES), help="or 'all'")
    ap.add_argument("--verify-max", type=int, default=10000,
                    help="also run hetero_solve.solve() and compare, up to this size (first repetition)")
    ap.add_argument("--out", default=str(RESULTS / "pipeline.md"))
    ap.add_argument("--profile-out", default=str(RESULTS / "pipeline-profile.txt"))
    ap.add_argument("--gc-off", action="store_true",
                    help="experiment: run every worker with gc.disable() (how much the cyclic "
                         "garbage collector costs); noted in the results")
    ap.add_argument("--shared-note", default="",
                    help="a caveat printed in the results (e.g. 'the machine was shared')")
    # worker mode (internal)
    ap.add_argument("--worker", choices=("floor", "pipeline"), help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", help=argparse.SUPPRESS)
    ap.add_argument("--result-file", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cprofile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global GC_OFF
    GC_OFF = args.gc_off
    if args.worker:
        worker_main(args)
    else:
        parent_main(args)


if __name__ == "__main__":
    main()
