"""Panel makers for the taxonomy classes the figure generator's makers do not draw.

The modality classifier needs at least one picture of every L2 class it may be asked about,
or it will call an MRI slice a gel because it has no MRI class. These makers add them: MRI,
PET / nuclear, angiography, OCT, electron microscopy, cytology, clinical photographs,
non-clinical photographs, tables and text, molecular structures. Like ``panels.py`` they are
procedural (numpy and PIL, no network) and are not medical images: they give each class a
look of its own so that the classifier has a place to put it. The figure generator does not
use them (its output for a seed is unchanged); only the classifier's data writer does.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from modeldev.synth.panels import Maker, array_to_rgb
from ray_jobs.figures.fonts import font


def _blur(arr: np.ndarray, radius: float) -> np.ndarray:
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return np.asarray(img.filter(ImageFilter.GaussianBlur(radius)), dtype=np.float32)


def _smooth_noise(rng: np.random.Generator, w: int, h: int, radius: float) -> np.ndarray:
    """Zero-mean noise in about [-1, 1] with structure at ``radius`` pixels."""
    field = _blur(np.clip(rng.normal(128, 60, (h, w)), 0, 255), radius) - 128
    return field / max(1.0, float(np.abs(field).max()))


def mri_slice(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Brain-MR-like: a skull ring, folded grey/white matter, dark or bright CSF (T1 / T2)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = w / 2 + rng.normal(0, w * 0.02), h / 2 + rng.normal(0, h * 0.02)
    rx, ry = w * rng.uniform(0.3, 0.42), h * rng.uniform(0.34, 0.46)
    d = np.sqrt(((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2)
    theta = np.arctan2(yy - cy, xx - cx)
    folds = np.sin(
        theta * rng.integers(8, 20) + d * rng.uniform(6, 14) + 12 * _smooth_noise(rng, w, h, 4)
    )
    t2 = rng.random() < 0.5
    grey, white, csf = (110, 80, 230) if t2 else (120, 170, 30)
    arr = np.zeros((h, w), np.float32)
    brain = d < 0.92
    arr[brain] = np.where(folds[brain] * (1 - d[brain]) > -0.1, grey, white)
    ventricles = (np.abs(xx - cx) < rx * 0.18) & (np.abs(yy - cy) < ry * 0.3) & (folds > 0.3)
    arr[ventricles & brain] = csf
    arr[(d >= 0.95) & (d < 1.05)] = rng.uniform(150, 230)  # scalp fat
    arr += 18 * _smooth_noise(rng, w, h, 1.2) + rng.normal(0, 4, (h, w))
    return array_to_rgb(_blur(arr, rng.uniform(0.6, 1.4)))


def pet_scan(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """PET / scintigraphy-like: a blurred body outline with hot spots, grey, inverted or hot
    colour map."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx = w / 2
    body = np.exp(-(((xx - cx) / (w * 0.22)) ** 4)) * (yy > h * 0.12)
    head = np.exp(-(((xx - cx) / (w * 0.1)) ** 2 + ((yy - h * 0.1) / (h * 0.07)) ** 2))
    arr = 0.25 * (body + head)
    for _ in range(rng.integers(3, 9)):  # bladder, heart, brain, lesions
        x, y = cx + rng.normal(0, w * 0.12), rng.uniform(0.1, 0.9) * h
        r = rng.uniform(0.02, 0.07) * max(w, h)
        arr += rng.uniform(0.4, 1.0) * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * r * r))
    arr = np.clip(arr + 0.05 * _smooth_noise(rng, w, h, 3), 0, 1)
    style = rng.integers(3)
    if style == 0:  # black on white, as whole-body scans are printed
        return array_to_rgb(255 * (1 - arr))
    if style == 1:
        return array_to_rgb(255 * arr)
    hot = np.stack([np.clip(3 * arr, 0, 1), np.clip(3 * arr - 1, 0, 1), np.clip(3 * arr - 2, 0, 1)])
    return array_to_rgb(255 * hot.transpose(1, 2, 0))


