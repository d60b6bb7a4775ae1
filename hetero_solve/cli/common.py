"""Shared command-line helpers: consoles, --dim parsing, argument kinds, progress, warnings,
JSON output."""

from __future__ import annotations

import json
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import typer
from rich.console import Console
from rich.spinner import Spinner
from rich.table import Table

from ..errors import HeteroSolveError, HeteroSolveWarning
from ..filekind import content_kind, looks_like_json
from ..problem import Objective
from ..rules.load import objective_from_text
from ..units import format_seconds

out_console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

#: Width used to render tables when stdout is not a terminal: wide enough that no row wraps
#: in the middle of a field (a pipe has no width; rich would assume 80 columns).
PIPE_WIDTH = 10_000

USAGE = "hetero-solve MODEL.onnx RULES.yaml"

Say = Callable[[str], None]


class UsageError(HeteroSolveError):
    """A bad command-line value (exit code 2)."""


#: The largest value of a dimension, as the rule-file definition allows it.
MAX_DIM = 2**31 - 1


def parse_dims(values: list[str] | None) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--dim {item!r}: expected NAME=VALUE, e.g. --dim batch=1")
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"--dim {item!r}: {value!r} is not a whole number") from None
        if number < 1:
            raise UsageError(f"--dim {item!r}: the value must be >= 1")
        if number > MAX_DIM:
            raise UsageError(f"--dim {name.strip()}=...: the value must be at most {MAX_DIM} "
                             "(as for dims in rule files)")
        dims[name.strip()] = number
    return dims


def parse_shapes(values: list[str] | None) -> dict[str, list[int]]:
    """``--shape NAME=d0,d1,...`` options: one graph input's whole shape each."""
    shapes: dict[str, list[int]] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--shape {item!r}: expected NAME=d0,d1,..., e.g. "
                             f"--shape x=1,3,320,320")
        try:
            dims = [int(d) for d in value.split(",")] if value.strip() else []
        except ValueError:
            raise UsageError(f"--shape {item!r}: {value!r} is not a list of whole numbers "
                             f"separated by commas") from None
        if any(d < 0 for d in dims):
            raise UsageError(f"--shape {item!r}: dims must be >= 0")
        shapes[name.strip()] = dims
    return shapes


def shape_option(with_dim: bool = True):
    """``--shape``; ``with_dim=False`` for a command without ``--dim``."""
    beats = "; beats --dim for that input" if with_dim else ""
    return typer.Option([], "--shape", metavar="INPUT=D0,D1,...",
                        help="Whole shape of a graph input, e.g. --shape x=1,3,320,320 (for "
                             f"anonymous '?' dims; repeatable{beats}). "
                             "'hetero-solve dims MODEL' lists the inputs and their dims.")


def dim_option(more: str = ""):
    return typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                        help="Value of a symbolic dimension of the model's inputs, e.g. --dim "
                             "batch=1 (repeatable; beats the rule file's dims)." + more)


def objective_option():
    return typer.Option(None, "--objective", metavar="TERMS",
                        help="What to minimise, overriding the rule file's objective: terms in "
                             "order (lexicographic), e.g. 'latency' or 'fallback,latency', or "
                             "weights, e.g. 'fallback=1,partitions=20'. Terms: fallback, "
                             "partitions, transfer, latency, throughput (the last two need "
                             "each device's roofline in RULES or measured times, --costs).",
                        show_default=False)


def costs_option():
    return typer.Option(None, "--costs", metavar="PROFILE.json",
                        help="Measured node times of this model (a profile: 'hetero-solve "
                             "profile' writes one); they win over the rule file's rooflines "
                             "where they have a node's time.", show_default=False)


def parse_objective(text: str | None) -> Objective | None:
    """``--objective`` (:func:`hetero_solve.rules.load.objective_from_text`); ``None`` when
    not given."""
    if text is None:
        return None
    try:
        return objective_from_text(text)
    except ValueError as e:
        raise UsageError(f"--objective {text!r}: {e}") from None


def fallback_text(problem: Any, solution: Any, count: int) -> str:
    """``fallback: N node(s)``, with the devices those nodes run on when there are some
    (``fallback: 178 node(s) on ORT_CPU``): the nodes off their preferred device (the first
    in the rule file that takes them) are on these."""
    if not count:
        return f"fallback: {count} node(s)"
    from ..measures import off_preferred
    on: dict[str, int] = {}
    for v in off_preferred(problem, solution.part_of, solution.part_device):
        name = problem.devices[solution.part_device[solution.part_of[v]]].name
        on[name] = on.get(name, 0) + 1
    where = (next(iter(on)) if len(on) == 1 else
             ", ".join(f"{n} {c}" for n, c in sorted(on.items(), key=lambda x: -x[1])))
    return f"fallback: {count} node(s) on {where}"


