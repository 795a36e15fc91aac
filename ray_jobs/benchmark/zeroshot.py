"""Zero-shot classification in CLIP's form: each class is a short text, an image takes the
class whose text embedding is closest. Metric code is pure numpy; ties are pessimistic, as in
:mod:`ray_jobs.benchmark.retrieval`.

A labelled set is a JSON-lines file, one image a line: ``{"image": "path", "label": "xray"}``
(a path relative to the file) or ``{"key": "PMC1v1-F1-p00", "label": "xray"}`` naming a
benchmark image. Class texts come from ``template`` (``"a {} image"``, underscores as spaces).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ray_jobs.benchmark.retrieval import cosine_similarity, ranks_of_correct

DEFAULT_TEMPLATE = "a {} image"


@dataclass(frozen=True)
class LabelledSet:
    images: list[bytes]
    labels: list[int]  # index into classes
    classes: list[str]  # sorted label names


def class_texts(classes: Sequence[str], template: str = DEFAULT_TEMPLATE) -> list[str]:
    return [template.format(name.replace("_", " ")) for name in classes]


def load_labelled_set(
    path: str | Path, benchmark_images: Mapping[str, bytes] | None = None
) -> LabelledSet:
    path = Path(path)
    rows = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if not rows:
        raise ValueError(f"{path}: no labelled images")
    images: list[bytes] = []
    names: list[str] = []
    for n, row in enumerate(rows, 1):
        label = row.get("label")
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"{path}:{n}: no label")
        if "image" in row:
            images.append((path.parent / row["image"]).read_bytes())
        elif "key" in row:
            if benchmark_images is None or row["key"] not in benchmark_images:
                raise ValueError(f"{path}:{n}: key {row['key']!r} is not in the benchmark")
            images.append(benchmark_images[row["key"]])
        else:
            raise ValueError(f"{path}:{n}: neither image nor key")
        names.append(label.strip())
    classes = sorted(set(names))
    if len(classes) < 2:
        raise ValueError(f"{path}: zero-shot classification needs at least two classes")
    return LabelledSet(images, [classes.index(x) for x in names], classes)


def zero_shot_metrics(
    image_emb: np.ndarray, class_emb: np.ndarray, labels: Sequence[int], classes: Sequence[str]
) -> dict[str, object]:
    """Top-1 (and top-5 when there are more than five classes) accuracy, balanced accuracy
    (the mean of per-class recalls, fair to rare classes), and each class's accuracy."""
    labels = np.asarray(labels)
    ranks = ranks_of_correct(cosine_similarity(image_emb, class_emb), labels)
    per_class = {
        name: {"n": int((labels == i).sum()), "accuracy": float(np.mean(ranks[labels == i] < 1))}
        for i, name in enumerate(classes)
        if (labels == i).any()
    }
    out: dict[str, object] = {
        "n": len(labels),
        "classes": list(classes),
        "top1": float(np.mean(ranks < 1)),
        "balanced_accuracy": float(np.mean([c["accuracy"] for c in per_class.values()])),
        "per_class": per_class,
    }
    if len(classes) > 5:
        out["top5"] = float(np.mean(ranks < 5))
    return out
