"""Panel content the training generator does not draw, painted with numpy and PIL.

Several kinds are chosen because they hold what looks like a gutter inside one panel: bar and
box plots with wide white gaps, periodic stripes, smooth gradients, tables with white rows,
sparse drawings. Others (scans, micrographs, photographs, heat maps) are ordinary content drawn
another way than the training generator draws them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

Painter = Callable[[np.random.Generator, int, int], Image.Image]
FACES = ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "STIXGeneral.ttf", "STIXGeneralBol.ttf")


@lru_cache(maxsize=128)
def face(size: int, index: int = 0) -> ImageFont.FreeTypeFont:
    """Fonts matplotlib ships (never the training generator's DejaVu Sans/Serif)."""
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / FACES[index % len(FACES)]
    return ImageFont.truetype(str(path), size=max(7, int(size)))


def _colour(rng: np.random.Generator, lo: int = 30, hi: int = 220) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in rng.integers(lo, hi, 3))
    return r, g, b


def _axes(draw: ImageDraw.ImageDraw, w: int, h: int, box: bool) -> tuple[int, int, int, int]:
    left, top, right, bottom = int(w * 0.16), int(h * 0.08), int(w * 0.96), int(h * 0.84)
    draw.line((left, top, left, bottom), fill=(0, 0, 0), width=1)
    draw.line((left, bottom, right, bottom), fill=(0, 0, 0), width=1)
    if box:
        draw.line((left, top, right, top), fill=(0, 0, 0), width=1)
        draw.line((right, top, right, bottom), fill=(0, 0, 0), width=1)
    for k in range(5):
        y = bottom - (bottom - top) * k / 4
        draw.line((left - 3, y, left, y), fill=(0, 0, 0))
        draw.text((2, y - 5), f"{k * 25}", fill=(0, 0, 0), font=face(max(7, h // 22)))
    return left, top, right, bottom


def bars(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Bars far apart: the white columns between them run almost the panel's height."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    left, top, right, bottom = _axes(draw, w, h, bool(rng.random() < 0.3))
    n = int(rng.integers(2, 7))
    slot = (right - left) / n
    width = slot * rng.uniform(0.15, 0.4)
    colour = _colour(rng)
    for k in range(n):
        x = left + slot * (k + 0.5)
        value = top + (bottom - top) * rng.uniform(0.0, 0.8)
        draw.rectangle((x - width / 2, value, x + width / 2, bottom), fill=colour)
        err = (bottom - value) * 0.1
        draw.line((x, value - err, x, value + err), fill=(0, 0, 0))
        draw.text((x - 6, bottom + 3), f"G{k + 1}", fill=(0, 0, 0), font=face(max(7, h // 20)))
    return img


def boxes(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Box-and-whisker groups with wide gaps, no frame."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    left, top, right, bottom = _axes(draw, w, h, False)
    n = int(rng.integers(2, 6))
    slot = (right - left) / n
    for k in range(n):
        x = left + slot * (k + 0.5)
        q = np.sort(rng.uniform(top, bottom, 5))
        half = slot * rng.uniform(0.1, 0.25)
        draw.line((x, q[0], x, q[4]), fill=(0, 0, 0))
        draw.rectangle((x - half, q[1], x + half, q[3]), outline=(0, 0, 0), fill=_colour(rng, 120))
        draw.line((x - half, q[2], x + half, q[2]), fill=(0, 0, 0), width=2)
    return img


def lines(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Several series with markers and a legend inside the axes."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    left, top, right, bottom = _axes(draw, w, h, bool(rng.random() < 0.5))
    xs = np.linspace(left + 5, right - 5, int(rng.integers(5, 15)))
    for s in range(int(rng.integers(2, 5))):
        colour = _colour(rng)
        ys = np.clip(
            bottom - (bottom - top) * (0.5 + np.cumsum(rng.normal(0, 0.08, len(xs)))), top, bottom
        )
        draw.line(list(zip(xs, ys, strict=True)), fill=colour, width=2)
        for x, y in zip(xs, ys, strict=True):
            draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=colour)
        draw.line(
            (right - 60, top + 8 + 12 * s, right - 45, top + 8 + 12 * s), fill=colour, width=2
        )
        draw.text((right - 42, top + 2 + 12 * s), f"s{s}", fill=(0, 0, 0), font=face(9))
    return img


def stripes(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Periodic bands (gratings, striated muscle, a barcode-like gel): white bands inside."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = float(rng.choice([0.0, np.pi / 2, rng.uniform(0, np.pi)]))
    period = rng.uniform(8, 40)
    phase = np.cos(angle) * xx + np.sin(angle) * yy
    wave = (np.sin(2 * np.pi * phase / period) > rng.uniform(-0.3, 0.5)).astype(np.float32)
    tint = np.array(_colour(rng, 0, 160), np.float32)
    arr = 255 - wave[..., None] * (255 - tint)
    return Image.fromarray(arr.astype(np.uint8))


def gradient(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A smooth linear or radial ramp fading to white: no edge anywhere inside."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if rng.random() < 0.5:
        t = xx / max(1, w - 1) if rng.random() < 0.5 else yy / max(1, h - 1)
    else:
        t = np.hypot(xx - w * rng.uniform(0.2, 0.8), yy - h * rng.uniform(0.2, 0.8))
        t = t / t.max()
    a, b = np.array(_colour(rng, 0, 120), np.float32), np.array((250, 250, 250), np.float32)
    arr = a + (b - a) * t[..., None]
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


WORDS = ("age", "dose", "HR", "95% CI", "p", "n", "grade", "T1", "T2", "ctrl", "mean", "SD")


def table(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A text table with horizontal rules: white rows between lines of text."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    rows, cols = int(rng.integers(3, 9)), int(rng.integers(2, 5))
    font = face(max(8, min(16, h // (rows * 2 + 1))), int(rng.integers(4)))
    row_h, col_w = h / (rows + 1), w / cols
    for r in range(rows + 1):
        for c in range(cols):
            text = str(rng.choice(WORDS)) if r == 0 else f"{rng.uniform(0, 99):.1f}"
            draw.text((4 + c * col_w, 4 + r * row_h), text, fill=(0, 0, 0), font=font)
    for y in (1, row_h - 1, h - 2):
        draw.line((0, y, w, y), fill=(0, 0, 0), width=1)
    return img


def text_block(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Paragraph text: a legend, a protocol, a list of findings."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    size = int(rng.integers(9, 15))
    font = face(size, int(rng.integers(4)))
    y = 4.0
    while y < h - size:
        words = " ".join(str(rng.choice(WORDS)) for _ in range(int(rng.integers(3, 12))))
        draw.text((4, y), words, fill=(20, 20, 20), font=font)
        y += size * rng.uniform(1.3, 2.4)
    return img


def sketch(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A sparse line drawing on white: a few strokes and circles, mostly empty."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 7))):
        pts = [(float(rng.uniform(0.1, 0.9) * w), float(rng.uniform(0.1, 0.9) * h))]
        for _ in range(int(rng.integers(1, 5))):
            pts.append((pts[-1][0] + rng.normal(0, w * 0.15), pts[-1][1] + rng.normal(0, h * 0.15)))
        draw.line(pts, fill=_colour(rng, 0, 120), width=int(rng.integers(1, 4)))
    for _ in range(int(rng.integers(0, 4))):
        x, y, r = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h, rng.uniform(5, w * 0.12)
        draw.ellipse((x - r, y - r, x + r, y + r), outline=(40, 40, 40), width=2)
    return img


def scan(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A cross-sectional scan: a ringed head or torso outline on black, speckled."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = np.hypot(
        (xx - w / 2) / (w * rng.uniform(0.3, 0.45)), (yy - h / 2) / (h * rng.uniform(0.3, 0.45))
    )
    arr = np.where(r < 1, 90 + 60 * np.cos(r * rng.uniform(6, 14)), 0)
    arr = np.where((r > 0.92) & (r < 1), 230, arr) + rng.normal(0, 12, (h, w)) * (r < 1)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).convert("RGB")


def micrograph(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Stained cells as a Voronoi mosaic, bright on dark or dark on pale."""
    small_w, small_h = max(8, w // 4), max(8, h // 4)
    pts = rng.uniform(0, 1, (int(rng.integers(8, 60)), 2)) * (small_w, small_h)
    yy, xx = np.mgrid[0:small_h, 0:small_w].astype(np.float32)
    d = (xx[..., None] - pts[:, 0]) ** 2 + (yy[..., None] - pts[:, 1]) ** 2
    nearest = np.sort(d, axis=-1)
    edge = np.sqrt(nearest[..., 1]) - np.sqrt(nearest[..., 0]) < 1.2
    shade = rng.uniform(40, 200, len(pts))[d.argmin(-1)]
    base = np.array(_colour(rng, 60, 255), np.float32) / 255
    arr = shade[..., None] * base
    arr[edge] = (20, 20, 20) if rng.random() < 0.5 else (240, 240, 240)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).resize((w, h))
    return img.filter(ImageFilter.GaussianBlur(1))


def photo(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A clinical photograph: low-frequency colour noise."""
    small = rng.uniform(0, 255, (4, 4, 3)).astype(np.uint8)
    img = Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC)
    noise = rng.normal(0, 8, (h, w, 3))
    return Image.fromarray(np.clip(np.asarray(img) + noise, 0, 255).astype(np.uint8))


def heatmap(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A matrix of coloured cells (expression, correlation), nearest-neighbour upscaled."""
    cells = rng.uniform(0, 1, (int(rng.integers(3, 20)), int(rng.integers(3, 20))))
    a, b = np.array(_colour(rng), np.float32), np.array(_colour(rng), np.float32)
    arr = a + (b - a) * cells[..., None]
    return Image.fromarray(arr.astype(np.uint8)).resize((w, h), Image.Resampling.NEAREST)


PAINTERS: dict[str, Painter] = {
    "bars": bars,
    "boxes": boxes,
    "lines": lines,
    "stripes": stripes,
    "gradient": gradient,
    "table": table,
    "text": text_block,
    "sketch": sketch,
    "scan": scan,
    "micrograph": micrograph,
    "photo": photo,
    "heatmap": heatmap,
}
# panels whose edges are page-white: touching ones need a frame to have a boundary at all
WHITE = frozenset({"bars", "boxes", "lines", "table", "text", "sketch", "gradient", "stripes"})
