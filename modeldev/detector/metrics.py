"""Detection metrics for one class: AP at IoU 0.5 and 0.5:0.95 (COCO 101-point), and F1.

Our own implementation, so that synthetic and real annotated figures (COCO JSON, ImageCLEF)
are scored the same way, whatever produced the predictions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ray_jobs.figures.boxes import iou_matrix

IOU_THRESHOLDS = np.round(np.arange(0.5, 0.96, 0.05), 2)


@dataclass
class Detections:
    boxes: np.ndarray  # (N, 4)
    scores: np.ndarray  # (N,)


def _match(preds: list[Detections], gts: list[np.ndarray], thr: float):  # type: ignore[no-untyped-def]
    """Greedy matching by score, per image: (scores, is_true_positive) over all predictions."""
    scores, hits = [], []
    for det, gt in zip(preds, gts, strict=True):
        order = np.argsort(-det.scores, kind="stable")
        taken = np.zeros(len(gt), dtype=bool)
        ious = iou_matrix(det.boxes[order], gt) if len(gt) and len(order) else None
        for rank, i in enumerate(order):
            scores.append(float(det.scores[i]))
            hit = False
            if ious is not None:
                candidates = np.where(~taken, ious[rank], -1.0)
                j = int(np.argmax(candidates))
                if candidates[j] >= thr:
                    taken[j] = True
                    hit = True
            hits.append(hit)
    return np.asarray(scores), np.asarray(hits, dtype=bool)


def average_precision(preds: list[Detections], gts: list[np.ndarray], thr: float) -> float:
    n_gt = sum(len(g) for g in gts)
    if n_gt == 0:
        return float("nan")
    scores, hits = _match(preds, gts, thr)
    if not len(scores):
        return 0.0
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(hits[order])
    fp = np.cumsum(~hits[order])
    recall = tp / n_gt
    precision = tp / np.maximum(tp + fp, 1e-12)
    # monotone precision envelope, sampled at 101 recall points (COCO)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    points = np.linspace(0, 1, 101)
    idx = np.searchsorted(recall, points, side="left")
    sampled = np.where(idx < len(envelope), envelope[np.minimum(idx, len(envelope) - 1)], 0.0)
    return float(sampled.mean())


def f1_at(preds: list[Detections], gts: list[np.ndarray], conf: float, thr: float = 0.5):  # type: ignore[no-untyped-def]
    kept = [Detections(d.boxes[d.scores >= conf], d.scores[d.scores >= conf]) for d in preds]
    _, hits = _match(kept, gts, thr)
    tp = int(hits.sum())
    n_pred, n_gt = len(hits), sum(len(g) for g in gts)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gt if n_gt else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def match_counts(preds: list[Detections], gts: list[np.ndarray], thr: float = 0.5) -> np.ndarray:
    """Per image: true positives, predictions and gold boxes (an (N, 3) int array), matched as
    :func:`f1_at` matches them, so that F1 over any resample of images is a sum away."""
    rows = []
    for det, gt in zip(preds, gts, strict=True):
        _, hits = _match([det], [gt], thr)
        rows.append((int(hits.sum()), len(hits), len(gt)))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def f1_of(counts: np.ndarray) -> float:
    """F1 over :func:`match_counts` rows: 2·TP / (predictions + gold), which is
    2PR / (P + R) and 0 when there is neither."""
    tp, n_pred, n_gt = counts.reshape(-1, 3).sum(axis=0)
    return float(2 * tp / (n_pred + n_gt)) if n_pred + n_gt else 0.0


def summarize(preds: list[Detections], gts: list[np.ndarray], conf: float) -> dict[str, float]:
    aps = [average_precision(preds, gts, t) for t in IOU_THRESHOLDS]
    precision, recall, f1 = f1_at(preds, gts, conf)
    return {
        "images": len(gts),
        "instances": int(sum(len(g) for g in gts)),
        "mAP50": round(aps[0], 4),
        "mAP50_95": round(float(np.mean(aps)), 4),
        "precision@conf": round(precision, 4),
        "recall@conf": round(recall, 4),
        "F1@0.5": round(f1, 4),
        "conf": conf,
    }
