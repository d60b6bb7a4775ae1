"""The test tiers (tests/support/tiers.py): the fast tier leaves out what the record calls slow
or child-process and what modules declare corpus or load, samples seed sweeps one in five, and
``--full`` runs everything, load-sensitive tests last, and rewrites the record."""

from __future__ import annotations

import json
import textwrap

pytest_plugins = ["pytester"]

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from support import tiers

def pytest_addoption(parser):
    tiers.addoption(parser)

def pytest_configure(config):
    tiers.configure(config, durations=Path(__file__).parent / "durations.json")
"""

TESTS = """
import subprocess, sys
import pytest

@pytest.mark.parametrize("seed", range(10))
def test_sweep(seed):
    pass

def test_heavy():
    pass

def test_spawns():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.load
def test_clock():
    pass

@pytest.mark.corpus
def test_real():
    pass

def test_plain():
    pass
"""


def _project(pytester):
    from conftest import ROOT
    pytester.makeconftest(CONFTEST.format(tests=str(ROOT / "tests")))
    pytester.makepyfile(test_a=textwrap.dedent(TESTS))
    pytester.makeini("[pytest]\ntestpaths = .\n")


def _ran(reprec) -> list[str]:
    """The tests a run called, in order."""
    return [r.nodeid.split("::")[1] for r in reprec.getreports("pytest_runtest_logreport")
            if r.when == "call"]


def test_full_runs_everything_load_last_and_records_what_it_measured(pytester):
    _project(pytester)
    result = pytester.inline_run("--full")
    ran = _ran(result)
    assert len(ran) == 15 and ran[-1] == "test_clock"
    record = json.loads((pytester.path / "durations.json").read_text())["tests"]
    assert set(record) == {f"test_a.py::{t}" for t in ran}
    assert record["test_a.py::test_spawns"].get("child") is True
    assert "child" not in record["test_a.py::test_plain"]


def test_the_fast_tier_leaves_out_slow_child_corpus_load_and_four_seeds_in_five(pytester):
    _project(pytester)
    pytester.inline_run("--full")
    path = pytester.path / "durations.json"
    data = json.loads(path.read_text())
    data["tests"]["test_a.py::test_heavy"]["s"] = 3.0          # slow in "the last full run"
    path.write_text(json.dumps(data))
    result = pytester.inline_run()
    ran = _ran(result)
    assert sorted(ran) == ["test_plain", "test_sweep[0]", "test_sweep[5]"]
    assert json.loads(path.read_text()) == data                # only --full rewrites it


def test_a_marker_expression_is_the_users_own_selection(pytester):
    _project(pytester)
    pytester.inline_run("--full")
    result = pytester.inline_run("-m", "corpus or load or child")
    ran = _ran(result)
    assert sorted(ran) == ["test_clock", "test_real", "test_spawns"]


def test_a_partial_full_run_leaves_the_record_alone(pytester):
    _project(pytester)
    pytester.inline_run("--full")
    path = pytester.path / "durations.json"
    before = path.read_text()
    pytester.inline_run("--full", "-k", "plain")
    pytester.inline_run("--full", "test_a.py::test_plain")
    assert path.read_text() == before
