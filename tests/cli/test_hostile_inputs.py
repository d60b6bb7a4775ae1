"""Hostile input files: each is refused with one line and exit code 2, quickly, before it can
block (FIFOs), exhaust memory (YAML bombs) or leak a file from elsewhere (external data)
(issue 16).  One test per finding; ``test_fuzz.py`` covers the space around them."""

from __future__ import annotations

import builtins
import errno
import json
import re
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from conftest import EXAMPLES, RULES
from isolated import outcome

import hetero_solve as hs
from hetero_solve.errors import RuleError
from hetero_solve.export import write_result
from hetero_solve.readers import YAML_DEPTH, load_yaml

MODEL = EXAMPLES / "seed000.onnx"
RULE_TEXT = (RULES / "seed000.yaml").read_text()
FAST = ["-q", "--engine", "heuristic"]


@pytest.fixture
def box(tmp_path):
    shutil.copy(MODEL, tmp_path / "m.onnx")
    (tmp_path / "r.yaml").write_text(RULE_TEXT)
    return tmp_path


def refused(box, *argv, expect: str) -> str:
    r = outcome([*map(str, argv), "-o", "out", *FAST], cwd=box, timeout=30)
    assert r.code == 2, r
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("hetero-solve: error: "), r
    assert expect in r.err_lines[0], r
    assert not (box / "out").exists()
    return r.err_lines[0]


# -- rule files: encodings -----------------------------------------------------------------------

def test_a_latin1_comment_names_the_byte_line_and_column(box):
    (box / "l.yaml").write_bytes("# café\n".encode("latin-1") + RULE_TEXT.encode())
    refused(box, "m.onnx", "l.yaml", expect="l.yaml: not UTF-8 text: byte 0xE9 at line 1, column 6")


def test_a_binary_rule_file_is_refused(box):
    (box / "b.yaml").write_bytes(bytes(range(256)) * 8)
    refused(box, "m.onnx", "b.yaml", expect="not a text file: a NUL byte")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "utf-32"])
def test_a_byte_order_mark_says_the_encoding(box, encoding):
    (box / "u.yaml").write_bytes(("# café\n" + RULE_TEXT).encode(encoding))
    a = hs.solve(box / "m.onnx", box / "u.yaml", engine="heuristic")
    b = hs.solve(box / "m.onnx", box / "r.yaml", engine="heuristic")
    assert a.solution.part_of == b.solution.part_of


# -- rule files: YAML that would exhaust memory or recursion --------------------------------------

BILLION_LAUGHS = ('version: 1\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
                  + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9)
                            + "]\n" for i in range(8)))


def test_billion_laughs_is_refused_naming_its_key(box):
    (box / "bomb.yaml").write_text(BILLION_LAUGHS)
    refused(box, "m.onnx", "bomb.yaml", expect="aliases expand to over 1,000,000 values")
    (box / "bomb.yaml").write_text(RULE_TEXT + "notes:\n" + "".join(
        "  " + line + "\n" for line in BILLION_LAUGHS.splitlines()[1:]))
    refused(box, "m.onnx", "bomb.yaml", expect="(a YAML bomb?), under key 'notes.i'")


def test_a_self_referencing_alias_is_refused():
    with pytest.raises(RuleError, match="refer to themselves .*under key 'devices'"):
        load_yaml("version: 1\ndevices: &d [*d]", lambda why: RuleError("r.yaml", "", why))


@pytest.mark.parametrize("text, where", [
    ("version: 1\ndevices: " + "[" * 2000 + "]" * 2000, "devices[0][0][0][0][0]..."),
    ("version: 1\ndevices:\n" + "".join(" " * i + "- \n" for i in range(1, 1500)),
     "devices[0][0][0][0][0]..."),
    ("version: 1\ndevices:\n  - name: X\n    ops: " + "{a: " * 200 + "1" + "}" * 200,
     "devices[0].ops.a.a.a...")])
def test_deep_nesting_is_refused_naming_where(box, text, where):
    (box / "deep.yaml").write_text(text)
    refused(box, "m.onnx", "deep.yaml",
            expect=f"nested deeper than {YAML_DEPTH} levels under {where}")


