"""Labelled image folders for the modality classifier: the training set the synthetic panel
makers draw, and the reader of any ``<data>/<split>/<class>/<image>`` tree (drawn or real)
that training and evaluation share."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from modeldev.synth.modality_panels import MODALITY_MAKERS
from modeldev.synth.panels import PROCEDURAL, Maker

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


def read_folder(data: Path, split: str) -> tuple[list[Path], list[str], list[str]]:
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
