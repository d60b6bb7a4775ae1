"""One budget per command or library call: ``--time-limit`` (a wall-clock promise) or
``--work-limit`` (deterministic work, no clock), and how work is counted inside it
(docs/exact.md, "Determinism, time and interruption").

The decision on time:

* ``--time-limit L`` is a promise in **wall-clock seconds**: from the moment the model is
  prepared to the moment the answer is ready to write, nothing runs longer than ``L``
  (:attr:`Budget.deadline`).  Inside it, work is counted deterministically:
  ``WORK_PER_SECOND`` x ``L`` deterministic seconds, calibrated so that on a quiet machine the
  deterministic budget ends first.  Then the same input gives the same answer.  When the clock
  ends first, the best answer so far is kept and the budget says so
  (:attr:`Budget.deterministic` False, :attr:`Budget.stopped_by` ``"time limit"``).
* ``--work-limit W`` is ``W`` deterministic seconds with no clock at all: the same answer on
  any machine at any load (studies, CI, papers).

Work is counted in CP-SAT's *deterministic seconds*; the other engines and our own loops
convert their counts into them:

============================  ==============================================================
CP-SAT                        ``max_deterministic_time`` (its own unit), one worker by default
Glucose (python-sat)          conflicts and propagations per deterministic second
                              (:mod:`hetero_solve.exact.sat`)
search over device sequences  work units per deterministic second (``SEQUENCE_RATE``)
our loops (runs, heuristic)   ``RUN_STEPS_PER_SECOND`` steps per second (:class:`Steps`)
building a model              ``BUILD_ITEMS_PER_SECOND`` variables and clauses (CP-SAT),
                              ``CLAUSES_PER_SECOND`` clauses (Glucose's adder networks),
                              ``RELAXED_ITEMS_PER_SECOND`` variables and constraints
                              (relaxed assignment models)
============================  ==============================================================

One :class:`Budget` is made per command or library call (:meth:`Budget.of`); below the entry
points functions take it, never a time limit.  A part of the work gets a child budget
(:meth:`Budget.allot`, :meth:`Budget.split`): what a child spends, its parents spend, so
nothing is spent twice, and every child has the one deadline.

This module imports nothing of the package: every layer may use it.

>>> b = Budget.of(work_limit=2.0)
>>> half = b.split(2)
>>> half.left(), b.left()
(1.0, 2.0)
>>> half.charge(0.25)
>>> half.left(), b.left(), b.deterministic
(0.75, 1.75, True)
>>> Budget.of(time_limit=10.0).work
5.0
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

#: Deterministic seconds of work per second of ``--time-limit`` (docs/exact.md, "Determinism").
WORK_PER_SECOND = 0.5
#: The one library default (a call given no limit): deterministic seconds of work, no clock
#: (what ``--time-limit 10``, the command's default, gives on a quiet machine).
DEFAULT_WORK = 5.0
#: Conversions into deterministic seconds (module doc).
RUN_STEPS_PER_SECOND = 400_000
BUILD_ITEMS_PER_SECOND = 100_000
RELAXED_ITEMS_PER_SECOND = 10_000
CLAUSES_PER_SECOND = 200_000
#: A limit this large (seconds, infinity included) is no limit: the engines count conflicts
#: and deadlines in 64-bit integers.
MAX_LIMIT = 1e6
#: Work left below this (deterministic seconds) starts nothing more.
MIN_WORK = 0.01
#: What :attr:`Budget.stopped_by` says when the clock ended first.
TIME_LIMIT = "time limit"

#: The warning a run gives when the clock, not the deterministic budget, ended it.
TIME_WARNING = ("the {limit:g} s time limit ended the search before its deterministic budget "
                "did (the machine is slow or loaded): this answer may differ from run to run; "
                "--work-limit gives a reproducible one")


class _Flags:
    """What every budget of one call shares: whether the clock ended some work first."""

    def __init__(self) -> None:
        self.deterministic = True
        self.stopped_by: str | None = None


@dataclass(frozen=True)
class Limit:
    """The limit of one command or library call as the user gave it: ``time`` (``--time-limit``,
    wall-clock seconds) or ``work`` (``--work-limit``, deterministic seconds), one of them;
    checked when made, so a bad limit fails before any work.  :meth:`start` makes it the
    call's one :class:`Budget` when the model is prepared (the clock starts then).

    >>> Limit.of(time_limit=5).start().work, Limit.of().work, str(Limit.of(work_limit=2.5))
    (2.5, 5.0, '--work-limit 2.5')
    """

    time: float | None = None
    work: float | None = None

    @classmethod
    def of(cls, time_limit: float | None = None, work_limit: float | None = None) -> Limit:
        """From ``time_limit`` or ``work_limit`` (one, not both; neither: the one library
        default, :data:`DEFAULT_WORK` deterministic seconds).

        Raises
        ------
        ValueError
            Both given, or a negative or NaN limit.
        """
        if time_limit is not None and work_limit is not None:
            raise ValueError("give a time limit or a work limit, not both")
        if time_limit is not None:
            return cls(time=_checked("time_limit", time_limit, "seconds"))
        if work_limit is not None:
            return cls(work=_checked("work_limit", work_limit, "deterministic seconds"))
        return cls(work=DEFAULT_WORK)

    def start(self) -> Budget:
        """The call's one budget: the clock (with a time limit) starts now."""
        if self.time is not None:
            return Budget(self.time * WORK_PER_SECOND, time.perf_counter() + self.time,
                          time_limit=self.time, work_limit=self.time * WORK_PER_SECOND)
        return Budget(self.work, None, work_limit=self.work)

    def __str__(self) -> str:
        return f"--time-limit {self.time:g}" if self.time is not None else \
            f"--work-limit {self.work:g}"


