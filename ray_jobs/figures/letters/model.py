"""The label reader: a four-layer CNN over 32x64 grey crops, and its loader.

Small on purpose (about 0.1 M parameters, a few hundred kB in fp16): it runs on CPU beside the
detector, on a handful of crops per figure, and trains in minutes on two cores.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from PIL import Image

from ray_jobs.figures.letters.classes import CLASSES
from ray_jobs.figures.letters.crops import prepare
from ray_jobs.figures.letters.schemes import each_alone, read_in_scheme

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_WEIGHTS = REPO_ROOT / "models" / "label-reader" / "label-reader.pt"


def build(n_classes: int = len(CLASSES)):  # type: ignore[no-untyped-def]
    from torch import nn

    def block(cin: int, cout: int) -> list:
        return [
            nn.Conv2d(cin, cout, 3, padding=1),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.MaxPool2d(2),
        ]

    return nn.Sequential(
        *block(1, 24),
        *block(24, 48),
        *block(48, 64),
        *block(64, 96),  # 2 x 4 left
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(96 * 2 * 4, n_classes),
    )


class LabelReader:
    """Reads label crops; ``read`` returns (class text, probability) per crop."""

    def __init__(self, weights: str | Path = DEFAULT_WEIGHTS):
        import torch

        path = Path(weights)
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.classes: tuple[str, ...] = tuple(state["classes"])
        self.model = build(len(self.classes))
        self.model.load_state_dict({k: v.float() for k, v in state["model"].items()})
        self.model.eval()
        self.version = hashlib.sha256(path.read_bytes()).hexdigest()[:12]

    def probabilities(self, crops: list[Image.Image]) -> np.ndarray:
        """(crops, classes) softmax probabilities."""
        if not crops:
            return np.zeros((0, len(self.classes)), np.float32)
        import torch

        x = torch.from_numpy(np.stack([prepare(c) for c in crops])[:, None])
        with torch.inference_mode():
            return torch.softmax(self.model(x), dim=1).numpy()

    def read(self, crops: list[Image.Image]) -> list[tuple[str, float]]:
        """Each crop on its own: (class text, probability)."""
        return each_alone(self.probabilities(crops), self.classes)

    def read_figure(
        self, crops: list[Image.Image], panels: int | None = None
    ) -> list[tuple[str, float]]:
        """The labels of one figure of ``panels`` panels, read within the scheme they share
        (``schemes``)."""
        return read_in_scheme(self.probabilities(crops), self.classes, panels)
