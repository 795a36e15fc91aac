"""Panel extraction: compound figure in, panels in reading order out.

:class:`PanelDetector` is the stage's model, built once per Ray actor: the model is loaded
there, and the device (GPU with half precision, or CPU) is chosen there, on the worker, never
on the driver; :meth:`PanelDetector.detect` turns figure bytes into :class:`FigurePanels`.
The pure functions around it decide what a panel is: boxes too small or degenerate are
dropped with a reason, a box that merely contains other panels (the whole figure) is dropped,
labels are attached to the panel they name, and a figure with no confident panel passes
through as one panel.
"""

from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ray_jobs.config import DetectorSettings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.figures.boxes import Box, contains, iou_matrix, overlap_of_smaller
from ray_jobs.figures.colour_bars import is_colour_bar
from ray_jobs.figures.images import decode_image, page_level
from ray_jobs.figures.label_splits import split_at_labels
from ray_jobs.figures.yolo_env import ultralytics_offline

log = logging.getLogger(__name__)
STAGE = "detect"
REPO_ROOT = Path(__file__).resolve().parents[2]
PANEL, LABEL = 0, 1


@dataclass
class RawBox:
    box: tuple[float, float, float, float]
    score: float
    cls: int


@dataclass
class Panel:
    figure_key: str
    panel_index: int
    bbox: Box  # x0, y0, x1, y1 in source pixels
    score: float | None  # None for a figure passed through whole
    label_bbox: Box | None = None
    label_score: float | None = None
    status: str = "ok"  # ok | fallback
    # why a fallback is the whole figure: tiny_figure | extreme_aspect | no_confident_panel
    reason: str | None = None
    detector: str = ""
    detector_version: str = ""
    letter: str | None = None  # what the label reads, case-folded ("b", "ii", "a1"); None: no label
    letter_score: float | None = None
    crop: bytes | None = None
    crop_size: tuple[int, int] | None = None


@dataclass
class Dropped:
    figure_key: str
    bbox: Box
    score: float
    # too_small | degenerate | duplicate | overlap | merged | container | nested | blank |
    # colour_bar | split
    reason: str


@dataclass
class FigurePanels:
    figure_key: str
    width: int
    height: int
    panels: list[Panel] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    imgsz: int | None = None  # the letterbox size the panels were found at (zoom: the larger)


LETTER_MIN_SCORE = 0.7  # below this a label's letter is left unread
CONTAINER_MARGIN = 0.1  # how much surer than its pieces a box must be to stand over them
MIN_FIGURE_SIDE = 64  # below this no detector sees panels: the figure is one
MAX_ASPECT = 20.0  # a strip this long letterboxes to a line of pixels


def figure_guard(width: int, height: int) -> str | None:
    """Why a figure is passed through as one panel without asking the model, or None."""
    if min(width, height) < MIN_FIGURE_SIDE:
        return "tiny_figure"
    if max(width, height) >= MAX_ASPECT * min(width, height):
        return "extreme_aspect"
    return None


def needs_zoom(raw: list[RawBox], width: int, height: int, settings: DetectorSettings) -> bool:
    """Whether a figure read at ``settings.imgsz`` is read again at ``zoom_imgsz``: when a
    panel it keeps is under ``zoom_below_px`` on its short side once letterboxed. Such panels
    are near the model's limit, and their dense neighbours are the ones it misses or merges."""
    if settings.zoom_below_px <= 0 or settings.zoom_imgsz <= settings.imgsz:
        return False
    kept, _ = select_panels("", raw, width, height, settings)
    scale = settings.imgsz / max(width, height)
    return any(min(b[2] - b[0], b[3] - b[1]) * scale < settings.zoom_below_px for b, _ in kept)


