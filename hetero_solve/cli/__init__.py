"""The ``hetero-solve`` command line.

``hetero-solve MODEL RULES`` is short for ``hetero-solve solve MODEL RULES``.  Each command
is registered on ``app`` by its module (one per command group, :data:`COMMAND_MODULES`), which
is imported only when that command runs: a command does not pay for the others' modules and
libraries at start-up.  The help, an option before any command and an unknown command load
them all.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

try:
    import click
except ImportError:   # typer >= 0.24 carries its own copy of click and no longer installs it
    click = None
import typer
import typer.exceptions
import typer.main
from typer.core import TyperGroup

from ..errors import HeteroSolveError, one_line
from ..filekind import content_kind, looks_like_json
from ..gcpause import imports_loaded
from ..interrupt import (exit_interrupted, interrupt_taken, release_imports, restore_interrupts,
                         take_interrupts)
from .common import err_console


#: What an option's value is, in its help line and error messages (``--time-limit SECONDS``),
#: for the options that do not set a ``metavar`` of their own.  Others: the option's name in
#: capitals.
METAVARS = {"--out": "DIR", "--save": "DIR", "--time-limit": "SECONDS", "--work-limit": "UNITS",
            "--engine": "NAME", "--backend": "NAME", "--executor": "NAME", "--seed": "N",
            "--repeat": "N", "--repeats": "N", "--warmup": "N", "--threads": "N", "--jobs": "N",
            "--limit": "N", "--opset": "N", "--optimization": "LEVEL", "--tolerance": "TOL",
            "--rtol": "R", "--atol": "A", "--split": "MODE", "--memory": "MEASURE",
            "--note": "TEXT", "--objective": "TERMS"}


def _plain_help(command) -> None:
    """Help that names values as the docs do (``OUT_DIR``, ``--time-limit SECONDS``), not as
    typer's types (``{out_dir}``, ``<float range>``, ``<list[Path]>``): every argument in
    capitals, its help line saying what it is; every option taking a value with a name from
    :data:`METAVARS`.  For ``command`` and its subcommands."""
    for param in command.params:
        if param.param_type_name == "argument":
            if param.metavar is None:
                param.metavar = param.name.upper()
            param.display_type_rich = lambda ctx: None
        elif param.param_type_name == "option" and param.metavar is None \
                and not param.is_flag and not getattr(param, "count", False):
            long = max(param.opts, key=len)
            param.metavar = METAVARS.get(long, long.lstrip("-").upper().replace("-", "_"))
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


class _DefaultToSolve(TyperGroup):
    """Route ``hetero-solve MODEL RULES`` to the ``solve`` command (``hetero-solve INSTANCE``
    to ``instance``); help in the docs' words (:func:`_plain_help`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _plain_help(self)

    def parse_args(self, ctx, args):
        if args and not args[0].startswith("-") and args[0] not in COMMAND_MODULES:
            # an instance file has a command of its own, which also names other JSON files
            kind = content_kind(args[0])
            alone = len(args) == 1 or args[1].startswith("-")   # no RULES after it
            to_instance = alone and (kind == "instance" or (kind == "other"
                                                            and looks_like_json(args[0])))
            args = ["instance" if to_instance else "solve", *args]
        self._load(args[0] if args and args[0] in COMMAND_MODULES else None)
        return super().parse_args(ctx, args)

    def _load(self, command: str | None) -> None:
        """Import the modules of ``command`` (None: every command's, for the help) and give
        this group the commands they registered, in the help's order."""
        for module in COMMAND_MODULES[command] if command else dict.fromkeys(
                m for ms in COMMAND_MODULES.values() for m in ms):
            importlib.import_module(f"{__name__}.{module}")
        if len(app.registered_commands) + len(app.registered_groups) != len(self.commands):
            made = typer.main.get_group(app).commands   # click commands of all registered now
            order = list(COMMAND_MODULES)
            self.commands = dict(sorted(made.items(), key=lambda kv: order.index(kv[0])))


