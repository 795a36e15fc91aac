"""The modality / relevance classifier: a torchvision CNN over the taxonomy's L2 classes, and
the keep decision that weighs it against the panel's words.

Offline: backbones are built with ``weights=None``; pretrained weights, when wanted, come from a
local path or URI in the config, never a hub. The checkpoint carries its class list, backbone,
input size and calibration (a softmax temperature fitted on held-out data and the thresholds of
the out-of-distribution scores), so inference needs nothing else.

The decision (:func:`decide`) knows what the image model does not know: the model abstains
(``unknown``) on images unlike its training data or below the confidence threshold; a clinical
modality named in the subcaption or caption keeps the panel whatever the image says; a panel is
dropped as non-clinical only on confident evidence. Each decision names the evidence that
decided it (``decided_by`` and the first entry of ``evidence``). :class:`ModalityClassifier` is
the stage for Ray ``map_batches``: it loads once per actor and picks GPU with autocast or CPU.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter, ImageOps

from ray_jobs.config import ClassifierSettings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import resolve_weights
from ray_jobs.figures.synth.modality_panels import MODALITY_MAKERS
from ray_jobs.figures.synth.panels import PROCEDURAL, Maker
from ray_jobs.figures.taxonomy import (
    WEIGHTS,
    RulePrior,
    Taxonomy,
    load_taxonomy,
    metadata_prior,
)

log = logging.getLogger(__name__)
STAGE = "classify"
UNKNOWN = "unknown"
# which taxonomy class each procedural panel maker draws (the figure generator's makers first,
# in their order, then one maker for each class they do not draw)
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
} | {name: name for name in MODALITY_MAKERS}
MAKERS: dict[str, Maker] = {**PROCEDURAL, **MODALITY_MAKERS}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TEXT_SOURCES = ("subcaption", "caption")  # strong text evidence; article keywords are weaker
OOD_QUANTILE = 0.05  # the OOD thresholds accept 95% of the held-out in-distribution images
DEFAULT_DROP_CONFIDENCE = 0.9  # for checkpoints without a calibrated one
DROP_RISK = 0.01  # the calibrated drop_confidence drops at most this share of clinical panels


def _centre(img: Image.Image) -> Image.Image:
    w, h = img.size
    return img.crop((round(w * 0.1), round(h * 0.1), round(w * 0.9), round(h * 0.9)))


VIEWS: tuple[Callable[[Image.Image], Image.Image], ...] = (ImageOps.mirror, _centre)


def build_model(backbone: str, num_classes: int, pretrained: str | None = None):  # type: ignore[no-untyped-def]
    """A torchvision model with an ``fc`` head (``resnet*``, ``shufflenet_v2_*``), built with
    ``weights=None``; ``pretrained`` is a local state dict (its ``fc.*`` tensors are ignored)."""
    import torch
    from torchvision import models

    factory: Callable[..., Any] | None = getattr(models, backbone, None)
    if factory is None:
        raise ValueError(f"unknown torchvision backbone {backbone!r}")
    model = factory(weights=None)
    if not isinstance(getattr(model, "fc", None), torch.nn.Linear):
        raise ValueError(f"backbone {backbone!r} has no fc head (use resnet* or shufflenet_v2_*)")
    if pretrained:  # an ImageNet (or any) state dict from a local path, never a download
        state = torch.load(resolve_weights(pretrained), map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        body = {k: v for k, v in state.items() if not k.startswith("fc.")}
        missing, unexpected = model.load_state_dict(body, strict=False)
        wrong = [k for k in [*missing, *unexpected] if not k.startswith("fc.")]
        if wrong:
            raise ValueError(
                f"pretrained weights {pretrained} do not fit {backbone}: "
                f"{len(wrong)} tensors missing or extra, e.g. {wrong[:3]}"
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


def augment(img: Image.Image, rng: random.Random) -> Image.Image:
    """Training-time variation: a crop of 60-100% of each side, mirror, brightness, contrast,
    saturation, sometimes blur or grey. Nothing a panel's class depends on."""
    w, h = img.size
    cw, ch = max(8, int(w * rng.uniform(0.6, 1.0))), max(8, int(h * rng.uniform(0.6, 1.0)))
    x, y = rng.randint(0, max(0, w - cw)), rng.randint(0, max(0, h - ch))
    img = img.crop((x, y, x + cw, y + ch))
    if rng.random() < 0.5:
        img = ImageOps.mirror(img)
    img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.75, 1.25))
    img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.75, 1.25))
    img = ImageEnhance.Color(img).enhance(rng.uniform(0.6, 1.4))
    if rng.random() < 0.2:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
    if rng.random() < 0.1:
        img = ImageOps.grayscale(img).convert("RGB")
    return img