def predicted_line(result: Any) -> str:
    """The answer's predicted latency (time per sample under a throughput objective) next to
    the best single device's (docs/costs.md)."""
    terms = result.problem.objective.terms()
    term = "throughput" if "throughput" in terms and "latency" not in terms else "latency"
    word = "time per sample" if term == "throughput" else "latency"
    value = getattr(result.metrics, term)
    single = result.single_device
    if single is None:
        other = "no single device can run the whole model"
    else:
        name = result.problem.devices[single.device].name
        other = f"on {name} alone: {format_seconds(getattr(single, term))}"
    return f"predicted {word}: {format_seconds(value)}   ({other})"


def measured_line(measured: dict) -> str:
    """What ``solve --measure`` measured (``partition.json``'s ``measured``): each answer's
    median and middle half over the rounds, and what was kept."""
    figures = "   ".join(
        f"{label} {format_seconds(v['median'])} ({format_seconds(v['middle_half'][0])}-"
        f"{format_seconds(v['middle_half'][1])})" for label, v in measured["latency"].items())
    return (f"measured ({measured['rounds']} paired rounds): {figures}   kept: "
            f"{measured['kept']} ({measured['why']})")


# -- arguments in the wrong place --------------------------------------------------------------

def expect_model_and_rules(model: Path, rules: Path, usage: str = USAGE) -> None:
    """A rule file given where the model is expected, or a model where the rules are (the
    arguments swapped), is named before anything is read: one line, exit code 2."""
    model_kind, rules_kind = content_kind(model), content_kind(rules)
    if model_kind == "rules" and rules_kind == "model":
        raise UsageError(f"arguments in the wrong order: {model} is a rule file and {rules} an "
                         f"ONNX model; the model comes first: {usage}")
    if model_kind == "rules":
        raise UsageError(f"{model} is a rule file where the ONNX model is expected: {usage}")
    if model_kind == "instance" or (model_kind == "other" and looks_like_json(model)):
        raise UsageError(f"expected an ONNX model first ({usage}): {json_text(model)}")
    if rules_kind == "model":
        raise UsageError(f"{rules} is an ONNX model where the rule file is expected: {usage}")


def json_text(path: Path) -> str:
    """What a JSON file that is neither a model nor a rule file is, and what takes it."""
    if content_kind(path) == "instance":
        return f"{path} is an instance file: hetero-solve instance {path} solves it alone"
    if Path(path).name == "partition.json":
        return (f"{path} is an answer of hetero-solve: run, verify and export take its folder "
                f"{Path(path).parent}")
    return (f"{path} is JSON but not an instance file (an instance has the keys "
            f"maxSizePerFPGA, maxFPGAs, maxCPUs and nodes: docs/costs.md)")


# -- printing ----------------------------------------------------------------------------------

def print_out(renderable: Any, **options) -> None:
    """Print to stdout; tables are never wrapped in the middle of a field when stdout is a
    pipe or a file (rich caps a print's width at the console's, 80 columns for a pipe: a
    console of :data:`PIPE_WIDTH` renders them; on a terminal narrower than a table, its text
    columns are cut with an ellipsis, numbers kept whole), and a table's title is a line of
    its own (rich pads a title with spaces to the table's width)."""
    if isinstance(renderable, Table) and renderable.title:
        print_line(str(renderable.title))
        renderable.title = None
    if out_console.is_terminal:
        if isinstance(renderable, Table):   # narrower than the table: cut text, never wrap it
            for column in renderable.columns:
                if column.justify == "left":
                    column.no_wrap, column.overflow = True, "ellipsis"
        out_console.print(renderable, **options)
        return
    Console(file=sys.stdout, highlight=False, width=PIPE_WIDTH).print(renderable, **options)


