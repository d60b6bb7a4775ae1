"""Test tiers: a plain ``pytest`` is the fast floor, ``pytest --full`` is everything.

Markers (``pytest --markers`` lists them):

- ``child``: starts a child process (the command line forked by :mod:`isolated`, or any
  ``subprocess``).  Found, not declared: every ``--full`` run records which tests started one.
- ``slow``: took at least :data:`SLOW_SECONDS` in the last ``--full`` run.
- ``corpus``: reads the real exports in ``corpus/`` (declared by the test module).
- ``runtime``: needs an optional runtime (OpenVINO) to say anything (declared).
- ``load``: asserts on wall-clock behaviour, so it is sensitive to the machine's load
  (declared); the full run puts these last, after every other test, alone.

The fast tier deselects ``slow``, ``child``, ``corpus`` and ``load`` tests and samples the integer
seed sweeps (tests parametrized over ``seed``) one in :data:`SEED_STRIDE`.  ``--full`` runs all;
a whole-suite ``--full`` run (no paths, ``-k`` or ``-m``) rewrites :data:`DURATIONS`
(``tests/durations.json``, committed) with what it measured, so the markers follow the suite as
it changes.  Select by hand as usual: ``pytest -m corpus``,
``pytest --full -m "not child"``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
SLOW_SECONDS = 1.0
SEED_STRIDE = 5
FAST_EXCLUDES = ("slow", "child", "corpus", "load")

MARKERS = {
    "child": "starts a child process (found by the last --full run; tests/durations.json)",
    "slow": f"took >= {SLOW_SECONDS:g} s in the last --full run (tests/durations.json)",
    "corpus": "reads the real exports in corpus/",
    "runtime": "needs an optional runtime (OpenVINO)",
    "load": "asserts on wall-clock behaviour: sensitive to load; the full run puts it last",
}

_child_started = False


def note_child() -> None:
    """Record that the running test started a child process (called where tests fork)."""
    global _child_started
    _child_started = True


def _wrap_popen() -> None:
    original = subprocess.Popen.__init__
    if getattr(original, "_tiers", False):
        return

    def init(self, *args, **kwargs):
        note_child()
        original(self, *args, **kwargs)

    init._tiers = True
    subprocess.Popen.__init__ = init


def addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="every test and every seed (the fast tier is the default); "
                          "rewrites tests/durations.json")


def configure(config: pytest.Config, durations: Path = DURATIONS) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config._tiers = _Tiers(config, durations)
    config.pluginmanager.register(config._tiers, "hetero-solve-tiers")
    _wrap_popen()


def _load_record(path: Path) -> dict[str, dict]:
    try:
        return json.loads(path.read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return {}


class _Tiers:
    def __init__(self, config: pytest.Config, durations: Path) -> None:
        self.full = config.getoption("--full")
        self.path = durations
        self.record = _load_record(durations)
        self.measured: dict[str, dict] = {}
        self.collected: set[str] = set()
        self.whole_suite = False
        self.deselected = 0

    # -- collection: markers from the record, the fast selection, load last -------------------

    @pytest.hookimpl(tryfirst=True)   # before ``-m`` selects: it sees these markers
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            seen = self.record.get(item.nodeid)
            if seen is None:
                continue
            if seen.get("s", 0.0) >= SLOW_SECONDS:
                item.add_marker("slow")
            if seen.get("child"):
                item.add_marker("child")
        self.collected = {item.nodeid for item in items}
        # The record may forget tests only when this run collected the whole suite.
        testpaths = [Path(str(config.rootpath), t).resolve() for t in config.getini("testpaths")]
        self.whole_suite = not config.args or all(Path(a).resolve() in testpaths
                                                  for a in config.args)
        if not self.full:
            # A ``-m`` expression or a test named by id is the user's own selection: only the
            # seed sweeps are still thinned.
            excludes = () if config.getoption("markexpr") or any("::" in a for a in config.args) \
                else FAST_EXCLUDES
            keep, drop = [], []
            for item in items:
                if any(item.get_closest_marker(m) for m in excludes) or _thinned(item):
                    drop.append(item)
                else:
                    keep.append(item)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep
                self.deselected = len(drop)
        # Load-sensitive tests last, so nothing of this run competes with them.
        items.sort(key=lambda item: item.get_closest_marker("load") is not None)

    # -- the record: what a --full run measured ------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        global _child_started
        _child_started = False
        start = time.perf_counter()
        yield
        if self.full:
            self.measured[item.nodeid] = {"s": round(time.perf_counter() - start, 3),
                                          **({"child": True} if _child_started else {})}

    def pytest_sessionfinish(self, session, exitstatus):
        # Only a whole --full run rewrites the record: a room run with --full (or -k, -m) while
        # working on a branch would otherwise leave an unrelated diff in every commit.
        config = session.config
        if not self.full or not self.measured or os.environ.get("HS_KEEP_DURATIONS") \
                or not self.whole_suite or config.getoption("keyword") \
                or config.getoption("markexpr"):
            return
        record = {k: v for k, v in self.record.items() if k in self.collected}
        record.update(self.measured)
        lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(record.items())]
        text = ('{"about": "per-test seconds and child processes of the last `pytest --full` '
                '(tests/support/tiers.py reads it)",\n'
                f'"total_seconds": {sum(v["s"] for v in record.values()):.1f},\n'
                '"tests": {\n' + ",\n".join(lines) + "\n}}\n")
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.path)

    def pytest_terminal_summary(self, terminalreporter):
        if self.deselected:
            terminalreporter.write_line(
                f"fast tier: {self.deselected} slow, child-process, corpus, load-sensitive or "
                f"thinned seed tests not run (pytest --full runs every test)")


def _thinned(item: pytest.Item) -> bool:
    """A seed sweep's member the fast tier skips: ``seed`` not a multiple of the stride."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    seed = callspec.params.get("seed")
    return isinstance(seed, int) and not isinstance(seed, bool) and seed % SEED_STRIDE != 0
