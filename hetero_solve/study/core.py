"""Running a study: every algorithm on every (model, rules) pair, every answer validated.

Order of work: hash the inputs -> look up finished runs in ``DIR/runs/`` -> compile each pair
that still has runs to do (once, in this process) -> run the rest on the chosen executor,
saving each record as it arrives -> rebuild ``results.csv``, ``summary.md``, the plots and
``study.json`` from the saved runs.  Interrupting (Ctrl-C) keeps every finished run and still
writes the tables for them; the next start computes only what is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

from ..errors import HeteroSolveError
from ..problem import Objective, Problem
from ..rules.load import objective_from_text
from .algorithms import ALGORITHMS
from .executors import EXECUTORS, execute
from .runner import MEMORY_METHODS, Job, rss_source
from .store import RunStore, file_digest, read_csv, rules_digest, run_key, write_csv
from .summary import machine_info, render
from ..pipeline import prepare


class StudyError(HeteroSolveError):
    """A study cannot start: missing inputs, unknown algorithms, bad options."""


@dataclass
class StudyConfig:
    models: list[Path]
    rules: list[Path]
    out_dir: Path
    algorithms: list[str] = field(default_factory=lambda: list(ALGORITHMS))
    #: Per run of CP-SAT and SAT: wall-clock seconds (a promise; the answer may then depend on
    #: the load), or deterministic seconds of work with no clock (``work_limit``: the same
    #: answer anywhere).  Give one; neither: 10 s of wall clock.
    time_limit: float | None = 10.0
    work_limit: float | None = None
    jobs: int = 1
    dims: dict[str, int] = field(default_factory=dict)
    #: Whole input shapes (``--shape``), for the models that have those inputs.
    shapes: dict[str, list[int]] = field(default_factory=dict)
    executor: str = "local"
    scheduler: str | None = None
    seed: int = 0
    memory: str = "rss"
    note: str = ""
    command: str = ""
    plots: bool = True
    #: ``--objective`` as given (``latency``, ``fallback,latency``...): overrides every rule
    #: file's objective; ``None``: each rule file's own.
    objective: str | None = None
    # Extra algorithms by name (tests, experiments): run(problem, *, budget, seed).
    # They must be picklable to run in worker processes; with --jobs 1 anything works.
    custom: dict[str, Callable] = field(default_factory=dict)

    def public(self) -> dict:
        """The JSON-able settings (custom algorithms by name only: they may not copy)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "custom"}
        d["models"] = [str(m) for m in self.models]
        d["rules"] = [str(r) for r in self.rules]
        d["out_dir"] = str(self.out_dir)
        d["dims"] = dict(self.dims)
        d["shapes"] = {k: list(v) for k, v in self.shapes.items()}
        d["algorithms"] = list(self.algorithms)
        return d


@dataclass
class StudyResult:
    out_dir: Path
    records: list[dict]             # one per (model, rules, algorithm), in study order
    computed: int                   # runs executed by this call
    reused: int                     # runs found finished in DIR/runs
    files: list[Path]


def _plan(config: StudyConfig, algorithms: list[str], store: RunStore,
          model_digests: dict, rule_digests: dict
          ) -> tuple[list[tuple[Path, Path, str, str]], dict[str, dict]]:
    """Every run of the study, in order, with its key, and the records of those already
    finished (reused)."""
    plan: list[tuple[Path, Path, str, str]] = []
    finished: dict[str, dict] = {}
    for m, r in [(m, r) for m in config.models for r in config.rules]:
        for alg in algorithms:
            uses_limit = alg in config.custom or ALGORITHMS[alg].uses_limit
            key = run_key(model_digests[m], rule_digests[r], config.dims, alg,
                          config.time_limit if uses_limit else None,
                          config.seed if uses_limit else None, config.memory,
                          shapes=config.shapes, objective=config.objective,
                          work_limit=config.work_limit if uses_limit else None)
            plan.append((m, r, alg, key))
            record = store.load(key)
            if record is not None:
                finished[key] = record
    return plan, finished


