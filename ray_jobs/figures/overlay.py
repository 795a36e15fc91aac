"""Draw boxes on a figure so a person can check what the detector (or the generator) did."""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image, ImageDraw

from ray_jobs.figures.fonts import font

COLORS = {"panel": (230, 40, 40), "label": (30, 120, 255)}


def draw_boxes(
    image: Image.Image,
    boxes: Sequence[tuple[float, float, float, float]],
    kinds: Sequence[str],
    captions: Sequence[str] | None = None,
) -> Image.Image:
    out = image.convert("RGB").copy()
    draw = ImageDraw.Draw(out)
    width = max(2, round(max(out.size) / 300))
    face = font(max(10, max(out.size) // 50), bold=True)
    for i, (box, kind) in enumerate(zip(boxes, kinds, strict=True)):
        color = COLORS.get(kind, (0, 200, 0))
        draw.rectangle(box, outline=color, width=width)
        if captions:
            draw.text((box[0] + width + 1, box[1] + width), captions[i], fill=color, font=face)
    return out
