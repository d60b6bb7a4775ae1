"""What each speed mechanism of loading and compiling buys (issue 17's complexity budget).

    python benchmarks/bench_mechanisms.py                                # every mechanism, 100k, 3 pairs
    python benchmarks/bench_mechanisms.py --mechanisms fork,wire --pairs 5 --graphs layered

A mechanism stays only if it pays at least 0.2 s at 100,000 nodes on some benchmark graph.
For each mechanism and graph, runs come in pairs (mechanism on, then off, in fresh
subprocesses, the order alternating from pair to pair so that a drift in the machine's load
hits both alike); each run times the stages the mechanism touches.  Reported: the median of
the on/off differences of the stages' total, and of each side.  "Off" replaces the mechanism
by the plain code it saves (a monkeypatch in the worker; the product has one path).

Graphs (``benchmarks/gen_models.py``, generated when missing): ``layered`` (wide random DAG,
``rules/gpu-cpu.yaml``, batch=1), ``transformer`` (``rules/npu-static.yaml``, batch=1
seq=128), ``transformer-noseq`` (the same without seq: 30,000 refused nodes), ``cnn``
(``rules/npu-static.yaml``, batch=1).

Writes ``benchmarks/results/mechanisms.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

GRAPHS = {
    "layered": ("layered", "rules/gpu-cpu.yaml", {"batch": 1}),
    "transformer": ("transformer", "rules/npu-static.yaml", {"batch": 1, "seq": 128}),
    "transformer-noseq": ("transformer", "rules/npu-static.yaml", {"batch": 1}),
    "cnn": ("cnn", "rules/npu-static.yaml", {"batch": 1}),
}

#: mechanism -> (what it is, the stages it touches, graphs to measure it on).
MECHANISMS = {
    "fork": ("the checker and the first shape inference in forked processes while the "
             "parent flattens the graph (model/parallel.py)", ("load",),
             ("layered", "transformer", "cnn")),
    "refs": ("the tensor-name ids of every node computed while the forked inference runs "
             "(ModelGraph.refs), instead of in compile", ("load", "compile"),
             ("layered", "transformer", "cnn")),
    "wire": ("the inferred types read from the serialised model as (name, TypeProto bytes) "
             "pairs without parsing it (model/wire.py)", ("load",),
             ("layered", "transformer", "cnn")),
    "strip": ("the forked inference's copy of the model without its float weights' data "
              "(inference does not read them)", ("load",), ("layered", "transformer", "cnn")),
    "types-once": ("each distinct TypeProto parsed once, one shared TensorType per type, "
                   "instead of one per tensor", ("load", "compile"),
                   ("layered", "transformer", "cnn")),
    "signatures": ("a when condition checked once per (op, element types, ranks, "
                   "attributes) instead of per node (rules/conditions.py)", ("compile",),
                   ("cnn", "transformer-noseq")),
    "native-fold": ("folded values computed in numpy for the ops shape chains use, "
                    "instead of an onnxruntime session (model/evaluate.py): the values a "
                    "load needs and those the part files read", ("load", "values"),
                    ("transformer", "layered")),
    "lazy-reasons": ("refusal texts made when read (problem.NonStaticShape, NamedReason) "
                     "instead of at compile", ("compile",), ("transformer-noseq", "cnn")),
    "flat-pairs": ("compile hands the flat (node, tensor) pairs it built to the problem's "
                   "arrays instead of their being rebuilt from the lists", ("compile",),
                   ("layered", "transformer", "cnn")),
    "paused-gc": ("the cyclic garbage collector paused during the pipeline (gcpause.py)",
                  ("load", "compile", "heuristic"), ("layered", "transformer", "cnn")),
}


# -- worker: one run, in this process -------------------------------------------------------

def _disable(mechanism: str) -> None:
    """Replace ``mechanism`` by the plain code it saves."""
    if mechanism == "fork":
        os.environ["HETERO_SOLVE_NO_FORK"] = "1"
    elif mechanism == "refs":
        from hetero_solve.model import graph
        of = graph.ModelGraph.of.__func__

        def without_refs(cls, g, **found):
            found["refs"] = None
            return of(cls, g, **found)
        graph.ModelGraph.of = classmethod(without_refs)
    elif mechanism == "wire":
        import onnx
        from hetero_solve.model import shapes, wire

        def parsed(model):
            if isinstance(model, bytes):
                model = onnx.ModelProto.FromString(model)
            return wire.declared_types(model)
        shapes.declared_types = parsed
    elif mechanism == "strip":
        from hetero_solve.model import shapes
        shapes._strip = lambda t, huge: False
    elif mechanism == "types-once":
        import onnx
        from hetero_solve.model import shapes
        from hetero_solve.model.graph import TypeTable, type_of_proto

        def every_one(graph, inferred, interned, before):
            names, type_bytes = shapes.declared_types(inferred)
            types = TypeTable(before)
            types.update((n, type_of_proto(onnx.TypeProto.FromString(b)))
                         for n, b in zip(names, type_bytes))
            return types, dict(zip(names, type_bytes))
        shapes._types = every_one
    elif mechanism == "signatures":
        from hetero_solve.rules import conditions

        class Forgetful(dict):
            def __setitem__(self, key, value):
                pass
        init = conditions.SupportChecker.__init__

        def no_cache(self, rules, mg):
            init(self, rules, mg)
            self._node_cache = Forgetful()
        conditions.SupportChecker.__init__ = no_cache
    elif mechanism == "native-fold":
        from hetero_solve.model import evaluate
        evaluate.NATIVE.clear()
    elif mechanism == "lazy-reasons":
        from hetero_solve import compile as comp
        from hetero_solve.problem import reason_text
        allowed = comp._allowed_devices

        def eager(rules, mg, placeable, pins, pin_keys):
            found, refusals = allowed(rules, mg, placeable, pins, pin_keys)
            refusals._rows = [[reason_text(e) for e in row] for row in refusals._rows]
            return found, refusals
        comp._allowed_devices = eager
    elif mechanism == "flat-pairs":
        from hetero_solve import compile as comp
        arrays = comp.problem_arrays
        comp.problem_arrays = lambda problem, flat=None, **kw: arrays(problem, None, **kw)
    elif mechanism == "paused-gc":
        import contextlib
        from hetero_solve import gcpause
        gcpause.paused_gc = contextlib.nullcontext
    elif mechanism != "none":
        raise ValueError(mechanism)


def worker(path: str, rules_path: str, dims: dict, mechanism: str, on: bool) -> dict:
    if not on:
        _disable(mechanism)
    from hetero_solve import gcpause
    from hetero_solve.algorithms.greedy import heuristic
    from hetero_solve.compile import compile_problem
    from hetero_solve.model import load_model
    from hetero_solve.rules import load_rules
    seconds = {}
    rules = load_rules(ROOT / rules_path)
    with gcpause.paused_gc():
        t = time.perf_counter()
        mg = load_model(path, dims=dims, rule_dims=rules.dims, defer_check=True)
        seconds["load"] = time.perf_counter() - t
        t = time.perf_counter()
        problem = compile_problem(mg, rules)
        seconds["compile"] = time.perf_counter() - t
        t = time.perf_counter()
        sol = heuristic(problem)
        seconds["heuristic"] = time.perf_counter() - t
        t = time.perf_counter()
        mg.prefetch_folded(problem.const_names)    # what writing the part files reads
        seconds["values"] = time.perf_counter() - t
        mg.ensure_valid()
    return {"seconds": seconds, "parts": len(set(sol.part_of)), "folded": len(mg.folded)}


# -- driver ---------------------------------------------------------------------------------

def _run(path: Path, graph: str, mechanism: str, on: bool) -> dict:
    _, rules_path, dims = GRAPHS[graph]
    code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_mechanisms as b; "
            f"print(json.dumps(b.worker({str(path)!r}, {rules_path!r}, {dims!r}, "
            f"{mechanism!r}, {on!r})))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    ap.add_argument("--graphs", default="", help="only these graphs (default: each mechanism's)")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--note", default="", help="a caveat printed with the results")
    ap.add_argument("--out", type=Path, default=RESULTS / "mechanisms.md")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from gen_models import ensure
    only = [g for g in args.graphs.split(",") if g]
    rows = []
    for mech in [m for m in args.mechanisms.split(",") if m]:
        what, stages, graphs = MECHANISMS[mech]
        for graph in (only or graphs):
            path = ensure(GRAPHS[graph][0], args.size, say=print)
            on, off = [], []
            for k in range(args.pairs):
                for flag in ((True, False) if k % 2 == 0 else (False, True)):
                    r = _run(path, graph, mech, flag)
                    (on if flag else off).append(r)
            total = lambda r: sum(r["seconds"][s] for s in stages)  # noqa: E731
            gains = [total(b) - total(a) for a, b in zip(on, off)]
            row = {"mechanism": mech, "graph": graph, "stages": list(stages),
                   "on": statistics.median(map(total, on)), "off": statistics.median(map(total, off)),
                   "gain": statistics.median(gains), "gains": gains,
                   "same_answer": all(a["parts"] == b["parts"] and a["folded"] == b["folded"]
                                      for a, b in zip(on, off))}
            rows.append(row)
            print(f"{mech:13s} {graph:18s} on {row['on']:6.2f} s  off {row['off']:6.2f} s  "
                  f"gain {row['gain']:+6.2f} s  ({', '.join(f'{g:+.2f}' for g in gains)})",
                  flush=True)
    _write(args, rows)


def _write(args, rows: list[dict]) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [f"# Speed mechanisms: what each buys at {args.size:,} nodes", "",
             f"`python benchmarks/bench_mechanisms.py` on {_dt.date.today()}, {machine}; "
             f"{args.pairs} on/off pairs per row, fresh processes, order alternating; "
             f"gain = median of the paired differences (off - on) of the stages listed.",
             ""]
    if args.note:
        lines += [f"**{args.note}**", ""]
    lines += ["| mechanism | graph | stages | on (s) | off (s) | gain (s) | pairs | same answer |",
              "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['mechanism']} | {r['graph']} | {' + '.join(r['stages'])} | "
                     f"{r['on']:.2f} | {r['off']:.2f} | {r['gain']:+.2f} | "
                     f"{', '.join(f'{g:+.2f}' for g in r['gains'])} | {r['same_answer']} |")
    lines += ["", "What each mechanism is:", ""]
    lines += [f"- **{m}**: {MECHANISMS[m][0]}." for m in dict.fromkeys(r["mechanism"] for r in rows)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
