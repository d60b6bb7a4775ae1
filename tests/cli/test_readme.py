"""The README's set-up commands are what CI runs, exactly (issue 15): ``.ci/run`` holds both
``sh`` blocks of the "Set up" section verbatim, and what they name exists."""

from __future__ import annotations

import re
import shlex

from conftest import ROOT


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_ci_runs_the_readme_setup_commands_verbatim():
    """The first verbatim; the second (the fast tier) with ``--full``: CI runs every test."""
    commands = setup_commands()
    assert len(commands) == 2
    assert commands[1].endswith("pytest -q")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    expected = [commands[0], commands[1] + " --full"]
    for command in expected:
        assert command in ci, command
    assert ci.index(expected[0]) < ci.index(expected[1])


def test_the_setup_commands_name_files_that_exist():
    words = [w for c in setup_commands() for w in shlex.split(c)]
    for w in words:
        if w.startswith(("examples/", "rules/")):
            assert (ROOT / w).is_file(), w


def test_the_command_line_runs_without_click_installed(tmp_path):
    """The plain install has no ``click`` (typer carries its own copy): the first README
    command failed on an ``import click``.  Simulated by hiding the module."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['click'] = None\n"
            "from hetero_solve.cli import main\n"
            f"main([r'{ROOT / 'examples' / 'seed000.onnx'}', r'{ROOT / 'rules' / 'seed000.yaml'}',"
            f" '-o', r'{tmp_path / 'out'}', '--engine', 'heuristic'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "partition.json").exists()
    bad = subprocess.run([sys.executable, "-c", code.replace("seed000.yaml", "nope.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.startswith("hetero-solve: error:"), bad.stderr


def test_the_two_setup_commands_use_their_own_virtualenv():
    """The plain install and the test install live in two folders: running the second does
    not turn the first's plain install into a test one, and neither needs its own clone."""
    venvs = [re.search(r"python3 -m venv (\S+)", c).group(1) for c in setup_commands()]
    assert len(set(venvs)) == 2, venvs
    for command, venv in zip(setup_commands(), venvs):
        # every tool a command runs is its own venv's
        assert all(w.startswith(f"{venv}/bin/") for w in shlex.split(command)
                   if "/bin/" in w), command
