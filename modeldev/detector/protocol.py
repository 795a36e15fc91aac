"""The held-out protocol: three sets no training run sees, scored the same way for any method.

- ``family``: the independent figure family (``modeldev/heldout``), seed 2026;
- ``generator``: the training generator on seed 99, which no training command uses;
- ``real``: the ten real figures in ``../shared/data/medicat_figures``, test-only; their gold is
  the panel count their caption names ((A)…(D), "(B, C)"), so they give the exact-count rate.

A method maps a figure's bytes to boxes and scores. F1@0.5 and mAP@0.5 are computed on what the
method finally keeps (the product's output, not raw model boxes), so detector, cut and the
combination are compared on equal terms; a box without a score counts as score 1.

At 100 to 200 figures a set, F1 moves by about 0.01 from one draw of figures to the next, and
gains chosen on the dev seeds have shrunk on the test seeds: every F1 and exact-count rate
comes with a 95% bootstrap interval over figures, and :func:`gain` gives a paired interval
for the difference of two methods on the same figures.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from modeldev.detector.metrics import Detections, average_precision, f1_of, match_counts
from ray_jobs.figures.boxes import iou_matrix

REPO = Path(__file__).resolve().parents[2]
MEDICAT = REPO.parent / "shared" / "data" / "medicat_figures"
FAMILY_SEED, GENERATOR_SEED = 2026, 99
DRAWS = 2000  # bootstrap resamples
Method = Callable[[list[tuple[str, bytes]]], list[tuple[list, list]]]


@dataclass
class Item:
    key: str
    data: bytes
    boxes: np.ndarray | None  # (N, 4) gold boxes, None when only the count is known
    count: int


def _items(make, seed: int, n: int) -> list[Item]:  # type: ignore[no-untyped-def]
    """Figures ``0..n-1`` of ``make(seed, index) -> (bytes, figure)`` with their gold boxes."""
    items = []
    for i in range(n):
        data, fig = make(seed, i)
        boxes = np.array(fig.panels, float).reshape(-1, 4)
        items.append(Item(fig.name, data, boxes, len(fig.panels)))
    return items


def family(n: int, seed: int = FAMILY_SEED) -> list[Item]:
    from modeldev.heldout.figure import make_heldout_figure

    return _items(make_heldout_figure, seed, n)


def generator(n: int, seed: int = GENERATOR_SEED) -> list[Item]:
    from modeldev.synth.generate import make_figure

    return _items(make_figure, seed, n)


_GROUP = re.compile(r"\(([A-H](?:\s*[,–-]\s*[A-H])*)\)")


def caption_count(caption: str) -> int:
    """Panels a caption names: distinct capital letters in "(A)", "(B, C)", "(A–C)"; 1 if none."""
    letters: set[str] = set()
    for group in _GROUP.findall(caption):
        parts = re.split(r"\s*([,–-])\s*", group)
        for k in range(0, len(parts), 2):
            letters.add(parts[k])
            if k + 2 < len(parts) and parts[k + 1] in "–-":
                letters.update(chr(c) for c in range(ord(parts[k]), ord(parts[k + 2]) + 1))
    return max(1, len(letters))


def real(folder: Path = MEDICAT) -> list[Item]:
    items = []
    for line in (folder / "sample.jsonl").read_text().splitlines():
        rec = json.loads(line)
        path = folder / f"{rec['pdf_hash']}_{rec['fig_uri']}"
        items.append(Item(path.name, path.read_bytes(), None, caption_count(rec["s2_caption"])))
    return sorted(items, key=lambda item: item.key)


def _detections(found: list[tuple[list, list]]) -> list[Detections]:
    return [
        Detections(
            np.array(b, float).reshape(-1, 4), np.array([1.0 if s is None else s for s in sc])
        )
        for b, sc in found
    ]


def _boxed(items: list[Item]) -> bool:
    """Whether every figure's gold has boxes (else only its panel count is known)."""
    return all(item.boxes is not None for item in items)


def figure_counts(items: list[Item], found: list[tuple[list, list]]) -> np.ndarray:
    """Per figure: true positives at IoU 0.5, kept boxes, gold boxes (0 where the gold is only a
    count) and whether the count is exact: an (N, 4) array any resample of figures sums."""
    exact = [len(b) == item.count for item, (b, _) in zip(items, found, strict=True)]
    if _boxed(items):
        counts = match_counts(_detections(found), [item.boxes for item in items])  # type: ignore[misc]
    else:
        counts = np.zeros((len(items), 3), dtype=np.int64)
    return np.column_stack([counts, np.array(exact, dtype=np.int64)])


