"""Letter accuracy on labels no training run drew: crops of the gold label boxes of whole
figures from the generator's held-out seed, and of the independent figure family (other
fonts, other placement: a harder, out-of-style test).

The sets are lists of figures, each the list of its labels, so a reader can be scored on
crops one by one (``read``) and on each figure's labels together (``read_figure``, the
product's path).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image

from ray_jobs.figures.letters.classes import INDEX, canonical

Labelled = list[tuple[Image.Image, str]]  # crop, expected class


@dataclass
class Figure:
    """One figure's labelled crops, and how many panels it has (what the product knows)."""

    items: Labelled
    panels: int


def _crops(data: bytes, boxes: list, texts: list) -> Figure:
    img = Image.open(io.BytesIO(data)).convert("RGB")
    items = [
        (img.crop(tuple(box)), canonical(text))
        for box, text in zip(boxes, texts, strict=True)
        if box is not None and text is not None and canonical(text) in INDEX
    ]
    return Figure(items, len(boxes))


def generator_labels(n: int, seed: int = 99) -> list[Figure]:
    from modeldev.synth.generate import make_figure

    return [
        _crops(data, fig.labels, fig.label_texts)
        for data, fig in (make_figure(seed, i) for i in range(n))
    ]


def family_labels(n: int, seed: int = 2026) -> list[Figure]:
    from modeldev.heldout.figure import make_heldout_figure

    return [
        _crops(data, fig.labels, fig.label_texts)
        for data, fig in (make_heldout_figure(seed, i) for i in range(n))
    ]


def letter_accuracy(reader, figures: list[Figure], together: bool = True) -> float:  # type: ignore[no-untyped-def]
    """Share of labels read right; ``together``: each figure's labels read as one figure of
    its panel count, as the detection stage reads them."""
    right = total = 0
    for figure in figures:
        items = figure.items
        crops = [crop for crop, _ in items]
        read = reader.read_figure(crops, figure.panels) if together else reader.read(crops)
        right += sum(r == want for (r, _), (_, want) in zip(read, items, strict=True))
        total += len(items)
    return right / max(1, total)
