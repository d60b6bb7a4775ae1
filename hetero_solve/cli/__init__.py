"""The ``hetero-solve`` command line.

``hetero-solve MODEL RULES`` is short for ``hetero-solve solve MODEL RULES``; the other
commands are registered by the modules imported at the bottom, one module per command group.
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from ..errors import HeteroSolveError
from .common import err_console


class _DefaultToSolve(TyperGroup):
    """Route ``hetero-solve MODEL RULES`` to the ``solve`` command."""

    def parse_args(self, ctx, args):
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["solve", *args]
        return super().parse_args(ctx, args)


# Plain help (click's formatter): readable in a pipe, no markdown eating <placeholders>, and
# flags shown as flags (typer's rich panels print "<bool>" after every flag).
app = typer.Typer(
    cls=_DefaultToSolve, no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})


def version() -> str:
    """The installed hetero-solve's version, with the onnx and onnxruntime it runs on."""
    from importlib.metadata import PackageNotFoundError, version as installed
    try:
        own = installed("hetero-solve")
    except PackageNotFoundError:   # run from a source tree without installing
        from .. import __version__ as own
    parts = [f"hetero-solve {own}"]
    for dep in ("onnx", "onnxruntime", "ortools"):
        try:
            parts.append(f"{dep} {installed(dep)}")
        except PackageNotFoundError:
            pass
    return ", ".join(parts)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version())
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", callback=_print_version,
                                      is_eager=True, help="Print the version and exit."),
) -> None:
    """Split an ONNX model into the fewest parts for heterogeneous devices, with a proof.

    Start with: hetero-solve MODEL.onnx RULES.yaml (short for: hetero-solve solve MODEL RULES).
    """


# Each module registers its commands on ``app``.
from . import solve as _solve  # noqa: E402,F401  (solve, the default command)
from . import rules as _rules  # noqa: E402,F401  (rules check)
from . import run as _run  # noqa: E402,F401  (run, verify, check)
from . import explain as _explain  # noqa: E402,F401  (explain)
from . import study as _study  # noqa: E402,F401  (study)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: bad input is one line on stderr and exit code 2."""
    try:
        app(args=argv, standalone_mode=True)
    except HeteroSolveError as e:
        err_console.print(f"hetero-solve: error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)


__all__ = ["app", "main"]
