"""``hetero-solve instance FILE`` (also ``hetero-solve FILE`` when FILE is an instance file):
solve a problem given without an ONNX model, under a cost objective."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..engines import ENGINES
from ..export.manifest import build_manifest
from ..export.writer import answer_files, check_target
from ..filekind import content_kind, looks_like_json
from ..instances.solve import OBJECTIVES, solve_instance, write_instance
from ..result import Result
from . import app
from .common import (UsageError, caught_warnings, json_option, json_text, limits, print_json,
                     print_line, print_out, progress_on_stderr, quiet_option,
                     time_limit_option, verbose_option, work_limit_option, written_line)

MAX_ROWS = 40


@app.command("instance")
def instance_command(
    path: Path = typer.Argument(..., metavar="INSTANCE", show_default=False,
                                help="An instance file: Tarnawski et al.'s (NeurIPS 2020) JSON "
                                     "operator graph with CPU and accelerator times."),
    objective: str = typer.Option("throughput", "--objective",
                                  help="throughput: the pipeline's time per sample (largest "
                                       "load of a device instance); latency: one inference, "
                                       "parts one after another."),
    contiguous: bool = typer.Option(False, "--contiguous",
                                    help="At most one part per device instance (pipeline "
                                         "stages, as the paper's dynamic programme assumes)."),
    out: Optional[str] = typer.Option(None, "-o", "--out",
                                      help="Output directory for partition.json (default: "
                                           "INSTANCE_STEM.hetero/ next to the file)."),
    time_limit: Optional[float] = time_limit_option(30.0, start="the instance read"),
    work_limit: Optional[float] = work_limit_option(),
    engine: str = typer.Option("auto", "--engine", "-e",
                               help="auto or cpsat: the cost stages on CP-SAT; sat has no cost "
                                    "terms (it says so and keeps the best single-device "
                                    "answer); heuristic: no exact search."),
    seed: int = typer.Option(0, "--seed", help="Solver seed: same input and seed, same answer."),
    as_json: bool = json_option("the result (partition.json's content)"),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Place an operator graph given without a model (an instance file) on CPU cores and
    accelerators, minimising time per sample or latency, with a proof when one is found.

    Writes OUT/partition.json: parts with their device instance, nodes (the file's ids) and
    each instance's load; objective (throughput = time per sample, latency); lower_bound;
    status (optimal = proven). Times keep the file's unit.

    \b
    Examples:
      hetero-solve bert.json --objective throughput --contiguous -o bert.hetero
      hetero-solve instance resnet50.json --objective latency -t 60
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    expect_instance(path)
    time_limit, work_limit = limits(time_limit, work_limit, default=30.0)
    target = check_target(path.with_suffix(".hetero") if out is None else out)
    replaced = bool(answer_files(target))
    with caught_warnings() as warned:
        with progress_on_stderr(quiet, verbose) as say:
            result = solve_instance(path, objective, contiguous=contiguous,
                                    time_limit=time_limit, work_limit=work_limit, seed=seed,
                                    engine=engine, progress=say)
            written = write_instance(result, target)
    warned.show(result.warnings)
    if as_json:
        print_json({**build_manifest(result, files=False), "out_dir": str(written)})
        return
    print_instance_summary(result, written, replaced)


def expect_instance(path: Path) -> None:
    """A model, a rule file, an answer's partition.json or other JSON given as an instance is
    named as what it is, with the command that takes it (one line, exit code 2)."""
    kind = content_kind(path)
    if kind == "model":
        raise UsageError(f"{path} is an ONNX model; 'instance' solves instance files (an "
                         f"operator graph with times, docs/costs.md). A model is solved with "
                         f"its rule file: hetero-solve {path} RULES.yaml (with --objective "
                         f"latency or throughput and a cost source: docs/costs.md)")
    if kind == "rules":
        raise UsageError(f"{path} is a rule file; 'instance' solves instance files (an operator "
                         f"graph with times, docs/costs.md); a rule file goes after its model: "
                         f"hetero-solve MODEL.onnx {path}")
    if kind == "other" and looks_like_json(path):
        raise UsageError(json_text(path))


def print_instance_summary(result: Result, out_dir: Path | None = None,
                           replaced: bool = False) -> None:
    """The parts (device instance, nodes, load) and the objective, on stdout."""
    p, sol, m = result.problem, result.solution, result.metrics
    loads = build_manifest(result, files=False)
    table = Table(title=f"{Path(result.instance).name}: {m.partitions} part(s)", title_justify="left")
    for col in ("part", "device", "nodes", "instance load"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for part in loads["partitions"][:MAX_ROWS]:
        table.add_row(str(part["id"]), f"{part['device']}.{part['instance']}",
                      str(len(part["nodes"])), f"{part['instance_load']:.6g}")
    if len(loads["partitions"]) > MAX_ROWS:
        table.add_row("...", f"{len(loads['partitions']) - MAX_ROWS} more", "", "")
    print_out(table)
    term = p.objective.order[0]
    bound = sol.stats.get("cost_bounds", {}).get(term)
    value = getattr(m, term)
    print_line(f"status: {sol.status}   {term}: {value:.6g}"
               + (f" (lower bound {bound:.6g})" if bound is not None else "")
               + ("   contiguous stages" if p.costs.contiguous else "")
               + f"   time: {sum(result.seconds.values()):.2f}s")
    if out_dir is not None:
        print_line(written_line(out_dir, replaced))
