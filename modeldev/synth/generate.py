"""Compose synthetic compound figures and write them as a YOLO dataset plus COCO JSON.

Figure ``i`` of seed ``s`` depends only on ``(s, i)`` (numpy SeedSequence), so the output is
byte-identical however many worker processes write it and in whatever order.

Output::

    images/{train,val}/synth-000123.jpg
    labels/{train,val}/synth-000123.txt     YOLO: class cx cy w h (normalised); 0 panel, 1 label
    meta/synth-000123.json                  the figure's parameters and exact boxes
    annotations/{train,val}.json            COCO (categories 1 panel, 2 label)
    data.yaml                               the ultralytics dataset file
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from rich.progress import track

from modeldev.letters.fonts import face as reader_face
from modeldev.letters.fonts import faces
from modeldev.synth.hard_panels import HARD, HARD_WHITE
from modeldev.synth.labels import SCHEMES, label_text
from modeldev.synth.layout import Box, dense_layout, nested_layout, sample_layout, uneven_layout
from modeldev.synth.panels import PROCEDURAL, WHITE_KINDS, FolderPanels, decorate
from ray_jobs.figures.fonts import font

log = logging.getLogger(__name__)
CLASSES = ("panel", "label")


@dataclass
class SynthFigure:
    name: str
    split: str
    width: int
    height: int
    panels: list[Box]
    labels: list[Box | None]  # the label box of each panel, None when it has none
    label_texts: list[str | None]
    params: dict = field(default_factory=dict)


def _brightness(img: Image.Image, box: Box) -> float:
    crop = img.crop(box).convert("L")
    return float(np.asarray(crop).mean()) if crop.size[0] and crop.size[1] else 128.0


def _draw_label(
    rng: np.random.Generator,
    canvas: Image.Image,
    panel: Box,
    text: str,
    outside: bool,
    size: int,
    bold: bool,
    boxed: bool,
    face: ImageFont.FreeTypeFont | None = None,
) -> Box:
    """Draws one label at its panel's corner (or above it); ``face`` overrides the generator's
    DejaVu Sans (the label reader's training draws other faces)."""
    draw = ImageDraw.Draw(canvas)
    face = face or font(size, bold=bold)
    x0, y0, x1, _ = panel
    inset = int(rng.integers(2, max(3, size // 2)))
    if outside:
        x, y = x0 + inset, y0 - size - 3
    else:
        corner = rng.choice(["tl", "tl", "tl", "tr", "bl"])
        tw = draw.textlength(text, font=face)
        x = x0 + inset if corner != "tr" else x1 - inset - tw
        y = y0 + inset if corner != "bl" else panel[3] - inset - size * 1.2
    left, top, right, bottom = draw.textbbox((x, y), text, font=face)
    if boxed:
        draw.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=(255, 255, 255))
        color = (0, 0, 0)
    else:
        light = _brightness(canvas, (int(left), int(top), int(right) + 1, int(bottom) + 1)) > 110
        color = (0, 0, 0) if light else (255, 255, 255) if rng.random() < 0.8 else (255, 230, 0)
    draw.text((x, y), text, font=face, fill=color)
    pad = 2 if boxed else 1
    return (
        max(0, int(left) - pad),
        max(0, int(top) - pad),
        min(canvas.width, int(right) + pad + 1),
        min(canvas.height, int(bottom) + pad + 1),
    )


def make_figure(
    seed: int,
    index: int,
    *,
    folders: list[str] | None = None,
    max_side: int = 768,
    val_every: int = 10,
    hard: float = 0.0,
    nested: float = 0.0,
    furniture: float = 0.0,
    localizers: float = 0.0,
    label_faces: float = 0.0,
    dense: float = 0.0,
) -> tuple[bytes, SynthFigure]:
    """One compound figure (JPEG bytes) and its exact ground truth.

    ``hard`` is the share of figures drawn without the first generator's shortcuts (gap-filled
    plots, textures, insets, furniture, scan noise); ``nested`` the share laid out by
    successive cuts (:func:`nested_layout`: nested, uneven, up to 16 panels); ``furniture`` the
    share of the other figures that also get a hard figure's title and colour legend outside
    every panel; ``localizers`` the share of dark-ground scans drawn with a small reference
    image floating beside them (:func:`_with_localizer`); ``label_faces`` the share whose labels
    are set in one of the label reader's faces (sans, serif, narrow, bold, italic) instead of
    DejaVu Sans, so label boxes are found in the type real figures use; ``dense`` the share
    drawn as plates of 8 to 36 small panels, touching or nearly, told apart by a thin frame
    (:func:`_dense_panel`). Each has its own
    random stream, so with all at 0 every figure is byte for byte what it always was, and each
    at 0 leaves the others' figures as they were.
    """
    rng = np.random.default_rng([seed, index])
    hard_rng = np.random.default_rng([seed, index, 0x4A2D])  # never shifts the main stream
    nested_rng = np.random.default_rng([seed, index, 0x5B17])
    furniture_rng = np.random.default_rng([seed, index, 0x6C3E])
    localizer_rng = np.random.default_rng([seed, index, 0x7D21])
    face_rng = np.random.default_rng([seed, index, 0x8E45])
    dense_rng = np.random.default_rng([seed, index, 0x9F52])
    hard_figure = bool(hard > 0 and hard_rng.random() < hard)
    nested_figure = bool(nested > 0 and nested_rng.random() < nested)
    labelled = rng.random() < 0.85
    outside = labelled and rng.random() < 0.3
    scheme = str(rng.choice(SCHEMES))
    label_size = int(rng.integers(12, 30))
    background = (255, 255, 255) if rng.random() < 0.8 else (0, 0, 0)
    makers = list(PROCEDURAL)
    # figures often repeat one modality across panels
    theme = str(rng.choice(makers)) if rng.random() < 0.5 else None
    # white panels touching on a white page have no visible boundary: nobody could draw the
    # truth there, so such figures always get a gap
    blank_risk = background == (255, 255, 255) and (theme is None or theme in WHITE_KINDS)
    band = label_size + 6 if outside else 0
    style = _DenseStyle.draw(dense_rng) if dense > 0 and dense_rng.random() < dense else None
    if style is not None:
        background = style.page
        layout = dense_layout(dense_rng, band, margin=style.margin)
    elif nested_figure:
        margin = int(nested_rng.choice([0, 0, 0, 1, 2, 4, 8, 14]))
        layout = nested_layout(nested_rng, band, margin=margin)
    elif hard_figure and hard_rng.random() < 0.5:
        layout = uneven_layout(hard_rng, band, margin=int(hard_rng.choice([0, 0, 0, 2, 6, 12])))
    else:  # a hard figure frames its white panels instead of forcing a gap between them
        layout = sample_layout(
            rng, label_band=band, min_margin=6 if blank_risk and not hard_figure else 0
        )
    canvas = Image.new("RGB", (layout.width, layout.height), background)
    folder_panels = FolderPanels(folders) if folders else None
    kinds: list[str] = []
    localized: list[int] = []  # panels drawn with a reference image beside the scan
    for x0, y0, x1, y1 in layout.boxes:
        w, h = x1 - x0, y1 - y0
        if style is not None:
            kind, panel = _dense_panel(dense_rng, style, w, h)
        elif folder_panels and len(folder_panels) and rng.random() < 0.5:
            kind, panel = "folder", folder_panels.sample(rng, w, h)
        elif hard_figure and hard_rng.random() < 0.5:
            kind = str(hard_rng.choice(list(HARD)))
            panel = HARD[kind](hard_rng, w, h)
        else:
            kind = theme or str(rng.choice(makers))
            panel = PROCEDURAL[kind](rng, w, h)
            if localizers > 0 and kind in DARK_GROUND and localizer_rng.random() < localizers:
                drawn = _with_localizer(localizer_rng, kind, w, h)
                if drawn is not None:
                    panel = drawn
                    localized.append(len(kinds))
        kinds.append(kind)
        if style is not None:
            canvas.paste(panel, (x0, y0))
            continue
        panel = decorate(rng, panel)
        if hard_figure:
            _hard_panel(hard_rng, panel, kind, background, layout.margin)
        elif nested_figure:
            _frame_if_unseen(panel, kind, background, layout.margin)
        canvas.paste(panel, (x0, y0))
    # reading order: the layout already lists rows top to bottom, then left to right
    labels: list[Box | None] = []
    texts: list[str | None] = []
    bold = bool(rng.random() < 0.6)
    boxed = bool(not outside and rng.random() < 0.15)
    face_index = (
        int(face_rng.integers(len(faces())))
        if label_faces > 0 and face_rng.random() < label_faces
        else None
    )
    for i, box in enumerate(layout.boxes):
        if not labelled or (rng.random() < 0.03 and len(layout.boxes) > 1):
            labels.append(None)
            texts.append(None)
            continue
        text = label_text(scheme, i, layout.row_of[i], layout.col_of[i])
        size = max(10, min(label_size, (box[3] - box[1]) // 3))
        face = None if face_index is None else reader_face(face_index, size)
        labels.append(_draw_label(rng, canvas, box, text, outside, size, bold, boxed, face))
        texts.append(text)
    added: list[str] = []
    furnished = hard_figure or bool(furniture > 0 and furniture_rng.random() < furniture)
    if furnished:
        canvas, shift, added = _furniture(
            hard_rng if hard_figure else furniture_rng, canvas, background
        )
        layout.boxes = [(a, b + shift, c, d + shift) for a, b, c, d in layout.boxes]
        labels = [
            None if lb is None else (lb[0], lb[1] + shift, lb[2], lb[3] + shift) for lb in labels
        ]
    caption_strip = rng.random() < 0.15
    if caption_strip:  # figures cropped from PDFs often carry a line of caption below them
        strip = int(rng.integers(20, 48))
        extended = Image.new("RGB", (canvas.width, canvas.height + strip), (255, 255, 255))
        extended.paste(canvas, (0, 0))
        ImageDraw.Draw(extended).text(
            (6, canvas.height + 4),
            "Figure 1. (A) Axial image and (B) detail of the lesion.",
            font=font(max(10, strip // 2), bold=False),
            fill=(20, 20, 20),
        )
        canvas = extended
    scale = min(1.0, max_side / max(canvas.size))
    if scale < 1.0:
        canvas = canvas.resize(
            (round(canvas.width * scale), round(canvas.height * scale)), Image.Resampling.LANCZOS
        )

    def scaled(box: Box) -> Box:
        return (
            round(box[0] * scale),
            round(box[1] * scale),
            round(box[2] * scale),
            round(box[3] * scale),
        )

    buffer = io.BytesIO()
    quality = int(rng.integers(80, 96))
    if hard_figure:
        canvas, quality = _scanned(hard_rng, canvas, quality)
    canvas.save(buffer, format="JPEG", quality=quality)
    figure = SynthFigure(
        name=f"synth-{index:06d}",
        split="val" if index % val_every == 0 else "train",
        width=canvas.width,
        height=canvas.height,
        panels=[scaled(b) for b in layout.boxes],
        labels=[scaled(b) if b else None for b in labels],
        label_texts=texts,
        params={
            "seed": seed,
            "index": index,
            "layout": layout.kind,
            "grid": list(layout.grid),
            "margin": layout.margin,
            "padding": layout.padding,
            "scheme": scheme if labelled else None,
            "label_placement": ("outside" if outside else "inside") if labelled else None,
            "label_boxed": boxed,
            "background": list(background),
            "panel_kinds": kinds,
            "caption_strip": caption_strip,
            "scale": scale,
            "hard": hard_figure,
            "furniture": added,
            "localized": localized,
            "label_face": None if face_index is None else faces()[face_index].name,
            "dense": None if style is None else asdict(style),
        },
    )
    return buffer.getvalue(), figure


def _hard_panel(
    rng: np.random.Generator, panel: Image.Image, kind: str, page: tuple, margin: int
) -> None:
    """Frame a white panel that touches its neighbours, and sometimes inset a magnified
    detail: an inset is part of its panel, never a panel."""
    w, h = panel.size
    _frame_if_unseen(panel, kind, page, margin)
    if min(w, h) > 120 and rng.random() < 0.15:
        iw, ih = int(w * rng.uniform(0.22, 0.38)), int(h * rng.uniform(0.22, 0.38))
        detail = PROCEDURAL[str(rng.choice(["ct", "histology", "fluorescence", "fundus"]))](
            rng, iw, ih
        )
        x = int(rng.choice([3, w - iw - 3]))
        y = int(rng.choice([3, h - ih - 3]))
        panel.paste(detail, (x, y))
        ImageDraw.Draw(panel).rectangle(
            (x, y, x + iw - 1, y + ih - 1), outline=(255, 255, 0), width=2
        )


DARK_GROUND = ("ct", "fundus")  # scans shown on a black surround
# kinds whose content reaches their edges, unlike a neighbour's: a plate of them shows its
# boundaries without frames
FILLED = ("histology", "dermoscopy", "endoscopy")


@dataclass
class _DenseStyle:
    """One plate's look: its page, its gutter, the kind all its panels share (None: mixed)
    and the grey frame around each panel (width 0: none)."""

    page: tuple[int, int, int]
    margin: int
    kind: str | None
    frame_grey: int
    frame_width: int

    @classmethod
    def draw(cls, rng: np.random.Generator) -> _DenseStyle:
        dark = bool(rng.random() < 0.35)
        kind = str(rng.choice([*PROCEDURAL, *HARD])) if rng.random() < 0.85 else None
        grey = int(rng.uniform(45, 150) if dark else rng.uniform(50, 210))
        width = int(rng.choice([1, 1, 1, 2]))
        if kind in FILLED and rng.random() < 0.4:
            width = 0
        page = (0, 0, 0) if dark else (255, 255, 255)
        return cls(page, int(rng.choice([0, 0, 0, 1, 1, 2, 3])), kind, grey, width)


def _dense_panel(
    rng: np.random.Generator, style: _DenseStyle, w: int, h: int
) -> tuple[str, Image.Image]:
    """One panel of a plate. Touching panels of one kind on one ground have no boundary but
    the thin frame each carries (a 1 px line is a third of a pixel at the detector's input),
    so only plates of kinds whose content fills their edges go without frames."""
    kind = style.kind or str(rng.choice([*PROCEDURAL, *HARD]))
    panel = (PROCEDURAL.get(kind) or HARD[kind])(rng, w, h)
    if style.frame_width:
        g, width = style.frame_grey, style.frame_width
        ImageDraw.Draw(panel).rectangle((0, 0, w - 1, h - 1), outline=(g, g, g), width=width)
    return kind, panel


def _with_localizer(rng: np.random.Generator, kind: str, w: int, h: int) -> Image.Image | None:
    """A scan with a small reference image (a scout view, a key image) floating beside it on
    the same dark ground, unframed and with no gutter of the page's colour: the caption
    describes one picture, so it is one panel. None when the panel is too narrow for it."""
    main_w = int(w * rng.uniform(0.6, 0.75))
    side = int(h * rng.uniform(0.25, 0.45))
    small_w = min(w - main_w - 10, int(side * rng.uniform(0.8, 1.3)))
    if w < 1.2 * h or side < 24 or small_w < 24:
        return None
    main = PROCEDURAL[kind](rng, main_w, h)
    small = PROCEDURAL[str(rng.choice(DARK_GROUND))](rng, small_w, side)
    panel = Image.new("RGB", (w, h), main.getpixel((0, 0)))
    left = bool(rng.random() < 0.75)
    panel.paste(main, (0 if left else w - main_w, 0))
    lo, hi = (main_w + 4, w - small_w - 4) if left else (4, w - main_w - small_w - 4)
    x = int(rng.integers(lo, max(lo, hi) + 1))
    y = int(float(rng.choice([0.08, 0.5, 0.92])) * (h - side))
    panel.paste(small, (x, y))
    return panel


def _frame_if_unseen(panel: Image.Image, kind: str, page: tuple, margin: int) -> None:
    """A white panel close to a white neighbour on a white page has no visible edge: no one
    could draw its truth, so it gets the thin frame such figures carry."""
    if margin < 6 and page == (255, 255, 255) and (kind in WHITE_KINDS or kind in HARD_WHITE):
        ImageDraw.Draw(panel).rectangle(
            (0, 0, panel.width - 1, panel.height - 1), outline=(70, 70, 70)
        )


def _furniture(
    rng: np.random.Generator, canvas: Image.Image, page: tuple
) -> tuple[Image.Image, int, list[str]]:
    """A figure title above and a colour-bar legend beside the panels: ink outside every
    panel, which the detector must learn to leave alone. Returns the canvas, the vertical
    shift of every box, and what was added."""
    added: list[str] = []
    ink = (0, 0, 0) if page == (255, 255, 255) else (255, 255, 255)
    top = int(rng.integers(22, 40)) if rng.random() < 0.3 else 0
    right = int(rng.integers(40, 70)) if rng.random() < 0.25 else 0
    if not top and not right:
        return canvas, 0, added
    out = Image.new("RGB", (canvas.width + right, canvas.height + top), page)
    out.paste(canvas, (0, top))
    draw = ImageDraw.Draw(out)
    if top:
        draw.text(
            (8, 3), "Treatment response at 6 months", fill=ink, font=font(top // 2, bold=True)
        )
        added.append("title")
    if right:
        x0, span = canvas.width + 8, max(10, canvas.height - 20)
        for k in range(span):
            t = k / span
            draw.line(
                (x0, top + 10 + k, x0 + 12, top + 10 + k),
                fill=(int(255 * t), int(120 * (1 - t)), 200),
            )
        for k, tick in enumerate(("1.0", "0.5", "0.0")):
            draw.text((x0 + 15, top + 4 + k * span / 2), tick, fill=ink, font=font(10))
        added.append("legend")
    return out, top, added


def _scanned(
    rng: np.random.Generator, canvas: Image.Image, quality: int
) -> tuple[Image.Image, int]:
    """Scanner noise, softness and strong JPEG compression, each sometimes."""
    if rng.random() < 0.4:
        arr = np.asarray(canvas, dtype=np.float32)
        arr = arr + rng.normal(0, rng.uniform(2, 7), arr.shape)
        canvas = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if rng.random() < 0.5:
        quality = int(rng.integers(35, 80))
    return canvas, quality


def yolo_lines(figure: SynthFigure) -> str:
    lines = []
    boxes = [(0, b) for b in figure.panels] + [(1, b) for b in figure.labels if b]
    for cls, (x0, y0, x1, y1) in boxes:
        cx, cy = (x0 + x1) / 2 / figure.width, (y0 + y1) / 2 / figure.height
        w, h = (x1 - x0) / figure.width, (y1 - y0) / figure.height
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}")
    return "\n".join(lines) + "\n"


def _write_one(args: tuple[Path, int, int, list[str] | None, int, dict[str, float]]) -> dict:
    out, seed, index, folders, max_side, shares = args
    data, figure = make_figure(seed, index, folders=folders, max_side=max_side, **shares)
    (out / "images" / figure.split / f"{figure.name}.jpg").write_bytes(data)
    (out / "labels" / figure.split / f"{figure.name}.txt").write_text(yolo_lines(figure))
    (out / "meta" / f"{figure.name}.json").write_text(json.dumps(asdict(figure), indent=1))
    return asdict(figure)


def coco(figures: list[dict]) -> dict:
    images, annotations = [], []
    for image_id, fig in enumerate(figures, start=1):
        images.append(
            {
                "id": image_id,
                "file_name": f"{fig['name']}.jpg",
                "width": fig["width"],
                "height": fig["height"],
            }
        )
        boxes = [(1, b) for b in fig["panels"]] + [(2, b) for b in fig["labels"] if b]
        for category, (x0, y0, x1, y1) in boxes:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category,
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "area": (x1 - x0) * (y1 - y0),
                    "iscrowd": 0,
                }
            )
    return {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": 1, "name": "panel"}, {"id": 2, "name": "label"}],
    }


def write_dataset(
    out: Path,
    n: int,
    seed: int,
    *,
    folders: list[str] | None = None,
    workers: int | None = None,
    max_side: int = 768,
    progress: bool = False,
    **shares: float,
) -> list[dict]:
    """Write ``n`` figures in parallel; returns their ground truth in index order. ``shares``
    are :func:`make_figure`'s (``hard``, ``nested``, ``furniture``, ``localizers``,
    ``label_faces``, ``dense``)."""
    for sub in ("images/train", "images/val", "labels/train", "labels/val", "meta", "annotations"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    jobs = [(out, seed, i, folders, max_side, shares) for i in range(n)]
    workers = workers or os.cpu_count() or 1
    figures: list[dict]
    if workers == 1:
        figures = list(
            track(map(_write_one, jobs), total=n, description="synth", disable=not progress)
        )
    else:
        with ProcessPoolExecutor(workers) as pool:
            results: Iterator[dict] = pool.map(_write_one, jobs, chunksize=8)
            figures = list(track(results, total=n, description="synth", disable=not progress))
    write_index(out, figures)
    return figures


def write_index(out: Path, figures: list[dict]) -> None:
    """The dataset's COCO files per split and its YOLO ``data.yaml``, from the figures' truth
    (both generators write their datasets this way)."""
    for split in ("train", "val"):
        chosen = [f for f in figures if f["split"] == split]
        (out / "annotations" / f"{split}.json").write_text(json.dumps(coco(chosen)))
    (out / "data.yaml").write_text(
        f"path: {out.resolve()}\ntrain: images/train\nval: images/val\n"
        "names:\n  0: panel\n  1: label\n"
    )
