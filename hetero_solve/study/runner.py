"""One run of one algorithm on one compiled problem: time, peak memory, metrics and the
validator's verdict.  :func:`run_job` is what the executors ship to worker processes or Dask
workers, so it is a module-level function of picklable arguments."""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from typing import Callable

from ..algorithms.baselines import BaselineSkipped
from ..errors import one_line
from ..problem import Problem
from ..solution import Solution, evaluate
from ..validate import validate
from .algorithms import ALGORITHMS, AlgorithmUnavailable

MEMORY_METHODS = ("rss", "tracemalloc", "none")


@dataclass
class Job:
    key: str                           # the run's resume key (file name under runs/)
    problem: Problem
    algorithm: str
    runner: Callable | None = None     # overrides the registry (tests, custom algorithms)
    time_limit: float = 10.0
    seed: int = 0
    memory: str = "rss"


def run_job(job: Job) -> dict:
    """Run, measure, validate.  Never raises for the algorithm's own errors: they become
    ``status = failed`` (or ``skipped`` / ``unavailable``) with the reason."""
    run = job.runner or ALGORITHMS[job.algorithm].run
    out: dict = {"key": job.key, "algorithm": job.algorithm, "memory_method": job.memory,
                 "worker_pid": os.getpid()}
    try:
        sol, seconds, peak = measure(lambda: run(job.problem, time_limit=job.time_limit,
                                                 seed=job.seed), job.memory)
    except BaselineSkipped as e:
        return {**out, "status": "skipped", "reason": _one_line(e)}
    except AlgorithmUnavailable as e:
        return {**out, "status": "unavailable", "reason": _one_line(e)}
    except Exception as e:  # noqa: BLE001 - a study records failures and goes on
        return {**out, "status": "failed", "reason": f"{type(e).__name__}: {_one_line(e)}"}
    out.update(seconds=seconds, peak_memory=peak)
    out.update(judge(job.problem, sol))
    return out


def judge(problem: Problem, sol: Solution) -> dict:
    """Metrics and the validator's verdict for one answer."""
    try:
        m = evaluate(problem, sol)
        violations = validate(problem, sol, metrics=m)
    except Exception as e:  # noqa: BLE001 - a malformed answer is an invalid answer
        return {"status": sol.status, "valid": False, "violations": 1,
                "reason": f"structure: cannot evaluate ({type(e).__name__}: {_one_line(e)})"}
    return {
        "status": sol.status, "parts": m.partitions, "fallback": m.fallback,
        "transfer": m.transfer, "lower_bound": sol.lower_bound,
        # predicted seconds (docs/costs.md), with a cost model only
        **{t: getattr(m, t) for t in ("latency", "throughput") if getattr(m, t) is not None},
        # The rule file's objective (docs/problem.md) as a sort key: smaller is better.
        "objective": list(problem.objective.key(m.as_dict())),
        "objective_spec": problem.objective.describe(),
        # Terms ranked before the number of parts (what a lower bound on parts assumes).
        "objective_before_parts": _before_parts(problem),
        "valid": not violations, "violations": len(violations),
        "reason": str(violations[0]) if violations else "",
        "stats": _jsonable(sol.stats),
    }


def _before_parts(problem: Problem) -> list[str]:
    obj = problem.objective
    if not obj.lexicographic or "partitions" not in obj.order:
        return []
    return list(obj.order[:obj.order.index("partitions")])


def measure(fn: Callable[[], Solution], method: str) -> tuple[Solution, float, int | None]:
    """``(answer, seconds, peak bytes)``; the seconds always come from an untraced run.

    ``rss`` (default): the peak increase of the process's resident set size during the run,
    sampled every 5 ms with psutil, or, without psutil, the growth of the process's peak
    resident set size (``resource.getrusage``, standard library).  It sees native memory
    (CP-SAT's C++) and costs nothing, but it is coarse: a run that reuses memory the worker
    already holds (or, without psutil, stays below the worker's earlier peak) reads 0.
    ``tracemalloc``: after the timed run, the algorithm runs again under tracemalloc and the
    peak of Python allocations is reported: exact and repeatable, but it doubles the work, and
    native memory is not seen.  (Tracing the timed run itself would distort the seconds: 10x
    for the OpenVINO baseline, whose bitsets allocate on every operation.)
    ``none``: no measurement."""
    if method == "rss":
        sampler = _RssSampler() if rss_source() == "psutil" else _PeakRss()
        with sampler:
            t0 = time.perf_counter()
            sol = fn()
            seconds = time.perf_counter() - t0
        return sol, seconds, sampler.peak_increase
    if method not in ("tracemalloc", "none"):
        raise ValueError(f"memory method must be one of {', '.join(MEMORY_METHODS)}, "
                         f"not {method!r}")
    t0 = time.perf_counter()
    sol = fn()
    seconds = time.perf_counter() - t0
    if method == "none":
        return sol, seconds, None
    return sol, seconds, traced_peak(fn)


def traced_peak(fn: Callable[[], object]) -> int:
    """Peak bytes of Python allocations while ``fn`` runs (tracemalloc)."""
    was_tracing = tracemalloc.is_tracing()
    if was_tracing:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(peak, 0)


def rss_source() -> str | None:
    """How ``rss`` is measured here: ``"psutil"`` (sampled), ``"resource"`` (the standard
    library's peak resident set size, on Unix), or None (neither: use tracemalloc)."""
    import importlib.util
    if importlib.util.find_spec("psutil") is not None:
        return "psutil"
    try:
        import resource  # noqa: F401  (Unix only)
    except ImportError:
        return None
    return "resource"


class _PeakRss:
    """The growth of the process's peak resident set size (``getrusage``'s ``ru_maxrss``)
    across the run: no sampling thread, no dependency."""
    #: ru_maxrss is in KiB on Linux and the BSDs, in bytes on macOS.
    UNIT = 1 if sys.platform == "darwin" else 1024

    def __init__(self) -> None:
        self.base = self.peak = 0

    def _now(self) -> int:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * self.UNIT

    def __enter__(self):
        self.base = self.peak = self._now()
        return self

    def __exit__(self, *exc):
        self.peak = self._now()

    @property
    def peak_increase(self) -> int:
        return max(self.peak - self.base, 0)


class _RssSampler:
    def __init__(self, interval: float = 0.005):
        try:
            import psutil
        except ImportError:
            raise RuntimeError("--memory rss needs psutil: pip install 'hetero-solve[study]'") from None
        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.base = self.peak = 0

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self):
        self.base = self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def peak_increase(self) -> int:
        return max(self.peak - self.base, 0)


def _one_line(e: BaseException) -> str:
    return one_line(e, limit=300)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
