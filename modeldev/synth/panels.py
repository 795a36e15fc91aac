"""Procedural single panels that look enough like biomedical images to teach panel boundaries.

Each maker draws one panel of a given size from a numpy Generator; none reads the network. The
detector must learn where one image ends and the next begins, so what matters is the variety
of textures, backgrounds (black, white, coloured), borders and in-panel clutter (arrows, text,
scale bars), not medical fidelity.
"""

from __future__ import annotations

import io
import itertools
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from ray_jobs.figures.fonts import font

Maker = Callable[[np.random.Generator, int, int], Image.Image]


def _noise(rng: np.random.Generator, w: int, h: int, sigma: float, blur: float) -> np.ndarray:
    field = rng.normal(0, sigma, (h, w)).astype(np.float32)
    img = Image.fromarray(np.clip(field + 128, 0, 255).astype(np.uint8))
    return np.asarray(img.filter(ImageFilter.GaussianBlur(blur)), dtype=np.float32) - 128


def array_to_rgb(arr: np.ndarray) -> Image.Image:
    """A float array (grey or RGB, 0-255) as an RGB image, clipped."""
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).convert("RGB")


def ct_slice(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Axial CT/MR-like: a bright body ellipse with organs on black."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = w / 2 + rng.normal(0, w * 0.03), h / 2 + rng.normal(0, h * 0.03)
    rx, ry = w * rng.uniform(0.32, 0.46), h * rng.uniform(0.28, 0.44)
    body = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1
    arr = np.where(body, rng.uniform(90, 140), rng.uniform(0, 15)).astype(np.float32)
    for _ in range(rng.integers(3, 8)):
        ox, oy = cx + rng.normal(0, rx * 0.4), cy + rng.normal(0, ry * 0.4)
        orx, ory = rx * rng.uniform(0.08, 0.3), ry * rng.uniform(0.08, 0.3)
        organ = ((xx - ox) / orx) ** 2 + ((yy - oy) / ory) ** 2 <= 1
        arr[organ & body] = rng.uniform(40, 230)
    arr += _noise(rng, w, h, rng.uniform(5, 25), rng.uniform(0.5, 2))
    return array_to_rgb(arr)


def radiograph(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """X-ray-like: smooth gradients with rib-like arcs."""
    xx = np.mgrid[0:h, 0:w][1].astype(np.float32)
    arr = 60 + 80 * np.exp(-(((xx - w / 2) / (w * 0.35)) ** 2)) + _noise(rng, w, h, 30, 6)
    img = array_to_rgb(arr)
    draw = ImageDraw.Draw(img)
    for i in range(rng.integers(4, 10)):
        y = h * (0.15 + i * 0.08)
        draw.arc((w * 0.05, y, w * 0.5, y + h * 0.25), 200, 340, fill=(200, 200, 200), width=3)
        draw.arc((w * 0.5, y, w * 0.95, y + h * 0.25), 200, 340, fill=(200, 200, 200), width=3)
    return img.filter(ImageFilter.GaussianBlur(1.2))


def ultrasound(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A fan-shaped speckle sector on black."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = np.arctan2(xx - w / 2, yy + h * 0.1)
    radius = np.hypot(xx - w / 2, yy + h * 0.1)
    sector = (np.abs(angle) < rng.uniform(0.5, 0.8)) & (radius < h * 1.05) & (radius > h * 0.15)
    speckle = rng.gamma(1.5, 40, (h, w)).astype(np.float32)
    arr = np.where(sector, speckle * rng.uniform(0.6, 1.2), 0)
    return array_to_rgb(arr).filter(ImageFilter.GaussianBlur(0.8))


def histology(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """H&E-like: pink stroma, purple nuclei, pale lumens."""
    base = np.array([rng.uniform(220, 245), rng.uniform(160, 200), rng.uniform(190, 220)])
    arr = np.ones((h, w, 3), np.float32) * base + _noise(rng, w, h, 25, 3)[..., None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(2, 6)):
        x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(w * 0.05, w * 0.18)
        draw.ellipse((x - r, y - r * 0.7, x + r, y + r * 0.7), fill=(245, 235, 240))
    for _ in range(int(w * h / rng.uniform(150, 400))):
        x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1.5, 4.5)
        shade = rng.uniform(60, 120)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=(int(shade), 30, int(shade + 60)))
    return img.filter(ImageFilter.GaussianBlur(0.6))


def fluorescence(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Dark field with glowing cells in one or two channels."""
    arr = np.zeros((h, w, 3), np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    channels = rng.choice(3, size=rng.integers(1, 3), replace=False)
    for _ in range(rng.integers(5, 40)):
        x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, max(4, w * 0.08))
        blob = np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * r * r)) * rng.uniform(120, 255)
        arr[..., rng.choice(channels)] += blob
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def fundus(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Retina-like: an orange disc on black with branching dark vessels and a bright disc."""
    img = Image.new("RGB", (w, h), (0, 0, 0))
    draw = ImageDraw.Draw(img)
    r = min(w, h) * rng.uniform(0.42, 0.5)
    cx, cy = w / 2, h / 2
    color = (int(rng.uniform(180, 230)), int(rng.uniform(70, 110)), int(rng.uniform(20, 50)))
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)
    dx = cx + r * rng.uniform(-0.5, 0.5)
    for _ in range(rng.integers(6, 12)):
        x, y, a = dx, cy, rng.uniform(0, 2 * math.pi)
        for _ in range(25):
            nx, ny = x + math.cos(a) * r * 0.06, y + math.sin(a) * r * 0.06
            if math.hypot(nx - cx, ny - cy) > r * 0.97:
                break
            draw.line((x, y, nx, ny), fill=(110, 20, 10), width=max(1, int(r * 0.015)))
            x, y, a = nx, ny, a + rng.normal(0, 0.25)
    od = r * 0.14
    draw.ellipse((dx - od, cy - od, dx + od, cy + od), fill=(250, 230, 160))
    return img.filter(ImageFilter.GaussianBlur(1))


def dermoscopy(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Skin tone with a brown irregular lesion, sometimes a dark vignette."""
    skin = np.array([rng.uniform(190, 240), rng.uniform(140, 190), rng.uniform(120, 170)])
    arr = np.ones((h, w, 3), np.float32) * skin + _noise(rng, w, h, 12, 4)[..., None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    cx, cy = w * rng.uniform(0.35, 0.65), h * rng.uniform(0.35, 0.65)
    points = []
    for k in range(24):
        a = 2 * math.pi * k / 24
        rad = min(w, h) * rng.uniform(0.15, 0.32)
        points.append((cx + rad * math.cos(a), cy + rad * math.sin(a)))
    draw.polygon(points, fill=(int(rng.uniform(60, 120)), int(rng.uniform(30, 70)), 20))
    return img.filter(ImageFilter.GaussianBlur(2))


def endoscopy(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Red-pink mucosa around a dark lumen, often in a rounded frame."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    lx, ly = w * rng.uniform(0.3, 0.7), h * rng.uniform(0.3, 0.7)
    d = np.hypot(xx - lx, yy - ly) / max(w, h)
    red = np.clip(60 + 400 * d, 0, 235)
    arr = np.stack([red, red * 0.45, red * 0.4], -1) + _noise(rng, w, h, 15, 5)[..., None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if rng.random() < 0.5:
        mask = Image.new("L", (w, h), 0)
        ImageDraw.Draw(mask).ellipse((-w * 0.1, -h * 0.1, w * 1.1, h * 1.1), fill=255)
        img = Image.composite(img, Image.new("RGB", (w, h)), mask)
    return img


def gel(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Western blot / gel: dark bands in lanes on a light background (or inverted)."""
    img = Image.new("L", (w, h), int(rng.uniform(200, 245)))
    draw = ImageDraw.Draw(img)
    lanes = int(rng.integers(3, 10))
    for lane in range(lanes):
        x0 = w * (lane + 0.15) / lanes
        x1 = w * (lane + 0.85) / lanes
        for _ in range(rng.integers(1, 5)):
            y = rng.uniform(0.1, 0.9) * h
            draw.rectangle((x0, y, x1, y + h * 0.03), fill=int(rng.uniform(20, 120)))
    img = img.filter(ImageFilter.GaussianBlur(1.5))
    if rng.random() < 0.3:
        img = Image.eval(img, lambda v: 255 - v)
    return img.convert("RGB")


def chart(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A line, bar or scatter plot with axes and tick labels, drawn by matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    dpi = 100
    fig = plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    ax = fig.add_subplot(111)
    kind = rng.integers(3)
    x = np.arange(int(rng.integers(4, 12)))
    for _ in range(rng.integers(1, 4)):
        y = np.cumsum(rng.normal(0, 1, len(x))) + rng.uniform(0, 5)
        if kind == 0:
            ax.plot(x, y, marker="o", markersize=3)
        elif kind == 1:
            ax.bar(x + rng.uniform(-0.2, 0.2), np.abs(y), width=0.3)
        else:
            ax.scatter(rng.normal(0, 1, 40), rng.normal(0, 1, 40), s=6)
    ax.tick_params(labelsize=6)
    ax.set_xlabel(str(rng.choice(["Time (days)", "Dose (mg)", "Age", "Week"])), fontsize=7)
    ax.set_ylabel(str(rng.choice(["Survival (%)", "Expression", "Score", "Volume"])), fontsize=7)
    with warnings.catch_warnings():  # tiny panels cannot fit every tick label; fine
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(pad=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB").resize((w, h))


def _rounded_box(draw: ImageDraw.ImageDraw, box: tuple[float, ...], color: tuple) -> None:
    """A box with 6 px corners; PIL raises for such corners on a box a few pixels high (a
    plate's tiny panel), which gets corners half its short side instead. Tried on a 1 px
    scratch image first, so every box PIL drew before is drawn as before, byte for byte."""
    radius = 6
    try:
        ImageDraw.Draw(Image.new("RGB", (1, 1))).rounded_rectangle(box, radius=6, width=2)
    except ValueError:
        radius = int(min(box[2] - box[0], box[3] - box[1]) / 2)
    draw.rounded_rectangle(box, radius=radius, outline=color, width=2)


def diagram(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Boxes with words joined by arrows, on white or a pale colour."""
    bg = (255, 255, 255) if rng.random() < 0.7 else tuple(int(v) for v in rng.uniform(220, 250, 3))
    img = Image.new("RGB", (w, h), bg)
    draw = ImageDraw.Draw(img)
    face = font(max(8, h // 14))
    boxes = []
    for _ in range(rng.integers(2, 6)):
        bw, bh = w * rng.uniform(0.2, 0.4), h * rng.uniform(0.12, 0.22)
        x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
        color = tuple(int(v) for v in rng.uniform(60, 220, 3))
        _rounded_box(draw, (x, y, x + bw, y + bh), color)
        draw.text(
            (x + 4, y + 4),
            str(rng.choice(["Cell", "Gene", "Tumor", "Input", "Dose"])),
            fill=(30, 30, 30),
            font=face,
        )
        boxes.append((x + bw / 2, y + bh / 2))
    for (x0, y0), (x1, y1) in itertools.pairwise(boxes):
        draw.line((x0, y0, x1, y1), fill=(40, 40, 40), width=2)
    return img


PROCEDURAL: dict[str, Maker] = {
    "ct": ct_slice,
    "radiograph": radiograph,
    "ultrasound": ultrasound,
    "histology": histology,
    "fluorescence": fluorescence,
    "fundus": fundus,
    "dermoscopy": dermoscopy,
    "endoscopy": endoscopy,
    "gel": gel,
    "chart": chart,
    "diagram": diagram,
}

WHITE_KINDS = frozenset({"chart", "diagram", "gel"})  # panels whose edges are mostly white


def decorate(rng: np.random.Generator, img: Image.Image) -> Image.Image:
    """In-panel clutter real figures have: arrows, words, scale bars, thin borders."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    if rng.random() < 0.35:  # an arrow
        x, y = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
        dx, dy = rng.uniform(-0.15, 0.15) * w, rng.uniform(-0.15, 0.15) * h
        color = (255, 255, 255) if rng.random() < 0.6 else (255, 220, 0)
        draw.line((x + dx, y + dy, x, y), fill=color, width=max(2, w // 80))
        draw.polygon(
            [
                (x, y),
                (x + dx * 0.3 - dy * 0.15, y + dy * 0.3 + dx * 0.15),
                (x + dx * 0.3 + dy * 0.15, y + dy * 0.3 - dx * 0.15),
            ],
            fill=color,
        )
    if rng.random() < 0.3:  # a word
        face: ImageFont.FreeTypeFont = font(max(8, h // 12), bold=True)
        draw.text(
            (rng.uniform(0.3, 0.7) * w, rng.uniform(0.1, 0.8) * h),
            str(rng.choice(["Lumen", "*", "T", "L", "R", "→"])),
            fill=(255, 255, 255),
            font=face,
        )
    if rng.random() < 0.25:  # a scale bar
        bw = w * rng.uniform(0.15, 0.3)
        draw.rectangle((w * 0.9 - bw, h * 0.92, w * 0.9, h * 0.94), fill=(255, 255, 255))
    if rng.random() < 0.2:  # a thin frame
        draw.rectangle((0, 0, w - 1, h - 1), outline=(0, 0, 0), width=1)
    return img


class FolderPanels:
    """Real single-panel images from folders named in the config, sampled uniformly."""

    SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")

    def __init__(self, folders: list[str | Path]):
        self.paths = sorted(
            p
            for folder in folders
            for p in Path(folder).rglob("*")
            if p.suffix.lower() in self.SUFFIXES and p.is_file()
        )

    def __len__(self) -> int:
        return len(self.paths)

    def sample(self, rng: np.random.Generator, w: int, h: int) -> Image.Image:
        with Image.open(self.paths[int(rng.integers(len(self.paths)))]) as img:
            return img.convert("RGB").resize((w, h))
