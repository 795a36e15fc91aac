"""Panels of many small parts, drawn by hand in one frameless axes in pixel units.

Western blots (strips, lane treatments, kDa marks), rows of micrographs and fluorescence
channels, schematics of boxes and arrows, tables with rules only, and small multiples (a grid
of tiny plots with shared headers and legend, one lettered panel). One axes for all the parts
keeps a panel to milliseconds where a grid of real axes costs a second.
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from modeldev.synth.literature.style import GENES, GROUPS, Style


def _pixel_axes(fig: Figure, st: Style):  # type: ignore[no-untyped-def]
    """One frameless axes over the whole panel in pixel units (origin bottom left): panels
    of many small parts are drawn in it, as many axes would cost too much time."""
    w, h = fig.get_size_inches() * st.dpi
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    return ax, float(w), float(h)


def _finish_pixel_axes(ax, w: float, h: float) -> None:  # type: ignore[no-untyped-def]
    ax.set_xlim(0, w)
    ax.set_ylim(0, h)


def blot(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax, w, h = _pixel_axes(fig, st)
    fs = st.fs
    pt = st.font_pt
    lanes = int(rng.integers(3, 9))
    strips = int(rng.integers(2, 6))
    treat_rows = int(rng.integers(1, 3))
    x0, x1 = 4.5 * fs, w - 6.5 * fs
    top = h - (treat_rows * 1.5 + 0.4) * fs
    gap = 0.6 * fs
    sh = min((top - 2 - gap * (strips - 1)) / strips, 4 * fs)
    xs = np.linspace(0, 1, 40 * lanes)
    yy = np.linspace(-1, 1, 20)[:, None]
    for s in range(strips):
        y1 = top - s * (sh + gap)
        img = np.full((20, xs.size), rng.uniform(0.8, 0.95))
        for lane in range(lanes):
            cx = (lane + 0.5) / lanes
            amp = rng.uniform(0.1, 0.85)
            img -= (
                amp
                * np.exp(-(((xs - cx) * lanes / 0.32) ** 6))[None, :]
                * np.exp(-((yy / 0.35) ** 2))
            )
        img += rng.normal(0, 0.02, img.shape)
        ax.imshow(
            np.clip(img, 0, 1),
            cmap="gray",
            vmin=0,
            vmax=1,
            extent=(x0, x1, y1 - sh, y1),
            aspect="auto",
            interpolation="bilinear",
        )
        ax.add_patch(Rectangle((x0, y1 - sh), x1 - x0, sh, fill=False, lw=0.6))
        ax.text(x1 + 0.4 * fs, y1 - sh / 2, str(rng.choice(GENES)), va="center", fontsize=pt)
        kda = int(rng.choice([15, 25, 35, 42, 55, 70, 100, 130]))
        ax.text(x0 - 0.4 * fs, y1 - sh / 2, str(kda), va="center", ha="right", fontsize=pt * 0.9)
    for r in range(treat_rows):
        y = top + 0.3 * fs + 1.4 * fs * r
        for lane in range(lanes):
            sign = "+" if rng.random() < 0.5 else "−"
            ax.text(
                x0 + (lane + 0.5) / lanes * (x1 - x0),
                y,
                sign,
                ha="center",
                va="bottom",
                fontsize=pt,
            )
        ax.text(
            x1 + 0.4 * fs,
            y,
            str(rng.choice(["EGF", "Dox", "siRNA", "MG132"])),
            va="bottom",
            fontsize=pt * 0.9,
        )
    ax.text(0.2 * fs, top - strips * sh / 2, "kDa", rotation=90, va="center", fontsize=pt * 0.9)
    _finish_pixel_axes(ax, w, h)


def _texture(rng: np.random.Generator, n: int, fluor: bool) -> np.ndarray:
    if fluor:
        img = np.zeros((n, n, 3))
        yy, xx = np.mgrid[0:n, 0:n]
        colour = np.array(
            [[0, 0.4, 1], [0, 1, 0.2], [1, 0.1, 0.1], [1, 0, 1]][int(rng.integers(4))]
        )
        for _ in range(int(rng.integers(4, 14))):
            cx, cy, r = rng.uniform(0, n), rng.uniform(0, n), rng.uniform(2, n / 8)
            img += (
                colour
                * rng.uniform(0.4, 1)
                * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))[..., None]
            )
        return np.clip(img + rng.normal(0, 0.03, img.shape), 0, 1)
    yy, xx = np.mgrid[0:n, 0:n]
    img = np.full((n, n), 0.85) + rng.normal(0, 0.04, (n, n))
    for _ in range(int(rng.integers(5, 20))):  # cells: darker rounded blobs
        cx, cy, r = rng.uniform(0, n), rng.uniform(0, n), rng.uniform(1.5, n / 7)
        img -= rng.uniform(0.1, 0.4) * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))
    tint = np.array([1.0, rng.uniform(0.75, 1), rng.uniform(0.7, 1)])
    return np.clip(img[..., None] * tint, 0, 1)


def micrographs(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax, w, h = _pixel_axes(fig, st)
    fs = st.fs
    rows = 1 if h < 0.45 * w else int(rng.integers(1, 3))
    titled = rng.random() < 0.7
    side_labels = rows > 1 or rng.random() < 0.3
    top_px = 1.6 * fs if titled else 2
    left_px = 1.8 * fs if side_labels else 2
    avail_w, avail_h = w - left_px - 2, h - top_px - 2
    gap = float(rng.choice([2, 3, 5]))
    cell = min((avail_h - gap * (rows - 1)) / rows, avail_w / 2)
    cols = max(2, min(5, int((avail_w + gap) // (cell + gap))))
    cell = min(cell, (avail_w - gap * (cols - 1)) / cols)
    fluor = rng.random() < 0.6
    names = ["DAPI", "GFP", "Phalloidin", "Merge", "LC3", "Tom20"]
    for r in range(rows):
        for c in range(cols):
            x = left_px + c * (cell + gap)
            y = h - top_px - (r + 1) * cell - r * gap
            ax.imshow(
                _texture(rng, 40, fluor),
                extent=(x, x + cell, y, y + cell),
                interpolation="bilinear",
                aspect="auto",
            )
            if r == 0 and titled:
                title = names[c % len(names)] if fluor else str(rng.choice(GROUPS))
                ax.text(
                    x + cell / 2,
                    y + cell + 0.3 * fs,
                    title,
                    ha="center",
                    va="bottom",
                    fontsize=st.font_pt,
                )
            if c == 0 and side_labels:
                ax.text(
                    x - 0.4 * fs,
                    y + cell / 2,
                    str(rng.choice(GROUPS)),
                    rotation=90,
                    ha="right",
                    va="center",
                    fontsize=st.font_pt,
                )
            if r == rows - 1 and c == cols - 1:
                ax.plot(
                    [x + 0.6 * cell, x + 0.9 * cell],
                    [y + 0.08 * cell] * 2,
                    color="w" if fluor else "k",
                    lw=2,
                )
    _finish_pixel_axes(ax, w, h)


def schematic(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = fig.add_axes((0.01, 0.01, 0.98, 0.98))
    ax.axis("off")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    n = int(rng.integers(3, 7))
    two_rows = n > 3 and rng.random() < 0.5
    per = (n + 1) // 2 if two_rows else n
    steps = (
        "Screen",
        "Cells",
        "Treatment",
        "RNA-seq",
        "Analysis",
        "Mice",
        "Sort",
        "Imaging",
        "qPCR",
    )
    pos = []
    for i in range(n):
        r, c = (i // per, i % per) if two_rows else (0, i)
        x = (c + 0.5) / per
        y = (0.72 - 0.45 * r) if two_rows else 0.5
        pos.append((x, y))
        bw, bh = 0.8 / per, 0.22 if two_rows else 0.3
        ax.add_patch(
            FancyBboxPatch(
                (x - bw / 2, y - bh / 2),
                bw,
                bh,
                boxstyle="round,pad=0.01,rounding_size=0.03",
                fc=st.palette[i % len(st.palette)] if rng.random() < 0.5 else "#eeeeee",
                ec="k",
                lw=0.8,
                alpha=0.9,
            )
        )
        ax.text(x, y, str(rng.choice(steps)), ha="center", va="center", fontsize=st.font_pt)
    bw, bh = 0.8 / per, 0.22 if two_rows else 0.3
    for (xa, ya), (xb, yb) in itertools.pairwise(pos):  # edge to edge, never across a box
        if ya == yb:
            start, end = (xa + bw / 2, ya), (xb - bw / 2, yb)
        else:
            start, end = (xa, ya - bh / 2), (xb, yb + bh / 2)
        arrow = FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, lw=1, color="k")
        ax.add_patch(arrow)
    if rng.random() < 0.5:  # a dashed region grouping some steps
        ax.add_patch(Rectangle((0.01, 0.04), 0.5, 0.92, fill=False, ls="--", lw=0.8, ec="0.4"))


def table(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    h = fig.get_size_inches()[1] * st.dpi
    line = 1.6 * st.fs / h
    rows = max(2, min(14, int(0.9 / line) - 1))
    cols = int(rng.integers(3, 6))
    heads = ["Gene", "Fold change", "p value", "FDR", "n", "Group"][:cols]
    y = 0.97
    ax.plot([0.02, 0.98], [y, y], color="k", lw=1)
    for c in range(cols):
        ax.text(
            0.03 + c * 0.95 / cols,
            y - line * 0.5,
            heads[c],
            fontweight="bold",
            va="center",
            fontsize=st.font_pt,
        )
    y -= line
    ax.plot([0.02, 0.98], [y, y], color="k", lw=0.6)
    for r in range(rows):
        vals = [
            str(rng.choice(GENES)),
            f"{rng.uniform(0.1, 8):.2f}",
            f"{rng.uniform(0, 0.05):.1e}",
            f"{rng.uniform(0, 0.1):.3f}",
            str(int(rng.integers(3, 40))),
            str(rng.choice(GROUPS)),
        ]
        for c in range(cols):
            ax.text(
                0.03 + c * 0.95 / cols,
                y - line * (r + 0.5),
                vals[c],
                va="center",
                fontsize=st.font_pt,
            )
        if rng.random() < 0.12:
            ax.plot([0.02, 0.98], [y - line * (r + 1)] * 2, color="k", lw=0.4)
    ax.plot([0.02, 0.98], [y - line * rows] * 2, color="k", lw=1)


def small_multiples(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    """One lettered panel holding a grid of tiny plots with shared column headers, row
    headers and legend. Drawn in pixel units in one axes (frames, ticks and labels by hand):
    a grid of 20 real axes costs a second."""
    ax, w, h = _pixel_axes(fig, st)
    fs = st.fs * 0.85
    pt = st.font_pt * 0.75
    rows, cols = int(rng.integers(2, 6)), int(rng.integers(2, 5))
    bars = rng.random() < 0.35
    headed = rng.random() < 0.7
    row_heads = rng.random() < 0.6
    legend_bottom = rng.random() < 0.7
    left = (3.2 + (1.6 if row_heads else 0)) * fs
    top = (1.8 if headed else 0.6) * fs
    bottom = (2.2 if legend_bottom else 0.2) * fs + 2.4 * fs
    gx, gy = 2.4 * fs, 1.6 * fs
    cw = max(8.0, (w - left - 0.6 * fs - gx * (cols - 1)) / cols)
    ch = max(8.0, (h - top - bottom - gy * (rows - 1)) / rows)
    k = int(rng.integers(2, 4))
    xs = np.linspace(0, 1, 12)
    heads = list(rng.choice(GENES, cols, replace=False))
    tick = 0.25 * fs
    segs: list[list[tuple[float, float]]] = []
    for r in range(rows):
        for c in range(cols):
            x = left + c * (cw + gx)
            y = h - top - (r + 1) * ch - r * gy
            segs += [[(x, y), (x + cw, y)], [(x, y), (x, y + ch)]]
            if not st.despine:
                segs += [[(x, y + ch), (x + cw, y + ch)], [(x + cw, y), (x + cw, y + ch)]]
            ymax = float(rng.choice([50, 100]))
            for v in (0, ymax / 2, ymax):
                yy = y + v / ymax * ch * 0.9
                segs.append([(x - tick, yy), (x, yy)])
                if v != ymax / 2:
                    ax.text(x - tick * 1.5, yy, f"{v:g}", ha="right", va="center", fontsize=pt)
            if bars:
                heights = rng.uniform(0.2, 0.9, k)
                bw = cw / (k + 1)
                for i in range(k):
                    ax.add_patch(
                        Rectangle(
                            (x + bw * (i + 0.5), y),
                            bw * 0.8,
                            heights[i] * ch,
                            color=st.palette[i],
                            lw=0,
                        )
                    )
            else:
                for i in range(k):
                    mid, steep = rng.uniform(0.2, 0.8), rng.uniform(4, 14)
                    curve = rng.uniform(0.2, 0.9) / (1 + np.exp(-(xs - mid) * steep))
                    ax.plot(x + xs * cw, y + curve * ch, color=st.palette[i], lw=1)
                    if rng.random() < 0.4:
                        ax.fill_between(
                            x + xs * cw,
                            y + curve * ch * 0.92,
                            y + curve * ch * 1.08,
                            color=st.palette[i],
                            alpha=0.2,
                            lw=0,
                        )
                for v, t in ((0, "0"), (0.7, "100")):
                    segs.append([(x + v * cw, y - tick), (x + v * cw, y)])
                    if r == rows - 1:
                        ax.text(x + v * cw, y - tick * 1.5, t, ha="center", va="top", fontsize=pt)
                if r == rows - 1:
                    ax.text(
                        x + cw / 2,
                        y - tick - 1.3 * fs,
                        "Time (h)",
                        ha="center",
                        va="top",
                        fontsize=pt,
                    )
            if r == 0 and headed:
                ax.text(
                    x + cw / 2,
                    y + ch + 0.4 * fs,
                    heads[c],
                    ha="center",
                    va="bottom",
                    fontsize=st.font_pt * 0.9,
                )
            if c == 0 and row_heads:
                ax.text(
                    x - 2.8 * fs,
                    y + ch / 2,
                    GROUPS[r % len(GROUPS)],
                    rotation=90,
                    ha="right",
                    va="center",
                    fontsize=pt * 1.1,
                )
    ax.add_collection(LineCollection(segs, colors="k", lw=0.7))
    if legend_bottom:
        names = ["Untreated", "Non-targeting", "Targeting"][:k]
        x = left
        for i, name in enumerate(names):
            ax.add_patch(Rectangle((x, 0.6 * fs), 1.6 * fs, 0.8 * fs, color=st.palette[i], lw=0))
            ax.text(x + 2 * fs, fs, name, va="center", fontsize=pt * 1.1)
            x += (w - left) / k
    _finish_pixel_axes(ax, w, h)
