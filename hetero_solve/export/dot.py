"""Pictures of an answer: the model graph coloured by device (``affinity``, as OpenVINO's
``hetero_affinity_<model>.dot``) and the DAG of parts (``partitions``, as its
``hetero_subgraphs_<model>.dot`` and Glow's ``DAG.dot``).

Each picture is first a plain :class:`Picture` (boxes with lines of text and a colour, arrows
with an optional label), then written as Graphviz DOT text (:func:`to_dot`, always) or drawn
as SVG or PNG (:func:`draw`): laid out by :mod:`.layout` (arrows beside the boxes, never behind
them; long models wrapped into columns to fit a screen) and drawn by matplotlib, an optional
extra (``pip install 'hetero-solve[pictures]'``), else by Graphviz's ``dot`` when only it is
installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import HeteroSolveError
from ..measures import crossings, quotient_edges
from ..problem import Problem
from ..solution import Solution
from ..units import format_bytes, instance_label
from .glyphs import GlyphText
from .layout import Layout, layout

PALETTE = ["#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5",
           "#ffffb3", "#bc80bd", "#ccebc5"]
FORMATS = ("svg", "png")
#: Drawing a model graph with more nodes than this takes minutes and shows nothing readable;
#: such pictures are left to the DOT file (``dot -Tsvg``, or a viewer that zooms).
MAX_DRAWN_NODES = 3000


class PictureError(HeteroSolveError):
    """A picture cannot be drawn here (no drawing library, an unknown format)."""


@dataclass
class Picture:
    """Boxes and arrows.  ``nodes``: (id, lines of text, fill colour); ``edges``: (from, to,
    label, highlighted); ``legend``: (text, colour) pairs."""
    title: str
    nodes: list[tuple[str, list[str], str]] = field(default_factory=list)
    edges: list[tuple[str, str, str, bool]] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    font_size: int = 10


def device_colours(problem: Problem) -> list[str]:
    return [PALETTE[d % len(PALETTE)] for d in range(len(problem.devices))]


def affinity_picture(problem: Problem, sol: Solution, title: str = "model") -> Picture:
    """Every placed node, coloured by its part's device; edges between parts highlighted."""
    colours = device_colours(problem)
    pic = Picture(f"{title} affinity", legend=[(d.name, colours[i])
                                                for i, d in enumerate(problem.devices)])
    names, ops, part_of, part_device = problem.names, problem.op_types, sol.part_of, sol.part_device
    pic.nodes = [(f"n{v}", [names[v], f"{ops[v]} | part {p}"], colours[part_device[p]])
                 for v, p in enumerate(part_of)]
    pic.edges = [(f"n{u}", f"n{v}", "", part_of[u] != part_of[v])
                 for u, succ in enumerate(problem.succ) for v in succ]
    return pic


def partitions_picture(problem: Problem, sol: Solution, memory: list[int],
                       title: str = "model") -> Picture:
    """One box per part (device instance, node count, memory); arrows labelled with the bytes
    they carry."""
    colours = device_colours(problem)
    sizes = [0] * sol.num_parts
    for p in sol.part_of:
        sizes[p] += 1
    carried: dict[tuple[int, int], int] = {}
    for t, a, readers in crossings(problem, sol.part_of):
        for b in readers:
            carried[(a, b)] = carried.get((a, b), 0) + problem.tensor_bytes[t]
    pic = Picture(f"{title} partitions", font_size=11,
                  legend=[(d.name, colours[i]) for i, d in enumerate(problem.devices)])
    for p in range(sol.num_parts):
        dev = problem.devices[sol.part_device[p]]
        pic.nodes.append((f"p{p}", [f"part {p}",
                                    instance_label(dev.name, sol.part_instance[p], dev.instances),
                                    f"{sizes[p]} node{'s' if sizes[p] != 1 else ''}",
                                    format_bytes(memory[p])],
                          colours[sol.part_device[p]]))
    for a, b in sorted(quotient_edges(problem, sol.part_of)):
        pic.edges.append((f"p{a}", f"p{b}", format_bytes(carried.get((a, b), 0)), False))
    return pic


