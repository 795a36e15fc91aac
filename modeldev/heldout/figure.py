"""Compose a held-out compound figure: page, panels, insets, labels, furniture, degradation.

The truth is exact: a panel is one guillotine cell (an inset inside it is part of it), and
figure furniture (a title above, a colour legend beside, caption lines below) lies outside
every panel box. Touching panels on a page of their own colour get a thin frame, since without
any boundary no annotator could place the cut either.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from modeldev.heldout.content import PAINTERS, WHITE, face
from modeldev.heldout.layout import Rect, sample_page

SCHEMES = ("A", "a", "(a)", "(A)", "a1", "i", "1", "A.")


@dataclass
class HeldoutFigure:
    name: str
    width: int
    height: int
    panels: list[Rect]  # reading order: rows top to bottom, then left to right
    labels: list[Rect | None] = field(default_factory=list)
    label_texts: list[str | None] = field(default_factory=list)
    params: dict = field(default_factory=dict)


def _roman(n: int) -> str:
    out = ""
    for value, numeral in ((10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out, n = out + numeral, n - value
    return out


def label_for(scheme: str, index: int) -> str:
    letter = chr(ord("a") + index % 26)
    return {
        "A": letter.upper(),
        "a": letter,
        "(a)": f"({letter})",
        "(A)": f"({letter.upper()})",
        "a1": f"a{index + 1}",
        "i": _roman(index + 1),
        "1": str(index + 1),
        "A.": f"{letter.upper()}.",
    }[scheme]


def _reading_order(cells: list[Rect]) -> list[Rect]:
    return sorted(cells, key=lambda c: (c[1], c[0]))


def _inset(rng: np.random.Generator, panel: Image.Image) -> None:
    """A magnified detail in a corner, with a border: still one panel."""
    w, h = panel.size
    iw, ih = int(w * rng.uniform(0.25, 0.4)), int(h * rng.uniform(0.25, 0.4))
    kind = str(rng.choice(["photo", "scan", "micrograph", "heatmap"]))
    detail = PAINTERS[kind](rng, iw, ih)
    x = w - iw - 4 if rng.random() < 0.6 else 4
    y = 4 if rng.random() < 0.5 else h - ih - 4
    panel.paste(detail, (x, y))
    colour = (255, 255, 255) if rng.random() < 0.5 else (0, 0, 0)
    ImageDraw.Draw(panel).rectangle((x - 1, y - 1, x + iw, y + ih), outline=colour, width=2)


def _degrade(rng: np.random.Generator, canvas: Image.Image) -> tuple[Image.Image, int]:
    """Scan noise, blur, resampling and a JPEG quality anywhere from poor to good."""
    if rng.random() < 0.4:
        arr = np.asarray(canvas, dtype=np.float32) + rng.normal(0, rng.uniform(3, 10), (1, 1, 1))
        arr = arr + rng.normal(0, rng.uniform(2, 8), arr.shape)
        canvas = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if rng.random() < 0.3:
        canvas = canvas.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.0)))
    if rng.random() < 0.3:
        w, h = canvas.size
        f = rng.uniform(0.5, 0.8)
        canvas = canvas.resize((int(w * f), int(h * f))).resize((w, h))
    return canvas, int(rng.integers(35, 92))


def make_heldout_figure(seed: int, index: int) -> tuple[bytes, HeldoutFigure]:
    """Figure ``index`` of held-out seed ``seed``: JPEG bytes and exact truth."""
    rng = np.random.default_rng([seed, index, 0x4E1D])
    page = sample_page(rng)
    background = [(255, 255, 255), (0, 0, 0), (236, 236, 236)][
        int(rng.choice(3, p=[0.8, 0.12, 0.08]))
    ]
    title = int(rng.integers(24, 40)) if rng.random() < 0.25 else 0
    legend = int(rng.integers(50, 90)) if rng.random() < 0.2 else 0
    caption = int(rng.integers(18, 40)) if rng.random() < 0.25 else 0
    outside = rng.random() < 0.25
    band = int(rng.integers(16, 26)) if outside else 0
    pad = int(rng.choice([0, 0, 4, 12]))
    ox, oy = pad, pad + title + band
    width = page.width + 2 * pad + legend
    height = page.height + oy + pad + caption
    canvas = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(canvas)
    ink = (0, 0, 0) if background != (0, 0, 0) else (255, 255, 255)
    theme = str(rng.choice(list(PAINTERS))) if rng.random() < 0.35 else None
    cells = _reading_order(page.cells)
    # labels outside a panel sit in the band above its row: leave that band empty
    if outside:
        cells = [(x0, y0 + band * (y0 > 0), x1, y1) for x0, y0, x1, y1 in cells]
        cells = [c for c in cells if c[3] - c[1] >= 40] or cells
    panels: list[Rect] = []
    kinds = []
    insets = 0
    for x0, y0, x1, y1 in cells:
        box = (x0 + ox, y0 + oy, x1 + ox, y1 + oy)
        kind = theme or str(rng.choice(list(PAINTERS)))
        img = PAINTERS[kind](rng, x1 - x0, y1 - y0)
        if rng.random() < 0.12 and min(img.size) > 140:
            _inset(rng, img)
            insets += 1
        framed = page.gutter < 4 and (kind in WHITE or background != (255, 255, 255))
        if framed or rng.random() < 0.15:
            ImageDraw.Draw(img).rectangle(
                (0, 0, img.width - 1, img.height - 1), outline=(60, 60, 60)
            )
        canvas.paste(img, box[:2])
        panels.append(box)
        kinds.append(kind)
    if title:
        draw.text((8, 4), "Figure 2  Outcomes by group", fill=ink, font=face(title * 0.6, 1))
    if legend:  # a colour bar with its ticks, outside every panel
        x = width - legend + 10
        for k in range(page.height - 20):
            v = int(255 * k / max(1, page.height - 20))
            draw.line((x, oy + 10 + k, x + 14, oy + 10 + k), fill=(v, 40, 255 - v))
        for k in range(5):
            y = oy + 10 + (page.height - 20) * k / 4
            draw.text((x + 18, y - 5), f"{k / 4:.2f}", fill=ink, font=face(10))
    if caption:
        draw.text(
            (6, height - caption + 2),
            "Fig. 2. Panels show the cohort described in the text.",
            fill=ink,
            font=face(caption * 0.5, 2),
        )
    scheme = str(rng.choice(SCHEMES))
    labelled = len(panels) > 1 and rng.random() < 0.85
    labels: list[Rect | None] = []
    texts: list[str | None] = []
    size = int(rng.integers(12, 26))
    font_index = int(rng.integers(4))
    for i, (x0, y0, _x1, y1) in enumerate(panels):
        if not labelled:
            labels.append(None)
            texts.append(None)
            continue
        text = label_for(scheme, i)
        font = face(min(size, max(9, (y1 - y0) // 4)), font_index)
        x, y = (x0 + 2, y0 - band + 1) if outside else (x0 + 5, y0 + 4)
        box = draw.textbbox((x, y), text, font=font)
        if not outside:
            crop = np.asarray(canvas.crop(box).convert("L"))
            light = crop.size == 0 or crop.mean() > 120
            colour = (0, 0, 0) if light else (255, 255, 255)
        else:
            colour = ink
        draw.text((x, y), text, fill=colour, font=font)
        labels.append((box[0] - 1, box[1] - 1, box[2] + 1, box[3] + 1))
        texts.append(text)
    canvas, quality = _degrade(rng, canvas)
    out = io.BytesIO()
    canvas.save(out, format="JPEG", quality=quality)
    figure = HeldoutFigure(
        name=f"heldout-{seed}-{index:05d}",
        width=width,
        height=height,
        panels=panels,
        labels=labels,
        label_texts=texts,
        params={
            "gutter": page.gutter,
            "gutter_style": page.style,
            "background": list(background),
            "kinds": kinds,
            "insets": insets,
            "title": bool(title),
            "legend": bool(legend),
            "caption": bool(caption),
            "labels_outside": outside,
            "scheme": scheme if labelled else None,
            "jpeg_quality": quality,
        },
    )
    return out.getvalue(), figure