def run_study(config: StudyConfig, *, progress: bool = True,
              verbose: bool = False) -> StudyResult:
    """Run (or resume) a study and write its outputs into ``config.out_dir``.  ``progress``:
    a live bar when stderr is a terminal; ``verbose``: a line per finished run instead."""
    algorithms = _check(config)
    plots = config.plots and importlib.util.find_spec("matplotlib") is not None
    if config.plots and not plots:     # said before the runs, not after an hour of them
        print("hetero-solve: matplotlib is not installed: this study writes tables only "
              "(pip install 'hetero-solve[study]' for plots, or --no-plots to silence this)",
              file=sys.stderr, flush=True)
    out = Path(config.out_dir)
    store = RunStore(out)
    model_digests = {m: file_digest(m) for m in config.models}
    rule_digests = {r: rules_digest(r) for r in config.rules}
    plan, finished = _plan(config, algorithms, store, model_digests, rule_digests)
    reused = len(finished)
    todo = [p for p in plan if p[3] not in finished]

    bar = _Progress(enabled=progress, total=len(plan), done=reused, verbose=verbose)
    computed = 0
    try:
        with bar:
            jobs: list[Job] = []
            meta: dict[str, dict] = {}
            by_pair: dict[tuple[Path, Path], list[tuple[str, str]]] = {}
            for m, r, alg, key in todo:
                by_pair.setdefault((m, r), []).append((alg, key))
            for i, ((m, r), runs) in enumerate(by_pair.items()):
                bar.status(f"compiling {m.name} × {r.name} ({i + 1}/{len(by_pair)})")
                base = {"model": str(m), "rules": str(r), "model_digest": model_digests[m],
                        "rules_digest": rule_digests[r], "dims": dict(config.dims)}
                try:
                    problem = compile_pair(m, r, config.dims, config.shapes,
                                           objective=_objective(config.objective))
                except Exception as e:  # noqa: BLE001 - recorded for every run of the pair
                    reason = f"compile: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
                    for alg, key in runs:
                        record = {**base, "key": key, "algorithm": alg, "status": "failed",
                                  "reason": reason}
                        store.save(record)
                        finished[key] = record
                        computed += 1
                        bar.advance()
                    continue
                base.update(nodes=problem.n, edges=sum(len(s) for s in problem.succ),
                            missing_dims="; ".join(m.text() for m in problem.info.missing_dims))
                for alg, key in runs:
                    uses_limit = alg in config.custom or ALGORITHMS[alg].uses_limit
                    meta[key] = {**base, "time_limit": config.time_limit if uses_limit else None,
                                 "work_limit": config.work_limit if uses_limit else None,
                                 "seed": config.seed if uses_limit else None}
                    jobs.append(Job(key, problem, alg, config.custom.get(alg), config.time_limit,
                                    config.work_limit, config.seed, config.memory))
            bar.status(f"{len(jobs)} run(s) to do, {reused} reused")
            for record in execute(jobs, executor=config.executor, jobs_n=config.jobs,
                                  scheduler=config.scheduler,
                                  on_start=lambda where: bar.status(f"running {where}")):
                record = {**meta[record["key"]], **record, "finished": time.time()}
                store.save(record)
                finished[record["key"]] = record
                computed += 1
                bar.advance(f"{record['algorithm']} on {Path(record['model']).name} × "
                            f"{Path(record['rules']).name}: {_outcome(record)}")
    finally:
        # Also after Ctrl-C: the tables show every run finished so far.
        records = _records(plan, finished)
        files = write_outputs(out, records, algorithms, config, plots=plots)
    return StudyResult(out, records, computed, reused, files)


def _objective(text: str | None) -> Objective | None:
    """``--objective`` as the command line reads it (:func:`_check` refused a bad one)."""
    return None if text is None else objective_from_text(text)


def compile_pair(model: Path, rules: Path, dims: dict[str, int],
                 shapes: dict[str, list[int]] | None = None,
                 objective: Objective | None = None) -> Problem:
    """The compiled problem every algorithm of the study reads for this pair (``shapes``:
    whole input shapes, applied to the inputs this model has; ``objective``: overrides the
    rule file's), with
    ``info.missing_dims`` as ``solve`` finds them (a static-shape device refusing nodes
    only because input dims have no value)."""
    if shapes:
        import onnx
        names = {x.name for x in onnx.load(str(model), load_external_data=False).graph.input}
        shapes = {k: v for k, v in shapes.items() if k in names}
    return prepare(model, rules, dims=dims, shapes=shapes or None, objective=objective).problem


