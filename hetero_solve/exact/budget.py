"""The exact stage's time budget: deterministic work, derived from ``--time-limit`` by one fixed
conversion, and a wall-clock guard that normal runs never reach.

Same input and seed, same answer at any machine load: every limit that can change an answer
is counted in work, never read from a clock.  The units are CP-SAT's *deterministic
seconds*; the other engines and our own loops convert their counts into them:

============================  ==============================================================
CP-SAT                        ``max_deterministic_time`` (its own unit), one worker by default
Glucose (python-sat)          ``CONFLICTS_PER_SECOND`` conflicts and ``PROPAGATIONS_PER_SECOND``
                              propagations per deterministic second (:mod:`.sat`)
search over device sequences  ``SEQUENCE_RATE`` work units per deterministic second
runs (:mod:`.runs`)           ``RUN_STEPS_PER_SECOND`` memory-tracker steps per second
building a model              ``BUILD_ITEMS_PER_SECOND`` variables and clauses (CP-SAT),
                              ``CLAUSES_PER_SECOND`` clauses (Glucose's adder networks),
                              ``RELAXED_ITEMS_PER_SECOND`` variables and constraints
                              (relaxed assignment models, :mod:`.assign`)
============================  ==============================================================

:func:`work_seconds` turns ``--time-limit`` into the deterministic seconds the stages share:
``WORK_PER_SECOND`` of them per second of the limit (measured on this project's 2-core
machine under its usual load, so that the whole command, model building included, ends within
the limit; docs/exact.md, "Determinism").  More time, more work for every stage: each stage's
share grows with the limit.

The guard (:class:`Guard`) stops only a run the machine slows down far beyond the usual: it
fires after :func:`guard_seconds` (``GUARD_FACTOR`` x the limit + ``GUARD_EXTRA``) seconds of
this process's **CPU time**, or after :func:`backstop_seconds` (``BACKSTOP_FACTOR`` x the limit
+ ``BACKSTOP_EXTRA``) seconds on the wall clock.  CPU time, because other processes slow the
wall clock, not this process's own work: on the project's shared 2-core machine at load
averages of 10 to 40, a plain wall-clock net of three times the limit fired on ordinary runs,
and their answers changed with the load.  When the guard fires the answer may depend on the load,
and the run says so (``deterministic: false`` and ``stopped_by`` in ``partition.json``'s
``solver``, and a warning).

>>> work_seconds(10.0)
5.0
>>> guard_seconds(10.0)
35.0
"""

from __future__ import annotations

import time

#: Deterministic seconds of work per second of ``--time-limit``.
WORK_PER_SECOND = 0.5
#: The guard: this many times the limit, plus this many seconds, of CPU time ...
GUARD_FACTOR, GUARD_EXTRA = 3.0, 5.0
#: ... or of wall-clock time (a process starved of CPU for that long).
BACKSTOP_FACTOR, BACKSTOP_EXTRA = 20.0, 120.0
#: Conversions into deterministic seconds (module doc).
RUN_STEPS_PER_SECOND = 400_000
BUILD_ITEMS_PER_SECOND = 100_000
RELAXED_ITEMS_PER_SECOND = 10_000
CLAUSES_PER_SECOND = 200_000

#: The warning a run gives when the guard fired.
GUARD_WARNING = ("the exact solver was stopped by its time guard ({cpu:g} CPU seconds or {wall:g} "
                 "wall seconds for a {limit:g} s time limit: the machine is very slow or "
                 "loaded), not by its deterministic budget: this answer may differ from run to "
                 "run; a smaller --time-limit gives a reproducible one")


class Guard:
    """The time guard of one exact run (module doc): :meth:`passed` is True once this
    process has used :func:`guard_seconds` of CPU time since it was made, or
    :func:`backstop_seconds` of wall-clock time have gone by; :attr:`fired` says whether it
    ever was.  Native solvers get :attr:`wall_end` as their own wall-clock limit and
    :meth:`passed` as the watch of :func:`~hetero_solve.interrupt.run_stoppable`.

    >>> g = Guard(10.0)
    >>> g.passed(), g.fired
    (False, False)
    """

    def __init__(self, time_limit: float):
        self.time_limit = max(0.0, float(time_limit))
        self.cpu_end = time.process_time() + guard_seconds(self.time_limit)
        self.wall_end = time.perf_counter() + backstop_seconds(self.time_limit)
        self.fired = False

    def passed(self) -> bool:
        if not self.fired and (time.process_time() > self.cpu_end
                               or time.perf_counter() > self.wall_end):
            self.fired = True
        return self.fired

    def wall_left(self) -> float:
        """Wall seconds to the backstop (a native solver's own limit)."""
        return self.wall_end - time.perf_counter()


class Steps:
    """A count of our own loops' steps (e.g. nodes added to runs), converted into
    deterministic seconds at a fixed rate.

    >>> s = Steps(RUN_STEPS_PER_SECOND)
    >>> s.add(200_000)
    >>> s.seconds
    0.5
    """

    def __init__(self, per_second: float = RUN_STEPS_PER_SECOND):
        self.count = 0
        self.per_second = per_second

    def add(self, n: int) -> None:
        self.count += n

    @property
    def seconds(self) -> float:
        return self.count / self.per_second


def work_seconds(time_limit: float) -> float:
    """Deterministic seconds of work for a ``time_limit`` in seconds."""
    return max(0.0, float(time_limit)) * WORK_PER_SECOND


def guard_seconds(time_limit: float) -> float:
    """CPU seconds of this process after which the guard stops the exact stage."""
    return GUARD_FACTOR * max(0.0, float(time_limit)) + GUARD_EXTRA


def backstop_seconds(time_limit: float) -> float:
    """Wall seconds after which the guard stops the exact stage whatever the CPU time."""
    return BACKSTOP_FACTOR * max(0.0, float(time_limit)) + BACKSTOP_EXTRA


def guard_warning(time_limit: float) -> str:
    """The line said when the guard fired."""
    return GUARD_WARNING.format(cpu=guard_seconds(time_limit),
                                wall=backstop_seconds(time_limit), limit=time_limit)


__all__ = ["Guard", "Steps", "work_seconds", "guard_seconds", "backstop_seconds",
           "guard_warning", "WORK_PER_SECOND", "GUARD_FACTOR", "GUARD_EXTRA", "BACKSTOP_FACTOR",
           "BACKSTOP_EXTRA", "RUN_STEPS_PER_SECOND",
           "BUILD_ITEMS_PER_SECOND", "CLAUSES_PER_SECOND", "RELAXED_ITEMS_PER_SECOND"]
