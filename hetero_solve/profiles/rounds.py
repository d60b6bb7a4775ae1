"""Paired, interleaved rounds: the one way latencies are measured here (``profile``'s
whole-model times, ``solve --measure``, ``benchmarks/bench_two_runtimes.py``).

In each round every session runs in turn, the order rotating.  A session's turn is:

1. one untimed run right after the previous turn: its time, less the turn's figure, is what
   running *after another device* costs it (:attr:`Rounds.switched`, kept only when the
   previous turn was another device's): caches and thread pools the other runtime took;
2. more untimed runs until :data:`WARM_SECONDS` have passed (at least one): what the
   previous turn left behind (OpenVINO's or onnxruntime's threads still waking, caches)
   must not land on the timed runs, or the order of the turns decides the figures (an
   onnxruntime answer that always followed an OpenVINO one measured 1.07x the same answer
   following an onnxruntime one);
3. ``burst`` timed runs; their median is the round's figure.

A figure is then the latency of a session run over and over, as a user runs an answer; what
one part pays after a part on another runtime is :attr:`Rounds.switched`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: Untimed runs last at least this long in each turn (and at most :data:`WARM_RUNS` runs).
WARM_SECONDS = 2e-3
WARM_RUNS = 50


@dataclass
class Rounds:
    """Per label: the figure of each round (seconds), and what the first run after another
    device's turn took more than the round's figure (seconds, one per such turn)."""

    figures: dict[str, list[float]] = field(default_factory=dict)
    switched: dict[str, list[float]] = field(default_factory=dict)
    rounds: int = 0

    def switch_cost(self, label: str) -> float:
        """The median of :attr:`switched` for ``label`` (0 when never measured or negative)."""
        values = self.switched.get(label) or []
        return max(statistics.median(values), 0.0) if values else 0.0


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile (inclusive method)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def paired_rounds(sessions: Mapping[str, tuple[Any, Mapping[str, Any]]], rounds: int,
                  burst: int = 3, *, device: Mapping[str, str] | None = None,
                  warmup: int = 2, stop: Callable[[], bool] = lambda: False,
                  tick: Callable[[str], None] = lambda label: None,
                  min_seconds: float = 0.0, max_rounds: int = 0) -> Rounds:
    """Run each ``(session, feeds)`` of ``sessions`` (label -> pair) in ``rounds`` paired
    rounds (module doc), after ``warmup`` untimed runs of each; with ``min_seconds``, more
    rounds until the rounds have lasted that long (at most ``max_rounds``): a disturbance of
    the machine a second long must not be half the rounds.  ``device[label]`` says which
    device a label runs on (default: the label itself): a turn after a turn of the same device
    is no switch.  ``stop()`` is asked after each round (a budget); ``tick(label)`` is called
    after each turn and warm-up."""
    labels = list(sessions)
    device = dict(device or {})
    out = Rounds(figures={label: [] for label in labels},
                 switched={label: [] for label in labels})
    for label in labels:
        session, feeds = sessions[label]
        for _ in range(warmup):
            session.run(None, feeds)
        tick(label)
    previous = None
    began = time.perf_counter()
    k = 0
    while k < rounds or (k < max_rounds and time.perf_counter() - began < min_seconds):
        for label in labels[k % len(labels):] + labels[:k % len(labels)]:
            session, feeds = sessions[label]
            start = time.perf_counter()
            session.run(None, feeds)
            first = time.perf_counter() - start
            warm = 1
            while warm < WARM_RUNS and (warm < 2 or
                                        time.perf_counter() - start < WARM_SECONDS):
                session.run(None, feeds)
                warm += 1
            times = []
            for _ in range(burst):
                t0 = time.perf_counter()
                session.run(None, feeds)
                times.append(time.perf_counter() - t0)
            figure = statistics.median(times)
            out.figures[label].append(figure)
            if previous is not None and device.get(previous, previous) != \
                    device.get(label, label):
                out.switched[label].append(first - figure)
            previous = label
            tick(label)
        out.rounds += 1
        k += 1
        if stop():
            break
    return out


__all__ = ["Rounds", "paired_rounds", "quartiles", "WARM_SECONDS"]