def resolve_weights(path: str) -> Path:
    """A relative path is tried from the working folder, then from the project root."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return REPO_ROOT / candidate


def reading_order(boxes: list[Box]) -> list[int]:
    """Indices of ``boxes`` in reading order: rows top to bottom, then left to right.

    A box joins the current row when its vertical centre falls inside the row's first box,
    so panels of uneven height in one row stay together.
    """
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
    rows: list[list[int]] = []
    for i in order:
        cy = (boxes[i][1] + boxes[i][3]) / 2
        if rows and boxes[rows[-1][0]][1] <= cy <= boxes[rows[-1][0]][3]:
            rows[-1].append(i)
        else:
            rows.append([i])
    return [i for row in rows for i in sorted(row, key=lambda j: boxes[j][0])]


def _merge_overlapping(
    key: str, kept: list[tuple[Box, float]], dropped: list[Dropped], limit: float = 0.25
) -> list[tuple[Box, float]]:
    boxes = list(kept)
    merged = True
    while merged:
        merged = False
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                (a, sa), (b, sb) = boxes[i], boxes[j]
                share = overlap_of_smaller(a, b)
                if limit < share < 0.9:  # near-containment is left to the container rule
                    if min(sa, sb) < 0.5 * max(sa, sb):  # a weak box straddling a sure one
                        weak = j if sb < sa else i
                        dropped.append(Dropped(key, *boxes[weak], "overlap"))
                        del boxes[weak]
                    else:  # two halves of one picture
                        dropped.extend(
                            [Dropped(key, a, sa, "merged"), Dropped(key, b, sb, "merged")]
                        )
                        union = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
                        boxes[i] = (union, max(sa, sb))
                        del boxes[j]
                    merged = True
                    break
            if merged:
                break
    return boxes


def select_panels(
    key: str, raw: list[RawBox], width: int, height: int, settings: DetectorSettings
) -> tuple[list[tuple[Box, float]], list[Dropped]]:
    """Confident, sane panel boxes (clipped to the image), and the others with a reason."""
    kept: list[tuple[Box, float]] = []
    dropped: list[Dropped] = []
    min_area = settings.min_area_fraction * width * height
    for r in raw:
        if r.cls != PANEL or r.score < settings.conf:
            continue
        x0, y0 = max(0, round(r.box[0])), max(0, round(r.box[1]))
        x1, y1 = min(width, round(r.box[2])), min(height, round(r.box[3]))
        box = (x0, y0, x1, y1)
        if x1 <= x0 or y1 <= y0:
            dropped.append(Dropped(key, box, r.score, "degenerate"))
        elif min(x1 - x0, y1 - y0) < settings.min_side_px or (x1 - x0) * (y1 - y0) < min_area:
            dropped.append(Dropped(key, box, r.score, "too_small"))
        else:
            kept.append((box, r.score))
    # NMS runs per class inside the model; near-duplicates can survive it across scales
    if len(kept) > 1:
        ious = iou_matrix(np.array([b for b, _ in kept]), np.array([b for b, _ in kept]))
        survivors: list[int] = []
        for i in sorted(range(len(kept)), key=lambda i: -kept[i][1]):
            if all(ious[i, j] < 0.8 for j in survivors):
                survivors.append(i)
            else:
                dropped.append(Dropped(key, kept[i][0], kept[i][1], "duplicate"))
        kept = [kept[i] for i in sorted(survivors)]
    # panels of a figure do not overlap: two boxes sharing much of the smaller one are one
    # panel cut in two (a single photograph read as two) and become their union, unless one
    # is far less sure than the other, which then goes
    kept = _merge_overlapping(key, kept, dropped)
    # a box holding two or more other panels is the figure (or a row of it), not a panel;
    # unless it is surer than each of them by CONTAINER_MARGIN: then it is the panel and
    # they are pieces of it (a plot cut at the white between its bars)
    containers, fragments = set(), set()
    for i, (outer, score) in enumerate(kept):
        inner = [j for j, (b, _) in enumerate(kept) if j != i and contains(outer, b)]
        if len(inner) < 2:
            continue
        if score >= max(kept[j][1] for j in inner) + CONTAINER_MARGIN:
            fragments.update(inner)
        else:
            containers.add(i)
    fragments -= containers
    for i in sorted(containers):
        dropped.append(Dropped(key, kept[i][0], kept[i][1], "container"))
    for i in sorted(fragments):
        dropped.append(Dropped(key, kept[i][0], kept[i][1], "nested"))
    kept = [k for i, k in enumerate(kept) if i not in containers | fragments]
    # a box (almost) inside one other box, and only that one: a fragment of a panel, or the
    # panel with a border; the more confident of the two stands
    nested = set()
    for i, (a, sa) in enumerate(kept):
        for j, (b, sb) in enumerate(kept):
            if i < j and overlap_of_smaller(a, b) >= 0.9:
                nested.add(i if sa < sb else j)
    for i in sorted(nested):
        dropped.append(Dropped(key, kept[i][0], kept[i][1], "nested"))
    kept = [k for i, k in enumerate(kept) if i not in nested]
    return kept, dropped


def drop_blank(
    key: str,
    grey: np.ndarray,
    kept: list[tuple[Box, float]],
    max_std: float,
    dropped: list,
    min_ink: float = 0.0,
) -> list[tuple[Box, float]]:
    """Empty cells of a figure grid are layout, not panels: crops of near-uniform grey
    (std under ``max_std``), or of bare page with at most a speck on it (under ``min_ink`` of
    their pixels 30 grey levels off the page's colour: a stray mark lifts a crop's std above
    any threshold a flat panel would pass). ``grey`` is the figure in grey levels."""
    if max_std <= 0 or not kept:
        return kept
    page = page_level(grey)
    out = []
    for box, score in kept:
        crop = grey[box[1] : box[3], box[0] : box[2]]
        if float(crop.std()) < max_std or float((np.abs(crop - page) > 30).mean()) < min_ink:
            dropped.append(Dropped(key, box, score, "blank"))
        else:
            out.append((box, score))
    return out


def drop_colour_bars(
    key: str, image: Image.Image, kept: list[tuple[Box, float]], dropped: list
) -> list[tuple[Box, float]]:
    """A colour-bar legend beside the panels is furniture, not a panel (``colour_bars``). A
    lone box stays: with nothing else kept, the figure would fall back to itself anyway."""
    if len(kept) < 2:
        return kept
    out = []
    for box, score in kept:
        if is_colour_bar(image.crop(box)):
            dropped.append(Dropped(key, box, score, "colour_bar"))
        else:
            out.append((box, score))
    return out


def split_merged(
    key: str,
    image: Image.Image,
    grey: np.ndarray,
    kept: list[tuple[Box, float]],
    labels: list[Box],
    reader: Any,
    dropped: list,
) -> list[tuple[Box, float]]:
    """Boxes holding a later panel's label, cut into their panels (each part keeps the box's
    score); the box that was cut is recorded as dropped (``split``)."""
    boxes, cuts = split_at_labels(
        grey,
        [b for b, _ in kept],
        labels,
        lambda: reader.read([image.crop(lb) for lb in labels]),
        LETTER_MIN_SCORE,
    )
    if not cuts:
        return kept
    score = dict(kept)
    part_score = {part: score[box] for box, parts in cuts for part in parts}
    for box, _ in cuts:
        dropped.append(Dropped(key, box, score[box], "split"))
    return [(b, score.get(b, part_score.get(b))) for b in boxes]  # type: ignore[misc]


def attach_labels(panels: list[Box], labels: list[tuple[Box, float]]) -> list[int | None]:
    """For each panel, the index of the label that names it (inside it, or just outside its
    top-left corner), or None."""
    best: list[tuple[float, int] | None] = [None] * len(panels)
    centres = [((lb[0] + lb[2]) / 2, (lb[1] + lb[3]) / 2) for lb, _ in labels]
    holders = [
        [i for i, p in enumerate(panels) if p[0] <= cx <= p[2] and p[1] <= cy <= p[3]]
        for cx, cy in centres
    ]
    # a figure places its labels one way; when most sit outside every box, one inside a box's
    # bottom edge is the outside label of the panel below, under a box that runs long
    outside_figure = sum(not h for h in holders) > len(labels) / 2
    for li, (lb, score) in enumerate(labels):
        (cx, cy), inside = centres[li], holders[li]
        if inside:
            target = min(
                inside, key=lambda i: (panels[i][2] - panels[i][0]) * (panels[i][3] - panels[i][1])
            )
            below = _panel_just_below(panels, lb, target) if outside_figure else None
            target = target if below is None else below
        else:
            # outside labels sit above or left of their panel's top-left corner
            dist = [np.hypot(cx - p[0], cy - p[1]) for p in panels]
            target = int(np.argmin(dist)) if dist else -1
            if target < 0:
                continue
            p = panels[target]
            if dist[target] > 0.35 * np.hypot(p[2] - p[0], p[3] - p[1]):
                continue
        current = best[target]
        if current is None or score > current[0]:
            best[target] = (score, li)
    return [b[1] if b else None for b in best]


def _panel_just_below(panels: list[Box], label: Box, holder: int) -> int | None:
    """The panel whose top edge lies right under an outside label that a box above holds.

    A label drawn just above its panel lands inside the previous row's box when that box
    overshoots by a few pixels: it then lies in the holder's bottom edge, and the panel that
    starts just under it, near the label's left, is its own.
    """
    x0, y0, _, y1 = label
    h = y1 - y0
    if panels[holder][3] - y1 > h:
        return None
    near = [
        i
        for i, (px0, py0, px1, _) in enumerate(panels)
        if i != holder and -0.5 * h <= py0 - y1 <= h and px0 - h <= x0 <= px0 + 0.35 * (px1 - px0)
    ]
    return min(near, key=lambda i: abs(panels[i][1] - y1)) if near else None


def crop_bytes(image: Image.Image, box: Box, pad: int, fmt: str) -> tuple[bytes, tuple[int, int]]:
    x0, y0 = max(0, box[0] - pad), max(0, box[1] - pad)
    x1, y1 = min(image.width, box[2] + pad), min(image.height, box[3] + pad)
    crop = image.crop((x0, y0, x1, y1))
    out = io.BytesIO()
    if fmt == "png":
        crop.save(out, format="PNG")
    else:
        crop.save(out, format="JPEG", quality=95)
    return out.getvalue(), crop.size


def build_panels(
    key: str,
    image: Image.Image,
    raw: list[RawBox],
    settings: DetectorSettings,
    detector: str,
    version: str,
    with_crops: bool = True,
    reader: Any = None,
) -> FigurePanels:
    """The figure's panels from the model's raw boxes; ``reader`` (a ``LabelReader``) reads
    the letter of each label box found."""
    width, height = image.size
    result = FigurePanels(key, width, height)
    guard = figure_guard(width, height)
    if guard:
        raw = []
    kept, result.dropped = select_panels(key, raw, width, height, settings)
    grey = np.asarray(image.convert("L"))
    kept = drop_blank(key, grey, kept, settings.blank_std, result.dropped, settings.blank_ink_share)
    if settings.drop_colour_bars:
        kept = drop_colour_bars(key, image, kept, result.dropped)
    labels = [
        (
            (
                max(0, round(r.box[0])),
                max(0, round(r.box[1])),
                min(width, round(r.box[2])),
                min(height, round(r.box[3])),
            ),
            r.score,
        )
        for r in raw
        if r.cls == LABEL and r.score >= settings.label_conf
    ]
    if settings.split_at_labels and reader is not None and kept and len(labels) > 1:
        kept = split_merged(
            key, image, grey, kept, [lb for lb, _ in labels], reader, result.dropped
        )
    if not kept:  # nothing confident: the figure is one panel
        kept = [((0, 0, width, height), None)]  # type: ignore[list-item]
        guard = guard or "no_confident_panel"
    boxes = [b for b, _ in kept]
    if len(boxes) > settings.max_panels:  # the figure fails whole: no crops, no letters read
        with_crops, reader = False, None
    label_of = attach_labels(boxes, labels)
    read: dict[int, tuple[str, float]] = {}
    if reader is not None:
        named = [i for i in range(len(boxes)) if label_of[i] is not None]
        crops = [image.crop(labels[label_of[i]][0]) for i in named]  # type: ignore[index]
        read = dict(zip(named, reader.read_figure(crops, len(boxes)), strict=True))
    for index, i in enumerate(reading_order(boxes)):
        box, score = kept[i]
        label = labels[label_of[i]] if label_of[i] is not None else None
        crop, size = (
            crop_bytes(image, box, settings.pad_px, settings.crop_format)
            if (with_crops)
            else (None, None)
        )
        result.panels.append(
            Panel(
                figure_key=key,
                panel_index=index,
                bbox=box,
                score=None if score is None else round(float(score), 4),
                label_bbox=label[0] if label else None,
                label_score=round(float(label[1]), 4) if label else None,
                status="fallback" if score is None else "ok",
                reason=guard if score is None else None,
                # an unsure reading is no reading: on detector crops, readings at 0.7 or more
                # are right 98% of the time, those below it about half the time
                letter=read[i][0] if i in read and read[i][1] >= LETTER_MIN_SCORE else None,
                letter_score=read[i][1] if i in read else None,
                detector=detector,
                detector_version=version,
                crop=crop,
                crop_size=size,
            )
        )
    return result


def load_reader(weights: str | None):  # type: ignore[no-untyped-def]
    """The label reader the config names (``detector.label_reader_weights``), or None when it
    names none (letters stay unread); a named checkpoint that is missing is an error."""
    from ray_jobs.figures.letters.model import LabelReader

    return LabelReader(resolve_weights(weights)) if weights else None


class PanelDetector:
    """The detection stage's model. Construct once per worker; ``detect`` a batch of figures.

    A figure that fails to decode, or whose chunk the model fails on, comes back as a
    :class:`FailureRecord` so failures travel with the data instead of killing the batch.
    """

    def __init__(self, settings: DetectorSettings | None = None, *, device: str | None = None):
        self.settings = settings or DetectorSettings()
        weights = resolve_weights(self.settings.weights)
        if not weights.is_file():
            raise FileNotFoundError(f"detector weights not found: {weights}")
        ultralytics_offline()
        import torch
        from ultralytics import RTDETR, YOLO

        self.device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
        self.half = self.device.startswith("cuda")
        self.model = RTDETR(str(weights)) if "rtdetr" in weights.name else YOLO(str(weights))
        self.name = weights.stem
        self.version = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
        self.reader = load_reader(self.settings.label_reader_weights)
        log.info("panel detector %s (%s) on %s", self.name, self.version, self.device)

    def predict(
        self, images: list[Image.Image], imgsz: int | None = None, conf: float | None = None
    ) -> list[list[RawBox]]:
        """Boxes per image, whatever else is in the batch.

        ultralytics pads a batch to a minimal rectangle only when every image in it has the
        same shape, and to a full square otherwise, which changes the boxes and scores. Images
        are therefore batched by shape, so a figure's panels never depend on its neighbours
        (a resumed run must produce the records an uninterrupted one would). ``imgsz``: the
        letterbox size, the settings' by default; ``conf``: the floor of the boxes returned, the
        lower of the panel and label thresholds by default.
        """
        groups: dict[tuple[int, int], list[int]] = {}
        for i, image in enumerate(images):
            groups.setdefault(image.size, []).append(i)
        out: list[list[RawBox]] = [[] for _ in images]
        for indices in groups.values():
            for i, boxes in zip(
                indices,
                self._predict([images[i] for i in indices], imgsz or self.settings.imgsz, conf),
                strict=True,
            ):
                out[i] = boxes
        return out

    def _predict(
        self, images: list[Image.Image], imgsz: int, conf: float | None = None
    ) -> list[list[RawBox]]:
        s = self.settings
        results = self.model.predict(
            images,
            imgsz=imgsz,
            conf=min(s.conf, s.label_conf) if conf is None else conf,
            iou=s.iou,
            device=self.device,
            quantize=16 if self.half else None,  # fp16 on a GPU (replaces "half")
            verbose=False,
        )
        out = []
        for result in results:
            boxes = result.boxes
            xyxy = boxes.xyxy.cpu().numpy() if len(boxes) else np.zeros((0, 4))
            out.append(
                [
                    RawBox(tuple(map(float, b)), float(c), int(k))
                    for b, c, k in zip(
                        xyxy, boxes.conf.cpu().numpy(), boxes.cls.cpu().numpy(), strict=True
                    )
                ]
            )
        return out

    def _raws(
        self, images: list[Image.Image], imgsz: int, conf: float | None = None
    ) -> list[list[RawBox]]:
        """Raw boxes per image at ``imgsz``; a guarded figure is never shown to the model."""
        raws: list[list[RawBox]] = [[] for _ in images]
        asked = [i for i, img in enumerate(images) if not figure_guard(*img.size)]
        for i, boxes in zip(
            asked, self.predict([images[i] for i in asked], imgsz, conf), strict=True
        ):
            raws[i] = boxes
        return raws

    def read_boxes(
        self, images: list[Image.Image], conf: float | None = None
    ) -> tuple[list[list[RawBox]], list[int]]:
        """Raw boxes per image at the size the stage reads it at, and which images were zoomed
        (``needs_zoom`` judges the boxes at the stage's own thresholds whatever ``conf`` is).
        ``detect`` chooses among these; model development measures them
        (``modeldev.detector.proposals``), so both see the boxes the same reading gives."""
        s = self.settings
        raws = self._raws(images, s.imgsz, conf)
        zoom = [i for i, img in enumerate(images) if needs_zoom(raws[i], *img.size, s)]
        zoomed = self._raws([images[i] for i in zoom], s.zoom_imgsz, conf)
        for i, boxes in zip(zoom, zoomed, strict=True):
            raws[i] = boxes
        return raws, zoom

    def detect(
        self, items: list[tuple[str, bytes]], with_crops: bool = True
    ) -> tuple[list[FigurePanels], list[FailureRecord]]:
        decoded: list[tuple[str, Image.Image]] = []
        failures: list[FailureRecord] = []
        for key, data in items:
            try:
                decoded.append((key, decode_image(data, self.settings.max_pixels)))
            except Exception as exc:
                failures.append(FailureRecord.from_exception(key, STAGE, exc))
        figures: list[FigurePanels] = []
        s = self.settings
        for start in range(0, len(decoded), s.batch_size):
            chunk = decoded[start : start + s.batch_size]
            try:
                raws, zoom = self.read_boxes([img for _, img in chunk])
            except Exception as exc:  # a model fault fails this chunk's figures, not the job
                failures.extend(FailureRecord.from_exception(k, STAGE, exc) for k, _ in chunk)
                continue
            for i, ((key, img), raw) in enumerate(zip(chunk, raws, strict=True)):
                try:
                    figure = build_panels(
                        key,
                        img,
                        raw,
                        s,
                        self.name,
                        self.version,
                        with_crops,
                        reader=self.reader,
                    )
                    figure.imgsz = s.zoom_imgsz if i in zoom else s.imgsz
                    figures.append(figure)
                except Exception as exc:  # one figure's fault is that figure's failure
                    failures.append(FailureRecord.from_exception(key, STAGE, exc))
        return figures, failures