def test_a_key_given_twice_is_an_error_and_a_merge_may_override():
    fail = lambda why: RuleError("r.yaml", "", why)  # noqa: E731
    with pytest.raises(RuleError, match="line 2, column 1: the key 'version' appears twice"):
        load_yaml("version: 1\nversion: 2\n", fail)
    assert load_yaml("a: &a {x: 1, y: 2}\nb: {<<: *a, y: 3}", fail)["b"] == {"x": 1, "y": 3}


def test_plain_data_only_dates_stay_strings_binary_is_refused():
    fail = lambda why: RuleError("r.yaml", "", why)  # noqa: E731
    assert load_yaml("name: 2024-01-31\nx: =", fail) == {"name": "2024-01-31", "x": "="}
    for text in ("a: !!binary aGk=", "a: !!set {x}", "a: !!python/object:os.system x"):
        with pytest.raises(RuleError, match="YAML error at line 1"):
            load_yaml(text, fail)


def test_an_oversized_rule_file_is_refused_unread(box):
    with open(box / "huge.yaml", "wb") as f:
        f.truncate(64 << 20)     # sparse: refused by its size, never read
    refused(box, "m.onnx", "huge.yaml", expect="over the 16,777,216 bytes")


# -- files that are not regular files --------------------------------------------------------------

@pytest.mark.parametrize("which", ["model", "rules", "include"])
def test_a_fifo_is_refused_before_it_is_opened(box, which):
    os.mkfifo(box / "fifo")
    if which == "model":
        refused(box, "fifo", "r.yaml", expect="fifo: is a pipe (FIFO), not a file")
    elif which == "rules":
        refused(box, "m.onnx", "fifo", expect="fifo: is a pipe (FIFO), not a file")
    else:
        (box / "inc.yaml").write_text(RULE_TEXT.replace("version: 1", "version: 1\ninclude: [fifo]", 1))
        refused(box, "m.onnx", "inc.yaml",
                expect="inc.yaml: include[0]: fifo: is a pipe (FIFO), not a file")


@pytest.mark.parametrize("target,expect", [("/dev/zero", "is a device"), (".", "is a folder")])
def test_devices_and_folders_are_refused_as_model_rules_and_include(box, target, expect):
    refused(box, target, "r.yaml", expect=f"{target}: {expect}, not a file")
    refused(box, "m.onnx", target, expect=f"{target}: {expect}, not a file")
    (box / "inc.yaml").write_text(RULE_TEXT.replace("version: 1", f"version: 1\ninclude: ['{target}']", 1))
    refused(box, "m.onnx", "inc.yaml", expect=f"include[0]: {target}: {expect}, not a file")


def test_an_input_array_that_is_a_fifo_is_refused(box):
    write_result(hs.solve(box / "m.onnx", box / "r.yaml", engine="heuristic"), box / "ans")
    os.mkfifo(box / "x.npy")
    name = json.loads((box / "ans" / "partition.json").read_text())["graph_inputs"][0]
    r = outcome(["run", "ans", "--input", f"{name}=x.npy", "--no-save"], cwd=box, timeout=30)
    assert r.code == 2 and len(r.err_lines) == 1 and "is a pipe (FIFO), not a file" in r.err, r


def test_an_oversized_model_file_is_refused_unread(box):
    with open(box / "big.onnx", "wb") as f:
        f.truncate(3 << 30)      # sparse
    refused(box, "big.onnx", "r.yaml", expect="over protobuf's 2 GiB limit")


@pytest.mark.parametrize("domain", ["", "com.microsoft"])
def test_a_model_from_a_future_opset_is_refused_at_load(box, domain):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1])])
    opsets = [h.make_opsetid("", 1000 if domain == "" else 17)]
    if domain:
        opsets.append(h.make_opsetid(domain, 1000))
    m = h.make_model(g, opset_imports=opsets)
    m.ir_version = 10
    onnx.save(m, box / "future.onnx")
    line = refused(box, "future.onnx", "r.yaml", expect="future.onnx: declares opset 1000 of domain ")
    assert "the installed onnxruntime" in line and "runs " in line
    m.opset_import[-1].version = 1 if domain else 17     # what it runs: accepted
    onnx.save(m, box / "today.onnx")
    assert hs.load_model(box / "today.onnx").names == ["relu"]


# -- external data ----------------------------------------------------------------------------------

