"""Where the boxes and arrows of a picture go when matplotlib draws it (:mod:`.dot`): a layered
layout whose arrows never run behind a box, wrapped into columns so that a long model fits a
screen.

Step by step (:func:`layout`):

1. Layers: each box one row below the lowest of its predecessors (longest path).  An arrow
   that spans several rows gets a *waypoint* in each row it passes: a thin slot of its own
   beside the boxes of that row, so it runs past them, never through them.  Arrows without
   labels that leave one box share their waypoints (a bundle: one wire, branching off at
   each target's row).
2. Order within rows: barycentre sweeps (down, then up, a few times), ties kept in their
   previous order: few crossings, the same picture every time.
3. Columns: a graph much taller than wide (a 12-layer transformer is hundreds of rows of one or
   two boxes) is cut into columns of consecutive rows, as many as bring the picture nearest
   a screen's shape.
4. Arrows: straight down out of the bottom of a box, across the free band between two rows
   (no box is there), straight down into the top of the next box or waypoint.  An arrow
   leaving a column goes down into the band under every row, along it to the gutter between
   the columns, up the gutter to the band above every row, and down into its next row; each
   such arrow has a lane of its own.

Coordinates are inches (matplotlib draws one unit as one inch); ``y`` grows upwards, the
first row at the top.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

#: The gap between two boxes of a row, the height of the band between two rows, and the
#: width of a waypoint's slot (inches).
GAP = 0.3
BAND = 0.7
WAYPOINT = 0.12
#: The shape a picture is wrapped towards (width / height of a screen), and how tall an
#: unwrapped picture may be first (height / width).
SCREEN = 1.6
TALLEST = 2.5
#: A picture no taller than this (inches) is never wrapped: it fits a screen as it is.
SCREEN_HEIGHT = 12.0
#: Room between the lanes of the arrows that leave a column (inches).
LANE = 0.08
MAX_COLUMNS = 64
SWEEPS = 4


@dataclass
class Layout:
    """Boxes ``id -> (centre x, centre y, width, height)``; per arrow (in the order given)
    its polyline from the source's border to the target's, and where its label goes; the
    bounding box ``(x0, y0, x1, y1)`` of everything."""
    boxes: dict[str, tuple[float, float, float, float]]
    arrows: list[list[tuple[float, float]]]
    label_at: list[tuple[float, float]]
    bounds: tuple[float, float, float, float]
    columns: int = 1
    rows: int = 0

    @property
    def width(self) -> float:
        return self.bounds[2] - self.bounds[0]

    @property
    def height(self) -> float:
        return self.bounds[3] - self.bounds[1]


@dataclass
class _Slot:
    """One place in a row: a box (``node``) or an arrow's waypoint (``arrow``)."""
    width: float
    node: str | None = None
    arrow: int | None = None
    x: float = 0.0
    fan_in: int = 0
    fan_out: int = 0
    links_up: list["_Slot"] = field(default_factory=list)
    links_down: list["_Slot"] = field(default_factory=list)


