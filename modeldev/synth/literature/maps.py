"""Panels whose data fill a plane rather than run along one axis.

Heat maps with a colour bar and dendrograms, flow-cytometry density plots with quadrant or
polygon gates, and Venn diagrams: each is an image or a set of shapes over its axes, with the
furniture (trees, gates, counts) placed around it.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Polygon, Rectangle

from modeldev.synth.literature.charts import chart_axes
from modeldev.synth.literature.style import GENES, GROUPS, Style


def _dendrogram(rng: np.random.Generator, n: int) -> list[list[tuple[float, float]]]:
    """Segments of a random binary tree over leaves 0.5 .. n-0.5 (heights from 0 up)."""
    nodes = [(i + 0.5, 0.0) for i in range(n)]
    segs = []
    height = 0.0
    while len(nodes) > 1:
        j = int(rng.integers(len(nodes) - 1))
        (xa, ha), (xb, hb) = nodes[j], nodes[j + 1]
        height = max(ha, hb) + rng.uniform(0.2, 1.0)
        segs += [[(xa, ha), (xa, height)], [(xb, hb), (xb, height)], [(xa, height), (xb, height)]]
        nodes[j : j + 2] = [((xa + xb) / 2, height)]
    return segs


def heatmap(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    w, h = fig.get_size_inches() * st.dpi
    fs = st.fs
    rows, cols = int(rng.integers(6, 30)), int(rng.integers(4, 14))
    tree_top = rng.random() < 0.5
    tree_left = rng.random() < 0.6
    left = (4.5 + (3 if tree_left else 0)) * fs / w
    right = 1 - 8 * fs / w
    bottom = 3.5 * fs / h
    top = 1 - (0.5 + (3 if tree_top else 0)) * fs / h
    ax = fig.add_axes((left, bottom, right - left, top - bottom))
    data = rng.normal(0, 1, (rows, cols)) + np.linspace(-1, 1, rows)[:, None] * rng.uniform(0, 2)
    cmap = str(rng.choice(["RdBu_r", "viridis", "coolwarm", "magma", "bwr"]))
    im = ax.imshow(data, aspect="auto", cmap=cmap, interpolation="nearest")
    ax.set_xticks(range(cols))
    ax.set_xticklabels([f"S{i + 1}" for i in range(cols)], rotation=90, fontsize=st.font_pt * 0.8)
    ax.set_yticks(range(rows) if rows <= 16 else [])
    if rows <= 16:
        ax.set_yticklabels(list(rng.choice(GENES, rows)), fontsize=st.font_pt * 0.8)
    cax = fig.add_axes(
        (right + 1.2 * fs / w, bottom + (top - bottom) * 0.55, 0.9 * fs / w, (top - bottom) * 0.4)
    )
    fig.colorbar(im, cax=cax)
    cax.tick_params(labelsize=st.font_pt * 0.8)
    if tree_top:
        tax = fig.add_axes((left, top, right - left, 2.8 * fs / h))
        tax.add_collection(LineCollection(_dendrogram(rng, cols), colors="k", lw=0.7))
        tax.set_xlim(0, cols)
        tax.autoscale(axis="y")
        tax.axis("off")
    if tree_left:
        lax = fig.add_axes(
            (
                left - 3 * fs / w - (0 if rows > 16 else 2.5 * fs / w),
                bottom,
                2.8 * fs / w,
                top - bottom,
            )
        )
        segs = [[(-hh, rows - x) for x, hh in s] for s in _dendrogram(rng, rows)]
        lax.add_collection(LineCollection(segs, colors="k", lw=0.7))
        lax.set_ylim(0, rows)
        lax.autoscale(axis="x")
        lax.axis("off")


def flow(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = chart_axes(fig, st, left=5.5)
    pts = []
    for _ in range(int(rng.integers(2, 4))):
        c = rng.uniform(1.5, 4.5, 2)
        pts.append(rng.normal(c, rng.uniform(0.15, 0.45, 2), (int(rng.integers(800, 3000)), 2)))
    xy = np.concatenate(pts)
    hist, _, _ = np.histogram2d(xy[:, 1], xy[:, 0], bins=90, range=[[0, 5.5], [0, 5.5]])
    hist = np.ma.masked_equal(hist, 0)
    ax.imshow(
        np.log1p(hist),
        origin="lower",
        extent=(0, 5.5, 0, 5.5),
        cmap=str(rng.choice(["jet", "viridis", "turbo"])),
        interpolation="nearest",
        aspect="auto",
    )
    ax.set_xticks([1, 2, 3, 4, 5])
    decades = ["10¹", "10²", "10³", "10⁴", "10⁵"]  # DejaVu has the superscripts, Liberation not
    ax.set_xticklabels(decades, fontfamily="DejaVu Sans")
    ax.set_yticks([1, 2, 3, 4, 5])
    ax.set_yticklabels(decades, fontfamily="DejaVu Sans")
    ax.set_xlabel(str(rng.choice(["CD4-FITC", "Annexin V", "CD19-PE", "GFP"])))
    ax.set_ylabel(str(rng.choice(["CD8-APC", "PI", "CD3-PerCP", "SSC-A"])))
    if rng.random() < 0.6:  # quadrant gates
        qx, qy = rng.uniform(2, 3.5, 2)
        ax.axvline(qx, color="k", lw=0.8)
        ax.axhline(qy, color="k", lw=0.8)
        for x, y in ((0.05, 0.92), (0.72, 0.92), (0.05, 0.04), (0.72, 0.04)):
            ax.text(x, y, f"{rng.uniform(0, 60):.1f}", transform=ax.transAxes, fontsize=st.font_pt)
    else:
        for p in pts[: int(rng.integers(1, 3))]:
            cx, cy = p.mean(0)
            if rng.random() < 0.5:
                ax.add_patch(Rectangle((cx - 0.7, cy - 0.7), 1.4, 1.4, fill=False, lw=0.9))
            else:
                ang = np.linspace(0, 2 * np.pi, 7)[:-1]
                ax.add_patch(
                    Polygon(
                        np.c_[cx + 0.8 * np.cos(ang), cy + 0.8 * np.sin(ang)], fill=False, lw=0.9
                    )
                )
            ax.text(cx - 0.7, cy + 0.8, f"{rng.uniform(1, 80):.1f}%", fontsize=st.font_pt)
    ax.set_xlim(0, 5.5)
    ax.set_ylim(0, 5.5)


def venn(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.96))
    ax.set_aspect("equal")
    ax.set_anchor(str(rng.choice(["NW", "W", "C"])))
    ax.axis("off")
    k = int(rng.integers(2, 4))
    centres = [(-0.5, 0), (0.5, 0)] if k == 2 else [(-0.5, 0.3), (0.5, 0.3), (0, -0.5)]
    names = rng.choice(GROUPS, k, replace=False)
    for i, (x, y) in enumerate(centres):
        ax.add_patch(Circle((x, y), 0.85, color=st.palette[i], alpha=0.35, lw=1.2))
        ny = y + 0.95 if (k == 2 or y > 0) else y - 1.0
        ax.text(
            x * 1.3,
            ny,
            str(names[i]),
            ha="center",
            va="bottom" if ny > y else "top",
            fontsize=st.font_pt * 1.1,
        )
        ax.text(
            x * 1.45,
            y * 1.45 + (0.1 if k == 3 and y > 0 else 0),
            str(int(rng.integers(10, 900))),
            ha="center",
            va="center",
            fontsize=st.font_pt,
        )
    ax.text(
        0,
        0.02 if k == 3 else 0,
        str(int(rng.integers(5, 400))),
        ha="center",
        va="center",
        fontsize=st.font_pt,
    )
    ax.set_xlim(-1.9, 1.9)
    ax.set_ylim(-1.85, 1.6)