def angiogram(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """DSA-like: dark branching vessels on a flat grey background."""
    img = Image.new("L", (w, h), int(rng.uniform(150, 200)))
    draw = ImageDraw.Draw(img)
    stack = [(w * rng.uniform(0.3, 0.7), 0.0, math.pi / 2 + rng.normal(0, 0.2), 0.035 * w)]
    while stack:
        x, y, a, width = stack.pop()
        for _ in range(int(rng.integers(6, 14))):
            nx, ny = x + math.cos(a) * h * 0.04, y + math.sin(a) * h * 0.04
            draw.line((x, y, nx, ny), fill=int(rng.uniform(20, 60)), width=max(1, int(width)))
            x, y, a = nx, ny, a + rng.normal(0, 0.2)
            if width > 1.5 and rng.random() < 0.18 and len(stack) < 40:
                stack.append((x, y, a + rng.choice([-0.7, 0.7]), width * 0.65))
        width *= 0.8
    arr = np.asarray(img, np.float32) + 10 * _smooth_noise(rng, w, h, 8)
    return array_to_rgb(_blur(arr, 1.0))


def oct_scan(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Retinal OCT B-scan-like: wavy horizontal bright and dark layers with a foveal dip."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    dip = (
        h * rng.uniform(0.05, 0.15) * np.exp(-(((xx - w * rng.uniform(0.4, 0.6)) / (w * 0.1)) ** 2))
    )
    top = h * rng.uniform(0.3, 0.45) + dip + h * 0.03 * np.sin(xx / w * rng.uniform(2, 5))
    depth = yy - top
    arr = np.zeros((h, w), np.float32)
    offset = 0.0
    for _ in range(int(rng.integers(5, 9))):
        thick = h * rng.uniform(0.015, 0.05)
        layer = (depth >= offset) & (depth < offset + thick)
        arr[layer] = rng.uniform(40, 250)
        offset += thick
    arr[depth >= offset] = rng.uniform(20, 60)
    arr *= 0.6 + 0.8 * rng.gamma(2.0, 0.5, (h, w)).clip(0, 1.5) / 1.5  # speckle
    if rng.random() < 0.3:  # some scanners colour the B-scan
        heat = np.clip(arr / 255, 0, 1)
        return array_to_rgb(255 * np.stack([heat, heat**2, 1 - heat], -1))
    return array_to_rgb(_blur(arr, 0.7))


def electron_micrograph(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """TEM-like: grey granular field, membrane-bound organelles with dark rims and cristae."""
    arr = rng.uniform(120, 190) + 25 * _smooth_noise(rng, w, h, 2) + rng.normal(0, 10, (h, w))
    img = array_to_rgb(arr).convert("L")
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 10))):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.05, 0.18) * w, rng.uniform(0.03, 0.1) * h
        draw.ellipse(
            (x - rx, y - ry, x + rx, y + ry),
            fill=int(rng.uniform(150, 210)),
            outline=25,
            width=max(1, w // 100),
        )
        for k in range(int(rng.integers(2, 6))):  # cristae
            cy = y - ry + (k + 1) * 2 * ry / 7
            draw.line((x - rx * 0.7, cy, x + rx * 0.7, cy + rng.normal(0, 2)), fill=60, width=1)
    for _ in range(int(w * h / 400)):  # ribosome-like dots
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        draw.point((x, y), fill=int(rng.uniform(10, 60)))
    if rng.random() < 0.7:  # scale bar, black or white
        bw = w * rng.uniform(0.15, 0.3)
        draw.rectangle(
            (w * 0.06, h * 0.9, w * 0.06 + bw, h * 0.93), fill=0 if rng.random() < 0.5 else 255
        )
    return img.filter(ImageFilter.GaussianBlur(0.5)).convert("RGB")


def cytology(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Pap / Giemsa smear-like: scattered single cells (cytoplasm, dark nucleus) on pale glass."""
    bg = np.array([rng.uniform(225, 250), rng.uniform(225, 250), rng.uniform(225, 250)])
    arr = np.ones((h, w, 3), np.float32) * bg + 6 * _smooth_noise(rng, w, h, 5)[..., None]
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    palette = [(90, 170, 200), (230, 150, 170), (150, 120, 200), (200, 170, 210)]
    for _ in range(int(rng.integers(6, 30))):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(0.03, 0.08) * max(w, h)
        c = palette[int(rng.integers(len(palette)))]
        pts = [
            (
                x + r * rng.uniform(0.7, 1.2) * math.cos(a),
                y + r * rng.uniform(0.7, 1.2) * math.sin(a),
            )
            for a in np.linspace(0, 2 * math.pi, 10, endpoint=False)
        ]
        draw.polygon(pts, fill=c, outline=tuple(int(v * 0.8) for v in c))
        nr = r * rng.uniform(0.2, 0.45)
        nx, ny = x + rng.normal(0, r * 0.1), y + rng.normal(0, r * 0.1)
        draw.ellipse((nx - nr, ny - nr, nx + nr, ny + nr), fill=(int(rng.uniform(40, 90)), 30, 110))
    return img.filter(ImageFilter.GaussianBlur(0.8))


def clinical_photo(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """Intra-operative / gross-specimen-like: glistening red-brown tissue, green or blue drapes,
    a metal instrument, sometimes a ruler."""
    drape = np.array([rng.uniform(20, 80), rng.uniform(110, 170), rng.uniform(110, 170)])
    arr = np.ones((h, w, 3), np.float32) * drape + 15 * _smooth_noise(rng, w, h, 8)[..., None]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = w * rng.uniform(0.3, 0.7), h * rng.uniform(0.3, 0.7)
    blob = (
        ((xx - cx) / (w * rng.uniform(0.2, 0.4))) ** 2
        + ((yy - cy) / (h * rng.uniform(0.2, 0.4))) ** 2
        + 0.4 * _smooth_noise(rng, w, h, 10)
    ) < 1
    tissue = np.array([rng.uniform(140, 200), rng.uniform(40, 90), rng.uniform(40, 80)])
    shade = 40 * _smooth_noise(rng, w, h, 3)[..., None]
    arr[blob] = (tissue + shade)[blob]
    spec = (rng.random((h, w)) < 0.004) & blob  # specular highlights
    arr[_blur(255 * spec.astype(np.float32), 1.2) > 20] = 245
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    if rng.random() < 0.6:
        x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
        draw.line(
            (x0, y0, x0 + rng.normal(0, w * 0.4), y0 + rng.normal(0, h * 0.4)),
            fill=(200, 200, 210),
            width=max(2, w // 30),
        )
    if rng.random() < 0.4:  # a ruler along one edge
        draw.rectangle((0, h * 0.88, w, h), fill=(235, 235, 220))
        for k in range(0, w, max(3, w // 30)):
            draw.line((k, h * 0.88, k, h * 0.93), fill=(0, 0, 0), width=1)
    return img.filter(ImageFilter.GaussianBlur(0.7))


def lab_photo(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A non-clinical photograph: a device or animal-room scene, bench-top colours, hard edges."""
    top, bottom = rng.uniform(150, 240, 3), rng.uniform(60, 160, 3)
    t = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    arr = top * (1 - t) + bottom * t + 10 * _smooth_noise(rng, w, h, 12)[..., None]
    img = Image.fromarray(np.clip(arr * np.ones((1, w, 1)), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 6))):  # boxes, cylinders, screens
        x, y = rng.uniform(0, w * 0.8), rng.uniform(0, h * 0.8)
        bw, bh = rng.uniform(0.1, 0.4) * w, rng.uniform(0.1, 0.4) * h
        colour = tuple(int(v) for v in rng.uniform(0, 255, 3))
        if rng.random() < 0.5:
            draw.rectangle((x, y, x + bw, y + bh), fill=colour, outline=(20, 20, 20))
        else:
            draw.ellipse((x, y, x + bw, y + bh), fill=colour)
        draw.rectangle(
            (x + bw * 0.1, y + bh * 0.1, x + bw * 0.3, y + bh * 0.2), fill=(240, 240, 240)
        )
    return img.filter(ImageFilter.GaussianBlur(1.0))


_TABLE_WORDS = (
    "Age",
    "Sex",
    "n (%)",
    "Mean",
    "SD",
    "p value",
    "Group",
    "Total",
    "HR",
    "95% CI",
    "Control",
    "Case",
    "0.03",
    "12 (24)",
    "45.2",
    "<0.001",
    "Yes",
    "No",
)


def table_text(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A table (rows of cells with rules) or a block of text lines, dark ink on white."""
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    size = max(7, int(h / rng.uniform(10, 20)))
    face = font(size, bold=bool(rng.random() < 0.2), serif=bool(rng.random() < 0.5))
    if rng.random() < 0.6:
        rows, cols = int(rng.integers(4, 12)), int(rng.integers(2, 6))
        rh = h / rows
        for r in range(rows):
            if r in (0, 1) or r == rows - 1 or rng.random() < 0.15:
                draw.line((0, r * rh, w, r * rh), fill=(0, 0, 0), width=1)
            for c in range(cols):
                word = _TABLE_WORDS[int(rng.integers(len(_TABLE_WORDS)))]
                draw.text((c * w / cols + 2, r * rh + 1), word, fill=(20, 20, 20), font=face)
    else:
        y = size * 0.5
        while y < h - size:
            words = " ".join(
                _TABLE_WORDS[int(i)] for i in rng.integers(len(_TABLE_WORDS), size=12)
            ).lower()
            draw.text((size * 0.5, y), words, fill=(20, 20, 20), font=face)
            y += size * rng.uniform(1.2, 1.6)
    return img


def molecular_structure(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A ball-and-stick molecule, a skeletal formula or a ribbon-like protein on a plain field."""
    dark = rng.random() < 0.25
    img = Image.new("RGB", (w, h), (0, 0, 0) if dark else (255, 255, 255))
    draw = ImageDraw.Draw(img)
    style = rng.integers(3)
    if style == 2:  # ribbon: a thick smooth helix-like curve in rainbow colours
        t = np.linspace(0, 1, 200)
        xs = w * (0.1 + 0.8 * t)
        ys = h * (0.5 + 0.3 * np.sin(t * rng.uniform(8, 20)) * np.cos(t * rng.uniform(1, 3)))
        for k in range(len(t) - 1):
            hue = np.array(
                [math.sin(6.28 * t[k]), math.sin(6.28 * t[k] + 2), math.sin(6.28 * t[k] + 4)]
            )
            colour = tuple(int(v) for v in 128 + 120 * hue)
            draw.line((xs[k], ys[k], xs[k + 1], ys[k + 1]), fill=colour, width=max(3, w // 25))
        return img
    atoms = [(w / 2, h / 2)]
    bonds = []
    for _ in range(int(rng.integers(6, 20))):
        px, py = atoms[int(rng.integers(len(atoms)))]
        a = rng.integers(6) * math.pi / 3 + math.pi / 6
        length = min(w, h) * rng.uniform(0.1, 0.16)
        nx, ny = px + length * math.cos(a), py + length * math.sin(a)
        if 0 < nx < w and 0 < ny < h:
            bonds.append((px, py, nx, ny))
            atoms.append((nx, ny))
    ink = (230, 230, 230) if dark else (20, 20, 20)
    for x0, y0, x1, y1 in bonds:
        draw.line((x0, y0, x1, y1), fill=ink, width=max(1, w // 60))
    label = font(max(7, h // 14), bold=True)
    colours = [(200, 30, 30), (30, 30, 200), (60, 60, 60), (220, 180, 0)]
    for x, y in atoms:
        if style == 0:  # ball and stick
            r = min(w, h) * rng.uniform(0.025, 0.05)
            draw.ellipse((x - r, y - r, x + r, y + r), fill=colours[int(rng.integers(4))])
        elif rng.random() < 0.25:  # skeletal formula with heteroatom letters
            draw.text(
                (x - 3, y - 5), str(rng.choice(["O", "N", "OH", "S", "Cl"])), fill=ink, font=label
            )
    return img


MODALITY_MAKERS: dict[str, Maker] = {
    "mri": mri_slice,
    "nuclear": pet_scan,
    "angiography": angiogram,
    "oct": oct_scan,
    "electron_microscopy": electron_micrograph,
    "cytology": cytology,
    "clinical_photo": clinical_photo,
    "photo_nonclinical": lab_photo,
    "table_text": table_text,
    "molecular_structure": molecular_structure,
}
"""Taxonomy L2 class → maker, for the classes ``panels.PROCEDURAL`` has no maker for."""
