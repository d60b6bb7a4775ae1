"""Pictures of an answer: the model graph coloured by device (``affinity``, as OpenVINO's
``hetero_affinity_<model>.dot``) and the DAG of parts (``partitions``, as its
``hetero_subgraphs_<model>.dot`` and Glow's ``DAG.dot``).

Each picture is first a plain :class:`Picture` (boxes with lines of text and a colour, arrows
with an optional label), then written as Graphviz DOT text (:func:`to_dot`, always) or drawn
as SVG or PNG (:func:`draw`): with Graphviz's ``dot`` when it is installed, else laid out by
networkx (one row per topological generation) and drawn by matplotlib, an optional extra
(``pip install 'hetero-solve[pictures]'``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HeteroSolveError
from ..measures import quotient_edges
from ..problem import Problem
from ..solution import Solution
from ..units import format_bytes, instance_label

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
    for v in range(problem.n):
        p = sol.part_of[v]
        pic.nodes.append((f"n{v}", [problem.names[v], f"{problem.op_types[v]} | part {p}"],
                          colours[sol.part_device[p]]))
    for u, succ in enumerate(problem.succ):
        for v in succ:
            pic.edges.append((f"n{u}", f"n{v}", "", sol.part_of[u] != sol.part_of[v]))
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
    for t, u in enumerate(problem.tensor_producer):
        if u < 0:
            continue
        a = sol.part_of[u]
        for b in {sol.part_of[c] for c in problem.tensor_consumers[t]} - {a}:
            carried[(a, b)] = carried.get((a, b), 0) + problem.tensor_bytes[t]
    pic = Picture(f"{title} partitions", font_size=11,
                  legend=[(d.name, colours[i]) for i, d in enumerate(problem.devices)])
    for p in range(sol.num_parts):
        dev = problem.devices[sol.part_device[p]]
        pic.nodes.append((f"p{p}", [f"part {p}",
                                    instance_label(dev.name, sol.part_instance[p], dev.instances),
                                    f"{sizes[p]} nodes", format_bytes(memory[p])],
                          colours[sol.part_device[p]]))
    for a, b in sorted(quotient_edges(problem, sol.part_of)):
        pic.edges.append((f"p{a}", f"p{b}", format_bytes(carried.get((a, b), 0)), False))
    return pic


# -- DOT --------------------------------------------------------------------------------------

def _quoted(text: str) -> str:
    """A DOT string: backslashes and quotes escaped once."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(lines: list[str]) -> str:
    """A multi-line DOT label: each line escaped, joined by DOT's own line break ``\\n``."""
    return '"' + "\\n".join(_quoted(x)[1:-1] for x in lines) + '"'


def to_dot(pic: Picture) -> str:
    """The picture as Graphviz DOT text."""
    out = [f"digraph {_quoted(pic.title)} {{", "  rankdir=TB;",
           f'  node [shape=box, style="rounded,filled", fontsize={pic.font_size}];']
    for k, (text, colour) in enumerate(pic.legend):
        out.append(f'  legend_{k} [label={_quoted(text)}, fillcolor="{colour}", shape=note];')
    for node_id, lines, colour in pic.nodes:
        out.append(f'  {node_id} [label={_label(lines)}, fillcolor="{colour}"];')
    for a, b, label, highlighted in pic.edges:
        attrs = []
        if label:
            attrs.append(f"label={_quoted(label)}")
        if highlighted:
            attrs.append("penwidth=2, color=red")
        out.append(f"  {a} -> {b}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    out.append("}")
    return "\n".join(out) + "\n"


def affinity_dot(problem: Problem, sol: Solution, title: str = "model") -> str:
    """``affinity.dot``: the model graph coloured by device."""
    return to_dot(affinity_picture(problem, sol, title))


def partitions_dot(problem: Problem, sol: Solution, memory: list[int], title: str = "model") -> str:
    """``partitions.dot``: the DAG of parts."""
    return to_dot(partitions_picture(problem, sol, memory, title))


# -- SVG and PNG ------------------------------------------------------------------------------

def drawing_backend() -> str | None:
    """``"graphviz"`` (its ``dot`` program is installed), ``"matplotlib"`` (networkx lays
    out, matplotlib draws), or None: nothing here can draw."""
    if shutil.which("dot"):
        return "graphviz"
    import importlib.util
    if importlib.util.find_spec("matplotlib") is not None:
        return "matplotlib"
    return None


def check_can_draw(fmt: str) -> str:
    """The backend that will draw ``fmt``, or a :class:`PictureError` saying what to install
    (raised before any work is done)."""
    if fmt not in FORMATS:
        raise PictureError(f"--pictures {fmt!r}: expected one of {', '.join(FORMATS)}")
    backend = drawing_backend()
    if backend is None:
        raise PictureError("--pictures needs matplotlib (pip install 'hetero-solve[pictures]') "
                           "or Graphviz's dot program; the .dot files are written without them")
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
            import importlib.util
            if importlib.util.find_spec("matplotlib") is None:
                raise PictureError(f"Graphviz's dot failed to draw {path.name}") from None
    _draw_matplotlib(pic, path, fmt)
    return path


def _draw_matplotlib(pic: Picture, path: Path, fmt: str) -> None:
    """Rows of boxes, one row per topological generation (networkx), drawn by matplotlib."""
    import networkx as nx
    import matplotlib
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "hetero-solve"     # stable SVG ids
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    g = nx.DiGraph()
    g.add_nodes_from(node_id for node_id, _lines, _c in pic.nodes)
    g.add_edges_from((a, b) for a, b, _l, _h in pic.edges)
    rows = list(nx.topological_generations(g))
    pos = {}
    for y, row in enumerate(rows):
        for x, node_id in enumerate(row):
            pos[node_id] = (x - (len(row) - 1) / 2, -y)
    widest = max((len(r) for r in rows), default=1)
    lines_per_box = max((len(lines) for _i, lines, _c in pic.nodes), default=1)
    fig, ax = plt.subplots(figsize=(min(2.2 * widest + 2, 200), min(0.5 * lines_per_box * len(rows)
                                                                    + 2, 200)))
    labels = {node_id: "\n".join(lines) for node_id, lines, _c in pic.nodes}
    colours = {node_id: c for node_id, _l, c in pic.nodes}
    order = list(g.nodes)
    nx.draw_networkx_edges(g, pos, ax=ax, edgelist=[(a, b) for a, b, _l, _h in pic.edges],
                           edge_color=["red" if h else "#555555" for _a, _b, _l, h in pic.edges],
                           width=[2.0 if h else 1.0 for _a, _b, _l, h in pic.edges],
                           arrows=True, arrowsize=10, node_size=2500, node_shape="s")
    for node_id in order:
        x, y = pos[node_id]
        ax.text(x, y, labels[node_id], ha="center", va="center", fontsize=pic.font_size * 0.8,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": colours[node_id],
                      "edgecolor": "#333333"})
    edge_labels = {(a, b): label for a, b, label, _h in pic.edges if label}
    if edge_labels:
        nx.draw_networkx_edge_labels(g, pos, edge_labels=edge_labels, ax=ax,
                                     font_size=pic.font_size * 0.7)
    if pic.legend:
        ax.legend(handles=[Patch(facecolor=c, edgecolor="#333333", label=t)
                           for t, c in pic.legend], loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title(pic.title)
    ax.margins(0.15)
    ax.axis("off")
    fig.savefig(path, format=fmt, bbox_inches="tight", dpi=100)
    plt.close(fig)


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