def layout(nodes: list[tuple[str, float, float]], edges: list[tuple[str, str]],
           bundle: bool = False) -> Layout:
    """Place ``nodes`` (id, width, height) and route ``edges`` (source id, target id) as the
    module docstring says.  An edge against the order (a cycle) is routed as if reversed.
    ``bundle``: edges that share their upper end share their waypoints too (one wire that
    branches off at each target's row, not one wire per edge: an attention mask read by
    every layer of a transformer is one line down the picture); for pictures whose arrows
    have no labels."""
    ids = [n for n, _w, _h in nodes]
    width = {n: w for n, w, _h in nodes}
    height = max((h for _n, _w, h in nodes), default=1.0)
    rank = _ranks(ids, edges)
    rows: list[list[_Slot]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    slot_of = {}
    for n in ids:
        slot_of[n] = _Slot(width[n], node=n)
        rows[rank[n]].append(slot_of[n])
    chains: list[list[_Slot] | None] = []
    trunks: dict[str, list[_Slot]] = {}     # upper end -> its shared waypoints, row by row
    linked: set[tuple[int, int]] = set()
    for k, (a, b) in enumerate(edges):
        if a == b or a not in slot_of or b not in slot_of:
            chains.append(None)
            continue
        lo, hi = (a, b) if rank[a] < rank[b] else (b, a)
        span = rank[hi] - rank[lo] - 1
        trunk = trunks.setdefault(lo, []) if bundle else []
        while len(trunk) < span:
            w = _Slot(WAYPOINT, arrow=k)
            rows[rank[lo] + 1 + len(trunk)].append(w)
            trunk.append(w)
        chain = [slot_of[lo], *trunk[:span], slot_of[hi]]
        for u, v in zip(chain, chain[1:]):
            if (id(u), id(v)) not in linked:
                linked.add((id(u), id(v)))
                u.links_down.append(v)
                v.links_up.append(u)
        chains.append(chain if lo == a else chain[::-1])
    _order(rows)
    row_widths = [_place_row(row) for row in rows]
    columns = _columns(row_widths, height)
    return _route(rows, chains, columns, height, row_widths)


def _ranks(ids: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path rows; edges closing a cycle (found in the given node order) are ignored."""
    index = {n: i for i, n in enumerate(ids)}
    preds: dict[str, list[str]] = {n: [] for n in ids}
    succs: dict[str, list[str]] = {n: [] for n in ids}
    for a, b in edges:
        if a in index and b in index and a != b:
            succs[a].append(b)
            preds[b].append(a)
    indegree = {n: len(preds[n]) for n in ids}
    ready = deque(n for n in ids if indegree[n] == 0)
    order: list[str] = []
    while len(order) < len(ids):
        if not ready:   # a cycle: take the earliest node left, as if its open inputs were not there
            first = min((n for n in ids if indegree[n] > 0), key=index.__getitem__)
            indegree[first] = 0
            ready.append(first)
        n = ready.popleft()
        order.append(n)
        for s in succs[n]:
            if indegree[s] > 0:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
    position = {n: i for i, n in enumerate(order)}
    rank: dict[str, int] = {}
    for n in order:
        rank[n] = max((rank[p] + 1 for p in preds[n] if position[p] < position[n]), default=0)
    return rank


def _order(rows: list[list[_Slot]]) -> None:
    """Barycentre sweeps: each slot moves towards the mean position of its links in the row
    above (sweeping down) or below (sweeping up); ties keep the current order."""
    for sweep in range(SWEEPS * 2):
        down = sweep % 2 == 0
        sequence = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for r in sequence:
            pos = {id(s): i for i, s in enumerate(rows[r - 1 if down else r + 1])}
            keyed = []
            for i, s in enumerate(rows[r]):
                links = s.links_up if down else s.links_down
                near = [pos[id(t)] for t in links if id(t) in pos]
                keyed.append((sum(near) / len(near) if near else i, i, s))
            keyed.sort(key=lambda t: (t[0], t[1]))
            rows[r] = [s for _b, _i, s in keyed]


def _place_row(row: list[_Slot]) -> float:
    """Left to right from 0, a gap between slots; the row's width."""
    x = 0.0
    for s in row:
        s.x = x + s.width / 2
        x += s.width + GAP
    return max(x - GAP, 0.0)


def _columns(row_widths: list[float], height: float) -> int:
    """How many columns of consecutive rows bring the picture nearest :data:`SCREEN`; one
    when it is no taller than :data:`TALLEST` times its width, or than
    :data:`SCREEN_HEIGHT`."""
    n = len(row_widths)
    if n == 0:
        return 1

    def shape(k: int) -> float:
        per = math.ceil(n / k)
        wide = sum(max(row_widths[c * per:(c + 1) * per], default=0.0) for c in range(k))
        wide += (k - 1) * 4 * GAP
        tall = per * height + (per - 1) * BAND
        return max(wide, 1e-9) / tall

    if shape(1) >= 1 / TALLEST or n * (height + BAND) <= SCREEN_HEIGHT:
        return 1
    best = min(range(1, min(n, MAX_COLUMNS) + 1),
               key=lambda k: (abs(math.log(shape(k) / SCREEN)), k))
    return best


@dataclass
class _Grid:
    """Where rows and columns went: each row's column and ``y``, each column's left edge and
    width, the lane of each arrow step leaving a column (keyed ``(id(upper slot), id(lower
    slot))``: arrows sharing the step share the lane), the bands under and over every row."""
    row_of: dict[int, int]
    col_of: list[int]
    y_of: list[float]
    left: list[float]
    col_width: list[float]
    lane: dict[tuple[int, int], int]
    bottom: float
    top: float
    height: float


def _grid(rows: list[list[_Slot]], chains: list[list[_Slot] | None], columns: int,
          height: float, row_widths: list[float]) -> tuple[_Grid, int]:
    """Rows into columns, each row centred in its column (slots moved in place); the grid
    and the rows per column."""
    n = len(rows)
    per = math.ceil(n / columns) if n else 0
    col_of = [r // per if per else 0 for r in range(n)]
    col_width = [max(row_widths[c * per:(c + 1) * per], default=0.0) for c in range(columns)]
    # Arrows leaving each column take a lane each, in the gutter and the bands around the rows.
    row_of = {id(s): r for r, row in enumerate(rows) for s in row}
    leaving = [0] * columns
    lane: dict[tuple[int, int], int] = {}
    for chain in chains:
        for u, v in zip(chain or (), (chain or ())[1:]):
            ru, rv = row_of[id(u)], row_of[id(v)]
            top = min(ru, rv)
            key = (id(u), id(v)) if ru < rv else (id(v), id(u))   # (upper, lower): one lane
            if col_of[top] != col_of[max(ru, rv)] and key not in lane:   # per shared step
                lane[key] = leaving[col_of[top]]
                leaving[col_of[top]] += 1
    left = []
    x = 0.0
    for c in range(columns):
        left.append(x)
        x += col_width[c] + (4 * GAP + LANE * leaving[c] if c + 1 < columns else 0.0)
    step = height + BAND
    y_of = [-(r - col_of[r] * per) * step for r in range(n)]
    for r, row in enumerate(rows):
        shift = left[col_of[r]] + (col_width[col_of[r]] - row_widths[r]) / 2
        for s in row:
            s.x += shift
    grid = _Grid(row_of, col_of, y_of, left, col_width, lane,
                 bottom=-(per - 1) * step - height / 2 - BAND / 2, top=height / 2 + BAND / 2,
                 height=height)
    return grid, per


def _route(rows: list[list[_Slot]], chains: list[list[_Slot] | None], columns: int,
           height: float, row_widths: list[float]) -> Layout:
    """Final coordinates (:func:`_grid`) and every arrow's polyline (:func:`_polyline`)."""
    g, per = _grid(rows, chains, columns, height, row_widths)
    boxes = {s.node: (s.x, g.y_of[r], s.width, height)
             for r, row in enumerate(rows) for s in row if s.node is not None}
    downs = [None if chain is None else chain if g.row_of[id(chain[0])] < g.row_of[id(chain[-1])]
             else chain[::-1] for chain in chains]
    exits, entries = _ports(downs, g.row_of, g.col_of)
    arrows, labels = [], []
    for k, down in enumerate(downs):
        if down is None:   # a loop on one box, or an unknown box: nothing to draw
            arrows.append([])
            labels.append(None)
            continue
        points, label = _polyline(k, down, g, exits, entries)
        arrows.append(points if down is chains[k] else points[::-1])
        labels.append(label)
    xs = [b[0] - b[2] / 2 for b in boxes.values()] + [b[0] + b[2] / 2 for b in boxes.values()]
    ys = [b[1] - b[3] / 2 for b in boxes.values()] + [b[1] + b[3] / 2 for b in boxes.values()]
    for pts in arrows:
        xs += [p[0] for p in pts]
        ys += [p[1] for p in pts]
    pad = 0.1   # room for the boxes' outlines and the arrows' heads
    bounds = (min(xs, default=0.0) - pad, min(ys, default=0.0) - pad,
              max(xs, default=1.0) + pad, max(ys, default=1.0) + pad)
    return Layout(boxes, arrows, labels, bounds, columns, per)


def _polyline(k: int, down: list[_Slot], g: _Grid, exits: dict, entries: dict
              ) -> tuple[list[tuple[float, float]], tuple[float, float] | None]:
    """Arrow ``k``'s points from its upper end ``down[0]`` through its waypoints to
    ``down[-1]`` (the module docstring's step 4), and where its label goes."""
    points: list[tuple[float, float]] = []
    label = None
    half = g.height / 2
    for u, v in zip(down, down[1:]):
        ru, rv = g.row_of[id(u)], g.row_of[id(v)]
        yu, yv = g.y_of[ru] - half, g.y_of[rv] + half
        xu, xv = exits.get((k, id(u)), u.x), entries.get((k, id(v)), v.x)
        points.append((xu, yu))
        if ru == rv:   # an edge closing a cycle, between boxes of one row: under the row
            below = yu - BAND / 2
            points += [(xu, below), (v.x, below), (v.x, yu)]
            label = label or ((xu + v.x) / 2, below)
            continue
        if g.col_of[ru] == g.col_of[rv]:
            if label is None:   # nearer the end where the arrows fan out
                t = 0.7 if u.fan_out > 1 else 0.3 if v.fan_in > 1 else 0.5
                label = (xu + t * (xv - xu), yu + t * (yv - yu))
        else:
            j = g.lane[(id(u), id(v))]
            low, high = g.bottom - LANE * j, g.top + LANE * j
            gx = g.left[g.col_of[ru]] + g.col_width[g.col_of[ru]] + 2 * GAP + LANE * j
            points += [(xu, low), (gx, low), (gx, high), (xv, high)]
            if label is None:   # staggered: labels of neighbouring lanes apart
                label = (gx, max(low, (low + high) / 2 - 3 * BAND * (j % 4)))
        points.append((xv, yv))
    return points, label


def _ports(downs: list[list[_Slot] | None], row_of: dict[int, int], col_of: list[int]
           ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """Where each arrow leaves the bottom of a box and enters the top of one: spread over
    the box's width in the order of the other ends (arrows leaving the column last), so that
    arrows sharing a box neither share a line nor cross at it.  Keys: (arrow, id(slot))."""
    below: dict[int, dict[int, tuple]] = {}    # slot -> other end -> (its x, arrows)
    above: dict[int, dict[int, tuple]] = {}
    slots: dict[int, _Slot] = {}
    for k, down in enumerate(downs):
        for u, v in zip(down or (), (down or ())[1:]):
            ru, rv = row_of[id(u)], row_of[id(v)]
            if ru == rv:
                continue
            same = col_of[ru] == col_of[rv]
            slots[id(u)], slots[id(v)] = u, v
            below.setdefault(id(u), {}).setdefault(id(v), (v.x if same else math.inf, []))[1] \
                .append(k)
            above.setdefault(id(v), {}).setdefault(id(u), (u.x if same else -math.inf, []))[1] \
                .append(k)
    exits: dict[tuple[int, int], float] = {}
    entries: dict[tuple[int, int], float] = {}
    for ends, ports, fan in ((below, exits, "fan_out"), (above, entries, "fan_in")):
        for key, others in ends.items():
            s = slots[key]
            setattr(s, fan, len(others))
            if s.node is None:
                continue
            # one port per other end: arrows sharing a step (a bundle) share its port
            found = sorted((x, min(arrows), arrows) for x, arrows in others.values())
            for i, (_x, _first, arrows) in enumerate(found):
                for k in arrows:
                    ports[(k, key)] = s.x - s.width / 2 + s.width * (i + 1) / (len(found) + 1)
    return exits, entries


def crossings(lay: Layout, margin: float = 1e-6) -> list[tuple[int, str]]:
    """Every (arrow index, box id) where a segment of the arrow enters the box's interior
    (shrunk by ``margin``): what a reader of the picture would see as an arrow hidden
    behind a box."""
    found = []
    for k, pts in enumerate(lay.arrows):
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            for node, (cx, cy, w, h) in lay.boxes.items():
                if _segment_enters(x0, y0, x1, y1, cx - w / 2 + margin, cy - h / 2 + margin,
                                   cx + w / 2 - margin, cy + h / 2 - margin):
                    found.append((k, node))
    return found


def _segment_enters(x0, y0, x1, y1, left, low, right, high) -> bool:
    """Liang-Barsky: does the segment meet the open rectangle?"""
    t0, t1 = 0.0, 1.0
    dx, dy = x1 - x0, y1 - y0
    for p, q in ((-dx, x0 - left), (dx, right - x0), (-dy, y0 - low), (dy, high - y0)):
        if p == 0:
            if q <= 0:
                return False
            continue
        t = q / p
        if p < 0:
            if t > t1:
                return False
            t0 = max(t0, t)
        else:
            if t < t0:
                return False
            t1 = min(t1, t)
    return t0 < t1
