"""The separator analysis as a check on the detector: confirm, veto or add splits.

Three rules, each from what the figure's pixels say about one place:

- a split between two touching detector boxes stands when a gutter (a clean background run)
  or a visible edge (a frame line, or a jump in grey level all along the cut) lies there; a
  split with neither cuts through one picture (the white gaps of a bar chart, a stripe of a
  periodic texture, a gradient) and the two boxes become one;
- a detector box crossed by one or two clean separators into large parts, each with its own
  content, holds panels the detector ran together, and is split there;
- when the detector finds nothing, the cut's own large leaves are the panels.

Everything runs on a grey copy at most 512 px on its long side; a figure takes milliseconds.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from modeldev.detector.separators import Box, Grey, clear_lines, to_grey, to_source, to_work, xy_cut
from ray_jobs.figures.runs import true_runs


def cut_panels(image: Image.Image, grey: Grey | None = None) -> list[Box]:
    """Panels by the XY cut alone: its leaves, less the small ones (text, ticks, captions)."""
    grey = grey or to_grey(image)
    h, w = grey.pixels.shape
    min_side = max(12, 0.08 * min(w, h))
    keep = [
        b
        for b in xy_cut(grey)
        if min(b[2] - b[0], b[3] - b[1]) >= min_side
        and (b[2] - b[0]) * (b[3] - b[1]) >= 0.01 * w * h
    ]
    return [to_source(grey, b, image.width, image.height) for b in keep]


def _band_evidence(grey: Grey, a: Box, b: Box, axis: int) -> str:
    """What lies between ``a`` and ``b`` (work pixels), side by side (axis 0: a left of b)
    or stacked (axis 1): "gutter", "edge" or "none"."""
    px = grey.pixels
    ink = grey.ink
    if axis == 0:
        lo, hi = max(a[1], b[1]), min(a[3], b[3])
        c0, c1 = sorted((a[2], b[0]))
        strip = lambda s, e: px[lo:hi, s:e]  # noqa: E731
        ink_strip = ink[lo:hi, max(0, c0 - 1) : c1 + 1]
        limit = px.shape[1]
    else:
        lo, hi = max(a[0], b[0]), min(a[2], b[2])
        c0, c1 = sorted((a[3], b[1]))
        strip = lambda s, e: px[s:e, lo:hi].T  # noqa: E731
        ink_strip = ink[max(0, c0 - 1) : c1 + 1, lo:hi].T
        limit = px.shape[0]
    if hi - lo < 4:
        return "none"
    inner = slice(int((hi - lo) * 0.05), max(1, int((hi - lo) * 0.95)))
    if ink_strip.size and clear_lines(ink_strip[inner], axis=0).any():
        return "gutter"
    mid = (c0 + c1) // 2
    if mid - 3 < 0 or mid + 3 > limit:
        return "none"
    # a frame line: a column (row) in the band, uniform, far from the page colour, and unlike
    # what lies a few pixels to either side (a flat stretch of one picture is not a line)
    for s in range(max(3, c0 - 1), min(limit - 3, c1 + 2)):
        col = strip(s, s + 1)[inner]
        if not col.size or col.std() >= 14 or abs(float(col.mean()) - grey.background) <= 40:
            continue
        sides = [float(np.abs(strip(t, t + 1)[inner] - col).mean()) for t in (s - 3, s + 3)]
        if max(sides) > 30:
            return "edge"
    # the boundary may sit a few pixels off the boxes' edges: take the strongest jump near it
    jump = (
        max(
            float(np.abs(strip(m - 3, m - 1).mean(1) - strip(m + 1, m + 3).mean(1))[inner].mean())
            for m in range(max(3, c0 - 4), min(limit - 3, c1 + 5))
        )
        if min(limit - 3, c1 + 5) > max(3, c0 - 4)
        else 0.0
    )
    inside = []
    for box in (a, b):
        start, end = (box[0], box[2]) if axis == 0 else (box[1], box[3])
        for t in np.linspace(start + 3, end - 4, 7).astype(int)[1:-1]:
            inside.append(
                float(np.abs(strip(t - 2, t).mean(1) - strip(t + 1, t + 3).mean(1))[inner].mean())
            )
    typical = float(np.median(inside)) if inside else 0.0
    return "edge" if jump > max(10.0, 2.5 * typical) else "none"


def _neighbours(a: Box, b: Box, slack: int) -> int | None:
    """0 when ``a`` is just left of ``b``, 1 when just above, None otherwise."""

    def share(a0: int, a1: int, b0: int, b1: int) -> float:
        return max(0, min(a1, b1) - max(a0, b0)) / max(1, min(a1 - a0, b1 - b0))

    if share(a[1], a[3], b[1], b[3]) >= 0.6 and -slack <= b[0] - a[2] <= slack:
        return 0
    if share(a[0], a[2], b[0], b[2]) >= 0.6 and -slack <= b[1] - a[3] <= slack:
        return 1
    return None


def veto_splits(
    grey: Grey, boxes: list[Box], scores: list[float]
) -> tuple[list[Box], list[float], int]:
    """Merge touching detector boxes with neither a gutter nor an edge between them."""
    work = [to_work(grey, b) for b in boxes]
    boxes, scores = list(boxes), list(scores)
    merges = 0
    changed = True
    while changed and len(boxes) > 1:
        changed = False
        for i in range(len(boxes)):
            for j in range(len(boxes)):
                if i == j:
                    continue
                axis = _neighbours(
                    work[i], work[j], slack=max(3, int(0.03 * max(grey.pixels.shape)))
                )
                if axis is None or _band_evidence(grey, work[i], work[j], axis) != "none":
                    continue
                union = tuple(
                    f(p, q)
                    for f, p, q in zip((min, min, max, max), boxes[i], boxes[j], strict=True)
                )
                union_w = to_work(grey, union)  # type: ignore[arg-type]
                others = [k for k in range(len(boxes)) if k not in (i, j)]
                if any(_overlaps(union_w, work[k]) for k in others):
                    continue
                boxes[i], work[i], scores[i] = union, union_w, max(scores[i], scores[j])  # type: ignore[assignment]
                del boxes[j], work[j], scores[j]
                merges += 1
                changed = True
                break
            if changed:
                break
    return boxes, scores, merges


def _overlaps(a: Box, b: Box) -> bool:
    inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
    return inter > 0.2 * min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))


def split_box(grey: Grey, box: Box, min_part: float = 0.25) -> list[Box] | None:
    """Parts of a work-pixel ``box`` between one or two clean interior separators, when every
    part is large and has content of its own; None when the box is one panel."""
    x0, y0, x1, y1 = box
    ink = grey.ink[y0:y1, x0:x1]
    if ink.size == 0:
        return None
    for axis in (1, 0):  # separators that are rows, then columns
        clear = clear_lines(ink, axis)
        length = len(clear)
        runs = [(a, b) for a, b in true_runs(clear) if a > 0 and b < length and b - a >= 2]
        if not 1 <= len(runs) <= 2:
            continue
        cuts = [0, *[v for run in runs for v in run], length]
        parts = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts), 2)]
        if any(e - s < max(min_part * length, 24) for s, e in parts):
            continue
        out = []
        for s, e in parts:
            piece = ink[s:e] if axis == 1 else ink[:, s:e]
            if piece.mean() < 0.01 or min(piece.any(1).sum(), piece.any(0).sum()) < 0.2 * length:
                break
            out.append((x0, y0 + s, x1, y0 + e) if axis == 1 else (x0 + s, y0, x0 + e, y1))
        else:
            return out
    return None


def second_opinion(
    image: Image.Image,
    boxes: list[Box],
    scores: list[float | None],
    rules: frozenset[str] = frozenset({"veto", "split", "fallback"}),
) -> tuple[list[Box], list[float | None], dict[str, int]]:
    """The detector's boxes after the separator checks, with counts of what changed."""
    grey = to_grey(image)
    notes = {"vetoed": 0, "split": 0, "from_cut": 0}
    if "fallback" in rules and (not boxes or (len(boxes) == 1 and scores[0] is None)):
        cut = cut_panels(image, grey)
        if len(cut) >= 2:
            notes["from_cut"] = len(cut)
            return cut, [0.5] * len(cut), notes
        return boxes, scores, notes
    out_boxes: list[Box] = []
    out_scores: list[float | None] = []
    for box, score in zip(boxes, scores, strict=True):
        parts = split_box(grey, to_work(grey, box))
        if "split" in rules and parts and score is not None:
            notes["split"] += 1
            out_boxes += [to_source(grey, p, image.width, image.height) for p in parts]
            out_scores += [score] * len(parts)
        else:
            out_boxes.append(box)
            out_scores.append(score)
    if "veto" in rules and len(out_boxes) > 1:
        merged, merged_scores, notes["vetoed"] = veto_splits(
            grey, out_boxes, [0.0 if s is None else s for s in out_scores]
        )
        out_boxes, out_scores = merged, list(merged_scores)
    return out_boxes, out_scores, notes
