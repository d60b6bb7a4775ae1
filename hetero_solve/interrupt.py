"""Ctrl-C, wherever it comes: the one home of how hetero-solve is interrupted.

Python raises :class:`KeyboardInterrupt` between bytecodes of the main thread, so pure-Python
work stops by itself.  Two places need help:

* **native solvers** (CP-SAT, Glucose) run for seconds without returning to Python.
  :func:`run_stoppable` runs them in a helper thread (both release the GIL); the main thread
  waits, takes the interrupt, asks the solver to stop (``stop_search()``, ``interrupt()``),
  waits for it (a fraction of a second) and re-raises.  A library caller gets the
  ``KeyboardInterrupt``; the command line turns it into one line and exit code 130.  CP-SAT
  must also be told not to catch SIGINT itself (``catch_sigint_signal``): it would end the
  search as if its time were up, and the run would go on to write an answer.
* **imports**: the command's first imports (onnx, onnxruntime, typer...) take a second, and
  an interrupt there would print a traceback before ``main()`` can catch anything.
  :func:`guard_imports` (called first thing by the package, for the ``hetero-solve`` command
  only) makes it one line and exit code 130 until :func:`release_imports` (called by
  ``main()``) hands Ctrl-C back to Python.

>>> run_stoppable(lambda: 6 * 7, lambda: None)
42
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

#: The line the command prints when interrupted (``main()`` prints the same).
INTERRUPTED = "hetero-solve: interrupted"
#: How often (seconds) the waiting main thread wakes to take a signal.
POLL_SECONDS = 0.1

_guarded = False


def run_stoppable(work: Callable[[], T], stop: Callable[[], None],
                  watch: Callable[[], bool] | None = None) -> T:
    """``work()``, run so that Ctrl-C stops it: in a helper thread while the main thread waits.

    Parameters
    ----------
    work : callable
        The native call (it must release the GIL), e.g. ``lambda: solver.Solve(model)``.
    stop : callable
        Asks ``work`` to return soon; called from the main thread on an interrupt.
    watch : callable, optional
        Asked a few times a second while ``work`` runs; when it returns True, ``stop()`` is
        called (a deadline, e.g. :meth:`hetero_solve.budget.Budget.past_deadline`) and ``work``'s
        own result is returned.

    Returns
    -------
    Whatever ``work`` returns (its exceptions are raised here).

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C arrived while ``work`` ran (after ``work`` has stopped).
    """
    if threading.current_thread() is not threading.main_thread():
        return work()       # signals reach the main thread only: nothing to take here
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name="hetero-solve solver", daemon=True)
    thread.start()
    stopped = False
    try:
        while thread.is_alive():
            thread.join(POLL_SECONDS)
            if watch is not None and not stopped and thread.is_alive() and watch():
                stop()
                stopped = True
    except KeyboardInterrupt:
        stop()
        thread.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _is_the_command() -> bool:
    """The running program is the ``hetero-solve`` console script or ``python -m
    hetero_solve`` (not a library caller, who gets ``KeyboardInterrupt``)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name in ("hetero-solve", "hetero-solve.exe"):
        return True
    orig = list(getattr(sys, "orig_argv", []))      # python -m hetero_solve ...
    return any(a == "-m" and b == "hetero_solve" for a, b in zip(orig, orig[1:]))


def _interrupted_while_importing(_signum, _frame) -> None:
    try:
        os.write(2, (INTERRUPTED + "\n").encode())
    finally:
        os._exit(130)   # nothing was written yet: nothing to clean up


def guard_imports() -> None:
    """For the command only: Ctrl-C during the imports is one line and exit code 130."""
    global _guarded
    if _guarded or not _is_the_command() or \
            threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return              # someone else (a test runner, a shell setting) decides
    signal.signal(signal.SIGINT, _interrupted_while_importing)
    _guarded = True


def release_imports() -> None:
    """Hand Ctrl-C back to Python (a ``KeyboardInterrupt``, which ``main()`` reports)."""
    global _guarded
    if _guarded:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _guarded = False


__all__ = ["run_stoppable", "guard_imports", "release_imports", "INTERRUPTED"]
