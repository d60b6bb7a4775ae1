"""Pictures that render (issue 15, item 4): DOT labels escaped once (a line break, not a
literal backslash-n), and SVG/PNG of the partition DAG and of the coloured model graph drawn
without a system binary (:mod:`hetero_solve.export.layout` places, matplotlib draws) or with
Graphviz when only it is present.  Issue 24: no arrow behind a box, long models wrapped to a
screen's shape, checked on the coordinates matplotlib draws."""

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
    with pytest.raises(dot.PictureError, match="pictures needs matplotlib") as e:
        dot.check_can_draw("svg")
    # it is raised before anything is written: it says so, and how to get the .dot files
    assert "nothing was written (without --pictures" in str(e.value)
    r = subprocess.run([sys.executable, "-m", "hetero_solve", EXAMPLES / "seed000.onnx",
                        RULES / "seed000.yaml", "-o", tmp_path / "out", "--pictures", "gif"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "expected one of svg, png" in r.stderr
    assert not (tmp_path / "out").exists()


# -- issue 24: pictures a person can read ---------------------------------------------------------

def _check_arrows(pic, lay):
    """No arrow passes through a box; each starts on its source's border and ends on its
    target's (the geometry matplotlib draws, one unit one inch)."""
    from hetero_solve.export.layout import crossings
    assert crossings(lay) == []
    for (a, b, _label, _h), pts in zip(pic.edges, lay.arrows):
        assert len(pts) >= 2
        (ax_, ay), (bx, by) = pts[0], pts[-1]
        for (x, y), node in (((ax_, ay), a), ((bx, by), b)):
            cx, cy, w, h = lay.boxes[node]
            assert abs(x - cx) <= w / 2 + 1e-9 and abs(abs(y - cy) - h / 2) < 1e-9


def test_no_arrow_hides_behind_a_part_of_resnet_like():
    """Part 0 feeds parts 1 and 2, part 1 feeds part 2: the arrow 0 -> 2 once ran straight
    through part 1's box."""
    r = hs.solve(EXAMPLES / "resnet_like.onnx", RULES / "npu-static.yaml", engine="heuristic")
    pic = dot.partitions_picture(r.problem, r.solution, r.metrics.part_memory)
    assert ("p0", "p2") in {(a, b) for a, b, _l, _h in pic.edges}
    lay = dot.picture_layout(pic)
    _check_arrows(pic, lay)
    affinity = dot.affinity_picture(r.problem, r.solution)
    _check_arrows(affinity, dot.picture_layout(affinity))


def _twelve_layer_encoder(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    import make_examples
    import onnx
    path = tmp_path / "encoder12.onnx"
    onnx.save(make_examples.transformer_encoder(layers=12), str(path))
    return path


def test_a_twelve_layer_encoder_fits_a_screen(tmp_path):
    """Hundreds of rows of one to three boxes: wrapped into columns, the picture's shape is
    a screen's (within 2.5:1 either way), and no arrow crosses a box on the way."""
    from hetero_solve.export.layout import TALLEST
    r = hs.solve(_twelve_layer_encoder(tmp_path), RULES / "npu-static.yaml", dims={"seq": 16},
                 engine="heuristic")
    for pic in (dot.affinity_picture(r.problem, r.solution),
                dot.partitions_picture(r.problem, r.solution, r.metrics.part_memory)):
        lay = dot.picture_layout(pic)
        assert lay.columns > 1
        assert 1 / TALLEST <= lay.width / lay.height <= TALLEST, (pic.title, lay.width, lay.height)
        _check_arrows(pic, lay)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
def test_the_drawn_png_has_the_layouts_shape(tmp_path):
    import struct
    r = hs.solve(_twelve_layer_encoder(tmp_path), RULES / "npu-static.yaml", dims={"seq": 16},
                 engine="heuristic")
    pic = dot.partitions_picture(r.problem, r.solution, r.metrics.part_memory)
    lay = dot.picture_layout(pic)
    path = dot.draw(pic, tmp_path / "parts.png", backend="matplotlib")
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert max(width, height) <= dot.MAX_PIXELS
    assert 1 / 2.5 <= width / height <= 2.5
    # The drawing is the layout plus margins, title and legend: within an inch or so.
    assert abs(width / height - lay.width / lay.height) < 0.35


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_route_every_arrow_around_the_boxes(seed):
    import random
    from hetero_solve.export.layout import layout
    rng = random.Random(seed)
    n = rng.randint(5, 60)
    nodes = [(f"v{i}", rng.uniform(0.5, 2.5), 0.5) for i in range(n)]
    edges = sorted({(f"v{a}", f"v{b}") for a in range(n) for b in range(a + 1, min(n, a + 12))
                    if rng.random() < 3 / (b - a + 2)})
    edges.append((f"v{n - 1}", "v0"))         # one edge against the order (a cycle)
    pic = dot.Picture("random", nodes=[(i, [i], "#ffffff") for i, _w, _h in nodes],
                      edges=[(a, b, "", False) for a, b in edges])
    lay = layout(nodes, edges)
    _check_arrows(pic, lay)
