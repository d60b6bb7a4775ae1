"""OUT_DIR never costs a user a file: what the tool did not write is never removed or
overwritten, a previous answer is replaced whole (no stale part files), and every refusal is
one line with exit code 2 (issue 16)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES, RULES
from isolated import NOBODY, can_drop_privileges, outcome

import hetero_solve as hs
from hetero_solve.errors import OutputError
from hetero_solve.export import write_result
from hetero_solve.export.writer import answer_files, check_target, part_file

MODEL = EXAMPLES / "seed000.onnx"
RULE_FILE = RULES / "seed000.yaml"
FAST = ["-q", "--engine", "heuristic"]


def _user_folder(tmp_path: Path) -> Path:
    """A folder as a user has it: the model, the rule file and a file of their own."""
    d = tmp_path / "work"
    d.mkdir()
    shutil.copy(MODEL, d / "m.onnx")
    shutil.copy(RULE_FILE, d / "r.yaml")
    (d / "notes.txt").write_text("mine\n")
    return d


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(d.rglob("*"))}


def _one_line(r) -> str:
    assert r.code == 2, r
    assert len(r.err_lines) == 1, r
    assert r.err_lines[0].startswith("hetero-solve: error: "), r
    return r.err_lines[0]


@pytest.mark.parametrize("target", [".", "work", "work/", "../work"])
def test_the_folder_holding_model_rules_and_user_files_is_refused_untouched(tmp_path, target):
    d = _user_folder(tmp_path)
    before = _snapshot(tmp_path)
    cwd = d if target.startswith(".") else tmp_path
    if target == "../work":
        cwd = d
    r = outcome(["work/m.onnx" if cwd == tmp_path else "m.onnx",
                 "work/r.yaml" if cwd == tmp_path else "r.yaml", "-o", target, *FAST], cwd=cwd)
    line = _one_line(r)
    assert "holds files hetero-solve did not write" in line
    assert _snapshot(tmp_path) == before


def test_parent_folder_is_refused_untouched(tmp_path):
    d = _user_folder(tmp_path)
    before = _snapshot(tmp_path)
    line = _one_line(outcome(["m.onnx", "r.yaml", "-o", "..", *FAST], cwd=d))
    assert "did not write" in line
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("target,expect", [
    ("notes.txt", "exists and is a file, not a folder"),
    ("/dev/null", "exists and is a device, not a folder"),
    ("", "empty output path"),
    ("notes.txt/out", "notes.txt is a file, not a folder"),
    ("/proc/hetero-solve-out", "cannot write the answer"),
    ("/proc/self", "did not write"),
])
def test_unusable_targets_exit_2_with_one_line(tmp_path, target, expect):
    d = _user_folder(tmp_path)
    before = _snapshot(tmp_path)
    line = _one_line(outcome(["m.onnx", "r.yaml", "-o", target, *FAST], cwd=d))
    assert expect in line
    assert _snapshot(tmp_path) == before


@pytest.mark.skipif(not can_drop_privileges(), reason="needs root to run the child as nobody")
@pytest.mark.parametrize("inside", [False, True])
def test_a_read_only_folder_is_refused(tmp_path, inside):
    d = _user_folder(tmp_path)
    ro = d / "ro"
    ro.mkdir()
    for p in (tmp_path, d, *d.iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    ro.chmod(0o555)
    target = "ro/out" if inside else "ro"
    r = outcome(["m.onnx", "r.yaml", "-o", target, *FAST], cwd=d, user=NOBODY)
    line = _one_line(r)
    assert "not writable" in line
    assert list(ro.iterdir()) == []


def test_a_previous_answer_is_replaced_whole_and_nothing_else_is_touched(tmp_path):
    d = _user_folder(tmp_path)
    out = d / "out"
    assert outcome(["m.onnx", "r.yaml", "-o", "out", *FAST], cwd=d).code == 0
    first = answer_files(out)
    assert first and "part2_ACCEL.onnx" in first and "partition.json" in first
    # Things next to the answer that are not part of it: a run's outputs, the user's notes.
    (out / "outputs").mkdir()
    (out / "outputs" / "y.npy").write_bytes(b"npy")
    (out / "README.txt").write_text("my notes on this partition\n")
    # A second answer with one part (everything on CPU): parts 1 and 2 of the first are stale.
    cpu = d / "cpu.yaml"
    cpu.write_text("version: 1\ndevices:\n  - name: CPU\n    ops: {supported: all}\n")
    r = outcome(["m.onnx", "cpu.yaml", "-o", "out", *FAST], cwd=d)
    assert r.code == 0, r
    now = sorted(p.name for p in out.iterdir())
    assert now == sorted(answer_files(out) + ["outputs", "README.txt"])
    assert [x for x in now if x.startswith("part")] == ["part0_CPU.onnx", "partition.json",
                                                        "partitions.dot"]
    assert (out / "README.txt").read_text() == "my notes on this partition\n"
    assert (out / "outputs" / "y.npy").read_bytes() == b"npy"
    assert not [p for p in d.rglob(".hetero-solve-tmp-*")]
    report = hs.verify(d / "m.onnx", out)
    assert report.ok and len(report.run.parts) == 1


def test_an_answer_written_before_files_were_listed_is_recognised(tmp_path):
    out = tmp_path / "out"
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    manifest = json.loads((out / "partition.json").read_text())
    del manifest["files"]
    (out / "partition.json").write_text(json.dumps(manifest))
    (out / "part7_OLD.onnx").write_text("a stale part the old manifest does not list")
    assert "part2_ACCEL.onnx" in answer_files(out)
    write_result(hs.solve(MODEL, RULES / "seed000.yaml", engine="heuristic"), out)
    assert (out / "part7_OLD.onnx").exists()       # not listed: not ours to remove
    assert "files" in json.loads((out / "partition.json").read_text())


def test_a_file_of_the_users_with_an_answer_file_name_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    result = hs.solve(MODEL, RULE_FILE, engine="heuristic")
    write_result(result, out, dots=False)
    (out / "affinity.dot").write_text("my own drawing")    # not in the previous answer
    with pytest.raises(OutputError, match="was not written by hetero-solve"):
        write_result(result, out)
    assert (out / "affinity.dot").read_text() == "my own drawing"
    assert not list(out.glob(".hetero-solve-tmp-*"))


def test_an_empty_folder_is_filled_and_keeps_its_modes(tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o750)
    out.chmod(0o750)
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    assert (out / "partition.json").exists() and (out.stat().st_mode & 0o777) == 0o750


def test_a_new_folder_gets_the_modes_of_mkdir_not_a_private_temp_folder(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == 0o777 & ~umask


def test_replacing_never_removes_the_model_being_read(tmp_path):
    out = tmp_path / "out"
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    r = outcome(["out/part0_ACCEL.onnx", RULE_FILE, "-o", "out", *FAST], cwd=tmp_path)
    assert "this run reads" in _one_line(r)
    assert (out / "part0_ACCEL.onnx").exists() and (out / "part2_ACCEL.onnx").exists()


def test_a_failed_write_leaves_neither_the_folder_nor_the_parents_it_made(tmp_path, monkeypatch):
    import hetero_solve.export.writer as writer
    result = hs.solve(MODEL, RULE_FILE, engine="heuristic")

    def broken(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer, "_write_names", broken)
    with pytest.raises(OutputError, match="No space left on device"):
        write_result(result, tmp_path / "a" / "b" / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_long_device_name_gives_a_short_file_name(tmp_path):
    name = "N" * 120        # rule files allow up to 128 characters (rules/schema.py)
    rules = tmp_path / "r.yaml"
    rules.write_text(f"version: 1\ndevices:\n  - name: {name}\n    ops: {{supported: all}}\n")
    r = outcome([MODEL, rules, "-o", tmp_path / "out", *FAST])
    assert r.code == 0, r
    files = sorted(p.name for p in (tmp_path / "out").glob("part*.onnx"))
    assert files == [part_file(0, name)] and len(files[0]) < 100
    assert part_file(3, "ÄÖ/..\\x") == "part3_______x.onnx"


def test_check_target_accepts_new_empty_and_previous_answers(tmp_path):
    assert check_target(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    (tmp_path / "empty").mkdir()
    assert check_target(tmp_path / "empty") == tmp_path / "empty"
    with pytest.raises(OutputError, match="empty output path"):
        check_target("")


def test_parents_made_before_a_failure_half_way_are_removed(tmp_path, monkeypatch):
    result = hs.solve(MODEL, RULE_FILE, engine="heuristic")
    made = []
    mkdir = Path.mkdir

    def second_fails(self, *a, **k):
        if len(made) == 2:
            raise OSError(36, "File name too long")
        mkdir(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(Path, "mkdir", second_fails)
    with pytest.raises(OutputError, match="File name too long"):
        write_result(result, tmp_path / "a" / "b" / "c" / "out")
    assert made and list(tmp_path.iterdir()) == []


def test_a_path_too_long_for_its_files_is_refused_before_anything_is_made(tmp_path):
    with pytest.raises(OutputError, match="the path is too long"):
        check_target(tmp_path / ("d/" * 2100))
    assert list(tmp_path.iterdir()) == []


def test_run_never_overwrites_a_file_it_did_not_write(tmp_path):
    from hetero_solve.run.common import RunError
    from hetero_solve.run.session import run
    out = tmp_path / "out"
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    mine = tmp_path / "saved"
    mine.mkdir()
    (mine / "y.npy").write_text("my own array")
    with pytest.raises(RunError, match="y.npy exists and was not written by hetero-solve run"):
        run(out, save=mine)
    assert (mine / "y.npy").read_text() == "my own array"
    assert sorted(p.name for p in mine.iterdir()) == ["y.npy"]
    first = run(out, save=out / "outputs")          # the default place, twice: ours to replace
    again = run(out, save=out / "outputs")
    assert first.saved.keys() == again.saved.keys() == {"y"}


def test_dot_inside_a_previous_answer_replaces_it_and_keeps_the_model_there(tmp_path):
    out = tmp_path / "out"
    write_result(hs.solve(MODEL, RULE_FILE, engine="heuristic"), out)
    shutil.copy(MODEL, out / "m.onnx")          # the user keeps the model in the answer folder
    shutil.copy(RULE_FILE, out / "r.yaml")
    (out / "r.yaml").write_text("version: 1\ndevices:\n  - name: CPU\n    ops: {supported: all}\n")
    r = outcome(["m.onnx", "r.yaml", "-o", ".", *FAST], cwd=out)
    assert r.code == 0, r
    assert sorted(p.name for p in out.iterdir()) == sorted(answer_files(out) + ["m.onnx", "r.yaml"])
    assert (out / "m.onnx").read_bytes() == MODEL.read_bytes()
    assert [p["device"] for p in json.loads((out / "partition.json").read_text())["partitions"]] == ["CPU"]
