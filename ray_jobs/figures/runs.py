"""Runs of True in a 1-D mask: where a strip of rows or columns keeps one property.

Kept apart because the product's colour-bar test (``colour_bars``) measures how long a bar
stays at the page's colour with it, and model development's separator cut
(``modeldev.detector.separators``) finds clean gutters with it: one definition for both.
"""

from __future__ import annotations

import numpy as np


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Start/end (exclusive) of each run of True."""
    padded = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