def _external_model(folder, location: str, offset: int | None = None, length: int | None = None):
    w = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[4], data_location=T.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, str(value)
    graph = h.make_graph([h.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4])], initializer=[w])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    folder.mkdir(exist_ok=True)
    with open(folder / "m.onnx", "wb") as f:   # onnx.save would check the location itself
        f.write(model.SerializeToString())
    return folder / "m.onnx"


@pytest.mark.parametrize("location,expect", [
    ("../secret.bin", "points outside the model's folder"),
    ("link.bin", "points outside the model's folder"),
    ("SECRET", "is an absolute path"),
    ("fifo.bin", "fifo.bin: is a pipe (FIFO), not a file"),
    ("sub", "sub: is a folder, not a file"),
    ("missing.bin", "missing.bin: no such file"),
])
def test_external_data_outside_the_folder_or_not_a_file_is_refused(box, location, expect):
    secret = box / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    folder = box / "model"
    folder.mkdir()
    (folder / "link.bin").symlink_to(secret)
    os.mkfifo(folder / "fifo.bin")
    (folder / "sub").mkdir()
    path = _external_model(folder, str(secret) if location == "SECRET" else location)
    refused(box, path, "r.yaml", expect=expect)


def test_external_data_shorter_than_the_tensor_is_refused(box):
    folder = box / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"\0" * 16)
    refused(box, _external_model(folder, "w.bin", offset=8, length=16), "r.yaml",
            expect="w.bin has 16 bytes, the tensor needs 24")
    refused(box, _external_model(folder, "w.bin", offset=-1), "r.yaml",
            expect="offset '-1' is not a whole number")


