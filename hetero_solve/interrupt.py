"""Ctrl-C, wherever it comes: the one home of how hetero-solve is interrupted.

Python raises :class:`KeyboardInterrupt` between bytecodes of the main thread, so pure-Python
work stops by itself.  Two places need help:

* **native solvers** (CP-SAT, Glucose) run for seconds without returning to Python.
  :func:`run_stoppable` runs them in a helper thread (both release the GIL); the main thread
  waits, takes the interrupt, asks the solver to stop (``stop_search()``, ``interrupt()``),
  waits for it (a fraction of a second), and for the native threads it started to end
  (CP-SAT's workers outlive an interrupted ``Solve`` by milliseconds: a program that exits
  at once would abort), then re-raises.  A library caller gets the
  ``KeyboardInterrupt``; the command line turns it into one line and exit code 130.  CP-SAT
  must also be told not to catch SIGINT itself (``catch_sigint_signal``): it would end the
  search as if its time were up, and the run would go on to write an answer.
* **native calls that cannot be stopped** (OpenVINO compiling a model for ``export
  openvino``, seconds on a large model): :func:`run_unstoppable` runs them in a helper thread
  too; the command answers Ctrl-C at once and ends without waiting (``os._exit``), a library
  caller gets the ``KeyboardInterrupt`` when the call has returned.
* **imports**: the command's first imports (onnx, onnxruntime, typer...) take a second, and
  an interrupt there would print a traceback before ``main()`` can catch anything.
  :func:`guard_imports` (called first thing by the package, for the ``hetero-solve`` command
  only) makes it one line and exit code 130 until :func:`release_imports` (called by
  ``main()``) hands Ctrl-C to :func:`take_interrupts`.
* **forked children** (OpenVINO's telemetry forks one when ``openvino`` is imported): a
  terminal's Ctrl-C reaches the whole process group; a child forked from the command ends on
  it quietly (:func:`take_interrupts` registers :func:`_child_ends_on_sigint`), no traceback.
* **a second signal**: ``timeout -s INT`` signals the command and then its whole process
  group, so the command often gets two SIGINTs at once (and a user may press Ctrl-C twice).
  A second ``KeyboardInterrupt`` would cut the first's clean-up: the wait for the native
  solver to stop (a C++ thread still running when the process ends is ``terminate called
  without an active exception``, exit code 134) or the printing of the one line (a
  traceback from inside rich).  The command's handler (:func:`take_interrupts`) raises
  ``KeyboardInterrupt`` once and ignores every later SIGINT; :func:`exit_interrupted`
  prints the line and ends the process without the interpreter's own end (where OR-tools'
  native threads abort it).
  :func:`run_stoppable` also waits for its solver through further interrupts, for library
  callers.

>>> run_stoppable(lambda: 6 * 7, lambda: None)
42
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

#: The line the command prints when interrupted (``main()`` prints the same).
INTERRUPTED = "hetero-solve: interrupted"
#: How often (seconds) the waiting main thread wakes to take a signal.
POLL_SECONDS = 0.1

_guarded = False
_taken = False      # the command took its one interrupt: later ones are ignored


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
    before = _native_threads()
    thread, box = _started(work, "hetero-solve solver")
    stopped = False
    try:
        while thread.is_alive():
            thread.join(POLL_SECONDS)
            if watch is not None and not stopped and thread.is_alive() and watch():
                stop()
                stopped = True
    except KeyboardInterrupt:
        _stop_and_wait(thread, stop)
        _settle(before)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_unstoppable(work: Callable[[], T]) -> T:
    """``work()``, a native call that cannot be asked to stop (OpenVINO compiling a model),
    run so that Ctrl-C is answered at once: in a helper thread while the main thread waits.

    On Ctrl-C the command (its handler, :func:`take_interrupts`, took the signal) gets the
    ``KeyboardInterrupt`` at once and ends the process without waiting for ``work``
    (:func:`exit_interrupted`); a library caller gets it when ``work`` has returned (a
    native thread still running when the interpreter ends may abort the process).

    >>> run_unstoppable(lambda: 6 * 7)
    42
    """
    if threading.current_thread() is not threading.main_thread():
        return work()
    thread, box = _started(work, "hetero-solve native call")
    try:
        while thread.is_alive():
            thread.join(POLL_SECONDS)
    except KeyboardInterrupt:
        if not _taken:      # a library caller: wait for the call to end
            _stop_and_wait(thread, lambda: None)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _started(work: Callable[[], T], name: str) -> tuple[threading.Thread, dict]:
    """``work()`` started in a daemon thread; the dict gets its ``"value"`` or its
    ``"error"`` (re-raised by the caller in its own thread)."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread, box


