"""The held-out protocol: three sets no training run sees, scored the same way for any method.

- ``family``: the independent figure family (``figures/heldout``), seed 2026;
- ``generator``: the training generator on seed 99, which no training command uses;
- ``real``: the ten real figures in ``../shared/data/medicat_figures``, test-only; their gold is
  the panel count their caption names ((A)…(D), "(B, C)"), so they give the exact-count rate.

A method maps a figure's bytes to boxes and scores. F1@0.5 and mAP@0.5 are computed on what the
method finally keeps (the product's output, not raw model boxes), so detector, cut and the
combination are compared on equal terms; a box without a score counts as score 1.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ray_jobs.figures.metrics import Detections, average_precision, f1_at

REPO = Path(__file__).resolve().parents[2]
MEDICAT = REPO.parent / "shared" / "data" / "medicat_figures"
FAMILY_SEED, GENERATOR_SEED = 2026, 99
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
    from ray_jobs.figures.heldout.figure import make_heldout_figure

    return _items(make_heldout_figure, seed, n)


def generator(n: int, seed: int = GENERATOR_SEED) -> list[Item]:
    from ray_jobs.figures.synth.generate import make_figure

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


def score(
    items: list[Item], found: list[tuple[list, list]], seconds: float
) -> dict[str, float | None]:
    """F1@0.5 and mAP@0.5 (where boxes are known), exact-count rate, panels/s."""
    exact = float(
        np.mean([len(b) == item.count for item, (b, _) in zip(items, found, strict=True)])
    )
    n_panels = sum(len(b) for b, _ in found)
    out: dict[str, float | None] = {
        "figures": len(items),
        "panels": n_panels,
        "exact_count": round(exact, 4),
        "panels_per_s": round(n_panels / seconds, 2) if seconds > 0 else None,
        "F1@0.5": None,
        "mAP@0.5": None,
    }
    if all(item.boxes is not None for item in items):
        preds = [
            Detections(
                np.array(b, float).reshape(-1, 4), np.array([1.0 if s is None else s for s in sc])
            )
            for b, sc in found
        ]
        gts = [item.boxes for item in items]
        out["F1@0.5"] = round(f1_at(preds, gts, conf=0.0)[2], 4)  # type: ignore[arg-type]
        out["mAP@0.5"] = round(average_precision(preds, gts, 0.5), 4)  # type: ignore[arg-type]
    return out


def run(method: Method, items: list[Item]) -> dict[str, float | None]:
    start = time.perf_counter()
    found = method([(item.key, item.data) for item in items])
    return score(items, found, time.perf_counter() - start)
