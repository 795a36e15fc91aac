"""Letter accuracy on labels no training run drew: crops of the gold label boxes of whole
figures from the generator's held-out seed, and of the independent figure family (other
fonts, other placement: a harder, out-of-style test)."""

from __future__ import annotations

import io

from PIL import Image

from ray_jobs.figures.letters.classes import INDEX, canonical

Labelled = list[tuple[Image.Image, str]]  # crop, expected class


def _crops(data: bytes, boxes: list, texts: list) -> Labelled:
    img = Image.open(io.BytesIO(data)).convert("RGB")
    return [
        (img.crop(tuple(box)), canonical(text))
        for box, text in zip(boxes, texts, strict=True)
        if box is not None and text is not None and canonical(text) in INDEX
    ]


def generator_labels(n: int, seed: int = 99) -> Labelled:
    from ray_jobs.figures.synth.generate import make_figure

    out: Labelled = []
    for i in range(n):
        data, fig = make_figure(seed, i)
        out += _crops(data, fig.labels, fig.label_texts)
    return out


def family_labels(n: int, seed: int = 2026) -> Labelled:
    from ray_jobs.figures.heldout.figure import make_heldout_figure

    out: Labelled = []
    for i in range(n):
        data, fig = make_heldout_figure(seed, i)
        out += _crops(data, fig.labels, fig.label_texts)
    return out


def letter_accuracy(reader, items: Labelled) -> float:  # type: ignore[no-untyped-def]
    read = reader.read([crop for crop, _ in items])
    return sum(r == want for (r, _), (_, want) in zip(read, items, strict=True)) / max(
        1, len(items)
    )
