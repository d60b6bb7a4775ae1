"""``main()``: no traceback reaches a user.  Bad input is one line and exit code 2, an internal
error one line with a hint to report it and exit code 1, the traceback only with ``--debug``
(issue 16)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, RULES
from isolated import console_script, outcome

MODEL = EXAMPLES / "seed000.onnx"
RULE_FILE = RULES / "seed000.yaml"


@pytest.fixture
def broken_solver(monkeypatch):
    """An internal error in the middle of solving (a bug, not bad input)."""
    import hetero_solve.pipeline as pipeline

    def boom(problem):
        raise IndexError("tuple index out of range")
    monkeypatch.setattr(pipeline, "heuristic", boom)


def test_an_internal_error_is_one_line_with_a_hint_and_exit_1(broken_solver, tmp_path):
    r = outcome([MODEL, RULE_FILE, "-q", "-o", tmp_path / "out"])
    assert r.code == 1, r
    assert r.err_lines == ["hetero-solve: internal error: IndexError: tuple index out of range: "
                           "this is a bug in hetero-solve, please report it with the command "
                           "line (run again with --debug for the traceback)"], r
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(broken_solver, tmp_path, how):
    argv = [MODEL, RULE_FILE, "-q", "-o", tmp_path / "out"]
    r = (outcome([*argv, "--debug"]) if how == "flag"
         else outcome(argv, env={"HETERO_SOLVE_DEBUG": "1"}))
    assert r.code == 1, r
    assert "Traceback (most recent call last)" in r.err and "in boom" in r.err
    assert r.err_lines[-1].startswith("hetero-solve: internal error: IndexError")


@pytest.mark.parametrize("argv,expect", [
    (["--time-limit", "-1"], "Invalid value for '--time-limit'"),
    (["--work-limit", "-1"], "Invalid value for '--work-limit'"),
    (["--time-limit", "1", "--work-limit", "1"], "--time-limit and --work-limit: give one"),
    (["--bogus"], "No such option: --bogus"),
    (["--seed", "x"], "Invalid value for '--seed'"),
    (["--dim", "x"], "--dim 'x': expected NAME=VALUE"),
    (["--dim", "batch=0"], "must be >= 1"),
])
def test_bad_options_are_one_line_and_exit_2(argv, expect, tmp_path):
    r = outcome([MODEL, RULE_FILE, "-o", tmp_path / "out", *argv])
    assert r.code == 2, r
    assert len(r.err_lines) == 1 and expect in r.err_lines[0], r
    assert r.err_lines[0].startswith("hetero-solve: error: ")
    assert not (tmp_path / "out").exists()


def test_a_missing_argument_is_one_line():
    r = outcome(["solve", MODEL])
    assert r.code == 2 and r.err_lines == [
        "hetero-solve: error: Missing argument 'RULES'. (see: hetero-solve solve --help)"], r


def test_help_and_no_arguments_still_show_the_help():
    r = outcome(["--help"])
    assert r.code == 0 and "Usage" in r.out, r
    r = outcome([])
    assert r.code == 2 and "Usage" in r.out + r.err, r


def test_the_console_script_has_no_traceback_either(tmp_path):
    r = console_script([MODEL, RULE_FILE, "-o", tmp_path / "out", "--time-limit", "-1"])
    assert r.code == 2 and len(r.err_lines) == 1 and "Traceback" not in r.err, r
    r = console_script([MODEL, RULE_FILE, "-o", "/dev/null", "-q"])
    assert r.code == 2 and r.err_lines == [
        "hetero-solve: error: /dev/null: exists and is a device, not a folder: the answer is a "
        "folder of files (give a new or empty folder)"], r


@pytest.mark.parametrize("stage", ["solving", "writing"])
def test_ctrl_c_is_one_line_exit_130_and_nothing_half_written(monkeypatch, tmp_path, stage):
    import os
    import signal

    import hetero_solve.export.writer as writer
    import hetero_solve.pipeline as pipeline

    def ctrl_c(*_args):
        os.kill(os.getpid(), signal.SIGINT)
    if stage == "solving":
        monkeypatch.setattr(pipeline, "heuristic", ctrl_c)
    else:
        save = writer._save

        def save_then_ctrl_c(model, path, *weights):
            save(model, path, *weights)     # the first part file is written, the rest is not
            ctrl_c()
        monkeypatch.setattr(writer, "_save", save_then_ctrl_c)
    out = tmp_path / "out"
    r = outcome([MODEL, RULE_FILE, "-q", "--engine", "heuristic", "-o", out])
    assert r.code == 130 and r.err_lines == ["hetero-solve: interrupted"], r
    assert list(tmp_path.iterdir()) == []     # no OUT_DIR, no temporary folder beside it


@pytest.mark.parametrize("command", [
    [MODEL, RULE_FILE], ["explain", MODEL, RULE_FILE],
    ["check", MODEL, RULE_FILE, "--affinity", EXAMPLES / "seed000.onnx"],
    ["study", MODEL, "-r", RULE_FILE],
    ["instance", EXAMPLES.parent / "benchmarks" / "tarnawski2020" /
     "throughput_bert_l-3_inference.json"]],
    ids=["solve", "explain", "check", "study", "instance"])
def test_every_command_with_a_time_limit_takes_a_work_limit_but_not_both(command, tmp_path):
    out = [] if command[0] == "explain" else ["-o", tmp_path / "out"]    # explain writes nothing
    r = outcome([*command, *out, "--time-limit", "1", "--work-limit", "1"])
    assert r.code == 2, r
    assert len(r.err_lines) == 1 and "--time-limit and --work-limit: give one" in r.err_lines[0]
    assert not (tmp_path / "out").exists()