# -- DOT --------------------------------------------------------------------------------------

def _escaped(text: str) -> str:
    """Backslashes and quotes escaped once, for inside a DOT string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _quoted(text: str) -> str:
    """A DOT string: backslashes and quotes escaped once."""
    return '"' + _escaped(text) + '"'


def _label(lines: list[str]) -> str:
    """A multi-line DOT label: each line escaped, joined by DOT's own line break ``\\n``."""
    return '"' + "\\n".join(map(_escaped, lines)) + '"'


def to_dot(pic: Picture) -> str:
    """The picture as Graphviz DOT text (one list of lines, joined once: 100,000 nodes and
    their edges in a fraction of a second)."""
    out = [f"digraph {_quoted(pic.title)} {{", "  rankdir=TB;",
           f'  node [shape=box, style="rounded,filled", fontsize={pic.font_size}];']
    out += [f'  legend_{k} [label={_quoted(text)}, fillcolor="{colour}", shape=note];'
            for k, (text, colour) in enumerate(pic.legend)]
    out += [f'  {node_id} [label={_label(lines)}, fillcolor="{colour}"];'
            for node_id, lines, colour in pic.nodes]
    out += [f"  {a} -> {b};" if not (label or highlighted) else _edge(a, b, label, highlighted)
            for a, b, label, highlighted in pic.edges]
    out.append("}")
    return "\n".join(out) + "\n"


def _edge(a: str, b: str, label: str, highlighted: bool) -> str:
    attrs = []
    if label:
        attrs.append(f"label={_quoted(label)}")
    if highlighted:
        attrs.append("penwidth=2, color=red")
    return f"  {a} -> {b} [{', '.join(attrs)}];"


def affinity_dot(problem: Problem, sol: Solution, title: str = "model") -> str:
    """``affinity.dot``: the model graph coloured by device."""
    return to_dot(affinity_picture(problem, sol, title))


def partitions_dot(problem: Problem, sol: Solution, memory: list[int], title: str = "model") -> str:
    """``partitions.dot``: the DAG of parts."""
    return to_dot(partitions_picture(problem, sol, memory, title))


# -- SVG and PNG ------------------------------------------------------------------------------

