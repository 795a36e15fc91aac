"""How a dataset was made, as the card and the Croissant file state it: code and config
version, the models with their versions, the prompt version, and the settings that shape the
samples. Collected on the driver from the run's settings; nothing secret (no URL, no key, no
bucket) is kept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray_jobs.config import Settings


@dataclass(frozen=True)
class ModelInfo:
    role: str  # what the model does in the pipeline
    name: str  # the weights file, or the served model's id
    version: str | None  # first 12 hex digits of the weights' sha256 (as records name it)


@dataclass(frozen=True)
class DatasetFacts:
    code_version: str
    config_hash: str
    run_id: str
    models: list[ModelInfo] = field(default_factory=list)
    enrichment: dict[str, Any] = field(default_factory=dict)  # the manifest's
    settings: dict[str, Any] = field(default_factory=dict)  # the sample-shaping settings


def weights_version(path: str | None) -> str | None:
    """The version records carry for a model (``detector_version``): sha256 prefix of its
    weights; None when the driver cannot see the file."""
    if not path or not Path(path).is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:12]


def shaping_settings(settings: Settings) -> dict[str, Any]:
    """The config sections that decide which samples exist and what they hold."""
    d, c, cap = settings.detector, settings.classifier, settings.captions
    return {
        "detector": {
            k: getattr(d, k)
            for k in (
                "imgsz",
                "zoom_below_px",
                "zoom_imgsz",
                "conf",
                "label_conf",
                "iou",
                "min_side_px",
                "min_area_fraction",
                "blank_std",
                "blank_ink_share",
                "drop_colour_bars",
                "split_at_labels",
                "pad_px",
                "crop_format",
                "max_panels",
            )
        },
        "classifier": {
            "min_confidence": c.min_confidence,
            "drop_confidence": c.drop_confidence,
            "keep_without_evidence": c.keep_without_evidence,
            "ood_score": c.ood_score,
        },
        "captions": {
            "join_preamble": cap.join_preamble,
            "join_trailer": cap.join_trailer,
            "on_disagreement": cap.on_disagreement,
            "unlabelled_figures": cap.unlabelled_figures,
        },
        "near_duplicate_bits": settings.pipeline.near_duplicate_bits,
        "samples_per_shard": settings.pipeline.samples_per_shard,
    }


def collect(
    settings: Settings, code_version: str, config_hash: str, run_id: str, enrichment: dict
) -> DatasetFacts:
    models = [
        ModelInfo(
            "panel detector",
            Path(settings.detector.weights).name,
            weights_version(settings.detector.weights),
        ),
        ModelInfo(
            "modality classifier",
            Path(settings.classifier.weights).name,
            weights_version(settings.classifier.weights),
        ),
    ]
    if settings.detector.label_reader_weights:
        path = settings.detector.label_reader_weights
        models.append(ModelInfo("label reader", Path(path).name, weights_version(path)))
    if enrichment.get("enabled"):
        models.append(ModelInfo("caption writer (LLM)", enrichment["model"], None))
        models.append(ModelInfo("feasibility judge (LLM)", enrichment["vision_model"], None))
    if settings.captions.long_tokenizer:
        path = settings.captions.long_tokenizer
        models.append(ModelInfo("long-context tokenizer", Path(path).name, weights_version(path)))
    clean = {k: v for k, v in enrichment.items() if k != "base_url"}
    return DatasetFacts(
        code_version, config_hash, run_id, models, clean, shaping_settings(settings)
    )
