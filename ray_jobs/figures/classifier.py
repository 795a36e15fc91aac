"""The modality / relevance classifier at inference: a torchvision CNN over the taxonomy's L2
classes, loaded from a checkpoint, and the Ray stage that runs it and the keep decision.

Offline: backbones are built with ``weights=None``; pretrained weights, when wanted, come from a
local path or URI in the config, never a hub. The checkpoint carries its class list, backbone,
input size and calibration (a softmax temperature fitted on held-out data, the thresholds of
the out-of-distribution scores and the drop confidence), so inference needs nothing else: the
product never draws, trains or calibrates (that is ``modeldev.classifier``). The decision
itself lives in :mod:`ray_jobs.figures.decision`. :class:`ModalityClassifier` is the stage for
Ray ``map_batches``: it loads once per actor and picks GPU with autocast or CPU.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from ray_jobs.config import ClassifierSettings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.figures.decision import DEFAULT_DROP_CONFIDENCE, Decision, decide
from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import resolve_weights
from ray_jobs.figures.taxonomy import load_taxonomy, metadata_prior

log = logging.getLogger(__name__)
STAGE = "classify"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


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


# -- scores (shared with calibration, which fits what these read) --------------------------


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature``, shifted by the row maximum so that
    large logits do not overflow."""
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def logsumexp(logits: np.ndarray) -> np.ndarray:
    """Row-wise ``log(sum(exp(logits)))``, stable for large logits."""
    top = logits.max(axis=1)
    return top + np.log(np.exp(logits - top[:, None]).sum(axis=1))


def familiarity(logits: np.ndarray, temperature: float, kind: str) -> np.ndarray:
    """Higher is more like the training data: ``msp`` the calibrated top probability,
    ``energy`` the negative free energy ``T·logsumexp(logits / T)`` (Liu et al. 2020)."""
    if kind == "msp":
        return softmax(logits, temperature).max(axis=1)
    if kind == "energy":
        return temperature * logsumexp(logits / temperature)
    raise ValueError(f"unknown OOD score {kind!r}")


# -- the stage ----------------------------------------------------------------------------


class ModalityClassifier:
    """The relevance stage. ``__call__`` takes ``{"key", "image", "subcaption", "caption"}``
    batches (the panel's own text and its figure's shared text; ``figure_caption``, text that
    may be about any panel of the figure, and ``keywords``, a list of article subjects per
    panel, optional) and returns one row per panel with the decision columns (``failed`` rows
    for images that cannot be decoded)."""

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
        probs = softmax(logits, self.temperature) if len(logits) else logits
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
        figure_captions: list[str] | None = None,
    ) -> list[Decision]:
        """One decision per image: ``subcaptions`` are each panel's own text, ``captions`` the
        text its figure's panels share, ``figure_captions`` text that may be about any panel
        of its figure (an unsplit caption), ``keywords`` the article's (see ``decide``)."""
        probs, familiar = self.scores(self.logits(images))
        drop_at = self.settings.drop_confidence
        drop_at = self.drop_default if drop_at is None else drop_at
        stable = self.stable_nonclinical(images, probs, familiar, min(drop_at, 1.0))
        keywords = keywords or [[] for _ in images]
        figure_captions = figure_captions or ["" for _ in images]
        return [
            decide(
                probs[i],
                self.classes,
                metadata_prior(
                    subcaptions[i] or "",
                    captions[i] or "",
                    keywords[i] or [],
                    figure_caption=figure_captions[i] or "",
                ),
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
        figure_captions: list[str],
    ) -> list[Decision | FailureRecord]:
        """:meth:`decide_images` on the whole batch; when that raises, on each panel alone, so
        only the panel that breaks the model or the decision fails (a batch of one rounds the
        same logits differently in the last bits at most)."""
        try:
            return list(
                self.decide_images(images, subcaptions, captions, keywords, figure_captions)
            )
        except Exception as exc:  # one bad panel must not cost its batch
            if len(images) == 1:
                return [FailureRecord.from_exception(keys[0], STAGE, exc)]
            log.warning("classifier batch of %d failed (%s); deciding one by one", len(keys), exc)
        out: list[Decision | FailureRecord] = []
        for i, key in enumerate(keys):
            try:
                one = slice(i, i + 1)
                out.extend(
                    self.decide_images(
                        images[one],
                        subcaptions[one],
                        captions[one],
                        keywords[one],
                        figure_captions[one],
                    )
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
        figure_captions = list(batch.get("figure_caption", [""] * n))
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
            [figure_captions[i] for i, _ in decoded],
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
                "failure": None if d else failures[i],  # typed: stage, type, message, retryable
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
    "failure",
)
