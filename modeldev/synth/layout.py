"""Where the panels of a synthetic compound figure go: grids, spans, ragged rows, margins."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in figure pixels, x1/y1 exclusive


@dataclass
class Layout:
    kind: str
    width: int
    height: int
    boxes: list[Box]
    grid: tuple[int, int]  # rows, cols of the underlying grid (cols of the widest row)
    margin: int
    padding: int
    label_band: int  # free pixels above each row for labels placed outside the panels
    row_of: list[int] = field(default_factory=list)  # grid row of each box
    col_of: list[int] = field(default_factory=list)  # grid column of each box (row-local)


def _count(rng: np.random.Generator) -> int:
    # 1..5, favouring the 1–3 panel rows and columns real figures mostly have
    return int(rng.choice([1, 2, 3, 4, 5], p=[0.25, 0.32, 0.23, 0.12, 0.08]))


def sample_layout(
    rng: np.random.Generator, label_band: int = 0, max_side: int = 1600, min_margin: int = 0
) -> Layout:
    rows, cols = _count(rng), _count(rng)
    if rows == cols == 1 and rng.random() < 0.6:  # single panels are common, not dominant
        cols = 2
    kind = str(rng.choice(["grid", "span", "ragged"], p=[0.6, 0.2, 0.2]))
    if kind == "span" and rows * cols < 3:
        kind = "grid"
    if kind == "ragged" and rows < 2:
        kind = "grid"
    margin = max(min_margin, int(rng.choice([0, 0, 2, 4, 6, 10, 16, 24])))
    padding = int(rng.choice([0, 0, 4, 10, 24]))
    aspect = float(rng.uniform(0.6, 1.6))
    cell_w = int(rng.uniform(110, 380))
    cell_h = int(cell_w * aspect)
    # keep the whole figure within max_side
    scale = min(
        1.0,
        (max_side - 2 * padding) / (cols * cell_w + (cols - 1) * margin),
        (max_side - 2 * padding) / (rows * (cell_h + label_band) + (rows - 1) * margin),
    )
    cell_w, cell_h = max(24, int(cell_w * scale)), max(24, int(cell_h * scale))
    width = 2 * padding + cols * cell_w + (cols - 1) * margin
    row_h = cell_h + label_band
    height = 2 * padding + rows * row_h + (rows - 1) * margin

    boxes: list[Box] = []
    row_of: list[int] = []
    col_of: list[int] = []
    inner_w = width - 2 * padding
    for r in range(rows):
        y0 = padding + r * (row_h + margin) + label_band
        n = cols
        if kind == "ragged":
            n = int(rng.integers(1, 6)) if r else cols
        w = (inner_w - (n - 1) * margin) / n
        for c in range(n):
            x0 = padding + round(c * (w + margin))
            boxes.append((x0, y0, x0 + round(w), y0 + cell_h))
            row_of.append(r)
            col_of.append(c)
    if kind == "span":
        _merge_span(rng, boxes, row_of, col_of, rows, cols, label_band)
    return Layout(
        kind, width, height, boxes, (rows, cols), margin, padding, label_band, row_of, col_of
    )


def _merge_span(rng, boxes, row_of, col_of, rows, cols, label_band) -> None:  # type: ignore[no-untyped-def]
    """Merge two neighbouring cells into one panel spanning two columns or two rows."""
    index = {(r, c): i for i, (r, c) in enumerate(zip(row_of, col_of, strict=True))}
    options = [("h", r, c) for r in range(rows) for c in range(cols - 1)]
    options += [("v", r, c) for r in range(rows - 1) for c in range(cols)]
    direction, r, c = options[int(rng.integers(len(options)))]
    a = index[(r, c)]
    b = index[(r, c + 1)] if direction == "h" else index[(r + 1, c)]
    (ax0, ay0, _, _), (_, _, bx1, by1) = boxes[a], boxes[b]
    if direction == "v":
        ax1 = boxes[a][2]
        boxes[a] = (ax0, ay0, ax1, by1)
    else:
        boxes[a] = (ax0, ay0, bx1, boxes[a][3])
    del boxes[b], row_of[b], col_of[b]


def uneven_layout(
    rng: np.random.Generator, label_band: int = 0, max_side: int = 1600, margin: int = 0
) -> Layout:
    """A grid whose columns differ in width and rows in height (one weight per column and per
    row), often gutterless: real figures pair a wide image with a narrow plot."""
    rows, cols = _count(rng), _count(rng)
    if rows * cols == 1:
        cols = 2
    widths = rng.uniform(0.5, 1.8, cols)
    heights = rng.uniform(0.5, 1.8, rows)
    unit = float(rng.uniform(110, 300))
    widths, heights = widths * unit, heights * unit * float(rng.uniform(0.7, 1.3))
    return _weighted_grid("uneven", widths, heights, margin, label_band, max_side, 32)


def _weighted_grid(
    kind: str,
    widths: np.ndarray,
    heights: np.ndarray,
    margin: int,
    label_band: int,
    max_side: int,
    min_side: int,
) -> Layout:
    """A grid of the given column widths and row heights, shrunk to fit ``max_side``, no
    side under ``min_side``."""
    rows, cols = len(heights), len(widths)
    scale = min(
        1.0,
        max_side / (widths.sum() + margin * (cols - 1)),
        max_side / (heights.sum() + rows * label_band + margin * (rows - 1)),
    )
    widths = np.maximum(min_side, widths * scale).astype(int)
    heights = np.maximum(min_side, heights * scale).astype(int)
    xs = np.concatenate([[0], np.cumsum(widths + margin)])
    ys = np.concatenate([[0], np.cumsum(heights + margin + label_band)])
    boxes: list[Box] = []
    row_of: list[int] = []
    col_of: list[int] = []
    for r in range(rows):
        for c in range(cols):
            y0 = int(ys[r]) + label_band
            boxes.append((int(xs[c]), y0, int(xs[c] + widths[c]), y0 + int(heights[r])))
            row_of.append(r)
            col_of.append(c)
    width = int(xs[-1] - margin)
    height = int(ys[-1] - margin)
    return Layout(kind, width, height, boxes, (rows, cols), margin, 0, label_band, row_of, col_of)


def nested_layout(
    rng: np.random.Generator, label_band: int = 0, max_side: int = 1600, margin: int = 0
) -> Layout:
    """A page divided by successive straight cuts, each through one existing cell: a tall
    panel beside a stack of small ones, a row of thumbnails under a wide image. Real figures
    nest like this far more often than they form a full grid, and their smallest panels are
    a fraction of the largest. Up to 16 panels, often gutterless.

    Each step picks a cell with a chance that grows with its area and cuts it across its
    longer side into 2 (sometimes 3 equal) parts at an uneven ratio; a cell whose parts would
    fall under the minimum side is never cut.
    """
    target = int(rng.choice([3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16]))
    width = int(rng.uniform(500, max_side))
    height = int(width * rng.uniform(0.5, 1.4))
    min_side = int(rng.choice([40, 56, 80])) + label_band
    cells: list[Box] = [(0, 0, width, height)]
    for _ in range(4 * target):
        if len(cells) >= target:
            break
        area = np.array([(c[2] - c[0]) * (c[3] - c[1]) for c in cells], float)
        i = int(rng.choice(len(cells), p=area / area.sum()))
        x0, y0, x1, y1 = cells[i]
        across_x = (x1 - x0) >= (y1 - y0) if rng.random() < 0.8 else (x1 - x0) < (y1 - y0)
        lo, hi = (x0, x1) if across_x else (y0, y1)
        parts = 3 if rng.random() < 0.25 else 2
        if (hi - lo - margin * (parts - 1)) / parts < min_side:
            continue
        if parts == 2:
            cuts = [lo + int((hi - lo - margin) * rng.uniform(0.28, 0.72))]
        else:
            step = (hi - lo - 2 * margin) / 3
            cuts = [lo + int(step), lo + int(2 * step + margin)]
        edges = [lo, *[e for c in cuts for e in (c, c + margin)], hi]
        pieces = [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)]
        if min(b - a for a, b in pieces) < min_side:
            continue
        new = [(a, y0, b, y1) if across_x else (x0, a, x1, b) for a, b in pieces]
        cells[i : i + 1] = new
    # the label band sits above each cell's content: the panel is the cell less its band
    boxes = [(x0, y0 + label_band, x1, y1) for x0, y0, x1, y1 in cells]
    order = sorted(range(len(boxes)), key=lambda k: (boxes[k][1], boxes[k][0]))
    boxes = [boxes[k] for k in order]
    tops = sorted({b[1] for b in boxes})
    row_of = [tops.index(b[1]) for b in boxes]
    col_of = [sum(1 for a in boxes[:k] if a[1] == b[1]) for k, b in enumerate(boxes)]
    rows, cols = len(tops), max(col_of) + 1
    return Layout(
        "nested", width, height, boxes, (rows, cols), margin, 0, label_band, row_of, col_of
    )


def dense_layout(
    rng: np.random.Generator, label_band: int = 0, max_side: int = 1600, margin: int = 0
) -> Layout:
    """Many small panels, 8 to 36, in a grid whose columns and rows differ a little: the
    multi-slice and multi-stain plates of real figures. Drawn at 560 px or more across so
    that, scaled to the detector's input, a cell is 18 to 80 px: the size at which touching
    panels separated by one thin line are lost."""
    while True:
        rows, cols = int(rng.integers(2, 7)), int(rng.integers(3, 11))
        if 8 <= rows * cols <= 36:
            break
    if rng.random() < 0.5:  # as often tall plates as wide ones
        rows, cols = cols, rows
    widths = rng.uniform(0.55, 1.45, cols)
    heights = rng.uniform(0.55, 1.45, rows) * float(rng.uniform(0.6, 1.4))
    unit = float(rng.uniform(560, max_side)) / max(cols, rows)
    widths = np.maximum(24, widths * unit).astype(int)
    heights = np.maximum(24, heights * unit).astype(int)
    layout = _weighted_grid("dense", widths, heights, margin, label_band, max_side, 24)
    if rng.random() < 0.3:  # one panel spanning two cells
        _merge_span(rng, layout.boxes, layout.row_of, layout.col_of, rows, cols, label_band)
    return layout
