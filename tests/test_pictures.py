"""Pictures that render (issue 15, item 4): DOT labels escaped once (a line break, not a
literal backslash-n), and SVG/PNG of the partition DAG and of the coloured model graph drawn
without a system binary (networkx lays out, matplotlib draws) or with Graphviz when present."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

import hetero_solve as hs
from conftest import EXAMPLES, ROOT, RULES
from hetero_solve.export import dot


@pytest.fixture(scope="module")
def result():
    return hs.solve(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", engine="heuristic")


def test_dot_labels_are_escaped_once(result):
    text = dot.affinity_dot(result.problem, result.solution, 'a "quoted" \\ name')
    assert "\\\\n" not in text                               # no literal \n in any box
    assert re.search(r'label="1\\nRelu \| part 0"', text)    # one DOT line break
    assert 'digraph "a \\"quoted\\" \\\\ name affinity"' in text
    parts = dot.partitions_dot(result.problem, result.solution, result.metrics.part_memory)
    assert re.search(r'label="part 0\\nACCEL\\n2 nodes\\n', parts)
    if shutil.which("dot"):                                  # Graphviz parses it
        subprocess.run(["dot", "-Tsvg"], input=text.encode(), check=True, capture_output=True)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_pictures_without_a_system_binary(result, tmp_path, fmt, monkeypatch):
    monkeypatch.setattr(dot.shutil, "which", lambda _name: None)     # no Graphviz
    assert dot.drawing_backend() == "matplotlib"
    out = result.write(tmp_path / "out", pictures=fmt)
    for name in ("partitions", "affinity"):
        data = (out / f"{name}.{fmt}").read_bytes()
        if fmt == "svg":
            assert data.startswith(b"<?xml") and b"<svg" in data
            assert b"ACCEL" in data and b"CPU" in data          # the legend's devices
        else:
            assert data.startswith(b"\x89PNG")


def test_without_any_drawing_library_the_command_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(dot, "drawing_backend", lambda: None)
    with pytest.raises(dot.PictureError, match="pictures needs matplotlib"):
        dot.check_can_draw("svg")
    r = subprocess.run([sys.executable, "-m", "hetero_solve", EXAMPLES / "seed000.onnx",
                        RULES / "seed000.yaml", "-o", tmp_path / "out", "--pictures", "gif"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "expected one of svg, png" in r.stderr
    assert not (tmp_path / "out").exists()
