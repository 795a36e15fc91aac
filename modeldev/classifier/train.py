"""Training the modality classifier: fit a torchvision CNN on a labelled folder, calibrate it,
evaluate it, and leave the checkpoint, a JSON report and a model card.

The model, its input tensor and its scores are the product's
(:mod:`ray_jobs.figures.classifier`), so what is trained here is exactly what inference loads.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from modeldev.classifier.augment import augment, synthetic_outliers
from modeldev.classifier.calibration import OOD_QUANTILE, calibrate, recalibrate_drop
from modeldev.classifier.checkpoint import save_checkpoint
from modeldev.classifier.data import read_folder
from modeldev.classifier.evaluate import evaluate_classifier
from ray_jobs.figures.classifier import build_model, to_tensor
from ray_jobs.figures.taxonomy import load_taxonomy

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    weights: str
    backbone: str
    classes: list[str]
    epochs: int
    imgsz: int
    seconds: float
    val_accuracy: float
    pretrained: str | None = None
    calibration: dict[str, Any] = field(default_factory=dict)
    card: str | None = None


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
    augmentation: bool = True,
    outlier_weight: float = 0.5,
    card: bool = True,
) -> TrainResult:
    """Train on ``<data>/train/<class>/``, calibrate and evaluate on ``<data>/val/<class>/``
    (a tenth of train when there is no val/), write the checkpoint, a JSON report and a model
    card. Class folders must be taxonomy L2 names."""
    import torch

    torch.manual_seed(seed)
    rand = random.Random(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    paths, names, classes = read_folder(data, "train")
    outside = sorted(set(classes) - set(load_taxonomy().classes))
    if outside:
        raise ValueError(f"class folders not in the taxonomy: {outside}")
    labels = [classes.index(n) for n in names]
    if (data / "val").is_dir():
        val_data, val_split = data, "val"
        train_idx = list(range(len(paths)))
        held: list[int] = []
    else:  # hold out every tenth image of each class for calibration and the report
        held = [i for i in range(len(paths)) if i % 10 == 9]
        train_idx = [i for i in range(len(paths)) if i % 10 != 9]
        val_data, val_split = None, None
    model = build_model(backbone, len(classes), pretrained).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(1, epochs))
    loss_fn = torch.nn.CrossEntropyLoss()
    started = time.perf_counter()
    order = list(train_idx)
    for epoch in range(epochs):
        model.train()
        random.Random(seed + epoch).shuffle(order)
        total = 0.0
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            images = [Image.open(paths[i]).convert("RGB") for i in idx]
            if augmentation:
                images = [augment(img, rand) for img in images]
            x = to_tensor(images, imgsz).to(device)
            y = torch.tensor([labels[i] for i in idx], device=device)
            optimiser.zero_grad()
            if outlier_weight > 0:  # outlier exposure: made-up non-panels, pushed to uniform
                junk = synthetic_outliers(x, torch.Generator().manual_seed(seed * 100003 + start))
                out_all = model(torch.cat([x, junk]))
                logits, junk_logits = out_all[: len(idx)], out_all[len(idx) :]
                uniform = -torch.log_softmax(junk_logits, dim=1).mean()
                loss = loss_fn(logits, y) + outlier_weight * uniform
            else:
                loss = loss_fn(model(x), y)
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(idx)
        schedule.step()
        log.info("epoch %d/%d loss %.4f", epoch + 1, epochs, total / max(1, len(order)))
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{backbone.split('_')[0]}-modality.pt"
    model.eval()
    if val_split is None:
        cal_paths, cal_labels = [paths[i] for i in held], [labels[i] for i in held]
    else:
        cal_paths, cal_names, _ = read_folder(data, "val")
        cal_labels = [classes.index(n) for n in cal_names if n in classes]
        cal_paths = [p for p, n in zip(cal_paths, cal_names, strict=True) if n in classes]
    logits = _logits(model, [Image.open(p).convert("RGB") for p in cal_paths], imgsz, device)
    calibration = calibrate(logits, np.asarray(cal_labels, dtype=int))
    save_checkpoint(
        target, backbone, classes, imgsz, model.state_dict(), calibration, pretrained=pretrained
    )
    calibration = recalibrate_drop(target)
    report = (
        evaluate_classifier(target, val_data, val_split)
        if val_split
        else _report_from_logits(logits, cal_labels, classes, calibration)
    )
    result = TrainResult(
        str(target),
        backbone,
        classes,
        epochs,
        imgsz,
        round(seconds, 1),
        report["accuracy"],
        pretrained,
        calibration,
    )
    if card:
        result.card = str(
            write_model_card(
                out / "MODEL_CARD.md",
                result,
                report,
                data=data,
                n_train=len(train_idx),
                recipe={
                    "batch": batch,
                    "lr": lr,
                    "seed": seed,
                    "augmentation": augmentation,
                    "outlier_weight": outlier_weight,
                },
            )
        )
    (out / f"{target.stem}.train.json").write_text(json.dumps(asdict(result), indent=2))
    return result


def _logits(
    model, images: list[Image.Image], imgsz: int, device: str, batch: int = 32
) -> np.ndarray:  # type: ignore[no-untyped-def]
    import torch

    rows = []
    with torch.inference_mode():
        for start in range(0, len(images), batch):
            x = to_tensor(images[start : start + batch], imgsz).to(device)
            rows.append(model(x).float().cpu().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def _report_from_logits(
    logits: np.ndarray, labels: list[int], classes: list[str], calibration: dict[str, Any]
) -> dict[str, Any]:
    predicted = logits.argmax(axis=1) if len(logits) else np.zeros(0, dtype=int)
    accuracy = float((predicted == np.asarray(labels)).mean()) if len(labels) else 0.0
    return {"classes": classes, "accuracy": round(accuracy, 4), "n": len(labels)}


def write_model_card(
    path: Path,
    result: TrainResult,
    report: dict[str, Any],
    *,
    data: Path,
    n_train: int,
    recipe: dict[str, Any],
) -> Path:
    """The card a training run leaves beside its checkpoint: what it is, what it saw, how it
    scores on its own held-out split, and what that does not say."""
    cal = result.calibration
    start = (
        f"from the local weights `{result.pretrained}`"
        if result.pretrained
        else "from scratch (no pretrained weights)"
    )
    lines = [
        f"# {Path(result.weights).name}: modality classifier",
        "",
        f"- torchvision `{result.backbone}`, trained {start}, {result.epochs} epochs at "
        f"{result.imgsz} px (letterboxed on white, ImageNet normalisation); recipe {recipe}.",
        f"- Data: `{data}`, {n_train} training images; classes ({len(result.classes)}): "
        + ", ".join(result.classes)
        + ".",
        f"- Calibration on {cal.get('n', 0)} held-out images: temperature "
        f"{cal.get('temperature')}, expected calibration error {cal.get('ece_uncalibrated')} → "
        f"{cal.get('ece')}; OOD thresholds (accept {1 - cal.get('ood_quantile', OOD_QUANTILE):.0%}"
        f" of them) {cal.get('ood_thresholds')}.",
        f"- Held-out accuracy {report['accuracy']:.3f}"
        + (
            f", abstention {report['abstention_rate']:.3f}, clinical dropped "
            f"{report['keep_drop']['clinical_dropped']}, non-clinical kept "
            f"{report['keep_drop']['nonclinical_kept']} (image evidence only)."
            if "abstention_rate" in report
            else "."
        ),
        "",
        "Held-out here means the same data source as training: it measures fit, not how the",
        "model does on panels unlike these. Measure that with `pmcvl-dev bench-relevance` (a",
        "panel family no training run sees) and on real labelled panels with",
        "`pmcvl-dev eval-classifier`.",
        "",
        f"Made with `pmcvl-dev train-classifier --data {data} --backbone {result.backbone} "
        f"--epochs {result.epochs} --imgsz {result.imgsz}`"
        + (f" and `classifier.pretrained: {result.pretrained}`." if result.pretrained else "."),
        "",
    ]
    if "per_class" in report:
        lines += ["| class | precision | recall | support |", "|---|---|---|---|"]
        for name, row in report["per_class"].items():
            lines.append(
                f"| {name} | {row['precision']:.3f} | {row['recall']:.3f} | {row['support']} |"
            )
        lines.append("")
    path.write_text("\n".join(lines))
    return path
