"""The study's plots, PNG and SVG (matplotlib, Agg backend: no display needed):

- ``parts``: parts per problem (model × rules) per algorithm, invalid answers hatched and
  marked, missing answers (failed, skipped, unavailable) as an ``x`` on the axis;
- ``time``: seconds against graph size (placeable nodes), log-log, one series per algorithm,
  invalid answers hollow.
"""

from __future__ import annotations

from pathlib import Path

SOLVED = ("optimal", "feasible")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: pip install 'hetero-solve[study]'") from None
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "hetero-solve"     # stable SVG ids
    import matplotlib.pyplot as plt
    return plt


def _save(fig, out_dir: Path, stem: str) -> list[Path]:
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=120, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
    return paths


def plot_all(records: list[dict], algorithms: list[str], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    plt = _pyplot()
    try:
        return plot_parts(plt, records, algorithms, out) + plot_time(plt, records, algorithms, out)
    finally:
        plt.close("all")


def _label(r: dict, open_dims: bool = False) -> str:
    """A problem's tick label; ``†`` when it left dims with no value (summary.md names them)."""
    return f"{Path(r['model']).stem}{' †' if open_dims else ''}\n{Path(r['rules']).stem}"


def plot_parts(plt, records: list[dict], algorithms: list[str], out: Path) -> list[Path]:
    problems: list[tuple[str, str]] = []
    for r in records:
        if (r["model"], r["rules"]) not in problems:
            problems.append((r["model"], r["rules"]))
    index = {pk: i for i, pk in enumerate(problems)}
    # An algorithm without a single answer (e.g. unavailable in this build) gets no bars.
    answered = {r["algorithm"] for r in records if r.get("status") in SOLVED}
    shown = [a for a in algorithms if a in answered]
    absent = [a for a in algorithms if a not in answered]
    k = max(len(shown), 1)
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(min(max(6.0, 0.1 * k * len(problems) + 3), 24), 4.8))
    colors = plt.get_cmap("tab10")
    top = 1
    for j, alg in enumerate(shown):
        xs, ys, hatch_x, hatch_y, miss = [], [], [], [], []
        for r in records:
            if r["algorithm"] != alg:
                continue
            x = index[(r["model"], r["rules"])] + (j - (k - 1) / 2) * width
            if r.get("status") not in SOLVED or r.get("parts") is None:
                miss.append(x)
            elif r.get("valid"):
                xs.append(x)
                ys.append(r["parts"])
            else:
                hatch_x.append(x)
                hatch_y.append(r["parts"])
            if r.get("parts"):
                top = max(top, r["parts"])
        color = colors(algorithms.index(alg) % 10)
        ax.bar(xs, ys, width, color=color, label=alg)
        if hatch_x:
            ax.bar(hatch_x, hatch_y, width, color="white", edgecolor=color, hatch="///",
                   label=f"{alg} (invalid)")
        if miss:
            ax.plot(miss, [0] * len(miss), "x", color=color, markersize=6, clip_on=False)
    ax.set_xticks(range(len(problems)))
    open_dims = {(r["model"], r["rules"]) for r in records if r.get("missing_dims")}
    ax.set_xticklabels([_label({"model": m, "rules": r}, (m, r) in open_dims)
                        for m, r in problems], fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("parts (fewer is better)")
    ax.set_yscale("log" if top > 50 else "linear")
    title = "Parts per problem and algorithm (hatched: invalid; x: no answer)"
    if absent:
        title += f"\nno answer at all: {', '.join(absent)}"
    if open_dims:
        title += "\n†: dims with no value (see summary.md)"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    paths = _save(fig, out, "parts")
    plt.close(fig)
    return paths


def plot_time(plt, records: list[dict], algorithms: list[str], out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    colors = plt.get_cmap("tab10")
    markers = "os^vD<>ph*"
    plotted = False
    for j, alg in enumerate(algorithms):
        good = [(r["nodes"], r["seconds"]) for r in records if r["algorithm"] == alg
                and r.get("status") in SOLVED and r.get("valid") and r.get("seconds") is not None
                and r.get("nodes")]
        bad = [(r["nodes"], r["seconds"]) for r in records if r["algorithm"] == alg
               and r.get("status") in SOLVED and not r.get("valid")
               and r.get("seconds") is not None and r.get("nodes")]
        color, marker = colors(j % 10), markers[j % len(markers)]   # same as parts
        for pts, face, label in ((good, color, alg), (bad, "none", f"{alg} (invalid)")):
            if not pts:
                continue
            pts.sort()
            ax.plot([p[0] for p in pts], [max(p[1], 1e-6) for p in pts], marker=marker,
                    linestyle="none", markerfacecolor=face, color=color, label=label, alpha=0.85)
            plotted = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({r["nodes"] for r in records if r.get("nodes")})
    if 0 < len(sizes) <= 12:              # label the sizes measured, not powers of ten
        from matplotlib.ticker import NullFormatter
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("graph size (placeable nodes)")
    ax.set_ylabel("seconds")
    ax.set_title("Time against graph size (hollow: invalid answer)")
    if plotted:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3, which="both")
    paths = _save(fig, out, "time")
    plt.close(fig)
    return paths
