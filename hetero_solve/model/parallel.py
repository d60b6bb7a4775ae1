"""Run onnx's C++ steps (checker, shape inference) in forked processes while Python flattens
the graph.  They hold the GIL, so threads cannot overlap them; on the 2-core machines this
tool targets, a fork can, for the cost of piping back a result.

Used only where it is safe and pays: Linux (``fork``), no other Python thread running (a fork
copies one thread; locks held by others would stay held in the child), models of at least
``MIN_NODES`` nodes, and not disabled by ``HETERO_SOLVE_NO_FORK=1``.  A child that fails in
any way yields ``None`` and the caller does the work itself.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from typing import Any, Callable

MIN_NODES = 20_000


def fork_pays(num_nodes: int) -> bool:
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and num_nodes >= MIN_NODES and threading.active_count() == 1
            and os.environ.get("HETERO_SOLVE_NO_FORK", "") not in ("1", "true", "yes"))


def _lowest_priority() -> None:
    """Lower this process to the lowest niceness: it gets a core nothing else wants, and about
    1.5 % of one that something else does (never none: ``SCHED_IDLE`` could starve it for as
    long as other work keeps both cores busy, and the parent waits for it in the end)."""
    try:
        os.nice(19)
    except OSError:
        pass


class Forked:
    """``fn(*args)`` computed in a child process; :meth:`result` waits for it.  ``idle``: the
    child runs mostly when a core is otherwise idle (work off the critical path, such as the
    checker, must not slow the work on it)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, idle: bool = False):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: compute, send, leave without running any cleanup
            try:
                os.close(read_end)
                if idle:
                    _lowest_priority()
                try:
                    payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as e:  # noqa: BLE001 - reported to the parent
                    payload = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
                with os.fdopen(write_end, "wb") as f:
                    f.write(payload)
            finally:
                os._exit(0)
        os.close(write_end)
        self._pid = pid
        self._read = read_end
        self._done = False
        self._value: tuple[str, Any] | None = None

    def result(self) -> tuple[str, Any] | None:
        """``("ok", value)``, ``("error", message)``, or ``None`` when the child died."""
        if not self._done:
            self._done = True
            try:
                with os.fdopen(self._read, "rb") as f:
                    data = f.read()
                self._value = pickle.loads(data) if data else None
            except Exception:
                self._value = None
            finally:
                try:
                    os.waitpid(self._pid, 0)
                except ChildProcessError:
                    pass
        return self._value

    def cancel(self) -> None:
        """Stop the child (its result is no longer needed) and reap it."""
        if not self._done:
            self._done = True
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._read)
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
