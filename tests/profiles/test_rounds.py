"""Paired rounds (``profiles.rounds``): what the previous turn leaves behind lands on the
untimed runs, not on the figures, and is measured as the switch cost."""

from __future__ import annotations

import pytest

from hetero_solve.profiles import rounds as R


class Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class Fake:
    """A session of ``base`` seconds per run on ``device``; right after a run on another
    device its first run takes ``penalty`` more and its second half of that (a pool waking)."""

    last_device = None

    def __init__(self, clock, device, base, penalty):
        self.clock, self.device, self.base, self.penalty = clock, device, base, penalty
        self.since_switch = 99

    def run(self, _names, _feeds):
        if Fake.last_device is not None and Fake.last_device != self.device:
            self.since_switch = 0
        extra = self.penalty if self.since_switch == 0 else \
            self.penalty / 2 if self.since_switch == 1 else 0.0
        self.since_switch += 1
        Fake.last_device = self.device
        self.clock.now += self.base + extra


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(R.time, "perf_counter", c.perf_counter)
    Fake.last_device = None
    return c


def test_figures_are_warm_and_the_switch_is_measured(clock):
    a = Fake(clock, "X", 1e-3, 4e-4)
    b = Fake(clock, "Y", 2e-4, 1e-4)
    c = Fake(clock, "X", 5e-4, 4e-4)
    out = R.paired_rounds({"a": (a, {}), "b": (b, {}), "c": (c, {})}, 9, 3,
                          device={"a": "X", "b": "Y", "c": "X"})
    assert out.rounds == 9
    # the penalty and its carry-over fall on the untimed runs: each figure is the base time
    assert out.figures["a"] == [pytest.approx(1e-3)] * 9
    assert out.figures["b"] == [pytest.approx(2e-4)] * 9
    assert out.figures["c"] == [pytest.approx(5e-4)] * 9
    # what the first run after another device's turn took more; a turn after one of the same
    # device (a after c, c after a) is not a switch
    assert out.switch_cost("a") == pytest.approx(4e-4)
    assert out.switch_cost("b") == pytest.approx(1e-4)
    assert all(x == pytest.approx(4e-4) for x in out.switched["c"])
    assert 0 < len(out.switched["a"]) < 9 and len(out.switched["b"]) == 9


def test_a_budget_stops_after_the_round(clock):
    a = Fake(clock, "X", 1e-3, 0.0)
    asked = []
    out = R.paired_rounds({"a": (a, {})}, 20, 3, stop=lambda: asked.append(1) or
                          len(asked) >= 2)
    assert out.rounds == 2 and len(out.figures["a"]) == 2 and out.switch_cost("a") == 0.0


def test_rounds_go_on_until_they_have_lasted(clock):
    a = Fake(clock, "X", 1e-3, 0.0)
    # each round: 2 untimed runs (2 ms) and 3 timed: 5 ms; 0.1 s needs 20 rounds
    out = R.paired_rounds({"a": (a, {})}, 3, 3, min_seconds=0.1, max_rounds=50)
    assert out.rounds == 20
    out = R.paired_rounds({"a": (a, {})}, 3, 3, min_seconds=0.1, max_rounds=8)
    assert out.rounds == 8
    assert R.paired_rounds({"a": (a, {})}, 3, 3).rounds == 3
