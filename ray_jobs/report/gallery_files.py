"""The gallery's files, written by the panel stage's workers for a hash-selected sample.

Whole figures, label boxes, reading order and the crops of panels dropped later never reach
the shards, and the report cannot recover them afterwards. So the worker that detects a
figure's panels writes, for the sampled figures only, small JPEG thumbnails (the figure, each
panel, each box the detector dropped) and one JSON with the geometry and pairing, under
``gallery/entries/<part>/`` and ``gallery/thumbs/<part>/``. Whether a figure is sampled
depends on its key alone (:func:`sampled`): every worker decides alone and the same figure is
sampled in every run. The report lists the entries (JSON only, a small share of the figures),
so it needs no knowledge of the rate a build used. Files are named by part, so a newer build of
an article (a later part) never overwrites what an older, committed part shows.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from PIL import Image

from ray_jobs.config import ReportSettings
from ray_jobs.figures.images import pillow_open
from ray_jobs.storage.store import Storage

if TYPE_CHECKING:
    from ray_jobs.figures.panels import FigurePanels

log = logging.getLogger(__name__)

GALLERY = "gallery"
GALLERY_FORMAT = "pmcvl-gallery/1"
_CAPTION_CHARS = 4000  # the page shows a caption, it does not archive it


def key_hash(key: str) -> float:
    """A key's place in [0, 1): uniform, stable across runs, processes and machines."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def sampled(figure_key: str, rate: float) -> bool:
    return key_hash(figure_key) < rate


ENTRIES = f"{GALLERY}/entries"  # JSON only, so the report lists the sample without thumbnails
THUMBS = f"{GALLERY}/thumbs"


def entry_key(part: str, figure_key: str) -> str:
    return f"{ENTRIES}/{part}/{figure_key}.json"


def file_key(part: str, name: str) -> str:
    return f"{THUMBS}/{part}/{name}"


@dataclass
class GalleryPanel:
    key: str
    panel_index: int  # reading order
    bbox: list[int]  # source pixels
    label_bbox: list[int] | None
    letter: str | None  # what the label reader read
    score: float | None
    status: str  # ok | fallback
    subcaption: str
    panel_label: str | None
    alignment: str
    alignment_confidence: float
    thumb: str  # file name under gallery/<part>/


@dataclass
class GalleryDrop:
    bbox: list[int]
    score: float
    reason: str  # the detector's drop reason
    thumb: str | None


@dataclass
class GalleryEntry:
    figure_key: str
    part: str
    pmcid: str | None
    pmc_version: int | None
    figure_label: str | None
    caption: str
    width: int
    height: int
    thumb: str
    thumb_size: list[int]
    panels: list[GalleryPanel] = field(default_factory=list)
    dropped: list[GalleryDrop] = field(default_factory=list)
    format: str = GALLERY_FORMAT

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> GalleryEntry:
        raw: dict[str, Any] = json.loads(data)
        raw["panels"] = [GalleryPanel(**p) for p in raw.get("panels") or []]
        raw["dropped"] = [GalleryDrop(**d) for d in raw.get("dropped") or []]
        return cls(**raw)


def thumbnail(image: Image.Image, max_side: int, quality: int) -> tuple[bytes, tuple[int, int]]:
    """A JPEG no side of which exceeds ``max_side``; its bytes and size."""
    small = image.convert("RGB")
    small.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=quality, optimize=True)
    return buf.getvalue(), small.size


def _box(box: Any) -> list[int]:
    return [round(float(v)) for v in box]


def _crop(figure: Image.Image, box: list[int]) -> Image.Image | None:
    x0, y0, x1, y1 = box
    if x1 - x0 < 1 or y1 - y0 < 1:
        return None
    return figure.crop((x0, y0, x1, y1))


