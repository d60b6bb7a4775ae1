"""What a user reads, round 2 (issue 39 item 9): help in the docs' words, a did-you-mean for a
mistyped path and op, and lines that say what the command did."""

from __future__ import annotations

import re

import pytest

from conftest import EXAMPLES, RULES
from hetero_solve.cli import app, main


def cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _commands():
    """Every command path: ``[]``, ``["solve"]``, ..., ``["rules", "check"]``."""
    import importlib
    import typer.main
    from hetero_solve.cli import COMMAND_MODULES
    for modules in COMMAND_MODULES.values():      # the commands register when first used
        for module in modules:
            importlib.import_module(f"hetero_solve.cli.{module}")
    root = typer.main.get_command(app)
    paths = [[]]
    for name, cmd in root.commands.items():
        paths.append([name])
        paths.extend([name, sub] for sub in getattr(cmd, "commands", {}))
    return paths


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "hetero-solve")
def test_help_names_values_as_the_docs_do(path, capsys):
    """No typer type names (``<str>``, ``<float range>``, ``<list[Path]>``, ``<path>``) and no
    argument in lower case (``{out_dir}``): ``OUT_DIR``, ``--time-limit SECONDS``."""
    code, out, err = cli([*path, "--help"], capsys)
    assert code == 0, err
    assert not re.search(r"<(str|int|float|path|list\[|bool)", out), out
    assert not re.search(r"\{[a-z]", out.splitlines()[0]), out.splitlines()[0]


def test_help_says_what_each_command_takes(capsys):
    _, out, _ = cli(["solve", "--help"], capsys)
    assert "-t, --time-limit SECONDS" in out and "-o, --out DIR" in out
    _, out, _ = cli(["instance", "--help"], capsys)
    assert "from the instance read" in out and "model loaded" not in out
    _, out, _ = cli(["export", "openvino", "--help"], capsys)
    assert "--dim" not in out                        # export has no --dim to beat
    _, out, _ = cli(["rules", "from-onnxruntime", "--help"], capsys)
    assert "default: DEVICE" not in out and "onnxruntime provider, its name" in " ".join(out.split())
    _, out, _ = cli(["run", "--help"], capsys)
    assert "Run the parts in id order, each on its device's runtime" in out
    for command in (["profile"], ["rules", "from-onnxruntime"], ["rules", "from-openvino"]):
        _, out, _ = cli([*command, "--help"], capsys)
        assert "-o, --out, --output" in out, command   # -o/--out as on solve


def test_a_mistyped_path_gets_the_closest_name_of_its_folder(tmp_path, capsys):
    code, _, err = cli([EXAMPLES / "resnet_lik.onnx", RULES / "npu-static.yaml"], capsys)
    assert code == 2
    assert err.strip() == (f"hetero-solve: error: {EXAMPLES / 'resnet_lik.onnx'}: no such file "
                           f"(did you mean {str(EXAMPLES / 'resnet_like.onnx')!r}?)")
    code, _, err = cli([EXAMPLES / "resnet_like.onnx", RULES / "npu-statc.yaml"], capsys)
    assert code == 2 and f"(did you mean {str(RULES / 'npu-static.yaml')!r}?)" in err
    code, _, err = cli([EXAMPLES / "resnet_like.onnx", RULES / "zzz.yaml"], capsys)
    assert code == 2 and err.strip().endswith("zzz.yaml: no such file")
    (tmp_path / "model.hetero").mkdir()
    code, _, err = cli(["run", tmp_path / "model.hetro"], capsys)
    assert code == 2 and f"(did you mean {str(tmp_path / 'model.hetero')!r}?)" in err


def test_a_mistyped_op_is_not_proposed_in_another_domain(tmp_path, capsys):
    (tmp_path / "r.yaml").write_text("version: 1\ndevices:\n  - name: NPU\n    ops: "
                                     "{supported: [Rellu]}\n  - name: CPU\n    ops: "
                                     "{supported: all}\n")
    code, _, err = cli(["rules", "check", tmp_path / "r.yaml"], capsys)
    assert code == 2
    assert "unknown op 'Rellu' (did you mean Relu" in err and "com.microsoft.Rellu" not in err


def test_verbose_writing_is_not_one_line_per_part(tmp_path, capsys):
    """``-v`` on an answer of many parts: the first part's line, then at most one a second
    (it printed ``writing part i/N`` for every part)."""
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: NPU\n    ops: {supported: [Conv, Relu, "
                     "Add]}\n  - name: CPU\n    ops: {supported: all}\n")
    code, _, err = cli([EXAMPLES / "resnet_like.onnx", rules, "--dim", "batch=1", "-v",
                        "--engine", "heuristic", "-o", tmp_path / "out"], capsys)
    assert code == 0, err
    import json
    parts = len(json.loads((tmp_path / "out" / "partition.json").read_text())["partitions"])
    lines = [x for x in err.splitlines() if "writing part" in x]
    assert parts >= 10 and lines and "writing part 1/" in lines[0] and len(lines) < parts
