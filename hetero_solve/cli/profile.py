"""``hetero-solve profile MODEL RULES -o PROFILE.json``: measured per-node times of a model on
the devices of a rule file (docs/costs.md, "Profiles")."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List

import typer
from rich.table import Table

from . import app
from .common import (UsageError, caught_warnings, dim_option, err_console,
                     expect_model_and_rules, json_option, note, parse_dims, parse_shapes,
                     print_json, print_line, print_out, quiet_option,
                     shape_option)
from .run import OPTIMIZATION_HELP, RANGE_HELP, parse_ranges

USAGE = "hetero-solve profile MODEL.onnx RULES.yaml -o PROFILE.json"


@app.command("profile")
def profile_command(
    model: Path = typer.Argument(..., metavar="MODEL.onnx", help="The ONNX model.",
                                 show_default=False),
    rules: Path = typer.Argument(..., metavar="RULES.yaml",
                                 help="The rule file: its devices and the runtime of each.",
                                 show_default=False),
    output: Path = typer.Option(..., "-o", "--out", "--output", metavar="PROFILE.json",
                                help="Write the profile here; an existing file is refused "
                                     "unless --force.", show_default=False),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
    device: List[str] = typer.Option([], "--device", metavar="NAME",
                                     help="Measure only this device of the rule file "
                                          "(repeatable; default: every device this machine "
                                          "can run)."),
    imports: List[str] = typer.Option([], "--import", metavar="DEVICE=FILE",
                                      help="Read DEVICE's times from a profiler's file "
                                           "instead of measuring: onnxruntime's profile JSON "
                                           "or OpenVINO's per-layer report (benchmark_app "
                                           "-report_type detailed_counters); repeatable."),
    repeats: int = typer.Option(20, "--repeats", min=1, help="Measured runs (medians)."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Runs before measuring."),
    threads: int = typer.Option(0, "--threads", min=0,
                                help="Threads per run (onnxruntime's intra-op threads, "
                                     "OpenVINO's INFERENCE_NUM_THREADS); 0: the runtime's "
                                     "default. Run with the same setting as you measure."),
    optimization: str = typer.Option("all", "--optimization", metavar="LEVEL",
                                     help=OPTIMIZATION_HELP),
    input_range: List[str] = typer.Option([], "--input-range", metavar="NAME=LO,HI",
                                          help=RANGE_HELP),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output file."),
    as_json: bool = json_option("the profile's summary"),
    quiet: bool = quiet_option(),
) -> None:
    """Measure how long each node of MODEL takes on each device of RULES, through the
    runtime's own profiler, and write a profile for solve --costs.

    A device is measured on its rule-file runtime: runtime: {onnxruntime: PROVIDER} with
    onnxruntime's profiler (the first provider listed), runtime: {openvino: DEVICE} with
    OpenVINO's per-layer counters.  A device this machine cannot run is named and left out;
    the others are measured.  Per device: --warmup runs, then --repeats profiled runs (each
    runtime node's median), mapped back to ONNX nodes (fused kernels, OpenVINO's
    originalLayersNames, QDQ units); then the median time of hetero-solve run's Session on
    the model as one part on the device, and what a second part adds (the per-part cost).
    Node times are made to add up to the whole run minus the per-part cost; the file says how much of the
    profiler's time it could name ONNX nodes for ("attributed") and how the rest was spread.

    A profile belongs to the model at its input shapes: give the same --dim/--shape as to
    solve.  Inputs are random (as for run); --input-range for inputs that must hold some
    values.

    \b
    Examples:
      hetero-solve profile model.onnx rules/runtimes/two-runtimes-cpu.yaml -o model.profile.json
      hetero-solve profile model.onnx rules.yaml -o p.json --import CPU=onnxruntime_profile.json
      hetero-solve profile model.onnx rules.yaml -o p.json --import NPU=benchmark_detailed_counters_report.csv
    """
    with caught_warnings():
        _profile(model, rules, output, dim, shape, device, imports, repeats, warmup, threads,
                 optimization, input_range, force, as_json, quiet)


def _profile(model, rules, output, dim, shape, device, imports, repeats, warmup, threads,
             optimization, input_range, force, as_json, quiet) -> None:
    from ..model import load_model
    from ..times.profile import Profile, model_info, write_profile
    from ..profiles.measure import ProfileRunError, import_file, measure, plan, runs_needed
    from ..rules import load_rules
    expect_model_and_rules(model, rules, USAGE)
    if os.path.lexists(output) and not force:
        raise UsageError(f"{output} exists: pass --force to replace it")
    if os.path.isdir(output):
        raise UsageError(f"{output} is a folder: -o takes the profile's file name")
    pairs = _imports(imports)
    rule_set = load_rules(rules)
    names = [d.name for d in rule_set.devices]
    for name in [*device, *pairs]:
        if name not in names:
            raise UsageError(f"no device {name!r} in {rules} (it has {', '.join(names)})")
    mg = load_model(str(model), dims=parse_dims(dim), shapes=parse_shapes(shape),
                    rule_dims=rule_set.dims)
    if pairs:
        by_name = {d.name: d for d in rule_set.devices}
        devices = {name: import_file(mg, str(model), name, by_name[name].runtime, path,
                                     optimization)
                   for name, path in pairs.items()}
        profile, skipped = Profile(model_info(mg, model), devices), {}
    else:
        chosen = [d for d in rule_set.devices if not device or d.name in device]
        p = plan(chosen)
        skipped = p.skipped
        if not p.targets:
            raise ProfileRunError("no device can be measured here: " + "; ".join(
                f"{k}: {v}" for k, v in skipped.items()))
        with _bar(runs_needed(p.targets, warmup, repeats), quiet) as tick:
            profile = measure(mg, str(model), p.targets, warmup=warmup, repeats=repeats,
                              optimization=optimization, threads=threads,
                              ranges=parse_ranges(input_range),
                              tick=tick)
    write_profile(profile, output)
    if as_json:
        print_json({"written": str(output), "not_measured": skipped,
                    **profile.as_dict()})
    else:
        _summary(profile)
        print_line(f"written: {output}")     # on stdout after the table, as solve's
    for name, why in skipped.items():
        note(f"not measured: {name}: {why}")


def _imports(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path:
            raise UsageError(f"--import {item!r}: expected DEVICE=FILE, e.g. --import "
                             "CPU=onnxruntime_profile.json")
        if name.strip() in out:
            raise UsageError(f"--import {name.strip()}: given twice")
        out[name.strip()] = path
    return out


def _summary(profile) -> None:
    table = Table(title=f"profile of {profile.model.file} ({profile.model.nodes} nodes)",
                  title_justify="left")
    for col in ("device", "runtime", "run ms", "part µs (+ switch)", "cut µs + µs/MiB",
                "attributed",
                "measured / fused / spread", "timed nodes"):
        table.add_column(col, justify="left" if col in ("device", "runtime") else "right")
    for name, d in profile.devices.items():
        total = d.total_seconds if d.total_seconds is not None else sum(d.node_seconds.values())
        timed = sum(1 for s in d.node_seconds.values() if s > 0)
        shares = " / ".join(f"{d.shares.get(k, 0.0):.0%}" for k in
                            ("measured", "fused", "spread")) if d.shares else "-"
        cut = "-"
        if d.link:
            bw = d.link.get("bandwidth")
            cut = f"{d.link['latency'] * 1e6:.1f} + " + (f"{(1 << 20) / bw * 1e6:.1f}" if bw
                                                         else "0")
        table.add_row(name, d.runtime, f"{total * 1e3:.3f}",
                      "-" if d.part_cost is None else f"{d.part_cost * 1e6:.1f}" + (
                          f" + {d.switch_cost * 1e6:.1f}" if d.switch_cost else ""), cut,
                      f"{d.attributed:.1%}", shares, str(timed))
    print_out(table)


@contextmanager
def _bar(total: int, quiet: bool) -> Iterator[Callable[[str, int], None]]:
    """A progress bar on stderr (a terminal only; nothing with --quiet)."""
    if quiet or not err_console.is_terminal:
        yield lambda what, n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn
    with Progress(TextColumn("profiling {task.fields[what]}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True) as bar:
        task = bar.add_task("profile", total=total, what="")

        def tick(what: str, n: int) -> None:
            bar.update(task, advance=n, what=what)
        yield tick


__all__ = ["profile_command"]
