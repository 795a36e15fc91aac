"""Composing one figure from panels, with exact truth.

Rows of cells of unequal widths and heights (and spanning panels), the figure's style, a panel
rendered into each cell, its letter placed beside or above its ink and measured from the drawn
glyph, and a legend shared by the panels that belongs to none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from modeldev.synth.literature.kinds import CHARTS, KINDS, Box, choose_kind, ink_box, render_panel
from modeldev.synth.literature.style import (
    GROUPS,
    PALETTES,
    FigureRc,
    Style,
    bold_letter_font,
    families,
)
from ray_jobs.figures.fonts import font_path


def _layout(rng: np.random.Generator, n: int, width: int, gutter: int, pad: int) -> list[Box]:
    """Cells for ``n`` panels: rows of 1-4 panels of unequal widths and row heights, and
    sometimes a block of a tall panel beside a stack of two (a spanning panel)."""
    counts: list[int] = []
    left = n
    while left:
        k = int(min(left, rng.choice([1, 2, 2, 3, 3, 3, 4, 4])))
        counts.append(k)
        left -= k
    cells: list[Box] = []
    y = pad
    inner = width - 2 * pad
    for k in counts:
        if k == 3 and rng.random() < 0.3:  # tall panel + stack of two
            row_h = int(inner * rng.uniform(0.45, 0.7))
            wl = int(inner * rng.uniform(0.35, 0.6))
            half = (row_h - gutter) // 2
            cells.append((pad, y, pad + wl, y + row_h))
            cells.append((pad + wl + gutter, y, width - pad, y + half))
            cells.append((pad + wl + gutter, y + half + gutter, width - pad, y + row_h))
        else:
            weights = rng.uniform(0.6, 1.6, k)
            widths = weights / weights.sum() * (inner - gutter * (k - 1))
            row_h = (
                int(inner / k * rng.uniform(0.55, 0.95))
                if k > 1
                else int(inner * rng.uniform(0.3, 0.6))
            )
            x = float(pad)
            for wd in widths:
                cells.append((int(x), y, int(x + wd), y + row_h))
                x += wd + gutter
        y += row_h + gutter
    return cells


@dataclass
class LiteratureFigure:
    image: Image.Image
    panels: list[Box]
    labels: list[Box | None]
    label_texts: list[str | None]
    kinds: list[str]
    params: dict
    cells: list[Box]  # the layout's cell of each panel: its box lies in it


_COUNT_P = np.array([14, 14, 16, 12, 12, 8, 8, 5, 4, 4, 3], dtype=float)
_COUNT_P /= _COUNT_P.sum()


def _label_text(scheme: str, i: int) -> str:
    letter = chr(ord("a") + i)
    return {"A": letter.upper(), "a": letter, "(a)": f"({letter})", "(A)": f"({letter.upper()})"}[
        scheme
    ]


def make_literature_figure(
    rng: np.random.Generator,
    width: int | None = None,
    n_panels: int | None = None,
    kinds: list[str] | None = None,
) -> LiteratureFigure:
    """One figure at full size with exact boxes (panel = its ink and its letter; letter = the
    glyph box). ``width``, ``n_panels`` and ``kinds`` (cycled) fix what is otherwise drawn."""
    width = int(width or rng.integers(800, 2401))
    single = n_panels == 1 or (n_panels is None and rng.random() < 0.15)
    # most figures have 2-8 panels, some up to 12
    n = 1 if single else int(n_panels or rng.choice(np.arange(2, 13), p=_COUNT_P))
    st = Style(
        dpi=width / rng.uniform(6.5, 7.5),
        font_pt=float(rng.uniform(6, 8.5)),
        family=str(rng.choice(list(families()))),
        palette=list(PALETTES[int(rng.integers(len(PALETTES)))]),
        despine=bool(rng.random() < 0.7),
    )
    gutter = int(rng.choice([0, 2, 4, 6, 10, 14, 20]))
    pad = int(rng.choice([0, 4, 10, 20]))
    cells = _layout(rng, n, width, gutter, pad)
    shared_legend = not single and rng.random() < 0.2
    legend_w = int(10 * st.fs) if shared_legend else 0
    height = max(c[3] for c in cells) + pad
    page = Image.new("RGB", (width + legend_w, height), (255, 255, 255))
    scheme = str(rng.choice(["A", "A", "a", "a", "(a)", "(A)"]))
    # letters 1.3-2.2 times the body text, 14-36 px once saved at 1024 px
    saved = 1024 / max(width + legend_w, height)
    letter_px = int(np.clip(rng.uniform(1.3, 2.2) * st.fs, 14 / saved, 36 / saved))
    letter_font = bold_letter_font(letter_px, bool(rng.random() < 0.5))
    outside = bool(rng.random() < 0.4)  # the letter in a band above the plot, not beside it
    draw = ImageDraw.Draw(page)
    panels: list[Box] = []
    labels: list[Box | None] = []
    texts: list[str | None] = []
    drawn_kinds: list[str] = []
    theme = str(rng.choice(list(KINDS))) if rng.random() < 0.25 else None
    with FigureRc(st):
        for i, (x0, y0, x1, y1) in enumerate(cells):
            text = None if single else _label_text(scheme, i)
            bb = draw.textbbox((0, 0), text or "A", font=letter_font)
            w, h = x1 - x0, y1 - y0 - bb[3] - 4
            kind = kinds[i % len(kinds)] if kinds else choose_kind(rng, w, h, st.fs, theme)
            # the content is drawn below a band of the letter's height and then slid up as
            # far as the letter's corner stays clear of its ink: beside the plot's top-left
            # corner where there is room, above it where not (and above pictures: blots,
            # micrographs, tables, ... always carry their letter above them)
            band = bb[3] + 4 if text is not None else 0
            h = y1 - y0 - band
            arr = render_panel(rng, kind, w, h, st)
            lx = x0 + int(rng.integers(0, 4))
            ly = y0 + int(rng.integers(0, 3))
            shift = band
            if text is not None and not outside and kind in CHARTS:
                gb = draw.textbbox((lx, ly), text, font=letter_font)
                cols = arr[:, max(0, gb[0] - x0 - 2) : gb[2] - x0 + 3].min(axis=2) < 245
                rows = np.flatnonzero(cols.any(axis=1))
                first = int(rows[0]) if len(rows) else h
                shift = int(np.clip(gb[3] + 3 - y0 - first, 0, band))
            page.paste(Image.fromarray(arr), (x0, y0 + shift))
            ink = ink_box(arr)
            box = (
                (x0, y0 + shift, x1, y1)
                if ink is None
                else (x0 + ink[0], y0 + shift + ink[1], x0 + ink[2], y0 + shift + ink[3])
            )
            label = None
            if text is not None:
                draw.text((lx, ly), text, font=letter_font, fill=(0, 0, 0))
                gb = draw.textbbox((lx, ly), text, font=letter_font)
                label = (gb[0], gb[1], gb[2], gb[3])
                box = (
                    min(box[0], label[0]),
                    min(box[1], label[1]),
                    max(box[2], label[2]),
                    max(box[3], label[3]),
                )
            panels.append(box)
            labels.append(label)
            texts.append(text)
            drawn_kinds.append(kind)
        if shared_legend:
            _draw_shared_legend(rng, page, st, width, height)
    if single:  # one panel covering all the ink
        ink = ink_box(np.asarray(page))
        panels = [ink or (0, 0, page.width, page.height)]
    params = {
        "width": page.width,
        "dpi": round(st.dpi, 2),
        "font_pt": round(st.font_pt, 2),
        "family": st.family,
        "gutter": gutter,
        "pad": pad,
        "scheme": None if single else scheme,
        "letter_px": letter_px,
        "label_placement": None if single else ("outside" if outside else "inside"),
        "shared_legend": shared_legend,
        "panel_kinds": drawn_kinds,
    }
    return LiteratureFigure(page, panels, labels, texts, drawn_kinds, params, cells)


def _draw_shared_legend(
    rng: np.random.Generator, page: Image.Image, st: Style, x: int, height: int
) -> None:
    """A legend shared by the figure's panels, right of them: ink of no panel."""
    draw = ImageDraw.Draw(page)
    size = max(10, int(st.fs))
    face = ImageFont.truetype(str(font_path()), size=size)
    y = int(rng.uniform(0.1, 0.5) * height)
    for i in range(int(rng.integers(2, 5))):
        draw.rectangle((x + 6, y, x + 6 + size, y + size), fill=st.palette[i])
        draw.text((x + 12 + size, y), str(GROUPS[i]), font=face, fill=(0, 0, 0))
        y += int(size * 1.6)
