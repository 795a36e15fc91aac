"""The modality / relevance classifier: a torchvision ResNet over the taxonomy's L2 classes.

Offline: backbones are built with ``weights=None``; pretrained weights, when wanted, come from a
local path or URI in the config, never a hub. The checkpoint carries its class list, backbone
and input size, so inference needs nothing else. :class:`ModalityClassifier` is the stage for
Ray ``map_batches``: it loads once per actor and picks GPU with autocast or CPU there.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ray_jobs.config import ClassifierSettings
from ray_jobs.failures import FailureRecord
from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import resolve_weights
from ray_jobs.figures.synth.panels import PROCEDURAL
from ray_jobs.figures.taxonomy import RulePrior, Taxonomy, load_taxonomy, metadata_prior

log = logging.getLogger(__name__)
STAGE = "classify"
# which taxonomy class each procedural panel maker draws
MAKER_CLASS = {
    "ct": "ct",
    "radiograph": "xray",
    "ultrasound": "ultrasound",
    "histology": "histopathology",
    "fluorescence": "fluorescence",
    "fundus": "fundus",
    "dermoscopy": "dermatology",
    "endoscopy": "endoscopy",
    "gel": "gel_blot",
    "chart": "chart",
    "diagram": "diagram",
}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def build_model(backbone: str, num_classes: int, pretrained: str | None = None):  # type: ignore[no-untyped-def]
    import torch
    from torchvision import models

    factory: Callable[..., Any] = getattr(models, backbone)
    model = factory(weights=None)
    if pretrained:  # an ImageNet (or any) state dict from a local path, never a download
        state = torch.load(resolve_weights(pretrained), map_location="cpu", weights_only=True)
        model.load_state_dict(
            {k: v for k, v in state.items() if not k.startswith("fc.")}, strict=False
        )
    model.fc = torch.nn.Linear(model.fc.in_features, num_classes)
    return model


def to_tensor(images: list[Image.Image], size: int):  # type: ignore[no-untyped-def]
    """Letterbox to a square (aspect kept, white padding), scale, normalise: (N, 3, S, S)."""
    import torch

    out = np.empty((len(images), 3, size, size), dtype=np.float32)
    for i, img in enumerate(images):
        scale = size / max(img.size)
        resized = img.convert("RGB").resize(
            (max(1, round(img.width * scale)), max(1, round(img.height * scale))),
            Image.Resampling.BILINEAR,
        )
        canvas = Image.new("RGB", (size, size), (255, 255, 255))
        canvas.paste(resized, ((size - resized.width) // 2, (size - resized.height) // 2))
        arr = np.asarray(canvas, dtype=np.float32) / 255.0
        out[i] = ((arr - MEAN) / STD).transpose(2, 0, 1)
    return torch.from_numpy(out)


def write_dataset(
    out: Path, n_per_class: int, seed: int, size: int = 160, val_fraction: float = 0.2
) -> dict[str, int]:
    """An ImageFolder tree (``train/<class>/``, ``val/<class>/``) drawn by the panel makers."""
    counts: dict[str, int] = {}
    for maker, cls in MAKER_CLASS.items():
        for i in range(n_per_class):
            rng = np.random.default_rng([seed, list(MAKER_CLASS).index(maker), i])
            w, h = int(rng.integers(size // 2, size * 2)), int(rng.integers(size // 2, size * 2))
            split = "val" if i < n_per_class * val_fraction else "train"
            folder = out / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            PROCEDURAL[maker](rng, w, h).save(folder / f"{maker}-{i:05d}.jpg", quality=90)
            counts[cls] = counts.get(cls, 0) + 1
    return counts


def _folder(data: Path, split: str) -> tuple[list[Path], list[int], list[str]]:
    classes = sorted(p.name for p in (data / "train").iterdir() if p.is_dir())
    paths, labels = [], []
    for index, name in enumerate(classes):
        for path in sorted((data / split / name).glob("*")):
            paths.append(path)
            labels.append(index)
    return paths, labels, classes


@dataclass
class TrainResult:
    weights: str
    backbone: str
    classes: list[str]
    epochs: int
    imgsz: int
    seconds: float
    val_accuracy: float


def train_classifier(
    data: Path,
    out: Path,
    *,
    backbone: str = "resnet101",
    epochs: int = 5,
    imgsz: int = 224,
    batch: int = 16,
    lr: float = 1e-3,
    seed: int = 0,
    pretrained: str | None = None,
) -> TrainResult:
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    paths, labels, classes = _folder(data, "train")
    model = build_model(backbone, len(classes), pretrained).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(1, epochs))
    loss_fn = torch.nn.CrossEntropyLoss()
    started = time.perf_counter()
    order = list(range(len(paths)))
    for epoch in range(epochs):
        model.train()
        random.Random(seed + epoch).shuffle(order)
        total = 0.0
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            images = [Image.open(paths[i]).convert("RGB") for i in idx]
            x = to_tensor(images, imgsz).to(device)
            y = torch.tensor([labels[i] for i in idx], device=device)
            optimiser.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(idx)
        schedule.step()
        log.info("epoch %d/%d loss %.4f", epoch + 1, epochs, total / len(order))
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{backbone}-modality.pt"
    save_checkpoint(target, backbone, classes, imgsz, model.state_dict())
    report = evaluate_classifier(target, data, "val")
    result = TrainResult(
        str(target), backbone, classes, epochs, imgsz, round(seconds, 1), report["accuracy"]
    )
    (out / f"{backbone}-modality.train.json").write_text(json.dumps(asdict(result), indent=2))
    return result


def save_checkpoint(
    path: Path, backbone: str, classes: list[str], imgsz: int, state: dict[str, Any]
) -> None:
    """Weights stored in fp16 (half the bytes; inference casts them back to the model's
    dtype), with everything inference needs to rebuild the model."""
    import torch

    half = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    torch.save(
        {
            "backbone": backbone,
            "classes": classes,
            "imgsz": imgsz,
            "state_dict": half,
            "taxonomy_version": load_taxonomy().version,
        },
        path,
    )


def evaluate_classifier(weights: Path, data: Path, split: str = "val") -> dict[str, Any]:
    """Per-class precision and recall and the confusion matrix (rows true, columns predicted)."""
    classifier = ModalityClassifier(ClassifierSettings(weights=str(weights)))
    paths, labels, classes = _folder(data, split)
    if classes != classifier.classes:
        raise ValueError(f"dataset classes {classes} differ from the model's")
    probs = classifier.predict([Image.open(p).convert("RGB") for p in paths])
    predicted = probs.argmax(axis=1)
    n = len(classes)
    confusion = np.zeros((n, n), dtype=int)
    for t, p in zip(labels, predicted, strict=True):
        confusion[t, p] += 1
    per_class = {}
    for i, name in enumerate(classes):
        tp = confusion[i, i]
        per_class[name] = {
            "precision": round(tp / confusion[:, i].sum(), 4) if confusion[:, i].sum() else 0.0,
            "recall": round(tp / confusion[i].sum(), 4) if confusion[i].sum() else 0.0,
            "support": int(confusion[i].sum()),
        }
    accuracy = float(np.trace(confusion) / confusion.sum()) if confusion.sum() else 0.0
    return {
        "classes": classes,
        "accuracy": round(accuracy, 4),
        "per_class": per_class,
        "confusion": confusion.tolist(),
    }


@dataclass
class Decision:
    l2: str
    l2_score: float
    l1: str
    l0: str
    keep: bool
    drop_reason: str | None
    probabilities: dict[str, float]
    evidence: list[str]


def decide(
    probs: np.ndarray,
    classes: list[str],
    prior: RulePrior,
    size: tuple[int, int],
    settings: ClassifierSettings,
    taxonomy: Taxonomy,
) -> Decision:
    """Classifier and rules combined under the config's thresholds, with the reason."""
    combined = {c: float(p) for c, p in zip(classes, probs, strict=True)}
    if prior.scores:
        w = settings.rules_weight
        combined = {c: (1 - w) * p + w * prior.scores.get(c, 0.0) for c, p in combined.items()}
    l2 = max(combined, key=combined.__getitem__)
    score = combined[l2]
    reason = None
    if min(size) < settings.min_side_px:
        reason = "too_small"
    elif score < settings.min_confidence:
        reason = "low_confidence"
    elif not taxonomy.classes[l2].keep:
        reason = f"non_clinical:{l2}"
    return Decision(
        l2,
        round(score, 4),
        taxonomy.l1_of(l2),
        taxonomy.l0_of(l2),
        reason is None,
        reason,
        {c: round(v, 4) for c, v in combined.items()},
        [f"{e.source}:{e.phrase}->{e.l2}" for e in prior.evidence],
    )