def write_entry(
    storage: Storage,
    part: str,
    figure: dict[str, Any],
    image: bytes,
    found: FigurePanels,
    panels: list[dict[str, Any]],
    limits: ReportSettings,
) -> GalleryEntry:
    """Thumbnails and the JSON of one detected figure. ``figure`` is the figure row's record,
    ``panels`` the records of its panel rows (with their pairing), in panel order: the
    published ones (pieces joined at their label, or the whole figure, when the caption made
    it so: ``captions.layout``) and the detector's boxes it refused, shown as dropped."""
    q = limits.gallery_jpeg_quality
    with pillow_open()(io.BytesIO(image)) as opened:
        opened.draft("RGB", (limits.gallery_figure_px * 2, limits.gallery_figure_px * 2))
        full = opened.convert("RGB")
    # draft() may have decoded a JPEG at a reduced scale: boxes are in source pixels
    sx, sy = full.width / max(1, found.width), full.height / max(1, found.height)

    def scaled(box: list[int]) -> list[int]:
        return _box([box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy])

    fk = found.figure_key
    data, size = thumbnail(full, limits.gallery_figure_px, q)
    storage.write_bytes(file_key(part, f"{fk}.jpg"), data)
    entry = GalleryEntry(
        figure_key=fk,
        part=part,
        pmcid=figure.get("pmcid"),
        pmc_version=figure.get("pmc_version"),
        figure_label=figure.get("figure_label"),
        caption=(figure.get("caption") or "")[:_CAPTION_CHARS],
        width=found.width,
        height=found.height,
        thumb=f"{fk}.jpg",
        thumb_size=list(size),
    )
    detected = {tuple(p.bbox): p for p in found.panels}
    refused = [r for r in panels if r.get("drop_reason")]
    for rec in (r for r in panels if not r.get("drop_reason")):
        name = f"{rec['key']}.jpg"
        bbox = _box(rec["panel_bbox"])
        panel = detected.get(tuple(bbox))  # None: joined pieces, or the whole figure
        crop = _crop(full, scaled(bbox))
        if crop is not None:
            storage.write_bytes(
                file_key(part, name), thumbnail(crop, limits.gallery_panel_px, q)[0]
            )
        entry.panels.append(
            GalleryPanel(
                key=rec["key"],
                panel_index=rec["panel_index"],
                bbox=bbox,
                label_bbox=_box(rec["label_bbox"]) if rec.get("label_bbox") else None,
                letter=panel.letter if panel is not None else None,
                score=rec.get("detector_score"),
                status=rec.get("panel_status") or "ok",
                subcaption=rec.get("subcaption") or "",
                panel_label=rec.get("panel_label"),
                alignment=rec.get("alignment") or "",
                alignment_confidence=float(rec.get("alignment_confidence") or 0.0),
                thumb=name if crop is not None else "",
            )
        )
    drops = [(d.bbox, float(d.score), d.reason) for d in found.dropped] + [
        (r["panel_bbox"], float(detected[tuple(r["panel_bbox"])].score or 0.0), r["drop_reason"])
        for r in refused
        if tuple(r["panel_bbox"]) in detected
    ]
    for i, (box, score, reason) in enumerate(drops):
        bbox = _box(box)
        crop = _crop(full, scaled(bbox))
        name = f"{fk}-d{i:02d}.jpg" if crop is not None else None
        if crop is not None and name is not None:
            storage.write_bytes(
                file_key(part, name), thumbnail(crop, limits.gallery_panel_px, q)[0]
            )
        entry.dropped.append(GalleryDrop(bbox, score, reason, name))
    storage.write_bytes(entry_key(part, fk), entry.to_json())
    return entry


class GalleryWriter:
    """What the panel stage calls for every detected figure; writes the sampled ones.

    The gallery is a view, not data: a figure whose thumbnails cannot be written is logged
    and the build goes on (the report shows the figures it finds).
    """

    def __init__(self, storage: Storage, limits: ReportSettings):
        self.storage = storage
        self.limits = limits

    def __call__(
        self, row: dict[str, Any], found: FigurePanels, panels: list[dict[str, Any]]
    ) -> GalleryEntry | None:
        if not sampled(found.figure_key, self.limits.gallery_rate) or not row.get("image"):
            return None
        try:
            part = row.get("part") or "unassigned"
            return write_entry(
                self.storage, part, row["record"], row["image"], found, panels, self.limits
            )
        except Exception:  # never fail a figure for its thumbnail
            log.warning("gallery: no thumbnails for %s", found.figure_key, exc_info=True)
            return None
