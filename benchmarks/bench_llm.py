"""Every command on an LLM-size decoder with external data: wall seconds and peak RSS, next to
``onnx.load`` + ``infer_shapes`` of the same file.

    python benchmarks/bench_llm.py                                   # qwen2-0.5b fp32, 1 round
    python benchmarks/bench_llm.py --presets qwen2-0.5b:float32 tinyllama-1.1b:float16 \
        --baseline /tmp/before --repeat 3
    python benchmarks/bench_llm.py --presets --models corpus/cache/models/qwen2-kv-2gb-legacy.onnx

The decoders are built by ``corpus/decoder.py`` (random weights, external data) into
``benchmarks/out/llm/`` (gitignored) once.  Each measurement is a fresh process whose peak
RSS is the kernel's ``ru_maxrss``, read by a small parent (:data:`RUNNER`); the machine's load
average is noted beside.  Measured per model:

- ``floor``: ``onnx.load(path)`` (weights read in) + ``onnx.shape_inference.infer_shapes(...,
  data_prop=True)`` (``infer_shapes_path`` over 2 GiB, where the proto cannot be serialised):
  what any tool that reads and shape-infers the model pays;
- ``dims``, ``solve`` (``-o OUT``, every file written), ``check`` (``--affinity`` the solve's
  ``partition.json``, exported), ``explain``, ``run OUT``, ``verify MODEL OUT``.

``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/before main``) runs the same
commands with that tree's code (``PYTHONPATH``), rounds alternating.  Heavy: one process at a
time, run it under ``nice`` on a shared machine, never two at once (a baseline run of a 2 GB
model takes 10-16 GiB).  Writes ``benchmarks/results/llm.md`` and ``llm.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "llm"
RULES = HERE / "rules"

#: Over 2 GiB a ModelProto cannot be serialised for ``infer_shapes``: onnx's path API then
#: (it reads the file again in C++, weights included, and writes the inferred model).
FLOOR = ("import onnx, os, sys, tempfile; p = sys.argv[1]; m = onnx.load(p)\n"
         "if m.ByteSize() < 2**31 - 2**20: onnx.shape_inference.infer_shapes(m, data_prop=True)\n"
         "else:\n"
         " d = tempfile.mkdtemp(dir=os.path.dirname(p)); o = os.path.join(d, 'inferred.onnx')\n"
         " onnx.shape_inference.infer_shapes_path(p, o, data_prop=True)\n"
         " os.remove(o); os.rmdir(d)")
DIMS = ["--dim", "batch=1", "--dim", "sequence=16", "--dim", "past_sequence=32",
        "--dim", "total_sequence=48"]


#: A small process that runs the command and reports its children's peak RSS.  The kernel
#: starts a child's ``ru_maxrss`` at its parent's peak (the copied address space counts until
#: ``exec``), so the parent of a measured command must stay small: never this script, which
#: may have grown.
RUNNER = ("import resource, subprocess, sys; "
          "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
          "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")


def measure(argv: list[str], env: dict | None = None) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (bytes) and exit code of one process."""
    t0 = time.perf_counter()
    # not in the repository: ``python -m`` puts the working folder first on sys.path, which
    # would shadow a baseline tree's PYTHONPATH with this one
    p = subprocess.run([sys.executable, "-c", RUNNER, *argv], env=env, capture_output=True,
                       text=True, cwd=OUT)
    wall = time.perf_counter() - t0
    rss, code = (int(x) for x in p.stdout.split())
    if code not in (0, 1):
        print(f"  {' '.join(argv[:4])}... exit {code}: {p.stderr.strip()[-300:]}", file=sys.stderr)
    return wall, rss * 1024, code


def model_for(preset: str, dtype: str) -> Path:
    path = OUT / f"{preset}-{dtype}.onnx"
    if not path.exists():   # in another process: this one stays small (see RUNNER)
        OUT.mkdir(parents=True, exist_ok=True)
        print(f"building {path.name}", file=sys.stderr)
        subprocess.run([sys.executable, str(ROOT / "corpus" / "decoder.py"), str(path),
                        "--preset", preset, "--dtype", dtype, "--external"], check=True)
    return path