#: Each command -> the modules that register it (and its subcommands), in the help's order.
COMMAND_MODULES = {
    "solve": ("solve",), "run": ("run",), "verify": ("run",), "check": ("run",),
    "explain": ("explain",), "study": ("study",), "dims": ("dims",), "instance": ("instance",),
    "profile": ("profile",), "rules": ("rules", "rules_runtime"), "export": ("export",),
}


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

    Bad input is one line on stderr and exit code 2. An internal error (a bug, please report
    it) is one line and exit code 1; add --debug anywhere on the command line for its
    traceback.
    """



def main(argv: list[str] | None = None) -> None:
    """Console-script entry.  Whatever happens, stderr gets one line and no traceback:

    - bad input (a :class:`HeteroSolveError`, a bad option value, a file that cannot be
      written): ``hetero-solve: error: ...``, exit code 2;
    - an internal error: ``hetero-solve: internal error: ...`` with a hint to report it, exit
      code 1; ``--debug`` anywhere on the command line (or ``HETERO_SOLVE_DEBUG=1``) adds the
      traceback;
    - Ctrl-C: ``hetero-solve: interrupted``, exit code 130.
    """
    imports_loaded()               # the collector paused while they loaded runs again
    previous = take_interrupts()   # from here on Ctrl-C is one KeyboardInterrupt, reported below
    release_imports()              # (when take_interrupts left the handler to someone else)
    try:
        _main(argv)
    finally:
        restore_interrupts(previous)


def _main(argv: list[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("HETERO_SOLVE_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    try:
        code = app(args=args, prog_name="hetero-solve", standalone_mode=False)
    except SystemExit:
        raise
    except HeteroSolveError as e:
        _exit(2, f"error: {one_line(e, ERROR_CHARS)}", debug)
    except _CLICK_ERRORS as e:                      # bad option values, unknown options, ...
        if type(e).__name__ == "NoArgsIsHelpError":  # no arguments: the help, on stderr
            e.show()
            sys.exit(e.exit_code)
        hint = _help_hint(e)
        _exit(e.exit_code, f"error: {one_line(e.format_message(), ERROR_CHARS)}{hint}", debug)
    except (*_ABORTS, KeyboardInterrupt):
        _interrupted(debug)
    except BrokenPipeError:                         # stdout closed early (| head): not an error
        _quiet_stdout()
        sys.exit(1)
    except OSError as e:
        if e.filename is None:
            _internal(e, debug)
        # A file the run needed could not be read or written: the environment, not a bug.
        _exit(2, f"error: {e.filename}: {e.strerror or one_line(e)}", debug)
    except BaseException as e:                      # noqa: BLE001 (MemoryError, RecursionError, bugs)
        _internal(e, debug)
    if code == 130:   # click turned Ctrl-C into this exit code
        _interrupted(False)
    sys.exit(code if isinstance(code, int) else 0)


def _click_classes(name: str) -> tuple[type, ...]:
    """``name`` from click, and from the copy of click that recent typer versions carry."""
    found = [getattr(click.exceptions, name)] if click is not None else []
    try:
        from typer._click import exceptions as vendored
        found.append(getattr(vendored, name))
    except (ImportError, AttributeError):
        pass
    return tuple(dict.fromkeys(found))


_CLICK_ERRORS = _click_classes("ClickException")
_ABORTS = (*_click_classes("Abort"), typer.exceptions.Abort)
#: An error line longer than this is cut (a message naming thousands of nodes).
ERROR_CHARS = 2000


def _exit(code: int, line: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    try:
        err_console.print(f"hetero-solve: {line}", markup=False, highlight=False, soft_wrap=True)
    except Exception:   # stderr itself is broken: nothing more can be said
        pass
    sys.exit(code)


def _interrupted(debug: bool) -> None:
    """Ctrl-C: the one line and exit code 130, later signals ignored, no thread left to abort
    the process (:func:`hetero_solve.interrupt.exit_interrupted`)."""
    def say() -> None:
        if debug:
            traceback.print_exc()
        try:
            err_console.print("hetero-solve: interrupted", markup=False, highlight=False,
                              soft_wrap=True)
        except Exception:   # noqa: BLE001 (stderr itself is broken)
            pass
    exit_interrupted(say)


def _internal(e: BaseException, debug: bool) -> None:
    if interrupt_taken():   # the Ctrl-C, surfacing as another error (a native module's import)
        _interrupted(debug)
    kind = type(e).__name__
    what = one_line(e, 300) or "(no message)"
    hint = "" if debug else " (run again with --debug for the traceback)"
    _exit(1, f"internal error: {kind}: {what}: this is a bug in hetero-solve, please report it "
             f"with the command line{hint}", debug)


def _help_hint(e: Exception) -> str:
    ctx = getattr(e, "ctx", None)
    if ctx is None:
        return ""
    return f" (see: {ctx.command_path} --help)"


def _quiet_stdout() -> None:
    """After a broken pipe, make the interpreter's final flush of stdout silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["app", "main"]
