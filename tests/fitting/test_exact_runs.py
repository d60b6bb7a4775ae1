"""The runs' dynamic programme (fitting/cuts.py ``SlotRuns.cut``) against the plain one."""

from __future__ import annotations

import random

import pytest

from hetero_solve.fitting.cuts import SlotRuns


def plain_cut(sr: SlotRuns, lam: float, part_cost: float) -> list[tuple[int, int, int, int]]:
    """Every start relaxes every end it reaches, kept or dropped: O(m^2), the definition."""
    m = len(sr.nodes)
    INF = float("inf")
    best, back = [INF] * (m + 1), [(0, -1, 0)] * (m + 1)
    best[0] = 0.0
    for i in range(m):
        if best[i] == INF:
            continue
        base = best[i] + part_cost
        for j, used in sr.keep[i]:
            if base + lam * used < best[j]:
                best[j], back[j] = base + lam * used, (i, sr.d, used)
        for j in range(i + 1, sr.drop_end[i] + 1):
            if base + sr.pref[j] - sr.pref[i] < best[j]:
                best[j], back[j] = base + sr.pref[j] - sr.pref[i], (i, sr.drop_to[i], 0)
    if best[m] == INF:
        return []
    runs, j = [], m
    while j > 0:
        i, dev, used = back[j]
        runs.append((i, j, dev, used))
        j = i
    return runs[::-1]


def random_slot(rng: random.Random) -> SlotRuns:
    m = rng.randint(1, 14)
    sr = SlotRuns.__new__(SlotRuns)       # the fields cut() reads, drawn at random
    sr.nodes, sr.d = list(range(m)), 0
    sr.keep = [[(j, rng.randint(0, 6)) for j in sorted(rng.sample(range(i + 1, m + 1),
                                                                  rng.randint(0, m - i)))]
               for i in range(m)]
    sr.pref = [0]
    for _ in range(m):
        sr.pref.append(sr.pref[-1] + rng.randint(0, 1))
    sr.drop_to = [rng.choice([-1, 1, 1, 1]) for _ in range(m)]
    sr.drop_end = [i if sr.drop_to[i] < 0 else rng.randint(i, m) for i in range(m)]
    return sr


@pytest.mark.parametrize("seed", range(20))
def test_cut_equals_the_plain_dynamic_programme(seed):
    """Same runs, ties included (costs are exact binary fractions here)."""
    rng = random.Random(seed)
    for _ in range(100):
        sr = random_slot(rng)
        for lam, part_cost in ((0.0, 0.25), (0.5, 0.25), (2.0, 0.0), (0.125, 1.0)):
            assert sr.cut(lam, part_cost) == plain_cut(sr, lam, part_cost)