def commands(model: Path, rules: Path, out: Path) -> dict[str, list[str]]:
    hs = ["-m", "hetero_solve"]
    return {
        "floor": ["-c", FLOOR, str(model)],
        "dims": [*hs, "dims", str(model), *DIMS],
        "solve": [*hs, str(model), str(rules), *DIMS, "-o", str(out)],
        "check": [*hs, "check", str(model), str(rules), *DIMS, "--affinity",
                  str(out / "partition.json"), "-o", str(out) + "-check"],
        "explain": [*hs, "explain", str(model), str(rules), *DIMS],
        "run": [*hs, "run", str(out), *DIMS],
        "verify": [*hs, "verify", str(model), str(out), *DIMS],
    }


def one_round(model: Path, rules: Path, tree: Path | None, tag: str) -> dict[str, dict]:
    import shutil
    out = OUT / f"{model.stem}-{tag}.hetero"
    for d in (out, Path(str(out) + "-check")):
        shutil.rmtree(d, ignore_errors=True)
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    found = {}
    for name, argv in commands(model, rules, out).items():
        wall, rss, code = measure([sys.executable, *argv], env)
        found[name] = {"seconds": wall, "rss": rss, "exit": code, "load": os.getloadavg()[0]}
        print(f"  {tag:6} {name:8} {wall:7.1f} s {rss / 2**30:6.2f} GiB exit {code}",
              file=sys.stderr)
    for d in (out, Path(str(out) + "-check")):
        shutil.rmtree(d, ignore_errors=True)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="*", default=["qwen2-0.5b:float32"],
                    help="decoder.py presets as PRESET:DTYPE")
    ap.add_argument("--models", nargs="*", default=[],
                    help="other .onnx files with external data (e.g. corpus/cache/models/"
                         "qwen2-kv-2gb-legacy.onnx)")
    ap.add_argument("--rules", default=str(RULES / "llm-cards.yaml"))
    ap.add_argument("--baseline", help="another checkout of hetero-solve to compare with")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default=str(HERE / "results" / "llm.json"))
    a = ap.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    path = Path(a.json)   # models measured before (another run) are kept
    results = json.loads(path.read_text()) if path.exists() else {"models": {}}
    results.update(commit=commit, machine=f"{os.cpu_count()} cores")
    specs = [(spec, model_for(*spec.split(":"))) for spec in a.presets]
    specs += [(Path(m).stem, Path(m).resolve()) for m in a.models]
    for spec, model in specs:
        size = model.stat().st_size + sum(f.stat().st_size for f in model.parent.glob(model.name + ".data"))
        rounds = {"after": [], "before": []}
        for _ in range(a.repeat):
            if a.baseline:
                rounds["before"].append(one_round(model, Path(a.rules), Path(a.baseline), "before"))
            rounds["after"].append(one_round(model, Path(a.rules), None, "after"))
        results["models"][spec] = {"bytes": size, "rounds": rounds, "commit": commit}
        path.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return 0


def table(results: dict) -> str:
    lines = []
    for spec, m in results["models"].items():
        size = m["bytes"]
        lines.append(f"\n### {spec} ({size / 1e9:.2f} GB with external data, "
                     f"commit {m.get('commit', results.get('commit'))})\n")
        lines.append("| command | tree | seconds | peak RSS | RSS / model | seconds / floor | load |")
        lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for tag in ("before", "after"):
            rounds = m["rounds"][tag]
            if not rounds:
                continue
            floor = statistics.median(r["floor"]["seconds"] for r in rounds)
            for name in rounds[0]:
                sec = statistics.median(r[name]["seconds"] for r in rounds)
                rss = statistics.median(r[name]["rss"] for r in rounds)
                load = statistics.median(r[name]["load"] for r in rounds)
                bad = "" if all(r[name]["exit"] in (0, 1) for r in rounds) else " (failed)"
                lines.append(f"| {name}{bad} | {tag} | {sec:.1f} | {rss / 2**30:.2f} GiB | "
                             f"{rss / size:.2f} | {sec / floor:.2f} | {load:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