class Budget:
    """Deterministic work to spend and, with a time limit, a wall-clock deadline (module doc).

    Make one with :meth:`of`; hand parts of it on with :meth:`allot` or :meth:`split`.

    Parameters
    ----------
    work : float
        Deterministic seconds this budget may spend (``inf``: no cap of its own).
    deadline : float or None
        ``time.perf_counter()`` value after which nothing more runs; ``None``: no clock.

    Attributes
    ----------
    spent : float
        Deterministic seconds charged to this budget (its children's included).
    time_limit, work_limit : float or None
        What the user asked for (the one given; on children, their root's).
    """

    def __init__(self, work: float, deadline: float | None = None, *,
                 parent: Budget | None = None, time_limit: float | None = None,
                 work_limit: float | None = None):
        self.work = max(0.0, float(work))
        self.deadline = deadline
        self.parent = parent
        self.spent = 0.0
        self.time_limit = time_limit if parent is None else parent.time_limit
        self.work_limit = work_limit if parent is None else parent.work_limit
        self._flags = _Flags() if parent is None else parent._flags

    # -- making one ------------------------------------------------------------------------
    @classmethod
    def of(cls, time_limit: float | None = None, work_limit: float | None = None) -> Budget:
        """The budget of one command or library call, from ``--time-limit`` (seconds, a
        wall-clock promise; work ``WORK_PER_SECOND`` x it) or ``--work-limit``
        (deterministic seconds, no clock).  Give one, not both; neither: the one library
        default (:meth:`default`, deterministic).  The clock starts now: make it when the
        model is prepared (:meth:`Limit.start`).

        Raises
        ------
        ValueError
            Both given, or a negative or NaN limit.
        """
        return Limit.of(time_limit, work_limit).start()

    @classmethod
    def default(cls) -> Budget:
        """The one library default: :data:`DEFAULT_WORK` deterministic seconds, no clock (the
        same answer at any load)."""
        return Limit.of().start()

    @property
    def root(self) -> Budget:
        """The call's budget this one is part of (itself when it is the call's)."""
        b = self
        while b.parent is not None:
            b = b.parent
        return b

    def allot(self, work: float) -> Budget:
        """A child budget of at most ``work`` deterministic seconds (and at most what this one
        has left): what it spends, this one spends; same deadline."""
        return Budget(min(max(0.0, work), self.left()), self.deadline, parent=self)

    def split(self, parts: int) -> Budget:
        """A child with one of ``parts`` equal shares of what is left (:meth:`allot`)."""
        return self.allot(self.share(1, parts))

    # -- what is left ----------------------------------------------------------------------
    def left(self) -> float:
        """Deterministic seconds left (never below 0): this budget's and its parents'."""
        own = self.work - self.spent
        if self.parent is not None:
            own = min(own, self.parent.left())
        return max(0.0, own)

    def share(self, weight: float = 1.0, of: float = 1.0) -> float:
        """``weight / of`` of what is left (deterministic seconds)."""
        return self.left() * weight / max(of, 1e-12)

    @property
    def exhausted(self) -> bool:
        """Too little work left to start anything (:data:`MIN_WORK`)."""
        return self.left() <= MIN_WORK

    def wall_left(self) -> float:
        """Wall seconds to the deadline (``inf`` without a clock; may be negative)."""
        return math.inf if self.deadline is None else self.deadline - time.perf_counter()

    def past_deadline(self) -> bool:
        """The deadline has passed (a question only: nothing is marked)."""
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def out_of_time(self) -> bool:
        """True when the deadline has passed: the caller stops here, and the answer no
        longer depends on the input alone (:meth:`stop`)."""
        if self.past_deadline():
            self.stop()
            return True
        return False

    # -- spending --------------------------------------------------------------------------
    def charge(self, seconds: float) -> None:
        """Count ``seconds`` of deterministic work here and in every parent."""
        b: Budget | None = self
        while b is not None:
            b.spent += seconds
            b = b.parent

    def charge_run(self, stats: dict) -> None:
        """Count a solver run's work (``deterministic_time`` and ``build_time`` of its stats)
        and, when its ``deterministic`` is False, that the clock stopped it."""
        self.charge(stats.get("deterministic_time", 0.0) + stats.get("build_time", 0.0))
        if not stats.get("deterministic", True):
            self.stop()

    def stop(self, why: str = TIME_LIMIT) -> None:
        """Say that ``why`` (the clock), not the deterministic budget, ended some work."""
        self._flags.deterministic = False
        if self._flags.stopped_by is None:
            self._flags.stopped_by = why

    @property
    def deterministic(self) -> bool:
        """No work of this call was cut by the clock: the answer depends on the input only."""
        return self._flags.deterministic

    @property
    def stopped_by(self) -> str | None:
        """``"time limit"`` when the clock ended some work first, else ``None``."""
        return self._flags.stopped_by

    def stats(self) -> dict:
        """What ``partition.json``'s ``solver`` says of the call's budget: the limit given
        (``time_limit`` in seconds, or ``work_limit`` in deterministic seconds), whether the
        answer depends on the input alone (``deterministic``) and, when the clock ended some
        work first, ``stopped_by``."""
        out: dict = ({"time_limit": self.time_limit} if self.time_limit is not None
                     else {"work_limit": self.work_limit})
        out["deterministic"] = self.deterministic
        if self.stopped_by:
            out["stopped_by"] = self.stopped_by
        return out

    def warning(self) -> str | None:
        """The one line said when the clock ended some work first, else ``None``."""
        if self.deterministic:
            return None
        return TIME_WARNING.format(limit=self.time_limit or 0.0)

    def __repr__(self) -> str:
        clock = "no clock" if self.deadline is None else f"{self.wall_left():.2f} s of wall"
        return f"Budget({self.left():.3f} of {self.work:.3f} deterministic s left, {clock})"


class Steps:
    """A count of our own loops' steps (e.g. nodes added to runs), converted into
    deterministic seconds at a fixed rate; :meth:`Budget.charge` it when done.

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


def _checked(name: str, value: float, unit: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of {unit} >= 0, not {value!r}") from None
    if not v >= 0:      # NaN too
        raise ValueError(f"{name} must be a number of {unit} >= 0, not {value!r}")
    return min(v, MAX_LIMIT)


__all__ = ["Budget", "Limit", "Steps", "DEFAULT_WORK", "WORK_PER_SECOND", "RUN_STEPS_PER_SECOND",
           "BUILD_ITEMS_PER_SECOND", "RELAXED_ITEMS_PER_SECOND", "CLAUSES_PER_SECOND",
           "MAX_LIMIT", "MIN_WORK", "TIME_LIMIT", "TIME_WARNING"]
