"""Measure before answering (``solve --measure``; docs/costs.md, "Measured before answering").

A latency answer is predicted from a profile; what holds is what runs.  :func:`measure_answer`
runs the answer and each whole-model single-device answer this machine can run, each loaded
once into :class:`~hetero_solve.run.session.Session` with the execution settings of the
profile, in paired, interleaved rounds (:func:`.rounds.paired_rounds`: in each round every
answer in turn, the order rotating, warmed by untimed runs and then ``burst`` timed runs whose
median is the round's figure), and :func:`keep_measured` keeps a split only when it was faster
than the single device measured fastest *in the same rounds* by more than their noise:

- per round, the ratio split / the single device with the lowest median over the rounds; over
  the rounds its median ``r`` and its middle half ``[q1, q3]``; the noise is half the middle
  half, ``(q3 - q1) / 2``;
- the split is kept when ``r + noise < 1``; else the answer becomes the single device measured
  fastest (its median over the rounds), and ``partition.json`` says why.

The measuring is bounded: it spends from the call's one :class:`~hetero_solve.budget.Budget`
(wall seconds charged at ``WORK_PER_SECOND``, and never past its deadline), stops after
``rounds`` rounds or when the budget ends, and decides nothing on fewer than ``MIN_ROUNDS``
rounds (the predicted answer is kept and the record says so).  Devices this machine cannot run
are named in one line (``not_measured``); what can be measured is.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..budget import WORK_PER_SECOND, Budget
from ..export.writer import write_result
from ..pipeline import replace_answer
from ..result import Result
from ..run.backend import RunOptions
from ..run.session import Session
from .measure import ProfileRunError, model_feeds, plan
from .rounds import paired_rounds, quartiles

#: Rounds measured at most, and the fewest a decision is made on.
ROUNDS = 20
MIN_ROUNDS = 3
#: Timed runs of one answer in a round (their median is its figure).
BURST = 3
#: The share of the call's budget the solve leaves for measuring (``solve --measure``).
MEASURE_SHARE = 0.2


@dataclasses.dataclass
class Measurement:
    """What :func:`measure_answer` found: per answer (``answer``, ``<DEVICE> alone``) its
    figure in each round (seconds), and why something was not measured."""

    figures: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    singles: dict[str, int] = dataclasses.field(default_factory=dict)   # label -> device
    rounds: int = 0
    burst: int = BURST
    seconds: float = 0.0
    not_measured: str = ""
    execution: dict | None = None

    def summary(self, label: str) -> dict:
        q1, med, q3 = quartiles(self.figures[label])
        return {"median": med, "middle_half": [q1, q3]}


def runs_here(result: Result) -> tuple[list[str], dict[str, str]]:
    """The rule-file devices this machine runs (by their ``runtime:``), and why each other
    one does not."""
    p = plan(result.rules.devices)
    return [t.device for t in p.targets], dict(p.skipped)


def measure_answer(result: Result, budget: Budget | None = None, *, rounds: int = ROUNDS,
                   burst: int = BURST, seed: int = 0,
                   feeds: Mapping[str, Any] | None = None) -> Measurement:
    """Run ``result``'s answer and each single-device answer this machine can run in paired,
    interleaved rounds (module doc), within ``budget`` (default: at most 10 wall seconds)."""
    budget = budget or Budget.of(time_limit=10.0)
    start = time.perf_counter()
    out = Measurement(burst=burst, execution=result.problem.info.execution)
    here, skipped = runs_here(result)
    p, sol = result.problem, result.solution
    used = {p.devices[d].name for d in sol.part_device}
    whole = {d for d in range(len(p.devices)) if _single(result, d) is not None}
    absent = [p.devices[d].name for d in sorted(whole) if p.devices[d].name not in here]
    lacking = "; ".join(f"{name}: {skipped.get(name, 'not run here')}"
                        for name in sorted(used - set(here)) + [
                            n for n in absent if n not in used])
    out.not_measured = lacking
    if used - set(here):
        out.not_measured = f"{lacking} (the answer runs on it: nothing measured)"
        return out
    alone = {f"{p.devices[d].name} alone": d for d in sorted(whole)
             if p.devices[d].name in here}
    if not alone:
        out.not_measured = "; ".join(x for x in (lacking, "no single device that runs here "
                                                 "can run the whole model") if x)
        return out
    if sol.num_parts == 1 and len(alone) == 1 and \
            next(iter(alone.values())) == sol.part_device[0]:
        out.not_measured = "; ".join(x for x in (lacking, "the answer is the only "
                                                 "single-device answer here: nothing to "
                                                 "compare") if x)
        return out
    options = RunOptions.of_execution(out.execution)
    try:
        given = dict(feeds) if feeds is not None else model_feeds(result.model_graph, seed)
    except ProfileRunError as e:
        out.not_measured = str(e)
        return out
    allowance = min(budget.wall_left(), budget.left() / WORK_PER_SECOND)
    with tempfile.TemporaryDirectory(prefix="hetero-solve-measure-") as tmp, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sessions = {"answer": _session(result, Path(tmp) / "answer", options)}
        for label, d in alone.items():
            sessions[label] = _session(_single(result, d), Path(tmp) / f"single{d}", options)
        inputs = {x: given[x] for x in result.model_graph.graph_inputs if x in given}
        last = [time.perf_counter()]

        def stop() -> bool:       # would one more round, as long as the last, overrun?
            now = time.perf_counter()
            spent, took = now - start, now - last[0]
            last[0] = now
            return spent + took > allowance

        measured = paired_rounds({label: (s, inputs) for label, s in sessions.items()},
                                 rounds, burst, stop=stop)
        out.figures = measured.figures
        out.singles = dict(alone)
        out.rounds = measured.rounds
    out.seconds = time.perf_counter() - start
    budget.charge(min(out.seconds * WORK_PER_SECOND, budget.left()))
    return out


def _single(result: Result, d: int):
    """The whole model on device ``d`` as an answer (``Result``), or ``None`` when it cannot
    take it."""
    from ..algorithms.single import single_device
    sol = single_device(result.problem, d)
    return None if sol is None else replace_answer(result, sol)


def _session(result: Result, folder: Path, options: RunOptions) -> Session:
    out = write_result(result, folder, annotated=False, dots=False)
    return Session(out, options=options)


def keep_measured(result: Result, m: Measurement) -> Result:
    """``result`` with its measurement recorded (``Result.measured``, ``partition.json``'s
    ``measured``), and its answer replaced by the single device measured fastest when the
    split was not faster than it by more than the noise (module doc)."""
    record: dict[str, Any] = {"rounds": m.rounds, "burst": m.burst,
                              "seconds": round(m.seconds, 3)}
    if m.execution:
        record["execution"] = dict(m.execution)
    if m.not_measured:
        record["not_measured"] = m.not_measured
    if m.rounds < MIN_ROUNDS or not m.figures:
        if not m.not_measured:
            record["not_measured"] = (f"{m.rounds} round(s) in {m.seconds:.2f} s, fewer than "
                                      f"the {MIN_ROUNDS} a decision needs (the budget ended)")
        record["kept"] = "answer"
        record["why"] = "not measured: the predicted answer is kept"
        return dataclasses.replace(result, measured=record)
    record["latency"] = {label: m.summary(label) for label in m.figures}
    best_label = min(m.singles, key=lambda label: m.summary(label)["median"])
    # paired with the single device measured fastest, round by round (not with the faster
    # of the singles in each round: that minimum of noisy figures is biased low, and the
    # same answer as the fastest single device would measure slower than itself)
    per_round = [a / s for a, s in zip(m.figures["answer"], m.figures[best_label])]
    q1, r, q3 = quartiles(per_round)
    noise = (q3 - q1) / 2
    record["answer_vs_fastest_single"] = {"median": r, "middle_half": [q1, q3],
                                          "noise": noise}
    d = m.singles[best_label]
    same = result.solution.num_parts == 1 and result.solution.part_device[0] == d
    if same or r + noise < 1.0:
        record["kept"] = "answer"
        record["why"] = ("the answer is the single device measured fastest" if same else
                         f"measured {1 - r:.1%} faster than {best_label}, more than the "
                         f"noise ({noise:.1%})")
        return dataclasses.replace(result, measured=record)
    record["kept"] = best_label
    record["why"] = (f"the answer measured {r:.3f}x {best_label} (noise {noise:.1%}): not "
                     f"faster by more than the noise, so the whole model runs on "
                     f"{best_label.removesuffix(' alone')}")
    single = _single(result, d)
    # what was proven is of the predicted costs, and the measurement overruled them
    stats = {**result.solution.stats, "proven": [], "measured_instead": "latency"}
    sol = dataclasses.replace(single.solution, lower_bound=result.solution.lower_bound,
                              stats=stats, status="feasible")
    replaced = replace_answer(result, sol)
    return dataclasses.replace(replaced, measured=record,
                               warnings=[*result.warnings, f"measured: {record['why']}"])


__all__ = ["Measurement", "measure_answer", "keep_measured", "runs_here", "MEASURE_SHARE"]