def print_line(text: str) -> None:
    """One line of plain text on stdout (no markup, no wrapping)."""
    out_console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """``data`` as JSON on stdout (NaN and infinities as strings, so any JSON reader takes it)."""
    sys.stdout.write(json.dumps(_finite(data), indent=1) + "\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def written_line(out_dir: Path, replaced: bool) -> str:
    """``written: OUT/``, saying so when a previous answer there was replaced."""
    return f"written: {out_dir}/" + (" (replacing the previous answer there)" if replaced
                                     else "")


def note(text: str) -> None:
    """An informative line on stderr."""
    err_console.print(f"hetero-solve: {text}", markup=False, highlight=False, soft_wrap=True)


def fail(message: str) -> None:
    """Print one line and exit 2."""
    err_console.print(f"hetero-solve: error: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(2)


# -- warnings ----------------------------------------------------------------------------------

class Warnings:
    """The library's warnings (:class:`~hetero_solve.errors.HeteroSolveWarning`) caught while a
    command runs, printed once each as ``hetero-solve: warning: ...`` when it succeeds."""

    def __init__(self) -> None:
        self.caught: list[str] = []
        self.shown: set[str] = set()

    def show(self, more: Iterable[str] = (), skip: Iterable[str] = ()) -> None:
        """Print the caught warnings and ``more`` (a result's warnings list), each once;
        ``skip``: texts the command prints itself, in its report."""
        self.shown.update(skip)
        for text in [*self.caught, *more]:
            if text not in self.shown:
                self.shown.add(text)
                err_console.print(f"hetero-solve: warning: {text}", markup=False,
                                  highlight=False, soft_wrap=True)


@contextmanager
def caught_warnings() -> Iterator[Warnings]:
    """Catch the library's warnings (printed by :meth:`Warnings.show` after the command's work,
    never before an error line); other libraries' warnings are passed on unchanged."""
    found = Warnings()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always", HeteroSolveWarning)
        try:
            yield found
        finally:
            others = [w for w in records if not issubclass(w.category, HeteroSolveWarning)]
            found.caught.extend(str(w.message) for w in records
                                if issubclass(w.category, HeteroSolveWarning))
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


# -- progress ----------------------------------------------------------------------------------

class _LiveLine:
    """The live progress line: spinner, running clock, stage, and while the answer is
    searched what the call's budget says (:meth:`watch`: the work spent of the limit's, and
    with ``--time-limit`` the clock's seconds of it).  Rendered by rich several times a
    second, so the clock moves while a stage runs.  Called with a message, it shows it."""

    def __init__(self):
        self.start = time.perf_counter()
        self.message = "starting"
        self.budget = None
        self.spinner = Spinner("dots", style="cyan")

    def __call__(self, message: str) -> None:
        if message.startswith(("validating", "writing")):
            self.budget = None
        self.message = message

    def watch(self, budget) -> None:
        """Read ``budget`` (the call's :class:`~hetero_solve.budget.Budget`) from now on: the
        pipeline hands it over when the answer's search starts."""
        self.budget = budget

    def text(self) -> str:
        now = time.perf_counter()
        line = f"{now - self.start:6.1f}s  {self.message}"
        b = self.budget
        if b is not None:
            line += f"  [work {b.spent:.1f} of {b.work:g} s"
            if b.time_limit:
                line += f", {b.time_limit - max(0.0, b.wall_left()):.1f} of the {b.time_limit:g} s limit"
            line += "]"
        return line

    def __rich__(self):
        self.spinner.update(text=self.text())
        return self.spinner


@contextmanager
def progress_on_stderr(quiet: bool = False, verbose: bool = False) -> Iterator[Say]:
    """Yield a ``say(message)`` callback for progress.

    On a terminal: one live line on stderr (spinner, running clock, the stage, and what the
    call's budget says while the answer is searched), erased when the work ends, so the next
    line is the result or the one error line.  Not on a terminal (a pipe, a log file): silent, unless ``verbose``, which
    prints one timestamped line per stage (also on a terminal).  ``quiet``: nothing at all."""
    if quiet:
        yield _silent
        return
    if verbose:
        start = time.perf_counter()

        def say(msg: str) -> None:
            err_console.print(f"hetero-solve [{time.perf_counter() - start:6.1f}s] {msg}",
                              markup=False, highlight=False, soft_wrap=True)
        yield say
        return
    if not err_console.is_terminal:
        yield _silent
        return
    from rich.live import Live
    line = _LiveLine()
    with Live(line, console=err_console, transient=True, refresh_per_second=8):
        yield line


def _silent(_message: str) -> None:
    return None


# -- options shared by several commands --------------------------------------------------------

def time_limit_option(default: float = 10.0, start: str = "the model loaded") -> Any:
    return typer.Option(None, "--time-limit", "-t", min=0, show_default=False,
                        help=f"Wall-clock seconds from {start} to the answer ready "
                             f"(default {default:g}): kept. Work inside it is counted "
                             f"deterministically, so on a quiet machine the same input gives "
                             f"the same answer; if the clock ends first, the answer says "
                             f"'deterministic: false'.")


def work_limit_option() -> Any:
    return typer.Option(None, "--work-limit", min=0, show_default=False,
                        help="Instead of --time-limit: deterministic seconds of solver work, "
                             "no clock at all: the same answer on any machine at any load "
                             "(studies, CI). --time-limit T gives 0.5 x T of them.")


def limits(time_limit: float | None, work_limit: float | None,
           default: float = 10.0) -> tuple[float | None, float | None]:
    """``(time_limit, work_limit)`` to pass on: one of them (``default`` seconds when neither
    was given).  Both given is a usage error (exit 2)."""
    if time_limit is not None and work_limit is not None:
        raise UsageError("--time-limit and --work-limit: give one, not both (wall-clock "
                         "seconds, or deterministic work with no clock)")
    if time_limit is None and work_limit is None:
        time_limit = default
    return time_limit, work_limit


def quiet_option() -> Any:
    return typer.Option(False, "--quiet", "-q", help="No progress line, even on a terminal.")


def verbose_option() -> Any:
    return typer.Option(False, "--verbose", "-v",
                        help="Progress as timestamped lines on stderr, also when it is not a "
                             "terminal (by default a live line on a terminal only).")


def json_option(what: str) -> Any:
    return typer.Option(False, "--json", help=f"Print {what} as JSON on stdout instead of the "
                                              "table.")
