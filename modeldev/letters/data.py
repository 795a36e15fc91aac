"""Label crops as the training generator draws them, rendered one at a time.

Each sample is a label drawn by the generator's own ``_draw_label`` (its sizes, bold, boxed and
light-on-dark styles, its colour rule) on a patch of one of its procedural panel kinds, then
cropped around the drawn box with jitter, so the reader learns from crops as loose or tight as
a detector's. Most are set in one of the local faces of ``letters.fonts`` rather than the
generator's DejaVu Sans, and then slanted, stretched, turned, blurred or JPEG-compressed:
a reader that saw one face reads others poorly (0.76 on the held-out family's type).
Sample ``i`` of seed ``s`` depends only on ``(s, i)`` and the faces installed.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageFilter

from modeldev.letters.fonts import face, faces
from modeldev.synth.generate import _draw_label
from modeldev.synth.labels import SCHEMES, label_text
from modeldev.synth.panels import PROCEDURAL
from ray_jobs.figures.letters.classes import INDEX, canonical
from ray_jobs.figures.letters.crops import prepare

# fixed, so the reader's training data stay what its card says when the generator grows kinds
# (a chart is left out: matplotlib is slow, and a chart's corner is white, which is drawn anyway)
KINDS = (
    "ct",
    "radiograph",
    "ultrasound",
    "histology",
    "fluorescence",
    "fundus",
    "dermoscopy",
    "endoscopy",
    "gel",
    "diagram",
)


def _text(rng: np.random.Generator) -> str:
    scheme = str(rng.choice(SCHEMES))
    if scheme in ("a1", "a-1"):
        row, col = int(rng.integers(6)), int(rng.integers(6))
        return label_text(scheme, 0, row, col)
    limit = {"1": 20, "i": 12}.get(scheme, 26)
    weights = 1 / (1 + np.arange(limit) / 5)
    index = int(rng.choice(limit, p=weights / weights.sum()))
    return label_text(scheme, index, 0, index)


def jitter_crop(
    rng: np.random.Generator, img: Image.Image, box: tuple[int, int, int, int], amount: float = 0.2
):  # type: ignore[no-untyped-def]
    x0, y0, x1, y1 = box
    side = max(4, y1 - y0)
    d = rng.uniform(-amount, amount, 4) * side
    return img.crop(
        (
            max(0, round(x0 + d[0])),
            max(0, round(y0 + d[1])),
            min(img.width, max(round(x0 + d[0]) + 2, round(x1 + d[2]))),
            min(img.height, max(round(y0 + d[1]) + 2, round(y1 + d[3]))),
        )
    )


def sample(seed: int, index: int) -> tuple[np.ndarray, int, str]:
    """One prepared crop, its class index and the text drawn."""
    rng = np.random.default_rng([seed, index, 0x1AB])
    text = _text(rng)
    size = int(rng.integers(10, 30))
    w, h = max(48, int(size * rng.uniform(3, 6))), max(40, int(size * rng.uniform(2.5, 4)))
    if rng.random() < 0.3:
        patch = Image.new("RGB", (w, h), (255, 255, 255) if rng.random() < 0.8 else (0, 0, 0))
    else:
        try:
            patch = PROCEDURAL[str(rng.choice(KINDS))](rng, w, h)
        except ValueError:  # a maker's shapes can be too small for a label-sized patch
            patch = Image.new("RGB", (w, h), (255, 255, 255))
    boxed = bool(rng.random() < 0.15)
    bold = bool(rng.random() < 0.6)
    style = np.random.default_rng([seed, index, 0x57E])  # type and distortions: its own stream
    typeface = None
    if style.random() < STYLED:
        typeface = face(int(style.integers(len(faces()))), size)
    box = _draw_label(rng, patch, (0, 0, w, h), text, False, size, bold, boxed, typeface)
    crop = jitter_crop(rng, patch, box)
    if rng.random() < 0.3:  # the detector sees a resized figure: blur and JPEG-like softness
        f = rng.uniform(0.4, 0.9)
        crop = crop.resize((max(2, int(crop.width * f)), max(2, int(crop.height * f)))).resize(
            crop.size
        )
    return prepare(distort(style, crop)), INDEX[canonical(text)], text


STYLED = 0.7  # the share of labels set in another face than the generator's


def distort(rng: np.random.Generator, crop: Image.Image) -> Image.Image:
    """Slant (italic-like), horizontal stretch (condensed or wide type), a small turn, the blur
    and grain of a scan, and JPEG of a re-saved figure, each for some crops only."""
    w, h = crop.size
    if w < 4 or h < 4:
        return crop
    if rng.random() < 0.5:
        shear, stretch = rng.uniform(-0.3, 0.3), rng.uniform(0.75, 1.3)
        nw = max(4, round(w * stretch + abs(shear) * h))
        offset = -shear * h if shear > 0 else 0.0
        # inverse map: source x = (x - offset + shear * y) / stretch
        coeffs = (1 / stretch, shear / stretch, offset / stretch, 0, 1, 0)
        fill = crop.getpixel((0, 0))
        crop = crop.transform(
            (nw, h), Image.Transform.AFFINE, coeffs, Image.Resampling.BILINEAR, fillcolor=fill
        )
    if rng.random() < 0.25:
        crop = crop.rotate(
            rng.uniform(-4, 4),
            Image.Resampling.BILINEAR,
            expand=True,
            fillcolor=crop.getpixel((0, 0)),
        )
    if rng.random() < 0.25:  # a scan: soft edges and grain
        crop = crop.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.4)))
        grain = rng.normal(0, rng.uniform(4, 16), (crop.height, crop.width, 1))
        pixels = np.asarray(crop.convert("RGB"), np.float32) + grain
        crop = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if rng.random() < 0.3:
        out = io.BytesIO()
        crop.convert("RGB").save(out, "JPEG", quality=int(rng.integers(25, 85)))
        crop = Image.open(io.BytesIO(out.getvalue()))
    return crop


def batch(seed: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = zip(*((x, y) for x, y, _ in (sample(seed, start + i) for i in range(n))), strict=True)
    return np.stack(xs)[:, None], np.array(ys, np.int64)
