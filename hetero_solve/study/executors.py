"""Where runs execute: in this process (``--jobs 1``), in local worker processes
(``concurrent.futures``), or on a Dask cluster (``--executor dask``, an optional extra).

Each executor takes :class:`~hetero_solve.study.runner.Job` objects and yields their records
as they finish, in any order.  Results travel back to this process, which alone writes files,
so a remote Dask cluster needs no shared file system (only ``hetero-solve`` installed on its
workers).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from ..errors import HeteroSolveError
from .runner import Job, run_job

EXECUTORS = ("local", "dask")


class ExecutorError(HeteroSolveError):
    """The executor cannot start (missing extra, unreachable scheduler)."""


def execute(jobs: list[Job], *, executor: str = "local", jobs_n: int = 1,
            scheduler: str | None = None, on_start=None) -> Iterator[dict]:
    """Yield one record per job as each finishes.  ``on_start(description)`` is told where
    the runs go (for the progress line)."""
    if not jobs:
        return iter(())
    if executor == "local":
        if jobs_n <= 1:
            return _inline(jobs, on_start)
        return _processes(jobs, jobs_n, on_start)
    if executor == "dask":
        return _dask(jobs, jobs_n, scheduler, on_start)
    raise ExecutorError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")


def _inline(jobs: list[Job], on_start) -> Iterator[dict]:
    if on_start:
        on_start("in this process")
    for job in jobs:
        yield run_job(job)


def _processes(jobs: list[Job], n: int, on_start) -> Iterator[dict]:
    # spawn, not fork: the parent holds threads (the progress bar), and a forked child of a
    # threaded parent can deadlock.  Workers import hetero_solve once each.  (Imported here:
    # every command's start-up would pay for them.)
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
    completed = False
    try:
        if on_start:
            on_start(f"on {n} local processes")
        pending = {pool.submit(run_job, job) for job in jobs}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
        completed = True
    finally:
        if completed:
            pool.shutdown(wait=True)
        else:
            # Interrupted (Ctrl-C, or the caller stopped reading): the runs in flight are lost
            # anyway, so stop our own workers now.  Waiting would let them finish the runs
            # already queued to them, which can take minutes.
            workers = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in workers:
                if proc.is_alive():
                    proc.terminate()


def _dask(jobs: list[Job], n: int, scheduler: str | None, on_start) -> Iterator[dict]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ExecutorError("--executor dask needs dask.distributed: "
                            "pip install 'hetero-solve[dask]'") from None
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as e:
                raise ExecutorError(f"--scheduler {scheduler}: cannot connect ({e})") from None
            where = f"on the Dask scheduler {scheduler}"
        else:
            # A local cluster of single-threaded worker processes: the algorithms are pure
            # Python and would fight over the GIL in threads.
            cluster = LocalCluster(n_workers=max(n, 1), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
            where = f"on a local Dask cluster, {max(n, 1)} worker(s)"
        if on_start:
            on_start(where)
        with client:
            # Each problem is shipped once and shared by its runs.
            shared: dict[int, object] = {}
            futures = []
            for job in jobs:
                pid = id(job.problem)
                if pid not in shared:
                    shared[pid] = client.scatter(job.problem, hash=False)   # no tokenizing
                light = dataclasses.replace(job, problem=None)     # the problem goes separately
                futures.append(client.submit(_run_with_problem, light, shared[pid], pure=False))
            try:
                for fut in as_completed(futures):
                    yield fut.result()
            finally:
                for fut in futures:
                    if not fut.done():
                        fut.cancel()
    finally:
        if cluster is not None:
            cluster.close()


def _run_with_problem(job: Job, problem) -> dict:
    job.problem = problem
    return run_job(job)
