"""A newcomer's first hour (issue 15): every mistake gets one clear line, every output reads
well.  One test per finding: arguments in the wrong order, progress only on a terminal (and
never before the error line), --json, --version, one spelling of a device instance, one size
format, plain flags in --help, no wrapping when piped, warnings through Python's warnings."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import warnings

import pytest

import hetero_solve as hs
from conftest import EXAMPLES, ROOT, RULES
from hetero_solve.errors import HeteroSolveWarning, RuleError
from hetero_solve.export import build_manifest


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def one_error_line(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetero-solve: error: "), r.stderr
    return lines[0]


MODEL = EXAMPLES / "seed000.onnx"
RULE = RULES / "seed000.yaml"


# -- 1. arguments in the wrong order -----------------------------------------------------------

def test_swapped_arguments_are_named_in_one_line(tmp_path):
    line = one_error_line(run(RULE, MODEL, "-o", tmp_path / "out"))
    assert "arguments in the wrong order" in line and str(RULE) in line and str(MODEL) in line
    line = one_error_line(run(MODEL, MODEL, "-o", tmp_path / "out"))
    assert f"{MODEL} is an ONNX model where the rule file is expected" in line
    line = one_error_line(run(RULE, RULE, "-o", tmp_path / "out"))
    assert f"{RULE} is a rule file where the ONNX model is expected" in line
    line = one_error_line(run("explain", RULE, MODEL))
    assert "wrong order" in line
    assert not (tmp_path / "out").exists()


def test_the_library_names_a_model_given_as_rules():
    with pytest.raises(RuleError, match="this is an ONNX model, not a rule file"):
        hs.solve(RULE, MODEL)


def test_rules_check_takes_model_then_rules_and_the_old_order_still_works():
    new = run("rules", "check", MODEL, RULE, "--json")
    old = run("rules", "check", RULE, MODEL, "--json")
    assert new.returncode == old.returncode == 0, (new.stderr, old.stderr)
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert json.loads(new.stdout)["affinity"]
    alone = run("rules", "check", RULE)
    assert alone.returncode == 0 and "ACCEL" in alone.stdout
    line = one_error_line(run("rules", "check", MODEL))
    assert "is an ONNX model; rules check needs a rule file" in line


# -- 8. progress: a live line on a terminal only, never before the error line -------------------

def _screen(raw: bytes) -> list[str]:
    """The lines a terminal shows after ``raw`` (enough of VT100 for rich's live display:
    carriage return, newline, erase line, cursor up; other escapes ignored)."""
    lines, row = [""], 0
    for token in re.split(rb"(\x1b\[[0-9;?]*[A-Za-z]|\r\n|\r|\n)", raw):
        if token in (b"\r\n", b"\n"):
            row += 1
            if row == len(lines):
                lines.append("")
        elif token == b"\r":
            pass
        elif token.startswith(b"\x1b["):
            if token.endswith(b"2K"):
                lines[row] = ""
            elif token.endswith(b"A"):
                row = max(0, row - int(token[2:-1] or 1))
        else:
            lines[row] += token.decode("utf-8", "replace")
    return [x for x in lines if x.strip()]


def _on_a_terminal(*args) -> tuple[int, bytes]:
    """Run the command with stderr on a pseudo-terminal; return its exit code and stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "hetero_solve", *map(str, args)], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    raw = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        raw += chunk
    os.close(master)
    return proc.wait(timeout=300), raw


def test_on_a_terminal_the_progress_line_is_erased_before_the_error_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\n")
    code, raw = _on_a_terminal(MODEL, bad, "-o", tmp_path / "out")
    assert code == 2
    assert "reading rules" in raw.decode()                   # the live line was there...
    screen = _screen(raw)
    assert len(screen) == 1 and screen[0].startswith("hetero-solve: error:"), screen  # ...and gone


def test_progress_only_on_a_terminal_or_with_verbose(tmp_path):
    quiet = run(MODEL, RULE, "-o", tmp_path / "a", "--engine", "heuristic")
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = run(MODEL, RULE, "-o", tmp_path / "b", "--engine", "heuristic", "--verbose")
    assert loud.returncode == 0
    assert "greedy heuristic" in loud.stderr and "writing part" in loud.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\n")
    one_error_line(run(MODEL, bad, "-o", tmp_path / "c"))   # no progress line before it


