"""Separator analysis: where a figure's background runs clean across, and what it splits.

A second opinion for the detector, in numpy only. A *separator* is a run of rows (or columns)
in which no pixel is ink, where ink is a grey level far from the page's background colour.
A bar chart's white gap is crossed by its axis line, so it is not one; a gutter is. Recursive
XY cuts along such runs give the figure's cut tree, whose leaves are the cut's own panels, and
the same test applied to the band between two detector boxes says whether the detector's
split sits on a gutter, on a visible edge, or in the middle of one picture.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from ray_jobs.figures.runs import true_runs

Box = tuple[int, int, int, int]
WORK_SIDE = 512  # long side the analysis runs at; boxes are mapped back to source pixels


@dataclass
class Grey:
    """The figure as a float grey array at working scale, with its page colour."""

    pixels: np.ndarray
    scale: float  # working pixels per source pixel
    background: float
    tolerance: float

    @property
    def ink(self) -> np.ndarray:
        return np.abs(self.pixels - self.background) > self.tolerance


def _page_colour(pixels: np.ndarray, tolerance: float) -> float:
    """The page's grey level: white, black, or the border's own pale or dark shade, whichever
    leaves the most ink-free rows and columns (a panel reaching the border must not pass for
    the page, and a mid grey never does: any flat stretch of a picture would look like page)."""
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    counts = np.bincount((border // 8).astype(int), minlength=32)
    mode = float(np.argmax(counts) * 8 + 4)
    candidates = [255.0, 0.0] + ([mode] if mode > 200 or mode < 48 else [])

    def clear(level: float) -> int:
        ink = np.abs(pixels - level) > tolerance
        return int((ink.mean(axis=0) <= 0.002).sum() + (ink.mean(axis=1) <= 0.002).sum())

    return max(candidates, key=lambda level: (clear(level), level == mode))


def to_grey(image: Image.Image, tolerance: float = 40.0) -> Grey:
    scale = min(1.0, WORK_SIDE / max(image.size))
    small = (
        image
        if scale == 1.0
        else image.resize(
            (max(1, round(image.width * scale)), max(1, round(image.height * scale))),
            Image.Resampling.BILINEAR,
        )
    )
    pixels = np.asarray(small.convert("L"), dtype=np.float32)
    return Grey(pixels, scale, _page_colour(pixels, tolerance), tolerance)


def clear_lines(ink: np.ndarray, axis: int, allowance: float = 0.002) -> np.ndarray:
    """Rows (axis 1) or columns (axis 0) with (almost) no ink: JPEG speckle is allowed."""
    if ink.size == 0:
        return np.zeros(ink.shape[1 - axis] if ink.ndim == 2 else 0, dtype=bool)
    return ink.mean(axis=axis) <= allowance


def _trim(ink: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> Box | None:
    region = ink[y0:y1, x0:x1]
    rows, cols = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    if not len(rows) or not len(cols):
        return None
    return x0 + int(cols[0]), y0 + int(rows[0]), x0 + int(cols[-1]) + 1, y0 + int(rows[-1]) + 1


def xy_cut(grey: Grey, min_gap: int = 2, depth: int = 8) -> list[Box]:
    """Leaves of the recursive XY cut, in working pixels, trimmed to their ink."""
    ink = grey.ink
    leaves: list[Box] = []

    def visit(box: Box, level: int) -> None:
        trimmed = _trim(ink, *box)
        if trimmed is None:
            return
        x0, y0, x1, y1 = trimmed
        region = ink[y0:y1, x0:x1]
        best: tuple[int, int, list[tuple[int, int]]] | None = None
        for axis in (1, 0):  # rows (cut horizontally), then columns
            gaps = [(a, b) for a, b in true_runs(clear_lines(region, axis)) if b - a >= min_gap]
            if gaps:
                widest = max(b - a for a, b in gaps)
                if best is None or widest > best[0]:
                    best = (widest, axis, gaps)
        if best is None or level >= depth:
            leaves.append(trimmed)
            return
        _, axis, gaps = best
        length = y1 - y0 if axis == 1 else x1 - x0
        start = 0
        for a, b in [*gaps, (length, length)]:
            if a > start:
                if axis == 1:
                    visit((x0, y0 + start, x1, y0 + a), level + 1)
                else:
                    visit((x0 + start, y0, x0 + a, y1), level + 1)
            start = b

    visit((0, 0, ink.shape[1], ink.shape[0]), 0)
    return leaves


def to_source(grey: Grey, box: Box, width: int, height: int) -> Box:
    s = grey.scale
    return (
        max(0, int(box[0] / s)),
        max(0, int(box[1] / s)),
        min(width, int(np.ceil(box[2] / s))),
        min(height, int(np.ceil(box[3] / s))),
    )


def to_work(grey: Grey, box: Box) -> Box:
    s = grey.scale
    h, w = grey.pixels.shape
    return (
        max(0, int(box[0] * s)),
        max(0, int(box[1] * s)),
        min(w, int(np.ceil(box[2] * s))),
        min(h, int(np.ceil(box[3] * s))),
    )
