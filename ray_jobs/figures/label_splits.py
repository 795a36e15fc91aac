"""Split a box that holds a second panel's label at the edge that label marks.

A figure places its labels one way: at (or just above) each panel's top-left corner, at the
same offset. When the detector boxes two panels as one (white panels on a white page, text
blocks side by side, stripes touching stripes), the second panel's label still sits inside the
box at that offset from the corner the detector missed. The box is cut there, but only where
the image shows an edge along the whole cut (a gutter, a frame line or a change of content),
and only when both labels read as letters of one sequence with the second one later (an axis
tick or a word in a table is not the next panel's letter), so a mark inside one picture never
cuts it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ray_jobs.figures.images import page_level

Box = tuple[int, int, int, int]
MAX_PANELS = 64  # a figure is never cut into more than this many boxes
ROMAN = {r: i for i, r in enumerate("i ii iii iv v vi vii viii ix x xi xii".split(), 1)}
Reading = tuple[str, float]  # what a label reads (case-folded class text) and how sure


def sequence(text: str) -> set[tuple[str, int]]:
    """The sequences a label's text may belong to, with its rank in each ("v" is the 22nd
    letter or the roman 5; "b2", row b and column 2, comes after "a1" to "a6")."""
    ranks: set[tuple[str, int]] = set()
    if text.isdigit():
        ranks.add(("number", int(text)))
    if len(text) == 1 and text.isalpha():
        ranks.add(("letter", ord(text) - ord("a")))
    if text in ROMAN:
        ranks.add(("roman", ROMAN[text]))
    if re.fullmatch(r"[a-z]\d{1,2}", text):
        ranks.add(("grid", 6 * (ord(text[0]) - ord("a")) + int(text[1:])))
    return ranks


def follows(first: Reading, later: Reading, min_score: float, max_step: int = 26) -> bool:
    """Whether ``later`` reads, surely, as a label that comes after ``first`` in one sequence,
    at most ``max_step`` places on (a figure of n panels has no label n places on: an axis's
    "0" read as "o" after a "b" is not a label)."""
    if min(first[1], later[1]) < min_score:
        return False
    after = dict(sequence(later[0]))
    for kind, rank in sequence(first[0]):
        if kind in after:
            step = after[kind] - rank
            if 0 < step <= max_step:
                return True
    return False


def _height(box: Box) -> int:
    return box[3] - box[1]


def _inside(box: Box, point: tuple[float, float]) -> bool:
    return box[0] <= point[0] < box[2] and box[1] <= point[1] < box[3]


def _centre(box: Box) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def label_offset(panels: list[Box], labels: list[Box]) -> tuple[float, float, float] | None:
    """How the figure places a label against its panel's top-left corner: the median (dx, dy)
    and label height over panels that have a label there; None when none has."""
    found = []
    for p in panels:
        near = []
        for lb in labels:
            h = _height(lb)
            dx, dy = lb[0] - p[0], lb[1] - p[1]
            if -h <= dx <= 2.5 * h and -2.5 * h <= dy <= 2.5 * h and lb[0] < p[2] and lb[1] < p[3]:
                near.append((abs(dx) + abs(dy), dx, dy, h))
        if near:
            found.append(min(near)[1:])
    if not found:
        return None
    dx, dy, h = np.median(np.array(found, dtype=np.float64), axis=0)
    return float(dx), float(dy), float(h)


def _edge(
    sub: np.ndarray, axis: int, lo: int, hi: int, skip: Box, page: float
) -> tuple[int, int] | None:
    """The run of lines in ``[lo, hi)`` of ``sub`` (1: columns, 0: rows) where a boundary
    shows, as ``(first, last + 1)``, the run nearest the window's centre; None if none does.

    A line counts when it is uniform in the page's colour (a gutter) or in dark ink (a frame
    line), the pixels of ``skip`` (the label, in ``sub``'s coordinates) left out; a smooth
    stretch of a photograph is neither. It also counts when it differs from the line before
    far more than this box's lines usually do (two pictures touching without a gutter).
    """
    lines = (sub.T if axis == 1 else sub).astype(np.float32)
    keep = np.ones(sub.shape, dtype=bool)
    keep[max(0, skip[1]) : max(0, skip[3]), max(0, skip[0]) : max(0, skip[2])] = False
    keep = keep.T if axis == 1 else keep
    lo, hi = max(1, lo), min(len(lines), hi)
    if hi <= lo:
        return None
    jump = np.abs(np.diff(lines, axis=0)).mean(axis=1)  # jump[k - 1]: line k against k - 1
    sharp = max(25.0, 4.0 * float(np.median(jump)))
    good = np.zeros(hi - lo, dtype=bool)
    for k in range(lo, hi):
        values = lines[k][keep[k]]
        level = float(np.median(values)) if values.size else -1.0
        uniform = (abs(level - page) <= 24 or 0 <= level <= 90) and float(
            (np.abs(values - level) <= 18).mean()
        ) >= 0.92
        good[k - lo] = uniform or jump[k - 1] >= sharp
    if not good.any():
        return None
    idx = np.flatnonzero(good)
    k = int(idx[np.argmin(np.abs(idx - (hi - lo - 1) / 2))])
    first, last = k, k
    while first > 0 and good[first - 1]:
        first -= 1
    while last + 1 < len(good) and good[last + 1]:
        last += 1
    return lo + first, lo + last + 1


def _cut(
    grey: np.ndarray,
    box: Box,
    labels: list[Box],
    offset: tuple[float, float, float],
    page: float,
) -> tuple[Box, Box] | None:
    """The first clean guillotine cut of ``box`` at one of its labels, or None."""
    dx, dy, h = offset
    tol = max(6.0, 0.8 * h)
    min_part = max(24.0, 2.5 * h)
    x0, y0, x1, y1 = box
    sub = grey[y0:y1, x0:x1]
    for lb in sorted(labels, key=lambda b: (b[1], b[0])):
        if not 0.6 * h <= _height(lb) <= 1.6 * h:
            continue
        corner_x, corner_y = lb[0] - dx, lb[1] - dy
        at_top, at_left = abs(corner_y - y0) <= tol, abs(corner_x - x0) <= tol
        if at_top and not at_left and x0 + min_part <= corner_x <= x1 - min_part:
            axis, at, lo_edge = 1, corner_x - x0, lb[0] - x0
        elif at_left and not at_top and y0 + min_part <= corner_y <= y1 - min_part:
            axis, at, lo_edge = 0, corner_y - y0, lb[1] - y0
        else:
            continue
        span = int(tol)
        skip = (lb[0] - x0, lb[1] - y0, lb[2] - x0, lb[3] - y0)
        lo, hi = int(min(at, lo_edge)) - span, int(max(at, lo_edge)) + span + 1
        run = _edge(sub, axis, lo, hi, skip, page)
        if run is None:
            continue
        first, end = run
        corner = round(at)
        # a label above its panel: the panel starts under it; else at its label's corner,
        # within the edge found
        start = max(corner, lb[3] - y0) if axis == 0 and dy < 0 else min(max(corner, first), end)
        # the panel before ends halfway across the white between them, and before the label
        stop = max(1, min((first + start) // 2, int(lo_edge)))
        if axis == 1:
            a, b = (x0, y0, x0 + stop, y1), (x0 + start, y0, x1, y1)
        else:
            a, b = (x0, y0, x1, y0 + stop), (x0, y0 + start, x1, y1)
        if min(a[2] - a[0], a[3] - a[1], b[2] - b[0], b[3] - b[1]) < min_part:
            continue
        return a, b
    return None


def split_at_labels(
    grey: np.ndarray,
    panels: list[Box],
    labels: list[Box],
    read: Callable[[], list[Reading]],
    min_score: float = 0.7,
) -> tuple[list[Box], list[tuple[Box, list[Box]]]]:
    """``panels`` with every box that holds a later panel's label cut into its panels, and
    the cuts made as (box, parts). ``grey`` is the figure in grey levels (rows, columns);
    ``read()`` what each label reads, asked once and only when some box holds a label off its
    own corner. A box is cut only when its own corner label is found too: the next label is
    judged against it."""
    offset = label_offset(panels, labels)
    if offset is None or len(labels) < 2:
        return panels, []
    dx, dy, _ = offset
    step = max(3, len(panels))  # the farthest a later label of a merged box can be
    page = page_level(grey)
    readings: list[Reading] = []
    out: list[Box] = []
    cuts: list[tuple[Box, list[Box]]] = []
    for box in panels:
        todo, parts = [box], []
        while todo:
            current = todo.pop()
            inside = [i for i, lb in enumerate(labels) if _inside(current, _centre(lb))]
            corner = [
                i
                for i in range(len(labels))
                if abs(labels[i][0] - dx - current[0]) <= max(6.0, 0.8 * _height(labels[i]))
                and abs(labels[i][1] - dy - current[1]) <= max(6.0, 0.8 * _height(labels[i]))
            ]
            others = [i for i in inside if i not in corner]
            if others and corner and not readings:
                readings.extend(read())
            later = [
                labels[i]
                for i in others
                if any(follows(readings[c], readings[i], min_score, step) for c in corner)
            ]
            pair = (
                _cut(grey, current, later, offset, page)
                if later and len(out) + len(parts) + len(todo) < MAX_PANELS
                else None
            )
            if pair is None:
                parts.append(current)
            else:
                todo.extend(pair)
        if len(parts) > 1:
            cuts.append((box, parts))
        out.extend(parts)
    return out, cuts