class ModalityClassifier:
    """The relevance stage. ``__call__`` takes ``{"key", "image", "subcaption", "caption"}``
    batches and returns one row per panel with the decision columns (``failed`` rows for
    images that cannot be decoded)."""

    def __init__(self, settings: ClassifierSettings | None = None, *, device: str | None = None):
        import torch

        self.settings = settings or ClassifierSettings()
        path = resolve_weights(self.settings.weights)
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
        self.classes: list[str] = checkpoint["classes"]
        self.imgsz: int = checkpoint["imgsz"]
        self.model = build_model(checkpoint["backbone"], len(self.classes))
        self.model.load_state_dict(checkpoint["state_dict"])
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.taxonomy = load_taxonomy()
        unknown = set(self.classes) - set(self.taxonomy.classes)
        if unknown:
            raise ValueError(f"checkpoint classes not in the taxonomy: {sorted(unknown)}")
        self.name = f"{checkpoint['backbone']}:{path.name}"

    def predict(self, images: list[Image.Image]) -> np.ndarray:
        import torch

        rows = []
        with (
            torch.inference_mode(),
            torch.autocast(device_type="cuda", enabled=self.device.startswith("cuda")),
        ):
            for start in range(0, len(images), self.settings.batch_size):
                x = to_tensor(images[start : start + self.settings.batch_size], self.imgsz)
                logits = self.model(x.to(self.device)).float()
                rows.append(torch.softmax(logits, dim=1).cpu().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, len(self.classes)))

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        keys = list(batch["key"])
        n = len(keys)
        subcaptions = list(batch.get("subcaption", [""] * n))
        captions = list(batch.get("caption", [""] * n))
        decoded, failures = [], {}
        for i, data in enumerate(batch["image"]):
            try:
                decoded.append((i, decode_image(data)))
            except Exception as exc:
                failures[i] = FailureRecord.from_exception(keys[i], STAGE, exc)
        probs = self.predict([img for _, img in decoded])
        decisions = {
            i: decide(
                p,
                self.classes,
                metadata_prior(subcaptions[i] or "", captions[i] or ""),
                img.size,
                self.settings,
                self.taxonomy,
            )
            for (i, img), p in zip(decoded, probs, strict=True)
        }
        rows: dict[str, list] = {c: [] for c in CLASSIFIER_COLUMNS}
        for i in range(n):
            d = decisions.get(i)
            values = {
                "key": keys[i],
                "modality_l2": d.l2 if d else None,
                "modality_score": d.l2_score if d else None,
                "modality_l1": d.l1 if d else None,
                "modality_l0": d.l0 if d else None,
                "keep": d.keep if d else False,
                "drop_reason": d.drop_reason if d else "failed",
                "modality_probs": json.dumps(d.probabilities) if d else None,
                "modality_evidence": d.evidence if d else [],
                "classifier": self.name,
                "error": None
                if d
                else f"{failures[i].stage}/{failures[i].error_type}: {failures[i].message}",
            }
            for column in CLASSIFIER_COLUMNS:
                rows[column].append(values[column])
        return rows


CLASSIFIER_COLUMNS = (
    "key",
    "modality_l2",
    "modality_score",
    "modality_l1",
    "modality_l0",
    "keep",
    "drop_reason",
    "modality_probs",
    "modality_evidence",
    "classifier",
    "error",
)