def write_outputs(out: Path, records: list[dict], algorithms: list[str],
                  config: StudyConfig, plots: bool = True) -> list[Path]:
    """``results.csv``, ``summary.md``, the plots and ``study.json`` from the records."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "results.csv", out / "summary.md", out / "study.json"]
    write_csv(files[0], records)
    public = config.public()
    machine = machine_info()
    files[1].write_text(render(records, algorithms, config=public, machine=machine))
    files[2].write_text(json.dumps({"config": public, "machine": machine,
                                    "runs": len(records)}, indent=1))
    if records and config.plots and plots:
        try:
            from .plots import plot_all
            files += plot_all(records, algorithms, out)
        except RuntimeError as e:     # matplotlib missing: tables still count
            print(f"hetero-solve: warning: {e}", file=sys.stderr)
    return files


def load_results(out_dir: str | os.PathLike) -> list[dict]:
    """``results.csv`` of a finished study."""
    return read_csv(Path(out_dir) / "results.csv")


def _check(config: StudyConfig) -> list[str]:
    if not config.models:
        raise StudyError("no model given (MODELS... are ONNX files or folders of them)")
    if not config.rules:
        raise StudyError("no rule file given (--rules RULES.yaml, or .yaml files among the inputs)")
    for path in [*config.models, *config.rules]:
        if not Path(path).is_file():
            raise StudyError(f"{path}: no such file")
    algorithms: list[str] = []
    for name in config.algorithms:
        if name == "all":
            algorithms += [a for a in ALGORITHMS if a not in algorithms]
        elif name in config.custom or name in ALGORITHMS:
            if name not in algorithms:
                algorithms.append(name)
        else:
            raise StudyError(f"--algorithms: unknown algorithm {name!r}; known: "
                             f"{', '.join(ALGORITHMS)} (or all)")
    if not algorithms:
        raise StudyError("--algorithms: none given")
    if config.executor not in EXECUTORS:
        raise StudyError(f"--executor {config.executor!r}: expected one of {', '.join(EXECUTORS)}")
    if config.memory not in MEMORY_METHODS:
        raise StudyError(f"--memory {config.memory!r}: expected one of {', '.join(MEMORY_METHODS)}")
    if config.memory == "rss" and rss_source() is None:
        # Checked here: a missing package must not be recorded as every run failing.
        raise StudyError("--memory rss needs psutil on this system: pip install "
                         "'hetero-solve[study]' (or --memory tracemalloc / none)")
    if config.jobs < 1:
        raise StudyError(f"--jobs {config.jobs}: must be at least 1")
    if config.objective is not None:
        try:
            objective_from_text(config.objective)
        except ValueError as e:
            raise StudyError(f"--objective {config.objective!r}: {e}") from None
    if config.scheduler and config.executor != "dask":
        raise StudyError("--scheduler needs --executor dask")
    if config.time_limit is not None and config.work_limit is not None:
        raise StudyError("--time-limit and --work-limit: give one, not both")
    if config.time_limit is None and config.work_limit is None:
        config.time_limit = 10.0
    for name, value in (("--time-limit", config.time_limit), ("--work-limit", config.work_limit)):
        if value is not None and not value >= 0:
            raise StudyError(f"{name} must not be negative")
    return algorithms


def _records(plan, finished: dict[str, dict]) -> list[dict]:
    """Records in study order, labelled with this study's paths (a renamed file keeps its
    runs; the current name is shown)."""
    out = []
    for m, r, alg, key in plan:
        rec = finished.get(key)
        if rec is not None:
            out.append({**rec, "model": str(m), "rules": str(r), "algorithm": alg})
    return out


def _outcome(r: dict) -> str:
    if r.get("status") in ("optimal", "feasible"):
        n = r.get("parts")
        return f"{n} part{'' if n == 1 else 's'}" + ("" if r.get("valid") else " (invalid)")
    return r.get("status", "?")


class _Progress:
    """Progress on stderr: a rich bar on a terminal (erased at the end, so an error line is the
    last word); elsewhere nothing, unless ``verbose``: one line per finished run (so the log of
    a long study shows where the time went); nothing when disabled."""

    def __init__(self, enabled: bool, total: int, done: int, verbose: bool = False):
        self.enabled = enabled
        self.verbose = verbose
        self.total = total
        self.done = done
        self._progress = None
        self._lines = False

    def __enter__(self):
        if not self.enabled:
            return self
        from rich.console import Console
        console = Console(stderr=True)
        if self.verbose or not console.is_terminal:
            if not self.verbose:
                self.enabled = False
                return self
            self._lines = True
            self._start = time.perf_counter()
            self._say(f"{self.total} run(s), {self.done} already done")
            return self
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        self._progress = Progress(TextColumn("study"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TimeRemainingColumn(),
                                  TextColumn("{task.description}"), console=console,
                                  transient=True)
        self._progress.__enter__()
        self._task = self._progress.add_task("", total=self.total, completed=self.done)
        return self

    def _say(self, text: str) -> None:
        print(f"hetero-solve study [{time.perf_counter() - self._start:7.1f}s] "
              f"[{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def status(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)
        elif self._lines:
            self._say(text)

    def advance(self, text: str = "") -> None:
        self.done += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=text)
        elif self._lines:
            self._say(text)

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False
