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
from hetero_solve.export import write_result


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
    out = write_result(result, tmp_path / "out", pictures=fmt)
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


# -- issue 31: pictures a person can read, in a time a person waits for -------------------------

def _fan(n: int, bundle: bool):
    """A chain of ``n`` boxes and a source that feeds every one of them (a mask read by every
    layer): ``n - 1`` arrows leave the source for rows further and further down."""
    from hetero_solve.export.layout import layout
    nodes = [("mask", 1.0, 0.4)] + [(f"layer{i}", 1.5, 0.4) for i in range(n)]
    edges = [(f"layer{i}", f"layer{i + 1}") for i in range(n - 1)]
    edges += [("mask", f"layer{i}") for i in range(n)]
    pic = dot.Picture("fan", nodes=[(i, [i], "#ffffff") for i, _w, _h in nodes],
                      edges=[(a, b, "", False) for a, b in edges])
    return pic, layout(nodes, edges, bundle=bundle)


def test_arrows_sharing_a_source_are_one_wire(monkeypatch):
    """Twelve arrows from one box to twelve rows: bundled, they share their waypoints (one
    wire branching off at each row) instead of twelve wires side by side; none crosses a box
    and each still ends on its own target."""
    def wires(lay):   # distinct vertical steps between rows (rounded), over every arrow
        return {(round(x0, 3), round(y0, 3), round(x1, 3), round(y1, 3)) for pts in lay.arrows
                for (x0, y0), (x1, y1) in zip(pts, pts[1:])}
    pic, apart = _fan(12, bundle=False)
    _pic, bundled = _fan(12, bundle=True)
    _check_arrows(pic, bundled)
    assert len(wires(bundled)) <= 0.5 * len(wires(apart)), (len(wires(bundled)),
                                                            len(wires(apart)))
    # the picture's own choice: arrows without labels (affinity) are bundled, labelled
    # arrows (the parts' bytes) are not: their labels would sit on one another
    asked = []
    real = dot.layout
    monkeypatch.setattr(dot, "layout", lambda *a, **k: asked.append(k["bundle"]) or real(*a, **k))
    dot.picture_layout(pic)
    dot.picture_layout(dot.Picture("x", nodes=pic.nodes,
                                   edges=[(a, b, "1 KiB", h) for a, b, _l, h in pic.edges]))
    assert asked == [True, False]


def test_one_node_and_a_long_title_on_a_narrow_picture(tmp_path):
    import struct
    r = hs.solve(EXAMPLES / "seed000.onnx", RULES / "seed000.yaml", engine="heuristic")
    pic = dot.partitions_picture(r.problem, r.solution, r.metrics.part_memory)
    lines = [line for _i, node_lines, _c in pic.nodes for line in node_lines]
    assert "1 node" in lines and "1 nodes" not in lines
    if importlib.util.find_spec("matplotlib") is None:
        return
    narrow = dot.Picture("a-model-with-a-rather-long-name-that-is-wider-than-its-one-box "
                         "partitions", nodes=[("p0", ["part 0"], "#ffffff")])
    path = dot.draw(narrow, tmp_path / "narrow.png", backend="matplotlib")
    width, _height = struct.unpack(">II", path.read_bytes()[16:24])
    title_px = len(narrow.title) * dot._CHAR_WIDTH * dot.TITLE_POINTS / 72 * 100
    assert width >= title_px        # the title is not cut at the picture's edges


def test_glyph_text_lands_where_it_is_centred():
    """The PNG's box labels are pasted from glyphs rendered once: the ink of a centred word
    is around its centre, as wide as the word."""
    import numpy as np
    pytest.importorskip("matplotlib")
    from hetero_solve.export.glyphs import GlyphText
    pixels = np.full((60, 300, 3), 255, np.uint8)
    text = GlyphText(10, 100)
    text.draw(pixels, ["Conv | part 0"], 150, 30)
    rows, cols = np.nonzero(pixels.min(axis=2) < 128)
    assert len(rows) > 50
    assert abs((rows.min() + rows.max()) / 2 - 30) <= 4
    assert abs((cols.min() + cols.max()) / 2 - 150) <= 4
    assert abs((cols.max() - cols.min()) - text.width("Conv | part 0")) <= 4
