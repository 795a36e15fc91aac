"""Box geometry the detector stage needs: overlap, containment, IoU of every box with every other.

Boxes are x0, y0, x1, y1 in pixels. The stage decides duplicates, merges and containers with
these (``panels.select_panels``); model development's detection metrics
(``modeldev.detector.metrics``) match predictions to gold with the same ``iou_matrix``, so a
box the stage calls a duplicate is one the metrics would match.
"""

from __future__ import annotations

import numpy as np

Box = tuple[int, int, int, int]


def intersection(a: Box, b: Box) -> int:
    return max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))


def area(box: Box) -> int:
    return (box[2] - box[0]) * (box[3] - box[1])


def contains(outer: Box, inner: Box, fraction: float = 0.9) -> bool:
    """Whether ``fraction`` or more of ``inner`` lies inside ``outer``."""
    return area(inner) > 0 and intersection(outer, inner) >= fraction * area(inner)


def overlap_of_smaller(a: Box, b: Box) -> float:
    """The share of the smaller box that the two have in common."""
    smaller = min(area(a), area(b))
    return intersection(a, b) / smaller if smaller > 0 else 0.0


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (N,4) with every box in ``b`` (M,4); boxes are x0,y0,x1,y1."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
