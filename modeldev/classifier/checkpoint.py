"""Writing the modality classifier's checkpoint: the one file inference loads
(:class:`ray_jobs.figures.classifier.ModalityClassifier` reads these keys), so training and
recalibration write it the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray_jobs.figures.taxonomy import load_taxonomy


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
