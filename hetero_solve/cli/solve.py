"""``hetero-solve solve MODEL RULES`` (the default command)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ..answer import read_answer
from ..errors import OutputError
from ..export.dot import check_can_draw
from ..exact.explain import claims_text
from ..export.writer import answer_files, check_target, default_out_dir, write_result
from ..engines import ENGINES
from ..pipeline import solve
from ..result import Result
from ..solution import open_sizes
from ..units import format_bytes, instance_label
from . import app
from .common import (UsageError, caught_warnings, costs_option, dim_option, expect_model_and_rules,
                     fallback_text, json_option, limits, measured_line, note, objective_option,
                     parse_dims, parse_objective, parse_shapes, predicted_line, print_json, print_line, print_out,
                     progress_on_stderr, quiet_option, shape_option, time_limit_option,
                     verbose_option, work_limit_option, written_line)
from ..export.submodels import part_boundary

MAX_ROWS = 40


@app.command("solve")
def solve_command(
    model: Path = typer.Argument(..., metavar="MODEL", help="The ONNX model to split.",
                                 show_default=False),
    rules: Path = typer.Argument(..., metavar="RULES", help="Rule file (YAML): devices, ops, memory, pins. "
                                           "See rules/ for profiles to start from.",
                                 show_default=False),
    out: Optional[str] = typer.Option(None, "-o", "--out", help="Output directory "
                                      "(default: MODEL_STEM.hetero/ next to the model): new, "
                                      "empty, or a previous answer, which is replaced."),
    time_limit: Optional[float] = time_limit_option(),
    work_limit: Optional[float] = work_limit_option(),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 2 (nothing written) when a static-shape device "
                                     "refuses nodes only because input dims have no value, "
                                     "or when a memory or transfer figure of the answer "
                                     "counts a tensor of unknown size (a lower bound), "
                                     "instead of a warning."),
    engine: str = typer.Option("auto", "--engine", "-e",
                               help="; ".join(f"{e.name}: {e.description}" for e in ENGINES.values())
                                    + "."),
    seed: int = typer.Option(0, "--seed", help="Solver seed: same input and seed, same answer."),
    objective: Optional[str] = objective_option(),
    costs: Optional[Path] = costs_option(),
    measure: Optional[bool] = typer.Option(
        None, "--measure/--no-measure",
        help="Before answering, run the latency answer and each single device this machine "
             "runs in paired rounds, and keep a split only when it measured faster than the "
             "fastest single device by more than the noise (partition.json's measured). "
             "Default: on under a latency objective with a profile (--costs) whose devices "
             "run here; takes a fifth of the time limit."),
    no_models: bool = typer.Option(False, "--no-models",
                                   help="Write partition.json, affinity and .dot files only "
                                        "(no per-part ONNX models, no annotated model)."),
    pictures: Optional[str] = typer.Option(None, "--pictures", metavar="svg|png",
                                           help="Also draw partitions.svg and affinity.svg (or "
                                                ".png) with matplotlib (the 'pictures' "
                                                "extra), else Graphviz's dot when installed."),
    as_json: bool = json_option("the result (partition.json's content)"),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Partition MODEL under RULES: the fewest parts that every device can run, written to OUT.

    Writes partition.json (the result), partN_DEVICE.onnx (one model per part; run them in id
    order), affinity.json (node -> device), model.annotated.onnx (each node tagged with its
    device and part; not for a one-part answer, whose part file is the model), affinity.dot
    and partitions.dot. A summary table goes to stdout (--json: the result as JSON); progress is a
    live line on stderr when it is a terminal. Exit code 2 on bad input (one line on stderr),
    with nothing written.

    \b
    Examples:
      hetero-solve examples/transformer_encoder.onnx rules/npu-static.yaml --dim seq=16
      hetero-solve model.onnx rules/gpu-cpu.yaml -o out/ --time-limit 30
      hetero-solve model.onnx my-npu.yaml --objective latency   (a roofline per device)
    """
    _check_options(model, rules, engine, pictures, measure, costs)
    time_limit, work_limit = limits(time_limit, work_limit)
    dims, shapes = parse_dims(dim), parse_shapes(shape)
    goal = parse_objective(objective)
    target = check_target(default_out_dir(str(model)) if out is None else out)   # before solving
    replaced = bool(answer_files(target))
    with caught_warnings() as warned:
        with progress_on_stderr(quiet, verbose) as say:
            if costs is not None and measure is not False:
                result = _solve_measured(model, rules, dims, shapes, engine, time_limit,
                                         work_limit, seed, say, goal, costs, measure)
            else:
                result = solve(model, rules, dims=dims, shapes=shapes, engine=engine,
                               time_limit=time_limit, work_limit=work_limit, seed=seed,
                               progress=say, objective=goal, costs=costs)
            if strict:
                _check_strict(result)
            say(f"writing {target}")
            written = write_result(result, target, submodels=not no_models,
                                   annotated=not no_models, pictures=pictures, progress=say)
    _report(result, written, replaced, warned, as_json)


def _check_options(model: Path, rules: Path, engine: str, pictures: Optional[str],
                   measure: Optional[bool], costs: Optional[Path]) -> None:
    """What ``solve_command`` refuses before any work: an unknown engine, missing files,
    pictures nothing can draw (says what to install), ``--measure`` without a profile."""
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    expect_model_and_rules(model, rules)
    if pictures is not None:
        check_can_draw(pictures)
    if measure and costs is None:
        raise UsageError("--measure needs the profile the answer is priced with: --costs "
                         "PROFILE.json (hetero-solve profile MODEL RULES -o PROFILE.json)")


