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

from ray_jobs.figures.fonts import font


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


def column_table(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A table whose columns line up: white corridors run its full height between columns,
    and white rows between its lines, yet it is one panel."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    cols = int(rng.integers(2, 6))
    size = int(np.clip(min(h / rng.uniform(9, 18), w / cols / 4.5), 7, 16))
    face = font(size, bold=False, serif=bool(rng.random() < 0.4))
    head = font(size, bold=True, serif=bool(rng.random() < 0.4))
    lefts = np.linspace(4, w - w / cols * 0.6, cols)
    step = int(size * rng.uniform(1.4, 2.4))
    shaded = rng.random() < 0.25
    y, row = 4, 0
    while y + size + 4 < h:
        if shaded and row % 2 == 0 and row:
            draw.rectangle((0, y - 2, w - 1, y + size + 2), fill=(235, 235, 235))
        for c, x in enumerate(lefts):
            if row == 0:
                word = str(rng.choice(["Variable", "n", "OR", "95% CI", "HR", "P value", "Age"]))
            elif c == 0:
                word = str(rng.choice(["Stage I", "Stage II", "Male", "Female", "Smoker", "BMI"]))
            else:
                word = f"{rng.uniform(0, 99):.{int(rng.integers(1, 3))}f}"
            draw.text((float(x), y), word, fill=(0, 0, 0), font=head if row == 0 else face)
        if row == 0 and rng.random() < 0.7:
            draw.line((0, y + size + 3, w, y + size + 3), fill=(0, 0, 0))
        y += step
        row += 1
    return img


def paragraph(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Lines of prose or a bulleted list, ragged on the right, maybe under a bold heading."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    size = int(np.clip(h / rng.uniform(10, 22), 7, 14))
    serif = bool(rng.random() < 0.5)
    face = font(size, serif=serif)
    words = (
        "patients were treated with a dose after the cohort response at follow-up imaging "
        "showed the lesion and none of"
    ).split()
    y = 3
    if rng.random() < 0.5:
        draw.text((4, y), "Findings", fill=(0, 0, 0), font=font(size + 2, bold=True, serif=serif))
        y += int(size * 2)
    bullets = rng.random() < 0.4
    while y + size < h - 2:
        x = 4 + (size if bullets else 0)
        if bullets:
            draw.ellipse((4, y + size // 3, 4 + size // 3, y + 2 * size // 3), fill=(0, 0, 0))
        line, limit = "", (w - x - 4) * rng.uniform(0.6, 1.0)
        for word in rng.choice(words, 40):
            if draw.textlength(f"{line} {word}", font=face) > limit:
                break
            line = f"{line} {word}".strip()
        draw.text((x, y), line, fill=(0, 0, 0), font=face)
        y += int(size * rng.uniform(1.25, 1.6)) + (size if bullets and rng.random() < 0.3 else 0)
    return img


def cell_matrix(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A heat map: a grid of coloured cells, sometimes with thin page-coloured lines between
    them, row names on the left and a colour bar of its own on the right (inside the panel)."""
    from matplotlib import colormaps

    cmap = colormaps[str(rng.choice(["viridis", "RdBu_r", "magma", "coolwarm", "YlGnBu"]))]
    rows, cols = int(rng.integers(3, 16)), int(rng.integers(2, 12))
    values = rng.random((rows, cols))
    if rng.random() < 0.5:  # structure, as clustered data shows
        values = np.sort(values, axis=int(rng.integers(2)))
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    left = int(w * rng.uniform(0.12, 0.22)) if rng.random() < 0.6 else 2
    right = w - (int(w * 0.12) if rng.random() < 0.5 else 2)
    top, bottom = 2, h - 2
    gap = int(rng.choice([0, 0, 1, 2, 3]))
    line = (255, 255, 255) if rng.random() < 0.7 else (0, 0, 0)
    cw, ch = (right - left) / cols, (bottom - top) / rows
    for r in range(rows):
        for c in range(cols):
            colour = tuple(int(255 * v) for v in cmap(float(values[r, c]))[:3])
            box = (left + c * cw, top + r * ch, left + (c + 1) * cw - 1, top + (r + 1) * ch - 1)
            draw.rectangle(box, fill=colour, outline=line if gap else None, width=gap or 1)
        if left > 10:
            draw.text(
                (2, top + r * ch),
                f"g{r + 1}",
                fill=(0, 0, 0),
                font=font(int(np.clip(ch * 0.7, 7, max(7, min(16, left / 3))))),
            )
    if right < w - 10:
        x0 = right + 6
        for k in range(top, bottom):
            colour = tuple(int(255 * v) for v in cmap(1 - (k - top) / max(1, bottom - top))[:3])
            draw.line((x0, k, min(w - 2, x0 + 8), k), fill=colour)
    return img


def line_sketch(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A few thin strokes, arcs and dots on white, often without a frame: a panel that is
    almost all page, whose extent only the layout shows."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 9))):
        colour = tuple(int(v) for v in rng.integers(0, 160, 3))
        kind = rng.random()
        if kind < 0.5:
            points = [(float(rng.uniform(0.05, 0.95) * w), float(rng.uniform(0.05, 0.95) * h))
                      for _ in range(int(rng.integers(2, 5)))]  # fmt: skip
            draw.line(points, fill=colour, width=int(rng.integers(1, 4)))
        elif kind < 0.8:
            r = rng.uniform(0.03, 0.12) * min(w, h)
            x, y = rng.uniform(r, w - r), rng.uniform(r, h - r)
            draw.arc((x - r, y - r, x + r, y + r), 0, int(rng.integers(90, 361)), fill=colour)
        else:
            x, y = rng.uniform(0, w - 4), rng.uniform(0, h - 4)
            draw.ellipse((x, y, x + 4, y + 4), fill=colour)
    if rng.random() < 0.3:
        draw.rectangle((0, 0, w - 1, h - 1), outline=(120, 120, 120))
    return img


HARD = {
    "gapped_bars": gapped_bars,
    "box_plot": box_plot,
    "many_lines": many_lines,
    "table_rows": table_rows,
    "bands": bands,
    "ramp": ramp,
    "sparse_drawing": sparse_drawing,
    "column_table": column_table,
    "paragraph": paragraph,
    "cell_matrix": cell_matrix,
    "line_sketch": line_sketch,
}
HARD_WHITE = frozenset(HARD)  # all of them meet the page in white somewhere
