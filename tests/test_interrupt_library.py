"""A library caller gets ``KeyboardInterrupt`` from a running CP-SAT or Glucose search
(hetero_solve/interrupt.py).

Each case runs in a fresh interpreter, as a library caller's program does: the signal is sent
to the caller's own process, and after a few hundred tests in one pytest process the main
thread's alternate signal stack (faulthandler's) may no longer be mapped, so a SIGINT the kernel
cannot deliver becomes a SIGSEGV of the test process.  Not load-sensitive: the signal comes
0.3 s into a search that would run for hours."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT

CALLER = """
import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # as a user's program starts
{setup}
timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
timer.start()
t0 = time.process_time()
try:
    {search}
except KeyboardInterrupt:
    print("KeyboardInterrupt after", round(time.process_time() - t0, 1), "s")
else:
    print("search ended without an interrupt")
{cleanup}
"""


def _caller(setup: str, search: str, cleanup: str = "") -> subprocess.CompletedProcess:
    code = CALLER.format(setup=textwrap.dedent(setup), search=search, cleanup=cleanup)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_library_caller_gets_keyboard_interrupt_from_cpsat():
    """Ctrl-C during a CP-SAT search (native code) reaches the caller as KeyboardInterrupt,
    after the solver stopped (it used to be swallowed by CP-SAT's own handler)."""
    r = _caller("""
        from ortools.sat.python import cp_model
        from hetero_solve.budget import Budget
        from hetero_solve.exact.cpsat import run
        m = cp_model.CpModel()
        xs = [m.NewIntVar(0, 60, "") for _ in range(60)]
        m.AddAllDifferent(xs)
        for i in range(59):
            m.Add(3 * xs[i] + 7 * xs[i + 1] != 50 + i)
        m.Maximize(sum((i % 7) * x for i, x in enumerate(xs)))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        """, "run(solver, m, Budget.of(work_limit=1e4))")
    # The caller keeps its CpSolver and exits at once: CP-SAT returns from an interrupted
    # search while its worker threads are still being torn down, and an interpreter that ended
    # then aborted ("terminate called without an active exception", exit code 134, every
    # time); the library now waits for them before re-raising (interrupt._settle).
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("KeyboardInterrupt after"), r.stdout


def test_a_library_caller_gets_keyboard_interrupt_from_glucose():
    r = _caller("""
        from pysat.examples.genhard import PHP
        from pysat.solvers import Solver
        from hetero_solve.interrupt import run_stoppable
        s = Solver(name="g4", bootstrap_with=PHP(12).clauses)
        """, "run_stoppable(lambda: s.solve_limited(expect_interrupt=True), s.interrupt)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("KeyboardInterrupt after"), r.stdout
