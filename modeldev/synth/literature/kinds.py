"""The panel kinds: the drawer of each, how often each is drawn, and one panel alone.

Which kind fits a cell, rendering a kind into an RGB array on a white ground, and the box of
its ink, which is what a panel's truth box is measured from.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from modeldev.synth.literature.charts import bars, boxviolin, histogram, lines, scatter, survival
from modeldev.synth.literature.maps import flow, heatmap, venn
from modeldev.synth.literature.pictures import blot, micrographs, schematic, small_multiples, table
from modeldev.synth.literature.style import Style

Box = tuple[int, int, int, int]


KINDS: dict[str, Callable[[np.random.Generator, Figure, Style], None]] = {
    "bars": bars,
    "lines": lines,
    "scatter": scatter,
    "boxviolin": boxviolin,
    "histogram": histogram,
    "heatmap": heatmap,
    "survival": survival,
    "flow": flow,
    "venn": venn,
    "blot": blot,
    "micrographs": micrographs,
    "schematic": schematic,
    "table": table,
    "small_multiples": small_multiples,
}
# relative frequencies; the kinds the detector gets wrong are drawn more often
WEIGHTS = {
    "bars": 3,
    "lines": 3,
    "scatter": 1,
    "boxviolin": 1.5,
    "histogram": 0.7,
    "heatmap": 1,
    "survival": 1,
    "flow": 1,
    "venn": 0.5,
    "blot": 1.5,
    "micrographs": 1.5,
    "schematic": 1,
    "table": 0.8,
    "small_multiples": 2,
}


CHARTS = (
    "bars",
    "lines",
    "scatter",
    "boxviolin",
    "histogram",
    "survival",
    "flow",
    "small_multiples",
)


def choose_kind(
    rng: np.random.Generator, w: int, h: int, fs: float, theme: str | None = None
) -> str:
    """A kind that fits a ``w`` x ``h`` cell; ``theme`` (the figure's kind) when it fits."""
    names = list(KINDS)
    p = np.array([WEIGHTS[k] for k in names], dtype=float)
    small = min(w, h) < 14 * fs
    for i, k in enumerate(names):
        if k == "small_multiples" and (w < 26 * fs or h < 20 * fs):
            p[i] = 0
        if k == "micrographs" and w < 1.6 * h:
            p[i] *= 0.3
        if k in ("table", "schematic") and (w < 1.2 * h or w < 25 * fs):
            p[i] = 0
        if k in ("survival", "heatmap", "blot") and small:
            p[i] = 0
    if theme is not None and p[names.index(theme)] > 0 and rng.random() < 0.6:
        return theme
    return str(rng.choice(names, p=p / p.sum()))


def render_panel(rng: np.random.Generator, kind: str, w: int, h: int, st: Style) -> np.ndarray:
    """One panel drawn by matplotlib into a ``h`` x ``w`` RGB array (white ground)."""
    fig = Figure(figsize=(w / st.dpi, h / st.dpi), dpi=st.dpi, facecolor="white")
    canvas = FigureCanvasAgg(fig)
    KINDS[kind](rng, fig, st)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def ink_box(arr: np.ndarray, threshold: int = 245) -> Box | None:
    """The bounding box (x1, y1 exclusive) of every pixel darker than ``threshold``."""
    ink = arr.min(axis=2) < threshold
    ys = np.flatnonzero(ink.any(axis=1))
    xs = np.flatnonzero(ink.any(axis=0))
    if not len(xs):
        return None
    return int(xs[0]), int(ys[0]), int(xs[-1]) + 1, int(ys[-1]) + 1
