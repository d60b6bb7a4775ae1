"""Shared command-line helpers: consoles, --dim parsing, progress on stderr."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

import typer
from rich.console import Console

from ..errors import HeteroSolveError

out_console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class UsageError(HeteroSolveError):
    """A bad command-line value (exit code 2)."""


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
        if number >= 2**63:
            raise UsageError(f"--dim {name.strip()}=...: the value must be below 2^63 (ONNX "
                             "dimensions are 64-bit)")
        dims[name.strip()] = number
    return dims


@contextmanager
def progress_on_stderr(quiet: bool = False):
    """Yield a ``say(message)`` callback: a live status line on a terminal, timestamped lines
    otherwise (so logs of long runs show where the time went)."""
    if quiet:
        yield lambda _msg: None
        return
    start = time.perf_counter()
    if err_console.is_terminal:
        with err_console.status("starting") as status:
            yield lambda msg: status.update(f"[{time.perf_counter() - start:6.1f}s] {msg}")
    else:
        def say(msg: str) -> None:
            print(f"hetero-solve [{time.perf_counter() - start:6.1f}s] {msg}", file=sys.stderr,
                  flush=True)
        yield say


def fail(message: str) -> None:
    """Print one line and exit 2."""
    err_console.print(f"hetero-solve: error: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(2)
