"""Guillotine layouts: a page cut recursively into uneven rows and columns.

Cuts at uneven ratios give uneven column widths and row heights; a cell left uncut beside a
cut one spans rows or columns. The gutter is one value per figure and is often zero, so
panels touch edge to edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Rect = tuple[int, int, int, int]  # x0, y0, x1, y1, x1/y1 exclusive


@dataclass
class Page:
    width: int
    height: int
    gutter: int
    cells: list[Rect]  # the panels, in no particular order
    style: str  # none | thin | wide


def _cut(
    rng: np.random.Generator, rect: Rect, gutter: int, depth: int, budget: list[int], min_side: int
) -> list[Rect]:
    x0, y0, x1, y1 = rect
    w, h = x1 - x0, y1 - y0
    lopsided = max(w / h, h / w) > 2.2  # a strip this long is rarely one panel
    if (
        depth == 0
        or (budget[0] <= 1 and not lopsided)
        or (depth < 3 and not lopsided and rng.random() < 0.3)
    ):
        return [rect]
    vertical = w / h > 2.2 or (h / w <= 2.2 and rng.random() < w / (w + h))
    side = w if vertical else h
    parts = int(rng.choice([2, 2, 2, 3, 3, 4]))
    parts = min(parts, max(2, budget[0]), max(1, (side + gutter) // (min_side + gutter)))
    if parts < 2:
        return [rect]
    weights = rng.uniform(0.6, 1.6, parts)
    usable = side - gutter * (parts - 1)
    sizes = np.floor(usable * weights / weights.sum()).astype(int)
    sizes[-1] = usable - sizes[:-1].sum()
    budget[0] -= parts - 1
    out: list[Rect] = []
    start = x0 if vertical else y0
    for size in sizes:
        sub = (start, y0, start + size, y1) if vertical else (x0, start, x1, start + size)
        out.extend(_cut(rng, sub, gutter, depth - 1, budget, min_side))
        start += size + gutter
    return out


def sample_page(rng: np.random.Generator) -> Page:
    style = str(rng.choice(["none", "thin", "wide"], p=[0.4, 0.2, 0.4]))
    gutter = {"none": 0, "thin": int(rng.integers(1, 4)), "wide": int(rng.integers(6, 26))}[style]
    width = int(rng.integers(420, 1000))
    height = int(width * rng.uniform(0.45, 1.3))
    max_panels = int(rng.choice([1, 2, 3, 4, 6, 8, 12], p=[0.1, 0.2, 0.2, 0.2, 0.15, 0.1, 0.05]))
    cells = _cut(rng, (0, 0, width, height), gutter, 4, [max_panels], min_side=70)
    return Page(width, height, gutter, cells, style)