def _saved_with_external_data(folder):
    """A model saved by ``onnx.save_model`` with its two weights in one data file (as
    exporters write them: location, offset and length each)."""
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
                          h.make_node("Add", ["t", "b"], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 64])],
                         initializer=[onnx.numpy_helper.from_array(w, "w"),
                                      onnx.numpy_helper.from_array(w[:1], "b")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    folder.mkdir(exist_ok=True)
    onnx.save_model(model, folder / "m.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    return folder / "m.onnx"


def _edit_external(path, name, key, value):
    """Set (``value`` a number) or drop (``None``) one external-data key of tensor ``name``."""
    model = onnx.load(path, load_external_data=False)
    t = next(t for t in model.graph.initializer if t.name == name)
    kept = [(e.key, e.value) for e in t.external_data if e.key != key]
    del t.external_data[:]
    for k, v in kept + ([(key, str(value))] if value is not None else []):
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize("case", ["truncated", "truncated, no length", "stored length short"])
def test_external_data_shorter_than_its_tensor_is_refused_at_load(box, case):
    """Issue 32: weights in a truncated file (or a length that says fewer bytes than the
    tensor's dims and type need) are refused at load, one line naming the tensor, the file
    and both lengths; nothing is written.  A stat, not a read, finds it."""
    path = _saved_with_external_data(box / "model")
    data = box / "model" / "m.data"
    offsets = {t.name: {e.key: int(e.value) for e in t.external_data if e.key != "location"}
               for t in onnx.load(path, load_external_data=False).graph.initializer}
    last = max(offsets, key=lambda n: offsets[n]["offset"])   # the tensor the file ends with
    start = offsets[last]["offset"]
    if case == "stored length short":
        _edit_external(path, "w", "length", 64 * 64 * 4 - 4)
        expect = ("external data of tensor 'w': m.data: the stored length is 16,380 bytes, the "
                  "tensor needs 16,384 (4,096 float32 elements)")
    else:
        os.truncate(data, start + 100)
        if case == "truncated, no length":
            _edit_external(path, last, "length", None)
        expect = (f"external data of tensor {last!r}: m.data has {start + 100:,} bytes, the "
                  f"tensor needs {start + 256:,}")
    refused(box, path, "r.yaml", expect=expect)
    # The data file is never opened: only its size is read.
    real_open, real_os_open = open, os.open

    def no_data(file, *args, **kwargs):
        assert not str(file).endswith("m.data"), "the weights were read"
        return real_open(file, *args, **kwargs)

    def no_os_data(file, *args, **kwargs):
        assert not str(file).endswith("m.data"), "the weights were read"
        return real_os_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builtins, "open", no_data)
        mp.setattr(os, "open", no_os_data)
        with pytest.raises(hs.ModelError, match="the tensor needs"):
            hs.load_model(path)


def test_a_whole_external_data_file_still_loads(box):
    path = _saved_with_external_data(box / "model")
    r = outcome([path, "r.yaml", "-o", "out", *FAST], cwd=box)
    assert r.code == 0, r


def test_external_data_inside_the_folder_still_loads(box):
    folder = box / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = _external_model(folder, "w.bin")
    r = outcome([path, "r.yaml", "-o", "out", *FAST], cwd=box)
    assert r.code == 0, r
    assert hs.verify(path, box / "out").ok


# -- issue 31: a bomb and a failed include are named where the user wrote them ----------------

LAUGHS = "".join(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join(
    ['"lol"'] * 9 if i == 0 else ["*" + chr(96 + i)] * 9) + "]\n" for i in range(8))


@pytest.mark.parametrize("device, where", [
    ("{name: X, instances: *h, ops: {supported: all}}", "devices[0].instances"),
    ("{name: X, memory: *h, ops: {supported: all}}", "devices[0].memory"),
    ("{name: X, ops: {supported: *h}}", "devices[0].ops.supported"),
    ("{name: X, ops: {supported: all, unsupported: [Relu, *h]}}", "devices[0].ops.unsupported"),
    ("{name: X, ops: {supported: all, when: {Conv: {max_rank: *h}}}}",
     "devices[0].ops.when.Conv.max_rank"),
    ("{name: X, ops: {supported: all, when: {Conv: {attributes: {group: *h}}}}}",
     "devices[0].ops.when.Conv.attributes.group"),
    ("{name: *h, ops: {supported: all}}", "devices[0].name"),
    ("{name: X, ops: {supported: all}, runtime: *h}", "devices[0].runtime"),
    ("{name: X, ops: {supported: all}, runtime: {onnxruntime: *h}}",
     "devices[0].runtime.onnxruntime"),
    ("{name: X, ops: {supported: all}, instances: &z [*h, *h]}", "devices[0].instances")])
def test_a_yaml_bomb_names_the_key_that_holds_it(tmp_path, device, where):
    """The anchors are under ``notes`` (a free mapping); the error names where the bomb is
    used, not the outermost key (``devices``) nor the anchors' key."""
    text = "version: 1\nnotes:\n" + "".join("  " + x + "\n" for x in LAUGHS.splitlines()) \
        + f"devices:\n  - {device}\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    with pytest.raises(RuleError, match=r"\(a YAML bomb\?\), under key '" + re.escape(where)
                       + "'$"):
        hs.load_rules(path)


@pytest.mark.parametrize("make, expect", [
    (lambda p: p.write_bytes(bytes(range(256))), "not a text file: a NUL byte"),
    (lambda p: None, "expected a mapping (a catalog with value_inputs)"),     # /etc/passwd
    (lambda p: p.write_text("- a\n- b\n"), "expected a mapping (a catalog with value_inputs)"),
    (lambda p: p.write_text("value_inputs: {}\n"), "cannot read: Input/output error")])
def test_a_failed_include_names_the_rule_file_and_its_include_key(tmp_path, monkeypatch,
                                                                   make, expect):
    target = tmp_path / "cat.yaml"
    make(target)
    name = "/etc/passwd" if not target.exists() else "cat.yaml"
    if name == "/etc/passwd" and not os.path.exists(name):
        pytest.skip("no /etc/passwd here")
    if expect.startswith("cannot read"):   # a disk that fails (root reads a mode-0 file)
        real_open = os.open

        def failing_open(path, *args, **kwargs):
            if str(path) == str(target):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_open(path, *args, **kwargs)
        monkeypatch.setattr(os, "open", failing_open)
    rules = tmp_path / "r.yaml"
    rules.write_text(RULE_TEXT.replace("version: 1", f"version: 1\ninclude: ['{name}']", 1))
    with pytest.raises(RuleError) as e:
        hs.load_rules(rules)
    assert e.value.path == str(rules) and e.value.key == "include[0]", e.value
    assert str(e.value).startswith(f"{rules}: include[0]: {name}") and expect in str(e.value)