def _native_threads() -> frozenset[str] | None:
    """The ids of the process's threads, native ones included (Linux: ``/proc/self/task``),
    else None."""
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _settle(before: frozenset[str] | None, limit: float = 1.0) -> None:
    """Wait (at most ``limit`` seconds) until every thread started since ``before`` has ended.
    CP-SAT stopped by ``stop_search()`` returns while its worker threads are still being torn
    down (a few milliseconds); a caller that catches the ``KeyboardInterrupt`` and exits at once
    would end the interpreter with them running, which aborts the process (``terminate called
    without an active exception``, exit code 134)."""
    if before is None:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        now = _native_threads()
        if now is None or now <= before:
            return
        try:
            time.sleep(0.001)
        except KeyboardInterrupt:   # a second Ctrl-C: the first one's clean-up goes on
            continue


def _stop_and_wait(thread: threading.Thread, stop: Callable[[], None]) -> None:
    """Ask the native work to stop and wait for it, through further interrupts (a native
    thread still running when the interpreter ends aborts the process)."""
    while True:
        try:
            stop()
            thread.join()
            return
        except KeyboardInterrupt:
            continue


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A short step that must be done whole (renames that publish files): a SIGINT that comes
    meanwhile is held back and taken, as usual, when the step ends.  In the main thread only
    (elsewhere a plain block: signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def is_the_command() -> bool:
    """The running program is the ``hetero-solve`` console script or ``python -m
    hetero_solve`` (not a library caller, who gets ``KeyboardInterrupt``)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name in ("hetero-solve", "hetero-solve.exe"):
        return True
    orig = list(getattr(sys, "orig_argv", []))      # python -m hetero_solve ...
    return any(a == "-m" and b == "hetero_solve" for a, b in zip(orig, orig[1:]))


def _interrupted_while_importing(_signum, _frame) -> None:
    global _taken
    if _taken:          # a second signal (timeout -s INT signals the whole group too)
        return
    _taken = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.write(2, (INTERRUPTED + "\n").encode())
    finally:
        os._exit(130)   # nothing was written yet: nothing to clean up


def _interrupt_once(_signum, _frame) -> None:
    """The command's SIGINT handler: ``KeyboardInterrupt`` the first time, nothing after (the
    first one's clean-up must not be cut short)."""
    global _taken
    if _taken:
        return
    _taken = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def guard_imports() -> None:
    """For the command only: Ctrl-C during the imports is one line and exit code 130."""
    global _guarded
    if _guarded or not is_the_command() or \
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


def take_interrupts():
    """For the command's ``main()``: SIGINT raises ``KeyboardInterrupt`` once, later ones are
    ignored (:func:`_interrupt_once`).  Returns the handler it replaced, for
    :func:`restore_interrupts`; does nothing outside the main thread or when someone else
    (a test runner, a shell that ignores SIGINT) set the handler."""
    global _taken, _guarded
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if previous not in (signal.default_int_handler, _interrupted_while_importing):
        return None
    _taken, _guarded = False, False
    signal.signal(signal.SIGINT, _interrupt_once)
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_child_ends_on_sigint)
        _fork_hook = True
    return previous


_fork_hook = False


def _child_ends_on_sigint() -> None:
    """In a process forked from the command (OpenVINO's telemetry sends its events from one,
    started by ``import openvino``; :mod:`hetero_solve.model.parallel`'s workers): Ctrl-C at
    a terminal signals the whole process group, and the command's own handler would make the
    child print a ``KeyboardInterrupt`` traceback under the command's one line.  The child
    ends quietly instead (the command reports the interruption)."""
    if signal.getsignal(signal.SIGINT) is _interrupt_once:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def restore_interrupts(previous) -> None:
    """Put back the handler :func:`take_interrupts` replaced (``main()`` called in-process)."""
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler
                      if previous is _interrupted_while_importing else previous)


def interrupt_taken() -> bool:
    """The command took its Ctrl-C (:func:`take_interrupts`).  The ``KeyboardInterrupt`` may
    surface as another exception: one raised inside a native module's import (a lazy ``import
    onnxruntime``) comes out as ``ImportError: initialization failed``; ``main()`` reports
    whatever follows a taken Ctrl-C as the interruption it is."""
    return _taken


def exit_interrupted(say: Callable[[], None]) -> None:
    """End the command after Ctrl-C: no further SIGINT, ``say()`` (the one line), then exit
    code 130.  The command's process ends at once after flushing (``os._exit``): an
    interrupted CP-SAT search leaves a native thread of OR-tools that the interpreter's own
    end aborts on (``terminate called without an active exception``, exit code 134, even
    after the search returned), and everything the command writes was cleaned up while the
    ``KeyboardInterrupt`` unwound.  A library caller (``main()`` called in-process) gets
    ``SystemExit(130)``."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is _interrupt_once:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    say()
    if is_the_command():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:   # noqa: BLE001 (a closed pipe: nothing more to say)
                pass
        os._exit(130)
    sys.exit(130)


__all__ = ["run_stoppable", "run_unstoppable", "interrupts_deferred", "guard_imports",
           "release_imports", "take_interrupts", "restore_interrupts", "interrupt_taken", "exit_interrupted",
           "INTERRUPTED"]
