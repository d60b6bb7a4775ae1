"""``hetero-solve run``, ``verify`` and ``check``: the partition at run time, and
user-defined partitions.

Exit codes: 0 success; 1 ``verify`` over tolerance or ``check`` found violations; 2 bad input
(one line on stderr, nothing written).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import numpy as np
import typer
from rich.table import Table

from ..engines import ENGINES
from ..errors import HeteroSolveError
from ..run.common import InputShapeError
from ..run.inputs import RandomInputsError
from ..export.writer import check_target
from ..units import format_bytes, format_seconds, instance_label
from . import app
from .common import (UsageError, caught_warnings, costs_option, expect_model_and_rules, fail,
                     fallback_text,
                     json_option, limits, note, objective_option, parse_dims, parse_objective,
                     parse_shapes, print_json, print_line, print_out, progress_on_stderr,
                     quiet_option, shape_option, time_limit_option, verbose_option,
                     work_limit_option)
from ..run.inputs import load_npy
from ..run.backend import OPTIMIZATION_LEVELS
from ..run.session import run
from ..run.verify import verify
from ..user_partition import SPLITS, check_affinity

MAX_ROWS = 40


@contextmanager
def _errors(seed: int | None = None) -> Iterator[None]:
    """Bad input becomes one line on stderr and exit code 2 (also under typer's test runner),
    with the command line's own hint: the option that solves again for a shape, the random
    inputs a failed run used (on a line of their own, first) and the options that set them."""
    try:
        yield
    except InputShapeError as e:
        fail(f"{e} (on the command line: {e.cli_hint})")
    except RandomInputsError as e:
        note(f"random inputs (seed {seed}): {_random_line(e.random)}")
        name = next(iter(e.random)) if len(e.random) == 1 else "NAME"
        fail(f"{e.error}: it ran on random inputs (above); an input that needs particular "
             f"values gets them with --input-range {name}=LO,HI (one value: LO=HI) or "
             f"--input {name}=FILE.npy")
    except HeteroSolveError as e:
        fail(str(e))


def _random_line(how: dict[str, str]) -> str:
    """The random inputs as the note line shows them: name, dtype, shape, values."""
    return "; ".join(f"{name} {text}" for name, text in how.items())


def parse_inputs(values: list[str] | None) -> dict[str, np.ndarray]:
    """``NAME=FILE.npy`` options -> arrays."""
    out: dict[str, np.ndarray] = {}
    for item in values or []:
        name, sep, file = item.partition("=")
        name = name.strip()
        if not sep or not name or not file:
            raise UsageError(f"--input {item!r}: expected NAME=FILE.npy, e.g. --input x=x.npy")
        if name in out:
            raise UsageError(f"--input {name}: given twice")
        out[name] = load_npy(file, name)
    return out


def parse_ranges(values: list[str] | None) -> dict[str, tuple[float, float]]:
    """``NAME=LO,HI`` options -> name -> (low, high)."""
    out: dict[str, tuple[float, float]] = {}
    for item in values or []:
        name, sep, spec = item.partition("=")
        low, comma, high = spec.partition(",")
        try:
            pair = (float(low), float(high))
        except ValueError:
            pair = None
        if not sep or not name.strip() or not comma or pair is None:
            raise UsageError(f"--input-range {item!r}: expected NAME=LO,HI, e.g. "
                             f"--input-range token_type_ids=0,1")
        out[name.strip()] = pair
    return out


RANGE_HELP = ("Random values of an input drawn from LO..HI (repeatable; integers inclusive). "
              "By default integer inputs used as indices stay within the table they index.")


SHAPE_HELP = ("Whole shape of a graph input, e.g. --shape x=1,3,320,320 (repeatable); by "
              "default the shapes the partition was solved for (partition.json input_shapes).")
OPTIMIZATION_HELP = ("onnxruntime's graph optimisation level: all (its default), extended, "
                     "basic or disabled.")
#: Rows of the per-node table ``run --profile`` prints (the JSON has every node).
NODE_ROWS = 15


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _optimization(value: str) -> str:
    if value not in OPTIMIZATION_LEVELS:
        raise UsageError(f"--optimization {value!r}: expected one of "
                         f"{', '.join(OPTIMIZATION_LEVELS)}")
    return value


# -- run --------------------------------------------------------------------------------------

@app.command("run")
def run_command(
    out_dir: Path = typer.Argument(..., help="An OUT_DIR written by hetero-solve (partition.json "
                                             "and one ONNX model per part).", show_default=False),
    input: List[str] = typer.Option([], "--input", "-i", metavar="NAME=FILE.npy",
                                    help="A graph input from a .npy file (repeatable). Inputs not "
                                         "given are random, of the declared dtype and shape."),
    dim: List[str] = typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                                  help="Value of a symbolic dimension the partition left open."),
    save: Optional[Path] = typer.Option(None, "--save", "-s",
                                        help="Directory for the outputs as <name>.npy "
                                             "(default: OUT_DIR/outputs/)."),
    no_save: bool = typer.Option(False, "--no-save", help="Do not write the outputs."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs."),
    repeat: int = typer.Option(1, "--repeat", "-r", min=1,
                               help="Run each part this many times; times are medians."),
    input_range: List[str] = typer.Option([], "--input-range", metavar="NAME=LO,HI",
                                          help=RANGE_HELP),
    shape: List[str] = typer.Option([], "--shape", metavar="INPUT=D0,D1,...", help=SHAPE_HELP),
    optimization: Optional[str] = typer.Option(
        None, "--optimization", help=OPTIMIZATION_HELP + " Default: the answer's (below)."),
    threads: Optional[int] = typer.Option(
        None, "--threads", min=0,
        help="Threads per part (onnxruntime's intra-op threads, OpenVINO's "
             "INFERENCE_NUM_THREADS); 0: the runtime's default. Default: the answer's, those "
             "its profile was measured with (partition.json's execution); another value is "
             "a warning."),
    profile: bool = typer.Option(False, "--profile",
                                 help="Also time every node (onnxruntime's profiler): the "
                                      "slowest are listed, --json has them all."),
    backend: str = typer.Option("auto", "--backend",
                                help="Runtime of the parts: auto (each device's runtime in "
                                     "the rule file: OpenVINO for runtime: {openvino: "
                                     "DEVICE}, else onnxruntime), onnxruntime, or openvino "
                                     "(the openvino extra)."),
    device_map: List[str] = typer.Option(
        [], "--device-map", metavar="NAME=DEVICE",
        help="With --backend openvino: the OpenVINO device of a rule-file device (ACC=GPU: "
             "instance i on GPU.i) or of one instance (ACC.1=CPU), as export openvino takes "
             "it (repeatable; default: the rule file's names, else CPU)."),
    as_json: bool = json_option("the per-part counters, inputs and outputs"),
) -> None:
    """Run the parts in id order, each on its device's runtime (onnxruntime, or OpenVINO).

    Each part runs on its device's rule-file runtime: OpenVINO for runtime: {openvino:
    DEVICE}, onnxruntime (with the execution providers the device names) otherwise;
    --backend chooses one for all. Every part is loaded once (hetero_solve.Session); tensors
    pass from part to part without copies while they stay on one runtime's device. Prints per
    part: device, runtime, providers (onnxruntime's; OpenVINO's device), load and run time,
    bytes in and out, then the totals (OpenVINO's per-subgraph performance counters).
    Outputs are saved as .npy files, with outputs.json mapping tensor names to files. A
    provider this onnxruntime lacks falls back to CPU with a warning.

    The parts run with the execution settings the answer's times were measured with
    (partition.json's execution: threads, how onnxruntime's threads spin; its profile's):
    --threads or --optimization other than those is a warning naming both.

    \b
    Example:
      hetero-solve run resnet_like.hetero --input image=image.npy
      hetero-solve run yolo.hetero --shape images=1,3,320,320 --repeat 20 --profile
    """
    with _errors(seed), caught_warnings() as warned:
        dims = parse_dims(dim)
        feeds = parse_inputs(input)
        target = None if no_save else (save or out_dir / "outputs")
        result = run(out_dir, feeds, dims, seed=seed, repeat=repeat, save=target,
                     ranges=parse_ranges(input_range), shapes=parse_shapes(shape),
                     optimization=optimization and _optimization(optimization),
                     profile=profile, backend=backend, device_map=device_map,
                     threads=threads)
    warned.show(result.warnings)
    if result.random:
        note(f"random inputs (seed {seed}): {_random_line(result.random_how)}")
    if as_json:
        print_json(result.as_dict())
        return
    _print_run(result, out_dir, target)


def _print_run(result, out_dir: Path, target: Optional[Path]) -> None:
    """``run``'s summary: a row per part, the totals, the outputs, the slowest nodes."""
    table = Table(title=f"{out_dir}: {len(result.parts)} part(s)", title_justify="left")
    for col in ("part", "device", "runtime", "providers", "load ms", "run ms", "data in",
                "data out"):
        table.add_column(col, justify="left" if col in ("device", "runtime", "providers")
                         else "right")
    for p in result.parts:
        providers = ", ".join(x.removesuffix("ExecutionProvider") for x in p.providers)
        table.add_row(str(p.id), p.label, p.runtime, providers, _ms(p.load_seconds),
                      _ms(p.seconds), format_bytes(p.bytes_in), format_bytes(p.bytes_out))
    table.add_section()
    table.add_row("total", "", "", "", _ms(result.load_seconds), _ms(result.seconds),
                  format_bytes(result.bytes_in), format_bytes(result.bytes_out))
    print_out(table)
    for name, value in result.outputs.items():
        arr = np.asarray(value)
        print_line(f"output {name}: {arr.dtype} {tuple(arr.shape)}")
    if result.node_times:
        _print_nodes(result.node_times)
    if result.saved:
        print_line(f"saved: {target}/ ({len(result.saved)} file(s) and outputs.json)")


def _print_nodes(times) -> None:
    """The slowest nodes of ``run --profile``."""
    slow = sorted(times, key=lambda t: -t.microseconds)[:NODE_ROWS]
    table = Table(title=f"slowest nodes (of {len(times)}; summed over the runs)",
                  title_justify="left")
    for col in ("part", "node", "op", "provider", "ms", "runs"):
        table.add_column(col, justify="right" if col in ("part", "ms", "runs") else "left")
    for t in slow:
        table.add_row(str(t.part), t.node, t.op_type, t.provider.removesuffix("ExecutionProvider"),
                      f"{t.microseconds / 1000:.3f}", str(t.calls))
    print_out(table)


# -- verify -----------------------------------------------------------------------------------

@app.command("verify")
def verify_command(
    model: Path = typer.Argument(..., help="The original ONNX model.", show_default=False),
    out_dir: Path = typer.Argument(..., help="Its partition (an OUT_DIR of hetero-solve).",
                                   show_default=False),
    input: List[str] = typer.Option([], "--input", "-i", metavar="NAME=FILE.npy",
                                    help="A graph input from a .npy file (repeatable); the "
                                         "others are random."),
    dim: List[str] = typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                                  help="Value of a symbolic dimension the partition left open."),
    tolerance: Optional[float] = typer.Option(
        None, "--tolerance", "-t", min=0, show_default=False,
        help="An output passes when |a-b| <= tol*max(1,|b|) everywhere (integers, bools, "
             "strings: equal). Default by the output's dtype: float32 1e-5, float16 0.0098, "
             "bfloat16 0.078 (10 eps), float64 1e-12; one quantisation step more for an "
             "output a DequantizeLinear makes."),
    rtol: Optional[float] = typer.Option(
        None, "--rtol", min=0, show_default=False,
        help="Use numpy.allclose's rule instead: |a-b| <= atol + rtol*|b| (with --atol; the "
             "one not given is the dtype's tolerance above)."),
    atol: Optional[float] = typer.Option(
        None, "--atol", min=0, show_default=False,
        help="numpy.allclose's absolute tolerance (see --rtol)."),
    repeat: int = typer.Option(5, "--repeat", "-r", min=0,
                               help="Time each side as the median of this many warm runs "
                                    "after the compared one (0: the compared run, the first "
                                    "after loading)."),
    threads: int = typer.Option(0, "--threads", min=0,
                                help="onnxruntime's intra-op threads on both sides (0: its "
                                     "default, one per core)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs."),
    input_range: List[str] = typer.Option([], "--input-range", metavar="NAME=LO,HI",
                                          help=RANGE_HELP),
    shape: List[str] = typer.Option([], "--shape", metavar="INPUT=D0,D1,...", help=SHAPE_HELP),
    optimization: str = typer.Option("all", "--optimization",
                                     help=OPTIMIZATION_HELP + " The same on both sides."),
    as_json: bool = json_option("the comparison"),
) -> None:
    """Run MODEL and the partition in OUT_DIR on the same inputs and compare every output.

    Both sides run in onnxruntime with the same session options (--optimization). Random
    inputs respect each input's dtype (integers small and non-negative, like token ids) and
    the dims and shapes the partition was made for. Prints the max absolute and relative
    difference per output and the tolerance it was held to; exit code 1 when one is over,
    2 on bad input.

    \b
    Example:
      hetero-solve verify examples/resnet_like.onnx examples/resnet_like.hetero
    """
    with _errors(seed), caught_warnings() as warned:
        dims = parse_dims(dim)
        feeds = parse_inputs(input)
        report = verify(model, out_dir, feeds, dims, tolerance=tolerance, seed=seed,
                        ranges=parse_ranges(input_range), shapes=parse_shapes(shape),
                        optimization=_optimization(optimization), rtol=rtol, atol=atol,
                        repeat=repeat, threads=threads)
    warned.show(report.warnings)
    if report.random:
        note(f"random inputs (seed {seed}): {_random_line(report.run.random_how)}")
    if as_json:
        print_json(report.as_dict())
        if not report.ok:
            raise typer.Exit(1)
        return
    _print_verify(report, model, out_dir)


def _print_verify(report, model: Path, out_dir: Path) -> None:
    """``verify``'s summary: a row per output, the verdict (exit 1 when one is over) and
    both sides' times."""
    table = Table(title=f"{model.name} vs {out_dir}: {len(report.run.parts)} part(s)",
                  title_justify="left")
    for col in ("output", "dtype", "shape", "max abs", "max rel", "criterion", "worst",
                "result"):
        table.add_column(col, justify="right" if col.startswith(("max", "worst")) else "left")
    for o in report.outputs:
        verdict = "ok" if o.ok else "FAIL" + (f": {o.note}" if o.note else "")
        table.add_row(o.name, o.dtype, str(tuple(o.shape)), f"{o.max_abs:.3g}",
                      f"{o.max_rel:.3g}", f"{o.criterion} ({o.rule})", f"{o.worst:.3g}",
                      verdict)
    print_out(table)
    threads = report.settings.get("threads") or 0
    settings = (f"onnxruntime optimisation '{report.settings.get('optimization')}', "
                f"{threads or 'default'} thread(s), on both sides")
    bad = [o.name for o in report.outputs if not o.ok]
    if bad:
        over = "; ".join(f"{o.name} ({o.criterion}, {o.rule})" for o in report.outputs
                         if not o.ok)
        print_line(f"verify: FAILED: {len(bad)} of {len(report.outputs)} output(s) over "
                   f"their criterion (worst > 1): {over}; {settings}")
        raise typer.Exit(1)
    print_line(f"verify: ok: {len(report.outputs)} output(s) within their criterion (a: "
               f"partitioned, b: original; worst: the largest |a-b| over what the criterion "
               f"allows there, <= 1 passes); {settings}")
    print_line(f"time: original {_ms(report.original_seconds)} ms, partitioned "
               f"{_ms(report.run.seconds)} ms ({report.settings.get('timing')}; the "
               f"partitioned time is the parts' sum, without hand-offs)")


# -- check ------------------------------------------------------------------------------------

@app.command("check")
def check_command(
    model: Path = typer.Argument(..., metavar="MODEL", help="The ONNX model.",
                                 show_default=False),
    rules: Path = typer.Argument(..., metavar="RULES", help="Rule file (YAML).",
                                 show_default=False),
    affinity: Path = typer.Option(..., "--affinity", "-a", metavar="FILE.json",
                                  help="node -> device (like affinity.json), node -> part id, or "
                                       "a partition.json.", show_default=False),
    out: Optional[str] = typer.Option(None, "-o", "--out",
                                       help="Where a valid map is exported (default: <model "
                                            "stem>.user.hetero/ next to the model)."),
    no_export: bool = typer.Option(False, "--no-export", help="Check only, write nothing."),
    split: str = typer.Option("acyclic", "--split",
                              help="How a node -> device map becomes parts: 'acyclic' = "
                                   "connected same-device regions, cut where a path leaves "
                                   "the device and comes back so that parts never form a "
                                   "cycle; 'regions' = each connected same-device region is a "
                                   "part (OpenVINO; may form a cycle); 'fewest' = the fewest "
                                   "parts keeping those devices."),
    dim: List[str] = typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                                  help="Value of a symbolic dimension (beats the rule file's)."),
    shape: List[str] = shape_option(),
    engine: str = typer.Option("auto", "--engine", "-e",
                               help=f"Solver for the comparison: {', '.join(ENGINES)}."),
    time_limit: Optional[float] = time_limit_option(),
    work_limit: Optional[float] = work_limit_option(),
    seed: int = typer.Option(0, "--seed", help="Solver seed."),
    objective: Optional[str] = objective_option(),
    costs: Optional[Path] = costs_option(),
    no_models: bool = typer.Option(False, "--no-models",
                                   help="Export partition.json, affinity and .dot files only."),
    as_json: bool = json_option("the check (violations, parts, comparison)"),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Validate a user-defined partition, as Glow validates user-defined partitions.

    Lists every violation: a node on a device that refuses it (and the condition), a pin
    broken, a cycle between parts (with the node edges that close it), a value input made in
    the same part, memory over by how many bytes. A valid map is exported like a solved one,
    and its part count is shown next to the optimum hetero-solve finds. Exit code 0 valid,
    1 violations, 2 bad input.

    \b
    Example:
      hetero-solve check model.onnx rules/npu-static.yaml --affinity my_affinity.json
    """
    with _errors(), caught_warnings() as warned:
        if split not in SPLITS:
            raise UsageError(f"--split {split!r}: expected one of {', '.join(SPLITS)}")
        if engine not in ENGINES:
            raise UsageError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
        expect_model_and_rules(model, rules,
                               "hetero-solve check MODEL.onnx RULES.yaml --affinity MAP.json")
        dims = parse_dims(dim)
        time_limit, work_limit = limits(time_limit, work_limit)
        goal = parse_objective(objective)
        target = None
        if not no_export:   # refused before solving, not after
            target = check_target(model.with_name(model.stem + ".user.hetero") if out is None
                                  else out)
        with progress_on_stderr(quiet, verbose) as say:
            report = check_affinity(model, rules, affinity, dims=dims,
                                    shapes=parse_shapes(shape), split=split,
                                    engine=engine, time_limit=time_limit,
                                    work_limit=work_limit, seed=seed,
                                    progress=say, objective=goal, costs=costs)
            written = None
            if report.valid and not no_export:
                say(f"writing {target}")
                written = report.write(target, submodels=not no_models, annotated=not no_models)
    warned.show(report.warnings)
    if as_json:
        print_json(check_as_dict(report, written))
    else:
        _print_check(report, model)
        if written is not None:
            print_line(f"written: {written}/")
    if not report.valid:
        raise typer.Exit(1)


def _predicted(report) -> str:
    """The map's predicted latency beside hetero-solve's answer's and the best single
    device's, as ``solve`` prints it (docs/costs.md)."""
    line = f"predicted latency: {format_seconds(report.metrics.latency)}"
    o = report.optimum
    if o is None or o.metrics.latency is None:
        return line
    single = o.single_device
    alone = ("no single device can run the whole model" if single is None else
             f"on {o.problem.devices[single.device].name} alone: "
             f"{format_seconds(single.latency)}")
    return (f"{line}   (hetero-solve's answer: {format_seconds(o.metrics.latency)}; "
            f"{alone})")


def check_as_dict(report, written: Path | None) -> dict:
    """What ``check --json`` prints: the verdict, the violations, the map's parts (as
    partition.json lists them) and the comparison with the optimum."""
    p, sol, m = report.problem, report.solution, report.metrics
    parts = []
    for k, nodes in enumerate(sol.parts()):
        dev = p.devices[sol.part_device[k]]
        parts.append({"id": k, "device": dev.name, "instance": sol.part_instance[k],
                      "node_names": [p.names[v] for v in nodes],
                      "memory": m.part_memory[k] if k < len(m.part_memory) else None})
    optimum = report.optimum
    return {
        "valid": report.valid, "split": report.split,
        "violations": [v.as_dict() for v in report.violations],
        "objective": m.as_dict(), "partitions": parts,
        "device_partitions": report.device_partitions,
        "optimum": None if optimum is None else {
            **optimum.metrics.as_dict(), "status": optimum.solution.status,
            "lower_bound": optimum.solution.lower_bound},
        "warnings": list(report.warnings),
        "out_dir": None if written is None else str(written)}


def _print_check(report, model: Path) -> None:
    p, sol, m = report.problem, report.solution, report.metrics
    how = {"acyclic": "same-device regions, cut to form no cycle",
           "regions": "connected same-device regions", "fewest": "fewest parts for its devices",
           "given": "parts as given"}[report.split]
    table = Table(title=f"{model.name}: the map's {m.partitions} part(s) ({how})",
                  title_justify="left")
    for col in ("part", "device", "nodes", "first nodes", "memory"):
        table.add_column(col, justify="right" if col in ("part", "nodes", "memory") else "left")
    for k, nodes in enumerate(sol.parts()[:MAX_ROWS]):
        dev = p.devices[sol.part_device[k]]
        first = ", ".join(p.names[v] for v in nodes[:3]) + (", ..." if len(nodes) > 3 else "")
        table.add_row(str(k), instance_label(dev.name, sol.part_instance[k], dev.instances),
                      str(len(nodes)), first,
                      format_bytes(m.part_memory[k]))
    if sol.num_parts > MAX_ROWS:
        table.add_row("...", f"{sol.num_parts - MAX_ROWS} more", "", "", "")
    print_out(table)
    for v in report.violations:
        print_line(f"violation: {v.kind}: {v.message}")
    terms = m.as_dict()
    line = (f"parts: {m.partitions}   {fallback_text(p, sol, terms['fallback'])}   "
            f"transfer: {format_bytes(terms['transfer'])}")
    print_line(line)
    compare = []
    if report.device_partitions is not None:
        compare.append(f"fewest for these devices: {report.device_partitions} part(s)")
    if report.optimum is not None:
        o = report.optimum
        compare.append(f"hetero-solve: {o.metrics.partitions} part(s), fallback "
                       f"{o.metrics.fallback} ({o.solution.status})")
    if compare:
        print_line("   ".join(compare))
    if m.latency is not None:
        print_line(_predicted(report))
    if report.valid:
        print_line("check: valid")
    else:
        kinds: dict[str, int] = {}
        for v in report.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        summary = ", ".join(f"{c} {k}" for k, c in kinds.items())
        print_line(f"check: INVALID: {len(report.violations)} violation(s) ({summary})")
