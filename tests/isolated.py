"""Run the command line in a forked child: in-process speed (imports are done), with what a
real run has that a plain call lacks: a time limit (a hang is a finding, not a stuck suite),
an own stdout and stderr, a crash that cannot take pytest with it, and optionally an
unprivileged user (read-only folders mean nothing to root).

``outcome(argv, cwd=...)`` returns an :class:`Outcome` (exit code, stdout, stderr); a child
still running after ``timeout`` seconds is killed with its process group and reported as
``code = HANG``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

HANG = -1000         #: ``Outcome.code`` of a child killed at its time limit
CRASH = -2000        #: ``Outcome.code`` + signal number of a child killed by a signal
ESCAPED = 99         #: a Python exception left main() (printed to the child's stderr)
NOBODY = 65534       #: the unprivileged user of most Linux systems


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [x for x in self.err.splitlines() if x.strip()]

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out[-2000:]}\n--- stderr\n{self.err[-4000:]}"


def outcome(argv: list[str], *, cwd: str | os.PathLike | None = None, timeout: float = 60.0,
            user: int | None = None, env: dict[str, str] | None = None) -> Outcome:
    """``hetero_solve.cli.main(argv)`` in a forked child (see the module docstring)."""
    from hetero_solve.cli import main
    from support.tiers import note_child
    note_child()
    with tempfile.TemporaryDirectory(prefix="hs-child-") as box:
        out_path, err_path = os.path.join(box, "out"), os.path.join(box, "err")
        if user is not None:
            os.chmod(box, 0o777)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:   # the child: never returns
            code = ESCAPED
            try:
                os.setpgid(0, 0)
                # As a user's process starts: Ctrl-C raises KeyboardInterrupt (a test run
                # before may have installed other handlers, dask's for one).
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                if cwd is not None:   # first: an unprivileged user may not pass its parents
                    os.chdir(cwd)
                if user is not None:
                    os.setgroups([])
                    os.setgid(user)
                    os.setuid(user)
                for fd, path in ((1, out_path), (2, err_path)):
                    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                    os.dup2(f, fd)
                    os.close(f)
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
                sys.stdin = open(os.devnull, encoding="utf-8")
                for k, v in (env or {}).items():
                    os.environ[k] = v
                try:
                    main([str(a) for a in argv])
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 -- reported to the parent as ESCAPED
                traceback.print_exc()
                code = ESCAPED
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code & 0xFF)
        code = _wait(pid, timeout)
        with open(out_path, encoding="utf-8", errors="replace") as f:
            out = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            err = f.read()
    return Outcome(code, out, err)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return CRASH - os.WTERMSIG(status)
            return os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            for target in (-pid, pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
            os.waitpid(pid, 0)
            return HANG
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def console_script(argv: list[str], *, cwd: str | os.PathLike | None = None,
                   timeout: float = 120.0) -> Outcome:
    """The installed ``hetero-solve`` console script (or ``python -m hetero_solve`` when the
    script is not next to this interpreter), as a user runs it."""
    script = Path(sys.executable).with_name("hetero-solve")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "hetero_solve"]
    try:
        r = subprocess.run([*cmd, *map(str, argv)], cwd=cwd, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return Outcome(HANG, str(e.stdout or ""), str(e.stderr or ""))
    return Outcome(r.returncode, r.stdout, r.stderr)


def can_drop_privileges() -> bool:
    return hasattr(os, "setuid") and os.geteuid() == 0


def in_child(fn, *args, timeout: float = 180.0, **kwargs):
    """``fn(*args, **kwargs)`` in a fresh interpreter (spawned, not forked), its return value
    (picklable) back: for a test whose library leaves process-wide state behind (Dask's
    event-loop threads, which keep :func:`hetero_solve.model.parallel.fork_pays` false for every
    later test).  Spawned, because a fork of the suite's process copies the locks its native
    thread pools (onnxruntime, OpenVINO's TBB, Dask's loops) hold at that instant: a forked
    child started a Dask cluster and hung a CI run for its whole time limit.  ``fn`` must be
    importable (a module-level function of a test module).  An exception in the child fails the
    caller with the child's traceback; a child still running after ``timeout`` seconds is
    killed and fails it too."""
    import multiprocessing
    from support.tiers import note_child
    note_child()
    ctx = multiprocessing.get_context("spawn")
    read, write = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run_and_send, args=(write, fn, args, kwargs))
    sys.stdout.flush()
    sys.stderr.flush()
    child.start()
    write.close()
    try:
        if not read.poll(timeout):
            raise AssertionError(f"{fn.__name__} still ran after {timeout} s in its child")
        try:
            kind, value = read.recv()
        except EOFError:
            child.join(10)
            kind, value = "error", f"the child died: exit {child.exitcode}"
    finally:
        read.close()
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    if kind == "error":
        raise AssertionError(f"in the child:\n{value}")
    return value


def _run_and_send(conn, fn, args, kwargs) -> None:
    try:
        payload = ("ok", fn(*args, **kwargs))
    except BaseException:  # noqa: BLE001 -- reported to the parent
        payload = ("error", traceback.format_exc())
    try:
        conn.send(payload)
    except Exception:  # noqa: BLE001 -- an unpicklable answer is the test's error
        conn.send(("error", traceback.format_exc()))
    conn.close()
