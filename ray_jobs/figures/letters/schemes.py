"""One figure, one labelling scheme: read a figure's labels together, not one by one.

A figure labels its panels in one scheme: letters (A, b), numbers (1, 2), roman numerals
(i, ii) or grid codes (a1, b2). Alone, a crop of "ii" in a serif face is as much "11" as "ii",
and "i" is "1", "l" or "t"; beside "iii" and "iv" it is not. So the scheme that explains the
figure's labels best is chosen first, and then each label is read within it.

The scheme is used only when it is the majority's own reading (most labels already read as one
of its classes): a figure whose labels are mixed on purpose (A, B with i, ii inside) keeps its
labels' own readings.

A figure of N panels names them from the start of its scheme's sequence (a–d, 1–4, i–iv for
four panels), so a reading past the N-th is believed ten times less than before (not ruled
out: a continued figure starts at E, and the detector may have found fewer panels than there
are).

Within the scheme, no two labels of a figure say the same: when two readings collide, the
labels are assigned distinct classes that are jointly most probable (an assignment problem
on the log-probabilities).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from ray_jobs.figures.letters.classes import GRID, LETTERS, NUMBERS, ROMANS

BEYOND_PANELS = 0.1  # the weight of a reading past the figure's panel count

# each scheme's labels in the order figures use them (grid codes have no single order)
SEQUENCES = (
    LETTERS,
    NUMBERS,
    ["i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii"],
)
SCHEMES: dict[str, frozenset[str]] = {
    "letters": frozenset(LETTERS),
    "numbers": frozenset(NUMBERS),
    "roman": frozenset(["i", "v", "x", *ROMANS]),
    "grid": frozenset(GRID),
}


def scheme_of(probs: np.ndarray, classes: tuple[str, ...]) -> str | None:
    """The scheme that explains the labels best (highest sum of log best-in-scheme
    probability), when it is also what most labels read on their own; else None."""
    if len(probs) < 2:
        return None
    raw = [classes[int(i)] for i in probs.argmax(1)]
    best, best_score = None, -np.inf
    for name, members in SCHEMES.items():
        columns = [k for k, c in enumerate(classes) if c in members]
        score = float(np.log(probs[:, columns].max(1) + 1e-12).sum())
        if score > best_score:
            best, best_score = name, score
    assert best is not None
    agree = sum(r in SCHEMES[best] for r in raw)
    return best if 2 * agree > len(raw) else None


def each_alone(probs: np.ndarray, classes: tuple[str, ...]) -> list[tuple[str, float]]:
    """Each label's most probable class and its probability, whatever the others read."""
    picks = probs.argmax(1)
    return [(classes[int(k)], round(float(p[k]), 4)) for p, k in zip(probs, picks, strict=True)]


def panel_prior(classes: tuple[str, ...], panels: int) -> np.ndarray:
    """Per class: 1 for the first ``panels`` labels of each sequence and for grid codes, else
    ``BEYOND_PANELS``."""
    first = {name for sequence in SEQUENCES for name in sequence[:panels]}
    return np.array([1.0 if c in first or c in GRID else BEYOND_PANELS for c in classes])


def read_in_scheme(
    probs: np.ndarray, classes: tuple[str, ...], panels: int | None = None
) -> list[tuple[str, float]]:
    """Each label's reading and probability, within the figure's scheme when there is one;
    ``panels``, the figure's panel count, weights the readings by :func:`panel_prior`.

    The probability within a scheme is the class's share of the scheme's mass: what the reader
    believes once the scheme is known.
    """
    if panels is not None and len(probs):
        probs = probs * panel_prior(classes, panels)
        probs = probs / probs.sum(1, keepdims=True)
    scheme = scheme_of(probs, classes)
    if scheme is None:
        return each_alone(probs, classes)
    columns = np.array([k for k, c in enumerate(classes) if c in SCHEMES[scheme]])
    inside = probs[:, columns]
    share = inside / np.maximum(inside.sum(1, keepdims=True), 1e-12)
    picks = share.argmax(1)
    if len(set(picks.tolist())) < len(picks) <= len(columns):
        rows, picks = linear_sum_assignment(-np.log(share + 1e-12))
        picks = picks[np.argsort(rows)]
    return [
        (classes[int(columns[k])], round(float(s[k]), 4)) for s, k in zip(share, picks, strict=True)
    ]