def drawing_backend() -> str | None:
    """``"matplotlib"`` (:mod:`.layout` places, matplotlib draws: the layout whose arrows
    and shape are tested), else ``"graphviz"`` (its ``dot`` program is installed), else None:
    nothing here can draw."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is not None:
        return "matplotlib"
    if shutil.which("dot"):
        return "graphviz"
    return None


def check_can_draw(fmt: str) -> str:
    """The backend that will draw ``fmt``, or a :class:`PictureError` saying what to install
    (raised before any work is done)."""
    if fmt not in FORMATS:
        raise PictureError(f"--pictures {fmt!r}: expected one of {', '.join(FORMATS)}")
    backend = drawing_backend()
    if backend is None:
        raise PictureError("--pictures needs matplotlib (pip install 'hetero-solve[pictures]') "
                           "or Graphviz's dot program; nothing was written (without --pictures "
                           "the answer is written with partitions.dot and affinity.dot)")
    return backend


def draw(pic: Picture, path: str | os.PathLike, fmt: str | None = None,
         backend: str | None = None) -> Path:
    """Draw ``pic`` to ``path`` as SVG or PNG (``fmt``: from the suffix when not given)."""
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".").lower()
    backend = backend or check_can_draw(fmt)
    if backend == "graphviz":
        try:
            subprocess.run(["dot", f"-T{fmt}", "-o", str(path)], input=to_dot(pic).encode(),
                           check=True, capture_output=True, timeout=600)
            return path
        except (OSError, subprocess.SubprocessError):
            raise PictureError(f"Graphviz's dot failed to draw {path.name}") from None
    _draw_matplotlib(pic, path, fmt)
    return path


#: Text in a drawn box: lines cut to this many characters (the start dropped: a node name's
#: end says most), and the font's average character width and line height per point size.
DRAWN_LINE_CHARS = 36
_CHAR_WIDTH = 0.62
_LINE_HEIGHT = 1.3
_PAD = 0.08
#: The largest side of a PNG, in pixels (a 4K screen's width): a bigger picture is drawn at a
#: lower resolution (an overview; the SVG or affinity.dot has every name legible when zoomed).
MAX_PIXELS = 4096
#: The title's font size (points); a picture is at least as wide as its title.
TITLE_POINTS = 12


def drawn_lines(lines: list[str]) -> list[str]:
    """The lines of a box as drawn: each cut to :data:`DRAWN_LINE_CHARS` characters."""
    return [x if len(x) <= DRAWN_LINE_CHARS else "…" + x[-(DRAWN_LINE_CHARS - 1):] for x in lines]


def picture_layout(pic: Picture) -> Layout:
    """Where matplotlib draws ``pic``'s boxes and arrows (inches; :func:`.layout.layout`),
    each box as large as its text at the drawn font size; arrows without labels from one box
    bundled."""
    points = pic.font_size * 0.8
    line_h = _LINE_HEIGHT * points / 72
    rows = max((len(lines) for _i, lines, _c in pic.nodes), default=1)
    nodes = [(node_id, max((len(x) for x in drawn_lines(lines)), default=1) * _CHAR_WIDTH * points / 72
              + 2 * _PAD, rows * line_h + 2 * _PAD) for node_id, lines, _c in pic.nodes]
    return layout(nodes, [(a, b) for a, b, _l, _h in pic.edges],
                  bundle=not any(label for _a, _b, label, _h in pic.edges))


def _draw_matplotlib(pic: Picture, path: Path, fmt: str) -> None:
    """:func:`picture_layout` drawn by matplotlib, one unit one inch: boxes, arrows that run
    beside them, labels in the free bands between rows, the legend under the title."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "hetero-solve"     # stable SVG ids
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import FancyBboxPatch, Patch, Polygon

    lay = picture_layout(pic)
    points = pic.font_size * 0.8
    margin, header = 0.4, 0.6 + (0.35 if pic.legend else 0.0)
    legend_w = sum(len(t) * _CHAR_WIDTH * points / 72 + 0.6 for t, _c in pic.legend)
    title_w = len(pic.title) * _CHAR_WIDTH * TITLE_POINTS / 72
    fig_w = max(lay.width + 2 * margin, legend_w + 2 * margin, title_w + 2 * margin, 3.0)
    fig_h = lay.height + 2 * margin + header
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes([(fig_w - lay.width) / 2 / fig_w, margin / fig_h,
                       lay.width / fig_w, lay.height / fig_h])
    x0, y0, x1, y1 = lay.bounds
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.axis("off")
    colour_of = {node_id: c for node_id, _l, c in pic.nodes}
    lines_of = {node_id: drawn_lines(lines) for node_id, lines, _c in pic.nodes}
    segments, colours, widths, heads = [], [], [], []
    # highlighted arrows last, over the others (a bundle shares their lines)
    drawn = sorted(zip(pic.edges, lay.arrows, lay.label_at), key=lambda e: e[0][3])
    for (a, b, label, highlighted), pts, at in drawn:
        if len(pts) < 2:
            continue
        colour = "red" if highlighted else "#555555"
        segments.append(pts)
        colours.append(colour)
        widths.append(1.8 if highlighted else 0.9)
        heads.append(Polygon(_arrow_head(pts), closed=True))
        if label and at is not None:
            ax.text(at[0], at[1], label, ha="center", va="center", fontsize=points * 0.85,
                    zorder=4, bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                                    "edgecolor": "none", "alpha": 0.9})
    # Collections: one artist each for the arrows, their heads and the boxes (a patch apiece
    # costs seconds on a few hundred boxes).
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=widths, zorder=1))
    ax.add_collection(PatchCollection(heads, facecolors=colours, edgecolors="none", zorder=3))
    ids = list(lay.boxes)
    ax.add_collection(PatchCollection(
        [FancyBboxPatch((lay.boxes[i][0] - lay.boxes[i][2] / 2, lay.boxes[i][1] - lay.boxes[i][3] / 2),
                        lay.boxes[i][2], lay.boxes[i][3], boxstyle="round,pad=0,rounding_size=0.06")
         for i in ids], facecolors=[colour_of[i] for i in ids], edgecolors="#333333",
        linewidths=0.8, zorder=2))
    if fmt != "png":
        for node_id, (cx, cy, _w, _h) in lay.boxes.items():
            ax.text(cx, cy, "\n".join(lines_of[node_id]), ha="center", va="center",
                    fontsize=points, zorder=5, linespacing=1.1)
    fig.text(0.5, 1 - 0.3 / fig_h, pic.title, ha="center", va="center", fontsize=TITLE_POINTS)
    if pic.legend:
        fig.legend(handles=[Patch(facecolor=c, edgecolor="#333333", label=t)
                            for t, c in pic.legend], loc="center", ncol=len(pic.legend),
                   bbox_to_anchor=(0.5, 1 - 0.8 / fig_h), frameon=False, fontsize=points)
    dpi = max(20, min(100, MAX_PIXELS / max(fig_w, fig_h)))
    if fmt == "png":
        _save_png(fig, ax, dpi, points, lay, lines_of, path)
    else:
        fig.savefig(path, format=fmt, dpi=dpi)
    plt.close(fig)


