"""A seeded fuzz suite of hostile inputs (issue 16).

Every case builds its files in a fresh folder and runs the command line (in a forked child:
in-process speed, a time limit, a crash cannot take pytest along; a few through the real
console script).  Whatever the input, the outcome must be one of:

- exit 0 with a valid answer: OUT_DIR holds exactly the files its ``partition.json`` lists,
  every main-graph node is in one part, folded or a ``Constant``, parts are in topological
  order, and (when the model is small enough to run) the parts reproduce the model's
  outputs in onnxruntime;
- exit 2 with exactly one line on stderr (``hetero-solve: error: ...``; no progress line
  before it), nothing on stdout, and OUT_DIR as it was;

never a traceback, a hang, a crash or a half-written folder, and no file outside OUT_DIR
changed.  Categories: ``model`` (truncated, bit-flipped, cycles, undefined tensors, huge and
negative dims, external data), ``rules-type`` (every rule-file key given each wrong type),
``rules-yaml`` (bombs, tags, nesting, encodings), ``rules-include``, ``rules-value`` (absurd
memory, instances, weights, dims), ``cli`` (bad options and OUT_DIRs), ``random`` (random
small models and rule files, memory limits included) and ``console`` (the installed script).

Set ``HETERO_SOLVE_FUZZ_LOG=file.jsonl`` to record each case's category and exit code.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto as T
from onnx import helper as h

from isolated import CRASH, ESCAPED, HANG, NOBODY, can_drop_privileges, console_script, outcome

from hetero_solve.export import write_result
from hetero_solve.export.writer import TMP_PREFIX, answer_files

SEED = 16
TIMEOUT = 60.0
#: Models whose tensors are larger than this are not run in onnxruntime to check the answer.
RUN_ELEMENTS = 1 << 20

Argv = list[str]


@dataclass
class Case:
    category: str
    name: str
    build: Callable[[Path], Argv]      #: writes files into the folder, returns the arguments
    console: bool = False              #: through the installed console script
    user: int | None = None            #: run the child as this user
    out: str | None = "out"            #: OUT_DIR (relative to the folder); None: no -o
    quiet: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.category}-{self.name}"


# -- a base model and a base rule file that use every feature ---------------------------------------

def base_model(batch: object = "batch", width: int = 8) -> onnx.ModelProto:
    """x[batch, 8] -> MatMul -> Relu -> Reshape (value input) -> Softmax -> Erf -> Add -> y,
    plus a dead end (Sigmoid) and a Constant."""
    w = onnx.numpy_helper.from_array(np.linspace(-1, 1, width * width, dtype=np.float32)
                                     .reshape(width, width), "W")
    shape = onnx.numpy_helper.from_array(np.array([-1, width], np.int64), "shape")
    nodes = [
        h.make_node("MatMul", ["x", "W"], ["mm"], name="n_mm"),
        h.make_node("Relu", ["mm"], ["r"], name="n_relu"),
        h.make_node("Reshape", ["r", "shape"], ["rs"], name="n_reshape"),
        h.make_node("Softmax", ["rs"], ["sm"], name="n_softmax", axis=-1),
        h.make_node("Erf", ["sm"], ["e"], name="n_erf"),
        h.make_node("Constant", [], ["c"], name="n_const",
                    value=onnx.numpy_helper.from_array(np.float32(0.5))),
        h.make_node("Add", ["e", "c"], ["y"], name="n_add"),
        h.make_node("Sigmoid", ["x"], ["dead"], name="n_dead"),
    ]
    graph = h.make_graph(nodes, "fuzz", [h.make_tensor_value_info("x", T.FLOAT, [batch, width])],
                         [h.make_tensor_value_info("y", T.FLOAT, [batch, width])],
                         initializer=[w, shape])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model


BASE_RULES: dict = {
    "version": 1,
    "description": "fuzz base",
    "devices": [
        {"name": "NPU", "description": "d", "memory": "1MiB", "instances": 2,
         "value_inputs": "enforce",
         "ops": {"supported": ["MatMul", "Relu", "Add", "Reshape"], "unsupported": ["Softmax"],
                 "when": {"Relu": {"attributes": {}, "dtypes": ["float32"], "max_rank": 4}},
                 "static_shapes": True},
         "runtime": {"onnxruntime": "CPUExecutionProvider"}},
        {"name": "CPU", "ops": {"supported": "all"}},
    ],
    "value_inputs": {"Reshape": [1]},
    "affinity": {"n_erf": "CPU"},
    "dims": {"batch": 2},
    "objective": ["fallback", "partitions", "transfer"],
}

#: Every key of the rule file, as a path into BASE_RULES (strings: keys, ints: list positions).
KEY_PATHS: list[tuple] = [
    ("version",), ("description",), ("devices",), ("devices", 0), ("devices", 0, "name"),
    ("devices", 0, "description"), ("devices", 0, "memory"), ("devices", 0, "instances"),
    ("devices", 0, "value_inputs"), ("devices", 0, "ops"), ("devices", 0, "ops", "supported"),
    ("devices", 0, "ops", "supported", 0), ("devices", 0, "ops", "unsupported"),
    ("devices", 0, "ops", "when"), ("devices", 0, "ops", "when", "Relu"),
    ("devices", 0, "ops", "when", "Relu", "attributes"),
    ("devices", 0, "ops", "when", "Relu", "dtypes"),
    ("devices", 0, "ops", "when", "Relu", "max_rank"), ("devices", 0, "ops", "static_shapes"),
    ("devices", 0, "runtime"), ("devices", 0, "runtime", "onnxruntime"), ("devices", 1, "ops"),
    ("value_inputs",), ("value_inputs", "Reshape"), ("affinity",), ("affinity", "n_erf"),
    ("dims",), ("dims", "batch"), ("objective",), ("objective", 0), ("include",),
]
WRONG_VALUES: list = [None, True, 0, -1, 1.5, "x", "", [], [1], {}, {"k": 1}, float("inf"),
                      float("nan"), 2**70, "é" * 300, [[[]]], -(2**63)]


def _set(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return data


def _dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _write(box: Path, name: str, data: bytes | str) -> str:
    (box / name).write_bytes(data.encode() if isinstance(data, str) else data)
    return name


def _model_bytes(model: onnx.ModelProto | None = None) -> bytes:
    return (model or base_model()).SerializeToString()


def _with(model_bytes: bytes | None = None, rules: str | None = None, argv: Argv = ()):
    """A builder writing m.onnx and r.yaml (the bases unless given) and returning the argv."""
    def build(box: Path) -> Argv:
        _write(box, "m.onnx", model_bytes if model_bytes is not None else _model_bytes())
        _write(box, "r.yaml", rules if rules is not None else _dump(BASE_RULES))
        return ["m.onnx", "r.yaml", *argv]
    return build


# -- the cases ------------------------------------------------------------------------------------------

def model_cases(rng: random.Random) -> list[Case]:
    cases = []
    good = _model_bytes()
    for k in range(10):
        cut = rng.randrange(len(good))
        cases.append(Case("model", f"truncated-{cut}", _with(good[:cut])))
    for k in range(30):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            bit = rng.randrange(len(data) * 8)
            data[bit // 8] ^= 1 << (bit % 8)
        cases.append(Case("model", f"bitflip-{k}", _with(bytes(data))))
    for k in range(4):
        cases.append(Case("model", f"garbage-{k}",
                          _with(bytes(rng.randrange(256) for _ in range(rng.randint(0, 400))))))

    def graph_with(nodes, inputs=None, outputs=None, inits=(), opset=17, **kw):
        graph = h.make_graph(nodes, "g", inputs or [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                             outputs or [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                             initializer=list(inits))
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], **kw)
        m.ir_version = 8
        return m.SerializeToString()

    relu = lambda i, o, n: h.make_node("Relu", [i], [o], name=n)  # noqa: E731
    specials = {
        "cycle": graph_with([relu("b", "a", "n1"), relu("a", "b", "n2"), h.make_node("Add", ["x", "a"], ["y"])]),
        "self-loop": graph_with([h.make_node("Add", ["x", "y"], ["y"], name="n")]),
        "undefined-input": graph_with([h.make_node("Add", ["x", "nowhere"], ["y"], name="n")]),
        "undefined-output": graph_with([relu("x", "z", "n")]),
        "two-producers": graph_with([relu("x", "y", "a"), relu("x", "y", "b")]),
        "empty-graph": graph_with([], outputs=[h.make_tensor_value_info("x", T.FLOAT, [2, 4])]),
        "only-constants": graph_with(
            [h.make_node("Constant", [], ["y"], value=onnx.numpy_helper.from_array(np.zeros((2, 4), np.float32)))],
            inputs=[]),
        "unknown-op": graph_with([h.make_node("Frobnicate", ["x"], ["y"], name="n")]),
        "custom-domain-no-opset": graph_with([h.make_node("Op", ["x"], ["y"], domain="my.dom", name="n")]),
        "opset-1": graph_with([relu("x", "y", "n")], opset=1),
        "opset-999": graph_with([relu("x", "y", "n")], opset=999),
        "if-without-branches": graph_with([h.make_node("If", ["c"], ["y"], name="n")],
                                          inputs=[h.make_tensor_value_info("c", T.BOOL, [])]),
        "wrong-attribute": graph_with([h.make_node("Softmax", ["x"], ["y"], axis="zero", name="n")]),
        "short-initializer": graph_with(
            [h.make_node("Add", ["x", "w"], ["y"], name="n")],
            inits=[onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2, 4], raw_data=b"\0" * 12)]),
        "huge-name": graph_with([relu("x", "y", "n" * 5000)]),
        "odd-names": graph_with([relu("x", "t/../../x\n", "a\n/..\\b"), relu("t/../../x\n", "y", "")]),
        "string-tensors": graph_with([h.make_node("Identity", ["x"], ["y"], name="n")],
                                     inputs=[h.make_tensor_value_info("x", T.STRING, [2])],
                                     outputs=[h.make_tensor_value_info("y", T.STRING, [2])]),
        "no-ir-version": onnx.ModelProto(graph=onnx.ModelProto.FromString(
            graph_with([relu("x", "y", "n")])).graph).SerializeToString(),
    }
    for name, data in specials.items():
        cases.append(Case("model", name, _with(data)))
    for name, dim in (("dim-2^40", 2**40), ("dim-2^62", 2**62), ("dim-negative", -5), ("dim-zero", 0),
                      ("dim-minus-one", -1)):
        # Not run in onnxruntime: huge inputs, or a declared negative dim (no valid input).
        cases.append(Case("model", name, _with(_model_bytes(base_model(batch=dim))),
                          extra={"big": abs(dim) > 2**20 or dim < 0}))
    for name, value in (("huge", 10**18), ("2^40", 2**40)):
        cases.append(Case("model", f"dim-option-{name}", _with(argv=["--dim", f"batch={value}"]),
                          extra={"big": True}))
    cases.append(Case("model", "width-0", _with(_model_bytes(base_model(width=0)))))
    # External data that points outside the model's folder, or at things that are no files.
    for name, location in (("dotdot", "../outside.bin"), ("absolute", "/etc/hostname"),
                           ("symlink-out", "link.bin"), ("proc", "/proc/self/environ"),
                           ("dev", "../../../../../../dev/zero"), ("fifo", "fifo.bin"),
                           ("dir", "."), ("empty", "")):
        cases.append(Case("model", f"external-{name}", _external(location)))
    return cases


def _external(location: str) -> Callable[[Path], Argv]:
    def build(box: Path) -> Argv:
        model = base_model()
        w = model.graph.initializer[0]
        w.ClearField("float_data")
        w.ClearField("raw_data")
        w.data_location = T.EXTERNAL
        entry = w.external_data.add()
        entry.key, entry.value = "location", location
        folder = box / "model"
        folder.mkdir()
        (box / "outside.bin").write_bytes(b"\0" * 256)
        (folder / "link.bin").symlink_to(box / "outside.bin")
        os.mkfifo(folder / "fifo.bin")
        _write(folder, "m.onnx", model.SerializeToString())
        _write(box, "r.yaml", _dump(BASE_RULES))
        return ["model/m.onnx", "r.yaml"]
    return build


def rules_type_cases(rng: random.Random) -> list[Case]:
    cases = []
    for path in KEY_PATHS:
        for value in rng.sample(WRONG_VALUES, 3):
            data = _set(BASE_RULES, path, value)
            label = ".".join(map(str, path)) + "=" + (repr(value)[:12] if not isinstance(value, str)
                                                      else f"str{len(value)}")
            cases.append(Case("rules-type", label, _with(rules=_dump(data))))
    # The objective as weights, each weight wrong.
    for value in (float("inf"), float("nan"), -1, "x", None, 2**70, 1e308):
        data = _set(BASE_RULES, ("objective",), {"fallback": 1, "partitions": value})
        cases.append(Case("rules-type", f"weight={value!r}"[:40], _with(rules=_dump(data))))
    # Keys that are not strings, at every level that holds mappings.
    for where in ((), ("devices", 0), ("devices", 0, "ops"), ("dims",), ("affinity",)):
        for key in (1, None, True, 1.5):
            data = copy.deepcopy(BASE_RULES)
            node = data
            for k in where:
                node = node[k]
            node[key] = "v"
            cases.append(Case("rules-type", f"key-{key!r}-in-{'.'.join(map(str, where)) or 'top'}",
                              _with(rules=_dump(data))))
    return cases


def rules_yaml_cases(rng: random.Random) -> list[Case]:
    text = _dump(BASE_RULES)
    lol = ('version: 1\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
           + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n"
                     for i in range(8)))
    long_alias = "version: 1\ns: &s " + "x" * 100_000 + "\nd: [" + ", ".join(["*s"] * 5000) + "]\n"
    texts: dict[str, bytes | str] = {
        "billion-laughs": lol,
        "quadratic": long_alias,
        "recursive-anchor": "version: 1\ndevices: &d [*d]\n",
        "recursive-map": "version: 1\ndevices: &d [{name: a, ops: *d}]\n",
        "deep-flow": "version: 1\ndevices: " + "[" * 3000 + "]" * 3000 + "\n",
        "deep-block": "version: 1\ndevices:\n" + "".join(" " * i + "- \n" for i in range(1, 2000)),
        "deep-map": "version: 1\nd: " + "{a: " * 1500 + "1" + "}" * 1500 + "\n",
        "tag-python": "version: 1\ndevices: !!python/object/apply:os.system ['true']\n",
        "tag-binary": text.replace("name: NPU", "name: !!binary TlBV"),
        "tag-set": "version: 1\ndevices: !!set {a, b}\n",
        "tag-timestamp": text.replace("name: NPU", "name: !!timestamp 2001-12-14"),
        "tag-local": text.replace("name: NPU", "name: !npu NPU"),
        "tag-omap": "version: 1\ndevices: !!omap [a: 1]\n",
        "implicit-date-name": text.replace("name: NPU", "name: 2001-12-14"),
        "merge-override": "base: &b {name: NPU, ops: {supported: all}}\n" + text.replace(
            "- name: NPU", "- <<: *b\n  name: NPU2"),
        "duplicate-key": text + "version: 1\n",
        "two-documents": text + "---\n" + text,
        "empty": "",
        "only-comment": "# nothing\n",
        "scalar": "42\n",
        "list": "- 1\n- 2\n",
        "latin1-comment": ("# café\n" + text).encode("latin-1"),
        "utf16-bom": ("# café\n" + text).encode("utf-16"),
        "utf16-no-bom": ("# café\n" + text).encode("utf-16-le"),
        "utf32-bom": text.encode("utf-32"),
        "utf8-bom": text.encode("utf-8-sig"),
        "utf16-bom-garbage": b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(301)),
        "binary": bytes(rng.randrange(256) for _ in range(2048)),
        "nul-in-text": text.replace("fuzz base", "fuzz\0base"),
        "control-char": text.replace("fuzz base", "fuzz\x07base"),
        "lone-surrogate": text.encode() + b"# \xed\xa0\x80\n",
        "overlong-utf8": text.encode() + b"# \xc0\xaf\n",
        "bom-in-middle": text.replace("fuzz base", "fuzz\ufeffbase"),
        "crlf": text.replace("\n", "\r\n"),
        "tabs": text.replace("  ", "\t"),
        "unclosed": text + "affinity: {a: [\n",
        "huge-int": text.replace("instances: 2", "instances: " + "9" * 5000),
        "huge-float": text.replace("instances: 2", "instances: 1e99999"),
    }
    cases = [Case("rules-yaml", name, _with(rules=data)) for name, data in texts.items()]
    for k in range(8):   # random high bytes spliced into a good file
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            data.insert(rng.randrange(len(data)), rng.randrange(128, 256))
        cases.append(Case("rules-yaml", f"high-bytes-{k}", _with(rules=bytes(data))))
    return cases


def rules_include_cases(rng: random.Random) -> list[Case]:
    def inc(target: str, setup: Callable[[Path], None] | None = None):
        def build(box: Path) -> Argv:
            if setup:
                setup(box)
            data = dict(BASE_RULES)
            data = {"version": 1, "include": [target], **{k: v for k, v in BASE_RULES.items()
                                                          if k != "version"}}
            _write(box, "m.onnx", _model_bytes())
            _write(box, "r.yaml", _dump(data))
            return ["m.onnx", "r.yaml"]
        return build

    catalog = "version: 1\nvalue_inputs: {Reshape: [1]}\n"
    return [Case("rules-include", name, build) for name, build in {
        "folder": inc(".", None),
        "sub-folder": inc("sub", lambda b: (b / "sub").mkdir()),
        "dev-null": inc("/dev/null"),
        "dev-zero": inc("/dev/zero"),
        "fifo": inc("fifo", lambda b: os.mkfifo(b / "fifo")),
        "missing": inc("missing.yaml"),
        "self": inc("r.yaml"),
        "cycle": inc("a.yaml", lambda b: (_write(b, "a.yaml", "version: 1\ninclude: [b.yaml]\n"),
                                          _write(b, "b.yaml", "version: 1\ninclude: [a.yaml]\n"))),
        "binary": inc("bin.yaml", lambda b: _write(b, "bin.yaml", bytes(range(256)))),
        "latin1": inc("l.yaml", lambda b: _write(b, "l.yaml", ("# é\n" + catalog).encode("latin-1"))),
        "bomb": inc("bomb.yaml", lambda b: _write(b, "bomb.yaml", 'version: 1\na: &a [1,1,1,1,1,1,1,1,1,1]\n'
                                                  + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" +
                                                            ",".join(["*" + chr(97 + i)] * 10) + "]\n"
                                                            for i in range(8)))),
        "not-a-mapping": inc("list.yaml", lambda b: _write(b, "list.yaml", "- 1\n")),
        "rule-file-as-catalog": inc("other.yaml", lambda b: _write(b, "other.yaml", _dump(BASE_RULES))),
        "symlink-loop": inc("loop.yaml", lambda b: os.symlink("loop.yaml", b / "loop.yaml")),
        "nul": inc("a\0b"),
        "long-name": inc("x" * 5000),
        "proc": inc("/proc/self/status"),
        "good": inc("cat.yaml", lambda b: _write(b, "cat.yaml", catalog)),
    }.items()]


def rules_value_cases(rng: random.Random) -> list[Case]:
    values = {
        ("devices", 0, "memory"): [".inf", "-.inf", ".nan", "-1", "1e300", str(2**70), "'1e999GB'",
                                   "'99999999999999999999TiB'", "0", "'0.5'", "'1.5.5MB'", "'-0'",
                                   "'inf'", "'nan GB'", "1", "'1 KiB'"],
        ("devices", 0, "instances"): [str(10**9), str(10**6), str(2**63), "0", "-1", "1.5", "true",
                                      "1000"],
        ("dims", "batch"): [str(10**18), "0", "-1", str(2**63), "1.5", "2"],
        ("devices", 0, "ops", "when", "Relu", "max_rank"): [str(10**18), "-1", "0"],
        ("objective",): ["{fallback: .inf}", "{fallback: .nan}", "{partitions: 1e308, transfer: 1e308}",
                         "{fallback: " + str(2**70) + "}", "{fallback: 0, partitions: 0}", "[]",
                         "[transfer]", "[partitions, partitions]", "{transfer: 1}"],
    }
    cases = []
    for path, texts in values.items():
        for text in texts:
            data = _set(BASE_RULES, path, "@@")
            rules = _dump(data).replace("'@@'", text)
            cases.append(Case("rules-value", f"{'.'.join(map(str, path))}={text}"[:60],
                              _with(rules=rules)))
    return cases


def _previous_answer_folder(box: Path) -> None:
    """OUT_DIR holding an older answer with more parts than the next one will have."""
    from hetero_solve import solve
    _write(box, "m.onnx", _model_bytes())
    many = _set(BASE_RULES, ("devices", 0, "ops", "supported"), ["Relu"])
    _write(box, "old.yaml", _dump(many))
    write_result(solve(box / "m.onnx", box / "old.yaml", engine="heuristic"), box / "out")
    (box / "out" / "my-notes.txt").write_text("mine")


def cli_cases(rng: random.Random) -> list[Case]:
    bad_options = {
        "dim-x": ["--dim", "x"], "dim-empty-name": ["--dim", "=1"], "dim-word": ["--dim", "batch=b"],
        "dim-negative": ["--dim", "batch=-1"], "dim-zero": ["--dim", "batch=0"],
        "dim-float": ["--dim", "batch=1.5"], "dim-huge": ["--dim", "batch=" + "9" * 400],
        "time-limit-negative": ["--time-limit", "-1"], "time-limit-nan": ["--time-limit", "nan"],
        "time-limit-inf": ["--time-limit", "inf"], "time-limit-word": ["--time-limit", "soon"],
        "time-limit-zero": ["--time-limit", "0"], "seed-word": ["--seed", "x"],
        "seed-huge": ["--seed", str(2**70)], "seed-negative": ["--seed", "-5"],
        "engine-bogus": ["--engine", "magic"], "unknown-option": ["--frobnicate"],
        "option-without-value": ["--dim"], "unicode-option": ["--dïm", "a=1"],
    }
    cases = [Case("cli", name, _with(argv=argv)) for name, argv in bad_options.items()]

    def files_then(argv_of: Callable[[Path], Argv], setup: Callable[[Path], None] | None = None):
        def build(box: Path) -> Argv:
            _write(box, "m.onnx", _model_bytes())
            _write(box, "r.yaml", _dump(BASE_RULES))
            if setup:
                setup(box)
            return argv_of(box)
        return build

    targets = {
        "out-existing-file": ("notes.txt", lambda b: _write(b, "notes.txt", "mine")),
        "out-dev-null": ("/dev/null", None),
        "out-empty": ("", None),
        "out-dot": (".", None),
        "out-dotdot": ("..", None),
        "out-under-a-file": ("notes.txt/out", lambda b: _write(b, "notes.txt", "mine")),
        "out-proc": ("/proc/hetero-solve-fuzz", None),
        "out-proc-self": ("/proc/self", None),
        "out-user-folder": ("mine", lambda b: ((b / "mine").mkdir(), _write(b, "mine/x.txt", "x"))),
        "out-empty-folder": ("empty", lambda b: (b / "empty").mkdir()),
        "out-symlink-to-folder": ("link", lambda b: ((b / "real").mkdir(), os.symlink("real", b / "link"))),
        "out-dangling-symlink": ("dangling", lambda b: os.symlink("nowhere", b / "dangling")),
        "out-long-name": ("o" * 300, None),
        "out-previous-answer": ("out", _previous_answer_folder),
        "out-fake-answer": ("fake", lambda b: ((b / "fake").mkdir(), _write(
            b, "fake/partition.json", json.dumps({"version": 1, "files": ["partition.json", "../m.onnx"]})))),
        "out-answer-listing-a-user-file": ("ans", lambda b: ((b / "ans").mkdir(), _write(
            b, "ans/partition.json", json.dumps({"version": 1, "files": ["partition.json", "keep.txt"]})),
            _write(b, "ans/keep.txt", "listed but replaced only if the new answer writes it"))),
    }
    for name, (target, setup) in targets.items():
        cases.append(Case("cli", name, files_then(lambda b: ["m.onnx", "r.yaml"], setup), out=target))
    for inside in (False, True):
        def ro(box: Path, inside=inside) -> None:
            (box / "ro").mkdir()
            (box / "ro").chmod(0o555)
        if can_drop_privileges():
            cases.append(Case("cli", f"out-read-only-{'inside' if inside else 'itself'}",
                              files_then(lambda b: ["m.onnx", "r.yaml"], ro), user=NOBODY,
                              out="ro/out" if inside else "ro"))
    cases += [
        Case("cli", "swapped-arguments", files_then(lambda b: ["r.yaml", "m.onnx"])),
        Case("cli", "missing-rules", files_then(lambda b: ["m.onnx"])),
        Case("cli", "missing-model-file", files_then(lambda b: ["nope.onnx", "r.yaml"])),
        Case("cli", "model-is-rules", files_then(lambda b: ["r.yaml", "r.yaml"])),
        Case("cli", "rules-is-model", files_then(lambda b: ["m.onnx", "m.onnx"])),
        Case("cli", "model-is-folder", files_then(lambda b: [".", "r.yaml"])),
        Case("cli", "explain-missing", files_then(lambda b: ["explain", "m.onnx", "nope.yaml"]),
             out=None),
        Case("cli", "rules-check-fifo", files_then(lambda b: ["rules", "check", "fifo"],
                                                   lambda b: os.mkfifo(b / "fifo")), out=None),
        Case("cli", "run-fifo-input", files_then(
            lambda b: ["run", "out", "--input", "x=fifo", "--no-save"],
            lambda b: (_previous_answer_folder(b), os.mkfifo(b / "fifo"))), out=None),
        Case("cli", "run-not-an-answer", files_then(lambda b: ["run", "."]), out=None),
        *[Case("cli", f"check-affinity-{name}", files_then(
            lambda b, data=data: ["check", "m.onnx", "r.yaml", "--affinity",
                                  _write(b, "map.json", data), "--no-export"]), out=None)
          for name, data in {"deep": "[" * 100_000 + "]" * 100_000,
                             "latin1": '{"caf\xe9": "CPU"}'.encode("latin-1"),
                             "binary": bytes(range(256)), "nan": '{"n_mm": NaN}',
                             "list": "[1, 2]", "empty": "", "bom": '\ufeff{"n_mm": "CPU"}'}.items()],
        *[Case("cli", f"long-path-{name}", files_then(lambda b, argv=argv: argv), out=out)
          for name, argv, out in (
              ("model", ["m" * 5000 + ".onnx", "r.yaml"], "out"),
              ("rules", ["m.onnx", "r" * 5000], "out"),
              ("out", ["m.onnx", "r.yaml"], "o/" * 2500),
              ("run", ["run", "x" * 5000], None),
              ("verify", ["verify", "m.onnx", "x" * 5000], None),
              ("check-affinity", ["check", "m.onnx", "r.yaml", "--affinity", "a" * 5000], None),
              ("rules-check", ["rules", "check", "r" * 5000], None),
              ("run-input", ["run", "out", "--input", "x=" + "i" * 5000], None))],
        Case("cli", "run-deep-manifest", files_then(
            lambda b: ["run", "out", "--no-save"],
            lambda b: (_previous_answer_folder(b),
                       _write(b, "out/partition.json", "[" * 100_000 + "]" * 100_000))), out=None),
        Case("cli", "check-affinity-fifo", files_then(
            lambda b: ["check", "m.onnx", "r.yaml", "--affinity", "fifo", "--no-export"],
            lambda b: os.mkfifo(b / "fifo")), out=None),
    ]
    return cases


def random_cases(rng: random.Random) -> list[Case]:
    """Random small models (chains and branches of a few ops, some dead ends) under random
    rule files (op subsets, memory limits, instances, objectives, value inputs)."""
    cases = []
    ops = ["Relu", "Sigmoid", "Add", "Mul", "Tanh", "Neg", "Reshape", "Erf"]
    for k in range(36):
        r = random.Random(rng.randrange(2**32))
        names, nodes, inits = ["x"], [], []
        for i in range(r.randint(1, 9)):
            op = r.choice(ops)
            a = r.choice(names)
            if op in ("Add", "Mul"):
                ins = [a, r.choice(names)]
            elif op == "Reshape":
                sname = f"shape{i}"
                inits.append(onnx.numpy_helper.from_array(np.array([4, -1], np.int64), sname))
                ins = [a, sname]
            else:
                ins = [a]
            nodes.append(h.make_node(op, ins, [f"t{i}"], name=f"n{i}"))
            if r.random() < 0.8:
                names.append(f"t{i}")
        last = nodes[-1].output[0]
        graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 4])],
                             [h.make_tensor_value_info(last, T.FLOAT, [4, 4])], initializer=inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        model.ir_version = 8
        devices = []
        for d in range(r.randint(1, 3)):
            dev = {"name": f"D{d}", "ops": {"supported": r.sample(ops, r.randint(1, len(ops)))}}
            if r.random() < 0.5:
                dev["memory"] = r.choice([64, 128, 200, 256, 400, 1000, 4096])
            if r.random() < 0.3:
                dev["instances"] = r.randint(1, 3)
            if r.random() < 0.3:
                dev["value_inputs"] = "ignore"
            if r.random() < 0.2:
                dev["ops"]["static_shapes"] = True
            devices.append(dev)
        if r.random() < 0.7:
            fallback = {"name": "CPU", "ops": {"supported": "all"}}
            if r.random() < 0.3:
                fallback["memory"] = r.choice([128, 512, 100000])
            devices.append(fallback)
        rules = {"version": 1, "devices": devices, "value_inputs": {"Reshape": [1]}}
        objective = r.choice([None, ["fallback", "partitions", "transfer"], ["partitions", "fallback"],
                              ["transfer", "partitions"], {"fallback": 1, "partitions": 3},
                              {"transfer": 1, "partitions": 100}])
        if objective is not None:
            rules["objective"] = objective
        engine = r.choice(["heuristic", "auto", "sat"])
        cases.append(Case("random", f"{k}-{engine}",
                          _with(model.SerializeToString(), _dump(rules),
                                ["--engine", engine, "--time-limit", "2"])))
    return cases


def console_cases(rng: random.Random) -> list[Case]:
    good = _model_bytes()
    return [
        Case("console", "ok", _with(), console=True),
        Case("console", "bitflip", _with(good[:40] + bytes([good[40] ^ 0x40]) + good[41:]), console=True),
        Case("console", "bomb", rules_yaml_cases(random.Random(0))[0].build, console=True),
        Case("console", "time-limit-negative", _with(argv=["--time-limit", "-1"]), console=True),
        Case("console", "out-dot", _with(), console=True, out="."),
        Case("console", "latin1", _with(rules=("# é\n" + _dump(BASE_RULES)).encode("latin-1")),
             console=True),
    ]


def all_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases = []
    for make in (model_cases, rules_type_cases, rules_yaml_cases, rules_include_cases,
                 rules_value_cases, cli_cases, random_cases, console_cases):
        cases += make(random.Random(rng.randrange(2**32)))
    return cases


CASES = all_cases()
#: Cases left out: their failure is known and being fixed by the module's owner (id -> why).
KNOWN: dict[str, str] = {}


# -- checking an outcome -----------------------------------------------------------------------------

def _snapshot(box: Path, skip: Path | None) -> dict[str, str]:
    """Every entry under ``box`` (not following links, not below ``skip``) with its content."""
    found = {}
    for root, dirs, files in os.walk(box, followlinks=False):
        rootp = Path(root)
        if skip is not None and (rootp == skip or skip in rootp.parents):
            dirs[:] = []
            continue
        for name in dirs + files:
            p = rootp / name
            if skip is not None and p == skip:
                continue
            rel = str(p.relative_to(box))
            st = os.lstat(p)
            if os.path.islink(p):
                found[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                found[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
            elif p.is_dir():
                found[rel] = f"dir:{st.st_mode & 0o777:o}"
            else:
                found[rel] = f"special:{st.st_mode:o}"
    return found


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:   # a name too long, ...
        return False


def _check_answer(out: Path, model_path: Path, big: bool) -> None:
    files = answer_files(out)
    assert files is not None, f"{out} is not an answer"
    for name in files:
        assert (out / name).is_file(), f"{name} is listed but missing"
    manifest = json.loads((out / "partition.json").read_text())
    model = onnx.load(str(model_path), load_external_data=False)
    n = len(model.graph.node)
    seen = [i for p in manifest["partitions"] for i in p["nodes"]]
    seen += manifest["folded"] + manifest["constant_nodes"]
    assert sorted(seen) == list(range(n)), "every node exactly once"
    for a, b in manifest["edges"]:
        assert a < b, "part ids are a topological order"
    for part in manifest["partitions"]:
        if part["file"]:
            m = onnx.load(str(out / part["file"]))
            assert len(m.graph.output) >= 1, f"{part['file']} has no outputs"
    if big:   # too large (or declared negative): `verify` must say so in one line
        r = outcome(["verify", model_path, out], timeout=TIMEOUT)
        assert r.code == 2 and len(r.err_lines) == 1 and "Traceback" not in r.err, r
        return
    if not all(p["file"] for p in manifest["partitions"]):
        return
    import hetero_solve as hs
    from hetero_solve.errors import HeteroSolveError
    # A dimension the answer leaves open gets the base rules' value.
    dims = {"batch": 2} if "batch" not in manifest["dims"] else None
    try:
        report = hs.verify(model_path, out, dims=dims, seed=1)
    except HeteroSolveError as e:
        if "the original model" in str(e):
            return      # onnxruntime cannot run the original itself: nothing to compare
        raise
    assert report.ok, [o.as_dict() for o in report.outputs]


def _record(case: Case, code: int) -> None:
    log = os.environ.get("HETERO_SOLVE_FUZZ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"category": case.category, "case": case.name, "code": code}) + "\n")


SUBCOMMANDS = ("explain", "rules", "run", "check")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fuzz(case: Case, tmp_path: Path) -> None:
    if case.id in KNOWN:
        pytest.skip(f"left out, known: {KNOWN[case.id]}")
    box = tmp_path / "box"
    box.mkdir()
    argv = case.build(box)
    subcommand = bool(argv) and argv[0] in SUBCOMMANDS
    if not subcommand and case.out is not None:
        argv = [*argv, "-o", case.out]
    if case.user is not None:   # let the unprivileged child read what the case wrote
        for root, dirs, files in os.walk(box):
            for name in dirs + files:
                p = Path(root) / name
                if not p.is_symlink() and p.name != "ro":
                    p.chmod(0o755 if p.is_dir() else 0o644)
        box.chmod(0o755)
    # The target as a folder inside the box (other targets are refused or outside it).
    inside = (not subcommand and case.out not in (None, "", ".", "..")
              and not case.out.startswith("/"))
    target = box / case.out if inside else None
    old_answer = set(answer_files(target) or []) if target is not None and _is_dir(target) else set()
    before = _snapshot(box, None)
    if case.console:
        r = console_script(argv, cwd=box, timeout=TIMEOUT)
    else:
        r = outcome(argv, cwd=box, timeout=TIMEOUT, user=case.user)
    _record(case, r.code)

    assert r.code != HANG, f"hang: {r}"
    assert not (CRASH - 100 < r.code <= CRASH), f"crash: {r}"
    assert r.code != ESCAPED and "Traceback" not in r.err, f"traceback: {r}"
    assert r.code in (0, 2) or (r.code == 1 and argv[:1] == ["check"]), f"exit code: {r}"
    assert not [p for p in box.rglob(f"{TMP_PREFIX}*")], "a temporary folder was left behind"
    if r.code == 2:
        assert r.err_lines and r.err_lines[0].startswith("hetero-solve: error: "), \
            f"the error line is not the first line: {r}"
        assert len(r.err_lines) == 1, f"more than one line on stderr: {r}"
        assert r.out == "", f"stdout on an error: {r}"
        assert _snapshot(box, None) == before, "a failed run changed files"
        return
    others = [x for x in r.err_lines if not x.startswith("hetero-solve: warning: ")]
    assert not others, f"stderr lines that are no warnings: {r}"
    if subcommand:
        assert _snapshot(box, None) == before
        return
    assert target is not None and target.is_dir(), r
    real = target.resolve()
    in_target = lambda k: (box / k).resolve().is_relative_to(real)  # noqa: E731
    assert ({k: v for k, v in _snapshot(box, None).items() if not in_target(k)}
            == {k: v for k, v in before.items() if not in_target(k)}), "files outside OUT_DIR changed"
    new_answer = set(answer_files(target) or [])
    was, now = (_entries_of(snap, case.out) for snap in (before, _snapshot(box, None)))
    for name, value in was.items():       # what was not the old answer's is untouched
        top = name.split("/")[0]
        if top not in old_answer and top not in new_answer:
            assert now.get(name) == value, f"{name} in OUT_DIR changed or vanished"
    was_top = {n.split("/")[0] for n in was}
    for name in now:                      # nothing of the old answer survives beside the new
        top = name.split("/")[0]
        assert top in new_answer or (top in was_top and top not in old_answer), \
            f"{name}: a stale file next to the new answer"
    model_path = box / next(a for a in argv if a.endswith(".onnx"))
    _check_answer(target, model_path, case.extra.get("big", False))


def _entries_of(snap: dict[str, str], folder: str) -> dict[str, str]:
    prefix = folder.rstrip("/") + "/"
    return {k[len(prefix):]: v for k, v in snap.items() if k.startswith(prefix)}


def test_every_key_with_every_wrong_type_in_process(tmp_path):
    """The library on all of KEY_PATHS x WRONG_VALUES (the command-line cases above sample 3
    values per key): a rule file is accepted, and then solves, or is a RuleError; nothing
    else escapes."""
    import hetero_solve as hs
    from hetero_solve.errors import HeteroSolveError
    model = base_model()
    accepted = refused = 0
    for k, path in enumerate(KEY_PATHS):
        for j, value in enumerate(WRONG_VALUES):
            file = tmp_path / f"r{k}_{j}.yaml"
            file.write_text(_dump(_set(BASE_RULES, path, value)))
            try:
                rules = hs.load_rules(file)
            except HeteroSolveError as e:
                assert str(e).startswith(str(file)) and "\n" not in str(e), (path, value, e)
                refused += 1
                continue
            try:
                hs.solve(model, rules, engine="heuristic")
            except HeteroSolveError:
                pass
            accepted += 1
    assert refused > accepted > 0


def test_the_suite_covers_every_category_with_a_few_hundred_cases():
    counts: dict[str, int] = {}
    for c in CASES:
        counts[c.category] = counts.get(c.category, 0) + 1
    assert len(CASES) >= 300, counts
    assert set(counts) == {"model", "rules-type", "rules-yaml", "rules-include", "rules-value",
                           "cli", "random", "console"}, counts
    assert len({c.id for c in CASES}) == len(CASES), "case ids are unique"
