"""Panels that hold what looks like a gutter or a boundary inside them, for training.

The first detector learnt that a white band is a gap between panels and a strong straight edge
is a panel's side. Real panels break both rules: bar and box plots leave wide white columns,
tables and paragraphs leave white rows, gratings and striated tissue repeat bands, gradients
fade to the page colour, sparse line drawings are mostly page. Each maker below draws one such
panel (matplotlib for plots, numpy for textures), always with enough ink that a person could
still see where the panel is.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, ImageDraw

from ray_jobs.figures.synth.fonts import font


def _matplotlib_panel(w: int, h: int, draw) -> Image.Image:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig = plt.figure(figsize=(w / 100, h / 100), dpi=100)
    ax = fig.add_subplot(111)
    draw(ax)
    ax.tick_params(labelsize=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(pad=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB").resize((w, h))


def gapped_bars(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Few thin bars far apart, often without the top and right spines."""

    def draw(ax) -> None:  # type: ignore[no-untyped-def]
        n = int(rng.integers(2, 6))
        ax.bar(
            np.arange(n),
            rng.uniform(0.5, 10, n),
            width=float(rng.uniform(0.1, 0.35)),
            yerr=rng.uniform(0, 1, n),
            color=rng.uniform(0, 1, 3),
        )
        if rng.random() < 0.6:
            ax.spines[["top", "right"]].set_visible(False)

    return _matplotlib_panel(w, h, draw)


def box_plot(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    def draw(ax) -> None:  # type: ignore[no-untyped-def]
        n = int(rng.integers(2, 5))
        data = [rng.normal(rng.uniform(0, 5), rng.uniform(0.5, 2), 30) for _ in range(n)]
        ax.boxplot(data, positions=np.arange(n) * 2.0, widths=float(rng.uniform(0.2, 0.6)))
        ax.spines[["top", "right"]].set_visible(rng.random() < 0.3)

    return _matplotlib_panel(w, h, draw)


def many_lines(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    def draw(ax) -> None:  # type: ignore[no-untyped-def]
        x = np.linspace(0, 10, 30)
        for k in range(int(rng.integers(2, 6))):
            ax.plot(x, np.sin(x * rng.uniform(0.2, 1.5)) + k, label=f"g{k}", linewidth=1)
        ax.legend(fontsize=5, frameon=rng.random() < 0.5)

    return _matplotlib_panel(w, h, draw)


def table_rows(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Rows of text or numbers, with or without rules: white rows across the panel."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    size = int(np.clip(h / rng.uniform(8, 16), 8, 18))
    face = font(size, serif=bool(rng.random() < 0.5))
    y, row = 3, 0
    while y + size < h:
        cells = int(rng.integers(1, 5))
        for c in range(cells):
            word = (
                f"{rng.uniform(0, 100):.1f}"
                if row
                else str(rng.choice(["Group", "n", "Mean", "P"]))
            )
            draw.text((4 + c * w / cells, y), word, fill=(0, 0, 0), font=face)
        if rng.random() < 0.3:
            draw.line((0, y + size * 1.3, w, y + size * 1.3), fill=(0, 0, 0))
        y += int(size * rng.uniform(1.5, 2.5))
        row += 1
    if rng.random() < 0.5:
        draw.rectangle((0, 0, w - 1, h - 1), outline=(0, 0, 0))
    return img


def bands(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Square-wave bands or a checkerboard: periodic white stripes inside one panel."""
    yy, xx = np.mgrid[0:h, 0:w]
    period = int(rng.integers(6, 30))
    duty = rng.uniform(0.3, 0.7)
    if rng.random() < 0.7:
        coord = xx if rng.random() < 0.5 else yy
        on = (coord % period) < duty * period
    else:
        on = ((xx // period) + (yy // period)) % 2 == 0
    colour = rng.uniform(0, 180, 3)
    arr = np.where(on[..., None], colour, 255.0)
    return Image.fromarray(arr.astype(np.uint8))


def ramp(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Four corner colours blended bilinearly, one corner often page-white."""
    corners = rng.uniform(0, 255, (2, 2, 3))
    if rng.random() < 0.6:
        corners[int(rng.integers(2)), int(rng.integers(2))] = 255
    ty = np.linspace(0, 1, h)[:, None, None]
    tx = np.linspace(0, 1, w)[None, :, None]
    top = corners[0, 0] * (1 - tx) + corners[0, 1] * tx
    bottom = corners[1, 0] * (1 - tx) + corners[1, 1] * tx
    return Image.fromarray((top * (1 - ty) + bottom * ty).astype(np.uint8))


def sparse_drawing(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A schematic: a few outlined shapes and arrows, mostly white, in a thin frame."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 6))):
        x, y = rng.uniform(0.1, 0.8) * w, rng.uniform(0.1, 0.8) * h
        s = rng.uniform(0.05, 0.2) * min(w, h)
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x, y, x + s, y + s), outline=tuple(int(v) for v in rng.integers(0, 150, 3)), width=2)
        draw.line((x + s, y + s / 2, x + 2 * s, y + s / 2), fill=(0, 0, 0), width=1)
    draw.rectangle((0, 0, w - 1, h - 1), outline=(90, 90, 90))
    return img


HARD = {
    "gapped_bars": gapped_bars,
    "box_plot": box_plot,
    "many_lines": many_lines,
    "table_rows": table_rows,
    "bands": bands,
    "ramp": ramp,
    "sparse_drawing": sparse_drawing,
}
HARD_WHITE = frozenset(HARD)  # all of them meet the page in white somewhere