def _save_png(fig, ax, dpi: float, points: float, lay: Layout, lines_of: dict, path: Path
              ) -> None:
    """The figure rendered by Agg at ``dpi``, the boxes' text written into its pixels from
    glyphs rendered once (:mod:`.glyphs`: matplotlib renders each glyph of each text again,
    most of a large picture's time), saved as an RGB PNG at zlib's fastest level."""
    from PIL import Image
    fig.set_dpi(dpi)
    fig.canvas.draw()
    pixels = np.ascontiguousarray(np.asarray(fig.canvas.buffer_rgba())[..., :3])
    height, width = pixels.shape[:2]
    text = GlyphText(points, dpi)
    centres = ax.transData.transform([(cx, cy) for cx, cy, _w, _h in lay.boxes.values()])
    for node_id, (x, y) in zip(lay.boxes, centres):
        text.draw(pixels, lines_of[node_id], x, height - y)
    Image.frombuffer("RGB", (width, height), pixels, "raw", "RGB", 0, 1).save(
        path, format="PNG", compress_level=1, dpi=(round(dpi), round(dpi)))


def _arrow_head(pts: list[tuple[float, float]], size: float = 0.09) -> list[tuple[float, float]]:
    """A triangle whose tip is the polyline's last point, along its last segment."""
    (xa, ya), (xb, yb) = pts[-2], pts[-1]
    length = ((xb - xa) ** 2 + (yb - ya) ** 2) ** 0.5 or 1.0
    ux, uy = (xb - xa) / length, (yb - ya) / length
    bx, by = xb - ux * size, yb - uy * size
    return [(xb, yb), (bx - uy * size / 2, by + ux * size / 2), (bx + uy * size / 2, by - ux * size / 2)]


def write_pictures(problem: Problem, sol: Solution, memory: list[int], out_dir: Path,
                   fmt: str, title: str = "model") -> tuple[list[Path], list[str]]:
    """``partitions.<fmt>`` and ``affinity.<fmt>`` in ``out_dir``; returns the files and notes
    (a model graph too large to draw is left to ``affinity.dot``)."""
    backend = check_can_draw(fmt)
    files = [draw(partitions_picture(problem, sol, memory, title),
                  out_dir / f"partitions.{fmt}", fmt, backend)]
    notes = []
    if problem.n <= MAX_DRAWN_NODES or backend == "graphviz":
        files.append(draw(affinity_picture(problem, sol, title), out_dir / f"affinity.{fmt}",
                          fmt, backend))
    else:
        notes.append(f"affinity.{fmt} not drawn: the model graph has {problem.n} nodes (more "
                     f"than {MAX_DRAWN_NODES}); affinity.dot has it (Graphviz: dot -T{fmt})")
    return files, notes