def _resampled(counts: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """F1 and exact-count rate over DRAWS resamples of the figures (with replacement)."""
    n = len(counts)
    sums = counts[np.random.default_rng(seed).integers(0, n, (DRAWS, n))].sum(axis=1)
    tp, n_pred, n_gt, exact = sums.T
    f1 = 2 * tp / np.maximum(n_pred + n_gt, 1)  # f1_of, for every resample at once
    return f1, exact / n


def _interval(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(values, [2.5, 97.5])
    return round(float(lo), 4), round(float(hi), 4)


def score(
    items: list[Item], found: list[tuple[list, list]], seconds: float
) -> dict[str, float | tuple[float, float] | None]:
    """F1@0.5 and mAP@0.5 (where boxes are known), exact-count rate, panels/s, and 95%
    bootstrap intervals of F1 and the exact-count rate."""
    counts = figure_counts(items, found)
    f1s, exacts = _resampled(counts)
    n_panels = sum(len(b) for b, _ in found)
    boxed = _boxed(items)
    out: dict[str, float | tuple[float, float] | None] = {
        "figures": len(items),
        "panels": n_panels,
        "exact_count": round(float(counts[:, 3].mean()), 4),
        "exact_count_ci": _interval(exacts),
        "panels_per_s": round(n_panels / seconds, 2) if seconds > 0 else None,
        "F1@0.5": None,
        "F1_ci": _interval(f1s) if boxed else None,
        "mAP@0.5": None,
    }
    if boxed:
        out["F1@0.5"] = round(f1_of(counts[:, :3]), 4)
        gts = [item.boxes for item in items]
        out["mAP@0.5"] = round(average_precision(_detections(found), gts, 0.5), 4)  # type: ignore[arg-type]
    return out


def gain(
    items: list[Item], found: list[tuple[list, list]], baseline: list[tuple[list, list]]
) -> dict[str, float | tuple[float, float] | None]:
    """What ``found`` gains over ``baseline`` on the same figures: the F1 and exact-count
    differences with 95% intervals from resampling the figures once for both (paired), which
    is far tighter than two separate intervals, as both methods share each figure's
    difficulty. An interval that holds 0 is not a gain these figures can show."""
    a, b = figure_counts(items, found), figure_counts(items, baseline)
    (f1_a, ex_a), (f1_b, ex_b) = _resampled(a), _resampled(b)  # same seed: same resamples
    boxed = _boxed(items)
    return {
        "F1": round(f1_of(a[:, :3]) - f1_of(b[:, :3]), 4) if boxed else None,
        "F1_ci": _interval(f1_a - f1_b) if boxed else None,
        "exact_count": round(float(a[:, 3].mean() - b[:, 3].mean()), 4),
        "exact_count_ci": _interval(ex_a - ex_b),
    }


def proposal_ceiling(
    items: list[Item], proposals: list[list[tuple[tuple[float, ...], float]]]
) -> list[tuple[list, list]]:
    """What a perfect choice among a detector's own proposals keeps: for each gold panel the
    proposal that overlaps it most (each proposal used once, pairs taken best first), if that
    is IoU 0.5 or more. ``proposals``: per figure, (box, score) of the panel boxes proposed.
    A figure where none is chosen keeps the whole figure, as the stage does. Scored with
    :func:`score`, the gap between this and the stage is what choosing better could gain; the
    gap between this and 1 is what the detector does not propose at all."""
    found: list[tuple[list, list]] = []
    for item, proposed in zip(items, proposals, strict=True):
        if item.boxes is None:
            raise ValueError(f"{item.key}: the ceiling needs gold boxes, not only a count")
        boxes = np.array([b for b, _ in proposed], float).reshape(-1, 4)
        ious = iou_matrix(item.boxes, boxes)
        chosen: list[tuple[float, ...]] = []
        while ious.size and ious.max() >= 0.5:
            g, p = np.unravel_index(int(ious.argmax()), ious.shape)
            chosen.append(tuple(float(v) for v in boxes[p]))
            ious[g, :] = 0
            ious[:, p] = 0
        if not chosen:
            width, height = Image.open(io.BytesIO(item.data)).size
            chosen = [(0.0, 0.0, float(width), float(height))]
        found.append((chosen, [1.0] * len(chosen)))
    return found


def run(method: Method, items: list[Item]) -> dict[str, float | tuple[float, float] | None]:
    start = time.perf_counter()
    found = method([(item.key, item.data) for item in items])
    return score(items, found, time.perf_counter() - start)