def test_the_live_line_clock_runs_and_reads_the_budget(monkeypatch):
    """The line's clock moves within a stage; while the answer is searched it shows what the
    call's one budget says (work spent of the limit's, the clock's seconds of -t), and
    nothing of it once the answer is validated."""
    from hetero_solve import budget as budget_module
    from hetero_solve.budget import Limit
    from hetero_solve.cli import common
    now = [100.0]
    monkeypatch.setattr(common.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(budget_module.time, "perf_counter", lambda: now[0])
    line = common._LiveLine()
    line("loading the model")
    now[0] = 101.5
    first = line.text()
    now[0] = 103.0
    assert line.text() != first and "3.0s" in line.text()   # the clock moves within a stage
    assert "limit" not in line.text()                       # no budget yet: the model loads
    budget = Limit.of(time_limit=10).start()               # the model is prepared
    line.watch(budget)
    line("exact refinement (cpsat)")
    now[0] = 105.5
    budget.charge(1.25)
    assert "work 1.2 of 5 s, 2.5 of the 10 s limit" in line.text()
    line("validating")
    assert "limit" not in line.text()
    line.watch(Limit.of(work_limit=2).start())              # --work-limit: no clock to show
    assert "work 0.0 of 2 s]" in line.text()


# -- 9. --json, --version, instances, sizes, help, pipes ---------------------------------------

def test_json_on_solve_run_verify_and_check(tmp_path):
    out = tmp_path / "out"
    r = run(MODEL, RULE, "-o", out, "--engine", "heuristic", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    written = json.loads((out / "partition.json").read_text())
    assert data["partitions"] == written["partitions"] and data["out_dir"] == str(out)
    r = run("run", out, "--json", "--no-save")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [p["id"] for p in data["parts"]] == [0, 1, 2] and data["outputs"]
    r = run("verify", MODEL, out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ok"] is True
    r = run("check", MODEL, RULE, "--affinity", out / "affinity.json", "--json", "--no-export",
            "--split", "fewest")
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert data["valid"] is True and data["violations"] == []


def test_version():
    r = run("--version")
    assert r.returncode == 0 and re.match(r"hetero-solve \d+\.\d+", r.stdout)


def test_the_version_is_the_one_pyproject_declares():
    """``__version__`` sits beside ``pyproject.toml``'s (readable without installing): one
    number, held equal here."""
    import tomllib
    from pathlib import Path
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                            .read_text())["project"]
    assert hs.__version__ == project["version"]
    assert run("--version").stdout.startswith(f"hetero-solve {project['version']},")


def test_one_spelling_of_a_device_instance(tmp_path):
    rules = tmp_path / "two.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: ACC\n    instances: 2\n    memory: 2KiB\n"
                     "    ops: {supported: all}\n  - name: CPU\n    ops: {supported: all}\n")
    model = EXAMPLES / "resnet_like.onnx"
    out = tmp_path / "out"
    solved = run(model, rules, "-o", out, "--engine", "heuristic", "--no-models")
    assert solved.returncode == 0, solved.stderr
    checked = run("check", model, rules, "--affinity", out / "affinity.json", "--no-export",
                  "--split", "fewest", "--engine", "heuristic")
    dot = (out / "partitions.dot").read_text()
    for text in (solved.stdout, checked.stdout, dot):
        assert not re.search(r"ACC:\d", text)
    assert re.search(r"ACC\.[01]", solved.stdout) and re.search(r"ACC\.[01]", dot)


def test_help_shows_flags_as_flags():
    from typer.testing import CliRunner
    from hetero_solve.cli import app
    runner = CliRunner()
    for command in (["solve"], ["run"], ["verify"], ["check"], ["explain"], ["study"],
                    ["rules", "check"], ["rules", "schema"], []):
        r = runner.invoke(app, [*command, "--help"])
        assert r.exit_code == 0 and "--" in r.output and "<bool>" not in r.output, command


def test_the_summary_does_not_wrap_in_a_pipe(tmp_path):
    r = run(EXAMPLES / "transformer_encoder.onnx", RULES / "npu-static.yaml", "--dim", "seq=16",
            "-o", tmp_path / "out", "--engine", "heuristic")
    assert r.returncode == 0, r.stderr
    status = [x for x in r.stdout.splitlines() if x.startswith("status:")]
    assert len(status) == 1 and "time:" in status[0]          # one line, not cut
    rows = [x for x in r.stdout.splitlines() if x.startswith("│")]
    assert rows and all(x.endswith("│") for x in rows)         # no row continued on a next line
    assert len({len(x) for x in rows}) == 1


# -- 10. warnings through Python's warnings -----------------------------------------------------

def test_library_warnings_go_through_python_warnings(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(RULE.read_text() + '\naffinity: {"nothing/*": CPU}\n')
    with pytest.warns(HeteroSolveWarning, match="the glob matches no node") as caught:
        result = hs.solve(MODEL, rules, engine="heuristic")
    assert [str(w.message) for w in caught] == result.warnings
    assert caught[0].filename == __file__                    # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeteroSolveWarning)
        with pytest.raises(HeteroSolveWarning):
            hs.solve(MODEL, rules, engine="heuristic")
    plain = hs.solve(MODEL, RULE, engine="heuristic")
    assert build_manifest(plain, files=False)["partitions"] \
        == build_manifest(result, files=False)["partitions"]


def test_the_command_line_prints_each_warning_once(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(RULE.read_text() + '\naffinity: {"nothing/*": CPU}\n')
    r = run(MODEL, rules, "-o", tmp_path / "out", "--engine", "heuristic")
    assert r.returncode == 0
    assert r.stderr.count("the glob matches no node") == 1
    assert r.stderr.startswith("hetero-solve: warning: ")