def synthetic_outliers(x, generator):  # type: ignore[no-untyped-def]
    """Images that are no panel of any class, made from a training batch ``x`` (N, 3, S, S):
    tiles of several images shuffled together, and smooth random colour fields. Outlier
    exposure (Hendrycks et al. 2019) trains the model towards a uniform output on them, so
    its confidence and energy fall on images unlike its classes; no held-out image is used."""
    import torch

    n, _, size, _ = x.shape
    k = max(1, n // 4)
    grid = 4
    step = size // grid
    shuffled = x[:k].clone()
    for i in range(k):
        for gy in range(grid):
            for gx in range(grid):
                j = int(torch.randint(n, (1,), generator=generator))
                sy, sx = (int(v) for v in torch.randint(grid, (2,), generator=generator))
                shuffled[i, :, gy * step : (gy + 1) * step, gx * step : (gx + 1) * step] = x[
                    j, :, sy * step : (sy + 1) * step, sx * step : (sx + 1) * step
                ]
    coarse = torch.randn((k, 3, 4, 4), generator=generator) * 1.2
    fields = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bicubic")
    fields = fields + 0.3 * torch.randn((k, 3, size, size), generator=generator)
    return torch.cat([shuffled, fields.to(x.dtype)]).to(x.device)


def write_dataset(
    out: Path,
    n_per_class: int,
    seed: int,
    size: int = 160,
    val_fraction: float = 0.2,
    classes: Iterable[str] | None = None,
) -> dict[str, int]:
    """An ImageFolder tree (``train/<class>/``, ``val/<class>/``) drawn by the panel makers,
    one maker per taxonomy class (``classes`` picks some)."""
    wanted = set(classes) if classes is not None else None
    counts: dict[str, int] = {}
    for index, (maker, cls) in enumerate(MAKER_CLASS.items()):
        if wanted is not None and cls not in wanted:
            continue
        for i in range(n_per_class):
            rng = np.random.default_rng([seed, index, i])
            low = max(64, size // 2)  # some makers cannot draw smaller panels
            w, h = (
                int(rng.integers(low, max(low + 1, size * 2))),
                int(rng.integers(low, max(low + 1, size * 2))),
            )
            split = "val" if i < n_per_class * val_fraction else "train"
            folder = out / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            MAKERS[maker](rng, w, h).save(folder / f"{maker}-{i:05d}.jpg", quality=90)
            counts[cls] = counts.get(cls, 0) + 1
    return counts


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")


def _folder(data: Path, split: str) -> tuple[list[Path], list[str], list[str]]:
    """(paths, class names, the split's classes): every image under ``<data>/<split>/<class>/``."""
    root = data / split
    if not root.is_dir():
        raise ValueError(f"{data} has no {split}/ folder (expected {split}/<class>/<image>)")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    paths, names = [], []
    for name in classes:
        for path in sorted((root / name).iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
                paths.append(path)
                names.append(name)
    if not paths:
        raise ValueError(f"no images under {root}/<class>/")
    return paths, names, classes


# -- calibration --------------------------------------------------------------------------


def _softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=1)
    return top + np.log(np.exp(logits - top[:, None]).sum(axis=1))


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The softmax temperature with the least negative log-likelihood on held-out data
    (Guo et al. 2017), by a search over log T; 1.0 without data."""
    if len(labels) == 0:
        return 1.0
    best, best_nll = 1.0, math.inf
    for t in np.exp(np.linspace(math.log(0.05), math.log(20.0), 241)):
        p = _softmax(logits, float(t))[np.arange(len(labels)), labels]
        nll = float(-np.log(np.clip(p, 1e-12, None)).mean())
        if nll < best_nll:
            best, best_nll = float(t), nll
    return round(best, 4)


def familiarity(logits: np.ndarray, temperature: float, kind: str) -> np.ndarray:
    """Higher is more like the training data: ``msp`` the calibrated top probability,
    ``energy`` the negative free energy ``T·logsumexp(logits / T)`` (Liu et al. 2020)."""
    if kind == "msp":
        return _softmax(logits, temperature).max(axis=1)
    if kind == "energy":
        return temperature * _logsumexp(logits / temperature)
    raise ValueError(f"unknown OOD score {kind!r}")


def calibrate(logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Temperature and OOD thresholds from held-out in-distribution images: each threshold
    accepts ``1 - OOD_QUANTILE`` of them."""
    temperature = fit_temperature(logits, labels)
    thresholds = {
        kind: round(float(np.quantile(familiarity(logits, temperature, kind), OOD_QUANTILE)), 4)
        for kind in ("msp", "energy")
    }
    probs = _softmax(logits, temperature)
    return {
        "temperature": temperature,
        "ood_thresholds": thresholds,
        "ood_quantile": OOD_QUANTILE,
        "n": len(labels),
        "ece": round(expected_calibration_error(probs, labels), 4),
        "ece_uncalibrated": round(expected_calibration_error(_softmax(logits), labels), 4),
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
# (figures/heldout/content.py), which share no code with the classifier's makers nor with the
# relevance bench's family (figures/modality_heldout.py). Scans, micrographs and photographs
# count as clinical, plots, heat maps, tables, text and sketches as not; stripes and gradients
# are neither and are left out.
CALIBRATION_CLINICAL = ("scan", "micrograph", "photo")
CALIBRATION_OTHER = ("bars", "boxes", "lines", "heatmap", "table", "text", "sketch")


def calibration_family(per_kind: int = 30, seed: int = 11) -> tuple[list[Image.Image], list[bool]]:
    """Panels of a family the model never trained on, and whether each is clinical."""
    from ray_jobs.figures.heldout.content import PAINTERS

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


# -- training -----------------------------------------------------------------------------


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
    paths, names, classes = _folder(data, "train")
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
        cal_paths, cal_names, _ = _folder(data, "val")
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


def plain(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as JSON types only (numpy scalars become floats or ints), so the checkpoint
    loads with ``torch.load(weights_only=True)``, which refuses arbitrary objects."""
    return json.loads(json.dumps(values, default=lambda v: v.item()))


def save_checkpoint(
    path: Path,
    backbone: str,
    classes: list[str],
    imgsz: int,
    state: dict[str, Any],
    calibration: dict[str, Any] | None = None,
    *,
    pretrained: str | None = None,
) -> None:
    """Weights stored in fp16 (half the bytes; inference casts them back to the model's
    dtype), with everything inference needs to rebuild the model and read its scores."""
    import torch

    half = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    torch.save(
        {
            "backbone": backbone,
            "classes": classes,
            "imgsz": imgsz,
            "state_dict": half,
            "taxonomy_version": load_taxonomy().version,
            "calibration": plain(calibration or {}),
            "pretrained": pretrained,
        },
        path,
    )


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
        "model does on panels unlike these. Measure that with `pmcvl bench-relevance` (a panel",
        "family no training run sees) and on real labelled panels with `pmcvl eval-classifier`.",
        "",
        f"Made with `pmcvl train-classifier --data {data} --backbone {result.backbone} "
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


# -- the decision -------------------------------------------------------------------------


@dataclass
class ImageVerdict:
    """What the image model says about one panel: its class, or ``unknown``."""

    l2: str  # a class, or unknown when it abstains
    score: float  # calibrated top probability
    nonclinical: float  # calibrated probability mass on classes the taxonomy drops
    familiar: bool  # the OOD score is above the checkpoint's threshold
    top: str  # the top class even when abstaining

    @property
    def abstains(self) -> bool:
        return self.l2 == UNKNOWN


def image_verdict(
    probs: np.ndarray,
    classes: list[str],
    familiar: bool,
    settings: ClassifierSettings,
    taxonomy: Taxonomy,
) -> ImageVerdict:
    top = int(np.argmax(probs))
    score = float(probs[top])
    nonclinical = float(
        sum(p for c, p in zip(classes, probs, strict=True) if not taxonomy.classes[c].keep)
    )
    confident = familiar and score >= settings.min_confidence
    return ImageVerdict(
        classes[top] if confident else UNKNOWN,
        round(score, 4),
        round(nonclinical, 4),
        familiar,
        classes[top],
    )


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
    decided_by: str  # image | text | image+text | keywords | size | none
    image: str = UNKNOWN  # the image model's own verdict: a class, or unknown when it abstains


def _text_classes(
    prior: RulePrior, sources: tuple[str, ...], *, strong: bool = True
) -> dict[str, float]:
    """Evidence weight per class from the given sources (only strong keywords, or all)."""
    out: dict[str, float] = {}
    for e in prior.evidence:
        if e.source in sources and (e.strong or not strong):
            out[e.l2] = out.get(e.l2, 0.0) + WEIGHTS[e.source]
    return out


def decide(
    probs: np.ndarray,
    classes: list[str],
    prior: RulePrior,
    size: tuple[int, int],
    settings: ClassifierSettings,
    taxonomy: Taxonomy,
    *,
    familiar: bool = True,
    drop_default: float = DEFAULT_DROP_CONFIDENCE,
    stable_nonclinical: float | None = None,
) -> Decision:
    """The keep decision from the image model's calibrated probabilities and the text.

    In order, the first rule that applies decides:

    1. too small → drop (``size``);
    2. a clinical modality named in the subcaption or caption (a strong keyword) → keep, as
       that modality (``text``), or as the image's class where the image confidently names one
       of the text's classes (``image+text``), whatever else the image says;
    3. a confident, familiar image of a clinical class → keep (``image``);
    4. a confident, familiar image of a non-clinical class → drop, when its non-clinical
       probability reaches ``drop_confidence`` (``image``; unset in the settings: the
       checkpoint's calibrated ``drop_default``), in every view of the image where the stage
       gives ``stable_nonclinical``, or the text names its class (``image+text``);
    5. a non-clinical class named by a strong keyword → drop (``text``);
    6. a clinical class named only weakly ("t2", "stained") → keep (``text``);
    7. a clinical class in the article keywords → keep (``keywords``);
    8. nothing: ``unknown``, kept (``keep_unknown``) or dropped as ``low_confidence`` (``none``).
    """
    image = image_verdict(probs, classes, familiar, settings, taxonomy)
    strong = _text_classes(prior, TEXT_SOURCES)
    every = _text_classes(prior, TEXT_SOURCES, strong=False)
    clinical_text = {c: v for c, v in strong.items() if taxonomy.classes[c].keep}
    other_text = {c: v for c, v in strong.items() if not taxonomy.classes[c].keep}
    weak_clinical = {c: v for c, v in every.items() if taxonomy.classes[c].keep}
    clinical_keywords = {
        c: v for c, v in _text_classes(prior, ("keywords",)).items() if taxonomy.classes[c].keep
    }
    share = {c: v / sum(every.values()) for c, v in every.items()} if every else {}

    def best(scores: dict[str, float]) -> str:
        return max(scores, key=lambda c: (scores[c], c))

    confident = not image.abstains
    stable = image.nonclinical if stable_nonclinical is None else stable_nonclinical
    drop_at = settings.drop_confidence if settings.drop_confidence is not None else drop_default
    if min(size) < settings.min_side_px:
        l2, score, keep, reason, by = image.l2, image.score, False, "too_small", "size"
    elif clinical_text:
        if confident and image.l2 in clinical_text:
            l2, score, by = image.l2, max(image.score, share[image.l2]), "image+text"
        else:
            l2 = best(clinical_text)
            score, by = share[l2], "text"
        keep, reason = True, None
    elif confident and taxonomy.classes[image.l2].keep:
        l2, score, keep, reason = image.l2, image.score, True, None
        by = "image+text" if image.l2 in every else "image"
    elif confident and (min(image.nonclinical, stable) >= drop_at or image.l2 in every):
        l2, score, keep = image.l2, image.score, False
        reason, by = f"non_clinical:{l2}", "image+text" if image.l2 in every else "image"
    elif other_text:
        l2 = best(other_text)
        score, keep, reason, by = share[l2], False, f"non_clinical:{l2}", "text"
    elif weak_clinical:
        l2 = best(weak_clinical)
        score, keep, reason, by = share[l2], True, None, "text"
    elif clinical_keywords:
        l2 = best(clinical_keywords)
        score, keep, reason, by = image.score, True, None, "keywords"
    else:
        l2, score, by = UNKNOWN, image.score, "none"
        keep = settings.keep_unknown
        reason = None if keep else "low_confidence"
    combined = {c: float(p) for c, p in zip(classes, probs, strict=True)}
    if prior.scores:
        w = settings.rules_weight
        combined = {c: (1 - w) * p + w * prior.scores.get(c, 0.0) for c, p in combined.items()}
    image_note = (
        f"image:{image.l2}@{image.score:.2f}"
        if not image.abstains
        else f"image:unknown@{image.score:.2f}({'unfamiliar' if not image.familiar else 'unsure'},"
        f"top={image.top})"
    )
    evidence = [f"decided_by:{by}", image_note] + [str(e) for e in prior.evidence]
    return Decision(
        l2,
        round(float(score), 4),
        taxonomy.l1_of(l2) if l2 in taxonomy.classes else UNKNOWN,
        taxonomy.l0_of(l2) if l2 in taxonomy.classes else UNKNOWN,
        keep,
        reason,
        {c: round(v, 4) for c, v in combined.items()},
        evidence,
        by,
        image.l2,
    )


# -- the stage ----------------------------------------------------------------------------


class ModalityClassifier:
    """The relevance stage. ``__call__`` takes ``{"key", "image", "subcaption", "caption"}``
    batches (``keywords``, a list of article subjects per panel, optional) and returns one row
    per panel with the decision columns (``failed`` rows for images that cannot be decoded)."""

    def __init__(self, settings: ClassifierSettings | None = None, *, device: str | None = None):
        import torch

        self.settings = settings or ClassifierSettings()
        path = resolve_weights(self.settings.weights)
        # tensors and plain values only: unpickling a checkpoint must not run its code
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        self.classes: list[str] = checkpoint["classes"]
        self.imgsz: int = checkpoint["imgsz"]
        self.backbone: str = checkpoint["backbone"]
        self.model = build_model(self.backbone, len(self.classes))
        self.model.load_state_dict(checkpoint["state_dict"])
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.taxonomy = load_taxonomy()
        unknown = set(self.classes) - set(self.taxonomy.classes)
        if unknown:
            raise ValueError(f"checkpoint classes not in the taxonomy: {sorted(unknown)}")
        self.calibration: dict[str, Any] = checkpoint.get("calibration") or {}
        self.temperature = float(self.calibration.get("temperature", 1.0))
        self.drop_default = float(self.calibration.get("drop_confidence", DEFAULT_DROP_CONFIDENCE))
        self.name = f"{self.backbone}:{path.name}"

    def logits(self, images: list[Image.Image]) -> np.ndarray:
        import torch

        rows = []
        with (
            torch.inference_mode(),
            torch.autocast(device_type="cuda", enabled=self.device.startswith("cuda")),
        ):
            for start in range(0, len(images), self.settings.batch_size):
                x = to_tensor(images[start : start + self.settings.batch_size], self.imgsz)
                rows.append(self.model(x.to(self.device)).float().cpu().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, len(self.classes)), np.float32)

    def scores(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated probabilities and, per image, whether it passes the OOD threshold
        (always, with ``ood_score: none`` or a checkpoint without calibration)."""
        probs = _softmax(logits, self.temperature) if len(logits) else logits
        kind = self.settings.ood_score
        threshold = (self.calibration.get("ood_thresholds") or {}).get(kind)
        if kind == "none" or threshold is None or not len(logits):
            return probs, np.ones(len(logits), dtype=bool)
        return probs, familiarity(logits, self.temperature, kind) >= threshold

    def predict(self, images: list[Image.Image]) -> np.ndarray:
        """Calibrated class probabilities, (N, classes)."""
        return self.scores(self.logits(images))[0]

    def nonclinical(self, probs: np.ndarray, familiar: np.ndarray) -> np.ndarray:
        """Per image, the calibrated non-clinical probability where the image model is
        confident and the image familiar, else 0 (it cannot drop anything)."""
        other = np.array([not self.taxonomy.classes[c].keep for c in self.classes])
        confident = familiar & (probs.max(axis=1) >= self.settings.min_confidence)
        return np.where(confident, probs[:, other].sum(axis=1), 0.0)

    def stable_nonclinical(
        self, images: list[Image.Image], probs: np.ndarray, familiar: np.ndarray, floor: float
    ) -> np.ndarray:
        """The non-clinical probability that holds in every view of the image (itself, its
        mirror image, its centre 80%): a drop on the image alone needs the model to say so
        however the panel is shown. Views are only computed for images at ``floor`` or above."""
        base = self.nonclinical(probs, familiar)
        todo = [i for i in range(len(images)) if base[i] >= floor]
        if not todo:
            return base
        out = base.copy()
        for view in VIEWS:
            p, f = self.scores(self.logits([view(images[i]) for i in todo]))
            out[todo] = np.minimum(out[todo], self.nonclinical(p, f))
        return out

    def decide_images(
        self,
        images: list[Image.Image],
        subcaptions: list[str],
        captions: list[str],
        keywords: list[list[str]] | None = None,
    ) -> list[Decision]:
        probs, familiar = self.scores(self.logits(images))
        drop_at = self.settings.drop_confidence
        drop_at = self.drop_default if drop_at is None else drop_at
        stable = self.stable_nonclinical(images, probs, familiar, min(drop_at, 1.0))
        keywords = keywords or [[] for _ in images]
        return [
            decide(
                probs[i],
                self.classes,
                metadata_prior(subcaptions[i] or "", captions[i] or "", keywords[i] or []),
                img.size,
                self.settings,
                self.taxonomy,
                familiar=bool(familiar[i]),
                drop_default=self.drop_default,
                stable_nonclinical=float(stable[i]),
            )
            for i, img in enumerate(images)
        ]

    def decide_each(
        self,
        keys: list[str],
        images: list[Image.Image],
        subcaptions: list[str],
        captions: list[str],
        keywords: list[list[str]],
    ) -> list[Decision | FailureRecord]:
        """:meth:`decide_images` on the whole batch; when that raises, on each panel alone, so
        only the panel that breaks the model or the decision fails (a batch of one rounds the
        same logits differently in the last bits at most)."""
        try:
            return list(self.decide_images(images, subcaptions, captions, keywords))
        except Exception as exc:  # one bad panel must not cost its batch
            if len(images) == 1:
                return [FailureRecord.from_exception(keys[0], STAGE, exc)]
            log.warning("classifier batch of %d failed (%s); deciding one by one", len(keys), exc)
        out: list[Decision | FailureRecord] = []
        for i, key in enumerate(keys):
            try:
                one = slice(i, i + 1)
                out.extend(
                    self.decide_images(images[one], subcaptions[one], captions[one], keywords[one])
                )
            except Exception as exc:  # this panel's failure row
                out.append(FailureRecord.from_exception(key, STAGE, exc))
        return out

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        keys = list(batch["key"])
        n = len(keys)
        subcaptions = list(batch.get("subcaption", [""] * n))
        captions = list(batch.get("caption", [""] * n))
        keywords = list(batch.get("keywords", [[]] * n))
        decoded, failures = [], {}
        for i, data in enumerate(batch["image"]):
            try:
                decoded.append((i, decode_image(data)))
            except Exception as exc:
                failures[i] = FailureRecord.from_exception(keys[i], STAGE, exc)
        made = self.decide_each(
            [keys[i] for i, _ in decoded],
            [img for _, img in decoded],
            [subcaptions[i] for i, _ in decoded],
            [captions[i] for i, _ in decoded],
            [list(keywords[i] or []) for i, _ in decoded],
        )
        decisions: dict[int, Decision] = {}
        for (i, _), d in zip(decoded, made, strict=True):
            if isinstance(d, FailureRecord):
                failures[i] = d
            else:
                decisions[i] = d
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
                "modality_decided_by": d.decided_by if d else None,
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
    "modality_decided_by",
    "classifier",
    "error",
)


# -- evaluation ---------------------------------------------------------------------------


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
    paths, names, classes = _folder(data, split)
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
