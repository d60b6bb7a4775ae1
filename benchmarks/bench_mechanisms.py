"""What each speed mechanism of loading and compiling buys (issue 17's complexity budget).

    python benchmarks/bench_mechanisms.py                                # every mechanism, 100k, 5 reps
    python benchmarks/bench_mechanisms.py --mechanisms fork,strip --reps 7 --graphs cnn

A mechanism stays only if it pays at least 0.2 s at 100,000 nodes on some benchmark graph.
One process per graph loads and compiles the model once; then, for each mechanism, the code
it touches runs with the mechanism ("on") and with the plain code it saves ("off": what the
product would do without it, written here, never in the product), ``--reps`` times each,
alternating.  Reported: the fastest run of each side (the least disturbed by a busy machine)
and the median of the paired differences.  ``fork`` times a whole load (the forked checker
and inference against the same in one process); ``refs`` and ``lazy-reasons`` time the work
they take off the critical path or never do.

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
             "parent flattens the graph and computes the tensor-name ids (model/parallel.py); "
             "timed: load + compile + heuristic + waiting for the checker, as solve() runs them",
             ("load",),
             ("layered", "transformer", "cnn")),
    "refs": ("the tensor-name ids of every node computed while the forked inference runs "
             "(ModelGraph.refs), instead of in compile", ("load", "compile"),
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
    "paused-gc": ("the cyclic garbage collector paused during the pipeline (gcpause.py)",
                  ("load", "compile", "heuristic"), ("layered", "transformer", "cnn")),
}


# -- what each mechanism does, and the plain code it saves ----------------------------------

class Setup:
    """One graph loaded and compiled once (in the measuring process)."""

    def __init__(self, path: Path, graph: str):
        import onnx
        from hetero_solve.compile import compile_problem
        from hetero_solve.model import load_model
        from hetero_solve.model.load import read_model
        from hetero_solve.rules import load_rules
        _, rules_path, dims = GRAPHS[graph]
        self.rules = load_rules(ROOT / rules_path)
        self.dims = {**self.rules.dims, **dims}
        self.path = path
        self.model = read_model(path)[0]
        self.mg = load_model(self.model, dims=self.dims)
        self.problem = compile_problem(self.mg, self.rules)
        from hetero_solve.model import shapes
        base = shapes.light_copy(self.model)
        shapes.prepare(base, self.dims, {})
        self.inferred = onnx.ModelProto.FromString(shapes.infer(base))
        self.onnx = onnx


def _pair(on, off) -> tuple[float, float]:
    t = time.perf_counter()
    on()
    t_on = time.perf_counter() - t
    t = time.perf_counter()
    off()
    return t_on, time.perf_counter() - t


def micro(setup: Setup, mechanism: str):
    """``(on, off)``: two callables doing the same work, with and without ``mechanism``."""
    from hetero_solve.model import evaluate, shapes
    from hetero_solve.model.graph import TypeTable, type_of_proto
    mg, problem = setup.mg, setup.problem
    if mechanism == "types-once":
        def every_one():
            g = setup.inferred.graph
            infos = list(g.value_info) + list(g.input) + list(g.output)
            names, type_bytes = [vi.name for vi in infos], [vi.type.SerializeToString() for vi in infos]
            types = TypeTable(mg.initializer_types)
            types.update((n, type_of_proto(setup.onnx.TypeProto.FromString(b)))
                         for n, b in zip(names, type_bytes))
        return (lambda: shapes._types(mg, setup.inferred, {}, TypeTable(mg.initializer_types)),
                every_one)
    if mechanism == "strip":
        def child(strip: bool):
            copy = setup.onnx.ModelProto()
            copy.CopyFrom(setup.model)          # the forked child's own copy (not timed)
            saved = shapes._strip
            if not strip:
                shapes._strip = lambda t, huge: False
            try:
                t = time.perf_counter()
                shapes.forked_inference(copy, setup.dims, {})
                return time.perf_counter() - t
            finally:
                shapes._strip = saved
        return (lambda: child(True), lambda: child(False))
    if mechanism == "refs":
        from hetero_solve.model.structure import name_refs
        constant = set(mg.constant_nodes)
        nodes = [i for i in range(len(mg.names)) if i not in constant]
        return (lambda: None, lambda: name_refs(mg, nodes))
    if mechanism == "signatures":
        from hetero_solve.rules import conditions

        class Forgetful(dict):
            def __setitem__(self, key, value):
                pass

        def reasons(cache: bool):
            checker = conditions.SupportChecker(setup.rules, mg)
            if not cache:
                checker._node_cache = Forgetful()
            for d in range(len(setup.rules.devices)):
                checker.reasons(d, problem.graph_index)
        return (lambda: reasons(True), lambda: reasons(False))
    if mechanism == "native-fold":
        from hetero_solve.model.fold import FoldedValues
        wanted = [x for x in problem.const_names if x in mg.folded_values]
        saved = dict(evaluate.NATIVE)

        def values(native: bool):
            if not native:
                evaluate.NATIVE.clear()
            try:
                FoldedValues(mg, mg.folded, mg.types).get(wanted)
            finally:
                evaluate.NATIVE.update(saved)
        return (lambda: values(True), lambda: values(False))
    if mechanism == "lazy-reasons":
        from hetero_solve.problem import reason_text
        rows = problem.refusals._rows
        return (lambda: None, lambda: [[reason_text(e) for e in row] for row in rows])
    if mechanism == "paused-gc":
        import gc
        from hetero_solve.algorithms.greedy import heuristic
        from hetero_solve.compile import compile_problem

        def pipeline(paused: bool):
            gc.collect()
            was = gc.isenabled()
            if paused:
                gc.disable()
            try:
                heuristic(compile_problem(mg, setup.rules))
            finally:
                if was:
                    gc.enable()
        return (lambda: pipeline(True), lambda: pipeline(False))
    if mechanism == "fork":
        from hetero_solve.algorithms.greedy import heuristic
        from hetero_solve.compile import compile_problem
        from hetero_solve.model import parallel
        from hetero_solve.model.load import analyse_model

        def pipeline(fork: bool):
            # As solve() runs it: the checker is waited for after compile and the heuristic.
            saved = parallel.MIN_NODES
            parallel.MIN_NODES = saved if fork else 10 ** 12
            try:
                loaded = analyse_model(setup.model, str(setup.path), None, setup.dims,
                                       defer_check=True)
                heuristic(compile_problem(loaded, setup.rules))
                loaded.ensure_valid()
            finally:
                parallel.MIN_NODES = saved
        return (lambda: pipeline(True), lambda: pipeline(False))
    raise ValueError(mechanism)


def measure(graph: str, size: int, mechanisms: list[str], reps: int) -> list[dict]:
    """Every mechanism of ``mechanisms`` that applies to ``graph``: ``reps`` on/off pairs in
    this process, the order alternating."""
    sys.path.insert(0, str(HERE))
    from gen_models import ensure
    path = ensure(GRAPHS[graph][0], size)
    setup = Setup(path, graph)
    rows = []
    for mech in mechanisms:
        if graph not in MECHANISMS[mech][2]:
            continue
        on, off = micro(setup, mech)
        pairs = []
        for k in range(reps):
            if mech == "strip":   # each side times itself (its model copy is not the mechanism)
                a, b = (on(), off()) if k % 2 == 0 else tuple(reversed((off(), on())))
            elif k % 2 == 0:
                a, b = _pair(on, off)
            else:
                b, a = _pair(off, on)
            pairs.append((a, b))
        gains = [b - a for a, b in pairs]
        rows.append({"mechanism": mech, "graph": graph,
                     "on_min": min(a for a, _ in pairs), "off_min": min(b for _, b in pairs),
                     "gain": statistics.median(gains), "gains": gains})
        r = rows[-1]
        print(f"{mech:13s} {graph:18s} on {r['on_min']:6.3f} s  off {r['off_min']:6.3f} s  "
              f"(min of {reps})  gain {r['gain']:+6.3f} s (median of pairs)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--note", default="", help="a caveat printed with the results")
    ap.add_argument("--out", type=Path, default=RESULTS / "mechanisms.md")
    args = ap.parse_args(argv)
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    rows = []
    for graph in [g for g in args.graphs.split(",") if g]:
        # One process per graph: each measures its mechanisms on a model loaded once.
        code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_mechanisms as b; "
                f"print('ROWS' + json.dumps(b.measure({graph!r}, {args.size}, {mechanisms!r}, "
                f"{args.reps})))")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, cwd=ROOT, timeout=7200)
        if out.returncode:
            raise RuntimeError(out.stderr[-3000:])
        for line in out.stdout.splitlines():
            if line.startswith("ROWS"):
                rows += json.loads(line[4:])
            else:
                print(line, flush=True)
    _write(args, rows)


def _write(args, rows: list[dict]) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [f"# Speed mechanisms: what each buys at {args.size:,} nodes", "",
             f"`python benchmarks/bench_mechanisms.py` on {_dt.date.today()}, {machine}. "
             f"Each mechanism's code and the plain code it saves run on the same loaded "
             f"model in one process, {args.reps} times each, alternating; `on`/`off` are the "
             f"fastest of those runs (the least disturbed by other work), gain the median of "
             f"the paired differences.  A mechanism stays when it buys at least 0.2 s on some "
             f"graph.", ""]
    if args.note:
        lines += [f"**{args.note}**", ""]
    lines += ["| mechanism | graph | on (s) | off (s) | gain (s) | paired differences |",
              "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['mechanism']} | {r['graph']} | {r['on_min']:.3f} | "
                     f"{r['off_min']:.3f} | {r['gain']:+.3f} | "
                     f"{', '.join(f'{g:+.2f}' for g in r['gains'])} |")
    lines += ["", "What each mechanism is:", ""]
    lines += [f"- **{m}**: {MECHANISMS[m][0]}." for m in dict.fromkeys(r["mechanism"] for r in rows)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
