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
    scale = min(
        1.0,
        max_side / (widths.sum() + margin * (cols - 1)),
        max_side / (heights.sum() + rows * label_band + margin * (rows - 1)),
    )
    widths = np.maximum(32, widths * scale).astype(int)
    heights = np.maximum(32, heights * scale).astype(int)
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
    return Layout(
        "uneven", width, height, boxes, (rows, cols), margin, 0, label_band, row_of, col_of
    )
