"""Calibration of a trained modality classifier, stored in its checkpoint for inference to
read: the softmax temperature and OOD thresholds fitted on held-out in-distribution images,
and the drop confidence set on a panel family the model never trained on.

The score functions themselves (softmax, familiarity) are the product's
(:mod:`ray_jobs.figures.classifier`): calibration fits exactly what inference computes.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from modeldev.classifier.checkpoint import plain
from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.classifier import ModalityClassifier, familiarity, softmax
from ray_jobs.figures.decision import DEFAULT_DROP_CONFIDENCE

OOD_QUANTILE = 0.05  # the OOD thresholds accept 95% of the held-out in-distribution images
DROP_RISK = 0.01  # the calibrated drop_confidence drops at most this share of clinical panels


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The softmax temperature with the least negative log-likelihood on held-out data
    (Guo et al. 2017), by a search over log T; 1.0 without data."""
    if len(labels) == 0:
        return 1.0
    best, best_nll = 1.0, math.inf
    for t in np.exp(np.linspace(math.log(0.05), math.log(20.0), 241)):
        p = softmax(logits, float(t))[np.arange(len(labels)), labels]
        nll = float(-np.log(np.clip(p, 1e-12, None)).mean())
        if nll < best_nll:
            best, best_nll = float(t), nll
    return round(best, 4)


def calibrate(logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Temperature and OOD thresholds from held-out in-distribution images: each threshold
    accepts ``1 - OOD_QUANTILE`` of them."""
    temperature = fit_temperature(logits, labels)
    thresholds = {
        kind: round(float(np.quantile(familiarity(logits, temperature, kind), OOD_QUANTILE)), 4)
        for kind in ("msp", "energy")
    }
    probs = softmax(logits, temperature)
    return {
        "temperature": temperature,
        "ood_thresholds": thresholds,
        "ood_quantile": OOD_QUANTILE,
        "n": len(labels),
        "ece": round(expected_calibration_error(probs, labels), 4),
        "ece_uncalibrated": round(expected_calibration_error(softmax(logits), labels), 4),
    }


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    if len(labels) == 0:
        return 0.0
    conf, pred = probs.max(axis=1), probs.argmax(axis=1)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.mean() * abs(
                float((pred[inside] == labels[inside]).mean()) - conf[inside].mean()
            )
    return float(total)


# The family the drop threshold is set on: the detector's held-out panel painters
# (modeldev/heldout/content.py), which share no code with the classifier's makers nor with the
# relevance bench's family (modeldev/classifier/heldout.py). Scans, micrographs and photographs
# count as clinical, plots, heat maps, tables, text and sketches as not; stripes and gradients
# are neither and are left out.
CALIBRATION_CLINICAL = ("scan", "micrograph", "photo")
CALIBRATION_OTHER = ("bars", "boxes", "lines", "heatmap", "table", "text", "sketch")


def calibration_family(per_kind: int = 30, seed: int = 11) -> tuple[list[Image.Image], list[bool]]:
    """Panels of a family the model never trained on, and whether each is clinical."""
    from modeldev.heldout.content import PAINTERS

    images, clinical = [], []
    for k, kind in enumerate(CALIBRATION_CLINICAL + CALIBRATION_OTHER):
        for i in range(per_kind):
            rng = np.random.default_rng([seed, k, i])
            w, h = int(rng.integers(80, 220)), int(rng.integers(80, 220))
            images.append(PAINTERS[kind](rng, w, h))
            clinical.append(kind in CALIBRATION_CLINICAL)
    return images, clinical


def calibrate_drop_confidence(
    classifier: ModalityClassifier,
    images: list[Image.Image],
    clinical: list[bool],
    risk: float = DROP_RISK,
) -> dict[str, Any]:
    """The least non-clinical probability (≥ 0.9, in every view, as the stage applies it) at
    which the image alone may drop a panel such that at most ``risk`` of the clinical
    ``images`` would be dropped on the image alone; above 1 when even that is too many (the
    image never drops alone)."""
    probs, familiar = classifier.scores(classifier.logits(images))
    mass = classifier.stable_nonclinical(images, probs, familiar, DEFAULT_DROP_CONFIDENCE)
    confident = mass > 0
    is_clinical = np.asarray(clinical, dtype=bool)
    allowed = math.floor(risk * is_clinical.sum())
    candidates = np.sort(mass[is_clinical & confident])[::-1]
    threshold = DEFAULT_DROP_CONFIDENCE
    if len(candidates) > allowed:  # drop only above the (allowed + 1)-th most confident one
        threshold = max(threshold, math.ceil((float(candidates[allowed]) + 1e-7) * 1e6) / 1e6)
    threshold = min(threshold, 1.01)
    dropped = confident & (mass >= threshold)
    return {
        "drop_confidence": threshold,
        "drop_risk": risk,
        "drop_family": "figures.heldout.content",
        "drop_family_clinical": int(is_clinical.sum()),
        "drop_family_clinical_dropped": int((dropped & is_clinical).sum()),
        "drop_family_nonclinical_dropped_rate": round(float(dropped[~is_clinical].mean()), 4)
        if (~is_clinical).any()
        else 0.0,
    }


def recalibrate_drop(weights: Path, risk: float = DROP_RISK) -> dict[str, Any]:
    """Set a checkpoint's ``drop_confidence`` on the calibration family, in place."""
    import torch

    checkpoint = torch.load(weights, map_location="cpu", weights_only=True)
    classifier = ModalityClassifier(ClassifierSettings(weights=str(weights)))
    images, clinical = calibration_family()
    drop = calibrate_drop_confidence(classifier, images, clinical, risk)
    checkpoint["calibration"] = plain({**(checkpoint.get("calibration") or {}), **drop})
    torch.save(checkpoint, weights)
    return checkpoint["calibration"]
