"""Evaluating a modality classifier checkpoint on any labelled folder: per-class precision
and recall, the confusion matrix, abstention, and the image-only keep/drop confusion, through
the product's own stage and decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from modeldev.classifier.data import read_folder
from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.classifier import ModalityClassifier
from ray_jobs.figures.decision import UNKNOWN, decide
from ray_jobs.figures.taxonomy import RulePrior


@dataclass
class KeepDrop:
    """Keep/drop against the truth: clinical panels dropped, non-clinical panels kept."""

    clinical: int = 0
    clinical_dropped: int = 0
    nonclinical: int = 0
    nonclinical_kept: int = 0

    def add(self, clinical: bool, keep: bool) -> None:
        if clinical:
            self.clinical += 1
            self.clinical_dropped += not keep
        else:
            self.nonclinical += 1
            self.nonclinical_kept += keep

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "clinical_dropped_rate": round(self.clinical_dropped / self.clinical, 4)
            if self.clinical
            else 0.0,
            "nonclinical_kept_rate": round(self.nonclinical_kept / self.nonclinical, 4)
            if self.nonclinical
            else 0.0,
        }


def evaluate_classifier(
    weights: Path,
    data: Path,
    split: str = "val",
    settings: ClassifierSettings | None = None,
) -> dict[str, Any]:
    """Per-class precision and recall, the confusion matrix (rows the folder's classes,
    columns the same plus ``(other)``: a model class the folder does not have), the abstention
    rate and the image-only keep/drop confusion, on any labelled folder ``<data>/<split>/<class>/``
    whose classes are some of the model's."""
    base = settings or ClassifierSettings()
    classifier = ModalityClassifier(base.model_copy(update={"weights": str(weights)}))
    paths, names, classes = read_folder(data, split)
    outside = sorted(set(classes) - set(classifier.classes))
    if outside:
        raise ValueError(
            f"classes {outside} in {data / split} are not among the model's {classifier.classes}"
        )
    images = [Image.open(p).convert("RGB") for p in paths]
    probs, familiar = classifier.scores(classifier.logits(images))
    decisions = [
        decide(
            p,
            classifier.classes,
            RulePrior(),
            img.size,
            classifier.settings,
            classifier.taxonomy,
            familiar=bool(f),
            drop_default=classifier.drop_default,
        )
        for p, img, f in zip(probs, images, familiar, strict=True)
    ]
    n = len(classes)
    confusion = np.zeros((n, n + 1), dtype=int)
    keep_drop, abstained, right_accepted = KeepDrop(), 0, 0
    for name, p, d in zip(names, probs, decisions, strict=True):
        predicted = classifier.classes[int(np.argmax(p))]
        confusion[classes.index(name), classes.index(predicted) if predicted in classes else n] += 1
        keep_drop.add(classifier.taxonomy.classes[name].keep, d.keep)
        if d.image == UNKNOWN:
            abstained += 1
        elif d.image == name:
            right_accepted += 1
    per_class = {}
    for i, name in enumerate(classes):
        tp = confusion[i, i]
        per_class[name] = {
            "precision": round(tp / confusion[:, i].sum(), 4) if confusion[:, i].sum() else 0.0,
            "recall": round(tp / confusion[i].sum(), 4) if confusion[i].sum() else 0.0,
            "support": int(confusion[i].sum()),
        }
    total = int(confusion.sum())
    accepted = total - abstained
    return {
        "classes": classes,
        "accuracy": round(float(np.trace(confusion[:, :n]) / total), 4) if total else 0.0,
        "abstention_rate": round(abstained / total, 4) if total else 0.0,
        "accuracy_when_answering": round(right_accepted / accepted, 4) if accepted else 0.0,
        "per_class": per_class,
        "confusion": confusion.tolist(),
        "keep_drop": keep_drop.as_dict(),
        "n": total,
    }