def _check_strict(result: Result) -> None:
    """``--strict``: dims without a value that made a device refuse nodes, or a figure that
    counts a tensor of unknown size, are errors (nothing written)."""
    if result.problem.info.missing_dims:
        raise UsageError(f"--strict: {result.problem.info.missing_dims[0].text()}")
    sizes = open_sizes(result.problem, result.solution)
    if sizes is not None:
        raise UsageError(f"--strict: {sizes.text(result.problem, result.solution)}")


def _report(result: Result, written: Path, replaced: bool, warned, as_json: bool) -> None:
    """The warnings, then the summary table (or the answer as JSON)."""
    # The summary says what missing dims cost; JSON has it in its warnings.
    said = [] if as_json else [e.text() for e in result.problem.info.missing_dims]
    warned.show(result.warnings, skip=said)
    if as_json:
        manifest = read_answer(written, lambda why: OutputError(written, why)).data
        print_json({**manifest, "out_dir": str(written)})
        return
    print_summary(result, written, replaced)


def _solve_measured(model, rules, dims, shapes, engine, time_limit, work_limit, seed, say, goal,
                    costs, measure: bool | None) -> Result:
    """Solve with a fifth of the budget left for measuring, then measure the answer against
    the single devices (:mod:`hetero_solve.profiles.answers`) when the objective is latency
    (``measure`` None: and its devices run here; True: say what could not be measured)."""
    from ..budget import Budget
    from ..pipeline import prepare, solve_prepared
    from ..profiles.answers import MEASURE_SHARE, keep_measured, measure_answer, runs_here
    prepared = prepare(model, rules, dims=dims, shapes=shapes, objective=goal, progress=say,
                       defer_check=True, costs=costs)
    latency = "latency" in prepared.problem.objective.terms()
    if measure and not latency:
        raise UsageError("--measure compares latencies: it needs a latency objective "
                         "(--objective latency)")
    here, _ = runs_here(prepared) if latency else ([], {})
    if not latency or (measure is None and not here):
        return solve_prepared(prepared, engine=engine, time_limit=time_limit,
                              work_limit=work_limit, seed=seed, progress=say)
    budget = Budget.of(time_limit, work_limit)      # the clock starts: the model is prepared
    result = solve_prepared(prepared, engine=engine, seed=seed, progress=say,
                            budget=budget.allot(budget.work * (1 - MEASURE_SHARE)))
    say("measuring the answer and the single devices")
    measured = keep_measured(result, measure_answer(result, budget, seed=seed))
    if measured.measured.get("not_measured"):
        note(f"not measured: {measured.measured['not_measured']}")
    return measured


def print_summary(result: Result, out_dir: Path | None = None, replaced: bool = False) -> None:
    """The summary table on stdout."""
    p, sol, m = result.problem, result.solution, result.metrics
    manifest_parts = result.parts()
    sizes = open_sizes(p, sol)
    lower = set(sizes.parts) if sizes is not None else set()   # "≥": a lower bound
    table = Table(title=f"{Path(result.model_graph.path).name}: {m.partitions} part(s)",
                  title_justify="left")
    for col in ("part", "device", "nodes", "ops", "in", "out", "memory"):
        table.add_column(col, justify="right" if col in ("part", "nodes", "in", "out", "memory") else "left")
    for k, nodes in enumerate(manifest_parts[:MAX_ROWS]):
        dev = p.devices[sol.part_device[k]]
        ops: dict[str, int] = {}
        for v in nodes:
            ops[p.op_types[v]] = ops.get(p.op_types[v], 0) + 1
        top = ", ".join(f"{o}×{c}" if c > 1 else o for o, c in
                        sorted(ops.items(), key=lambda x: -x[1])[:3])
        if len(ops) > 3:
            top += ", ..."
        ins, outs = _boundary(p, sol, k, nodes)      # one scan of the part for both
        n_in, n_out = len(ins), len(outs)
        table.add_row(str(k), instance_label(dev.name, sol.part_instance[k], dev.instances),
                      str(len(nodes)), top, str(n_in), str(n_out),
                      ("≥ " if k in lower else "") + format_bytes(m.part_memory[k]))
    if len(manifest_parts) > MAX_ROWS:
        table.add_row("...", f"{len(manifest_parts) - MAX_ROWS} more", "", "", "", "", "")
    print_out(table)
    lb = sol.lower_bound
    print_line(
        f"status: {sol.status}   parts: {m.partitions}"
        + (f" (lower bound {lb})" if lb is not None else "")
        + f"   {fallback_text(result.problem, sol, m.fallback)}   transfer: "
        + ("≥ " if sizes is not None and sizes.transfer else "") + format_bytes(m.transfer)
        + f"   heuristic: {sol.stats.get('heuristic_partitions', m.partitions)} part(s)"
        + f"   time: {sum(result.seconds.values()):.2f}s")
    if result.explanation and result.explanation.get("claims"):
        print_line(claims_text(result.explanation["claims"]))
    if m.latency is not None:
        print_line(predicted_line(result))
    if result.measured and result.measured.get("latency"):
        print_line(measured_line(result.measured))
    for entry in result.problem.info.missing_dims:
        print_line(entry.text())
    if out_dir is not None:
        print_line(written_line(out_dir, replaced))


def _boundary(p, sol, k, nodes) -> tuple[list[str], list[str]]:
    return part_boundary(p, sol, k, nodes)
