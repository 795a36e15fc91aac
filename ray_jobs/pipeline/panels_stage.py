"""Figure rows to panel rows: detect panels, split the caption, pair each panel with its text.

Detection and pairing run in one stage because pairing needs all panels of a figure together,
and only the detector's output batch is guaranteed to hold them.

Two bounds turn a figure into a failure row instead of a cost: an image that would decode to
more than ``detector.max_decoded_bytes`` is refused from its header, never shown to the
detector (stage ``image``, ``image_too_large``), and a figure with more than
``detector.max_panels`` panels fails whole (stage ``detect``, ``too_many_panels``). The
top-scoring panels are not kept instead: the caption names every panel, so pairing a subset
would give the kept panels subcaptions meant for the dropped ones, silently wrong text.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ray_jobs.captions import layout as layouts
from ray_jobs.captions.pairing import MentionRef, PairedPanel, PanelBox, pair_panels
from ray_jobs.captions.split import split_caption
from ray_jobs.captions.tokens import clip_tokens
from ray_jobs.config import DetectorSettings, Settings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.records import panel_key
from ray_jobs.contract.rows import BUDGET_LEFT, DROPPED, OK, Row, failure_row, make_row
from ray_jobs.dedup.hashes import phash, sha256
from ray_jobs.figures.images import STAGE as IMAGE_STAGE
from ray_jobs.figures.images import decode_image, header_decoded_bytes, pillow_open
from ray_jobs.figures.panels import STAGE, FigurePanels, Panel, PanelDetector, crop_bytes
from ray_jobs.pipeline import budget

DISAGREEMENT = "caption_disagreement"  # rejects: a box of a figure published whole, or refused
UNPAIRED = "unpaired_panel"  # rejects: a box of a labelled figure that no label is its own
PAIRED_CASES = ("letters", "count", "anchored")  # the caption's labels pair the boxes
WHOLE_SUFFIX = "-fig"  # the key of a figure published whole: ``<figure key>-fig``


def _joined_panels(
    figure: Row, found: FigurePanels, layout: layouts.Layout, s: DetectorSettings
) -> list[Panel]:
    """An anchored figure's panels: each group's union box, cut again from the figure (decoded
    a second time: only figures whose detector over-split pay for it)."""
    image = decode_image(figure["image"], s.max_pixels)
    by_index = {p.panel_index: p for p in found.panels}
    out = []
    for n, group in enumerate(layout.groups):
        box = layouts.union([by_index[i].bbox for i in group])
        crop, size = crop_bytes(image, box, s.pad_px, s.crop_format)
        anchor = by_index[group[0]]
        out.append(replace(anchor, panel_index=n, bbox=box, crop=crop, crop_size=size))
    return out


def _whole_figure(figure: Row, found: FigurePanels, s: DetectorSettings, why: str) -> Panel:
    """The figure as one sample: its boxes and caption disagree, or its caption names none."""
    image = decode_image(figure["image"], s.max_pixels)
    box = (0, 0, found.width, found.height)
    crop, size = crop_bytes(image, box, 0, s.crop_format)
    first = found.panels[0]
    return Panel(
        found.figure_key,
        0,
        box,
        None,
        status="fallback",
        reason=why,
        detector=first.detector,
        detector_version=first.detector_version,
        crop=crop,
        crop_size=size,
    )


def _refused(
    shared: dict[str, Any], panel: Panel, case: str, why: str | None, code: str = DISAGREEMENT
) -> Row:
    """A detector box that is not published (``code`` says why): a rejects row."""
    key = panel_key(shared["figure_key"], panel.panel_index)
    record = {
        **shared,
        "key": key,
        "panel_index": panel.panel_index,
        "panel_bbox": list(panel.bbox),
        "sha256": sha256(panel.crop) if panel.crop else None,
        "width": panel.crop_size[0] if panel.crop_size else 0,
        "height": panel.crop_size[1] if panel.crop_size else 0,
        "drop_reason": code,
        "caption_agreement": case,
        "layout_reason": why,
    }
    return make_row(key, DROPPED, record)


def figure_panel_rows(figure: Row, found: FigurePanels, settings: Settings) -> list[Row]:
    """The figure's panel rows: its boxes judged against its caption (``captions.layout``),
    then each published panel paired with its text."""
    rec = figure["record"]
    caption = rec["caption"] or ""
    split = split_caption(caption, frozenset(rec.get("bold_labels") or []))
    boxes = [
        PanelBox(p.panel_index, p.bbox, p.label_bbox is not None, p.letter) for p in found.panels
    ]
    mentions = [MentionRef(m["sentence"], m["panels"]) for m in rec.get("mentions") or []]
    layout = layouts.judge(boxes, split.labels, (found.width, found.height))
    shared = {k: v for k, v in rec.items() if k not in ("bold_labels", BUDGET_LEFT)}
    rows: list[Row] = []
    whole = layout.case == "disagree" or (
        layout.case == "unlabelled" and settings.captions.unlabelled_figures == "whole"
    )
    if whole:
        if layout.case == "disagree":
            rows = [_refused(shared, p, layout.case, layout.reason) for p in found.panels]
            if settings.captions.on_disagreement == "reject":
                return rows
        panels = [_whole_figure(figure, found, settings.detector, layout.case)]
        paired = [PairedPanel(0, None, caption, "figure", 1.0, [m.sentence for m in mentions])]
    else:
        panels = found.panels
        if layout.case == "anchored":
            panels = _joined_panels(figure, found, layout, settings.detector)
            boxes = layouts.joined(boxes, layout)
        paired = pair_panels(
            boxes,
            split,
            caption,
            mentions,
            join_preamble=settings.captions.join_preamble,
            join_trailer=settings.captions.join_trailer,
        )
    dropped: dict[str, int] = {}
    for d in found.dropped:
        dropped[d.reason] = dropped.get(d.reason, 0) + 1
    for panel, pair in zip(panels, paired, strict=True):
        if pair.label is None and layout.case in PAIRED_CASES:
            why = "no caption label is this box's: its letter is unread and its place in the"
            why += " reading order is not the one a label left over would need"
            rows.append(_refused(shared, panel, layout.case, why, UNPAIRED))
            continue
        crop = panel.crop
        key = panel_key(rec["figure_key"], panel.panel_index)
        if pair.alignment == "figure":
            key = rec["figure_key"] + WHOLE_SUFFIX
        with pillow_open()(io.BytesIO(crop)) as img:
            ph = phash(img)
        record: dict[str, Any] = {
            **shared,
            "key": key,
            "subcaption": pair.text,
            "panel_index": panel.panel_index,
            "n_panels": len(panels),
            "panel_label": pair.label,
            "alignment": pair.alignment,
            "alignment_confidence": pair.confidence,
            "split_confidence": split.confidence,
            "caption_agreement": layout.case,
            "layout_reason": layout.reason,
            "panel_bbox": list(panel.bbox),
            "label_bbox": list(panel.label_bbox) if panel.label_bbox else None,
            "panel_status": panel.status,
            "detector_score": panel.score,
            "detector_version": f"{panel.detector}:{panel.detector_version}",
            "inline_mentions": pair.mentions,
            "width": panel.crop_size[0] if panel.crop_size else 0,
            "height": panel.crop_size[1] if panel.crop_size else 0,
            "sha256": sha256(crop),
            "phash": ph,
            "tokens_caption": clip_tokens(caption),
            "tokens_subcaption": clip_tokens(pair.text),
            "figure_width": found.width,
            "figure_height": found.height,
            # counted once per figure, on its first panel
            "detector_dropped": dropped if panel.panel_index == 0 else {},
        }
        rows.append(make_row(key, OK, record, crop))
    return rows


def oversized(key: str, image: bytes | None, max_bytes: int) -> FailureRecord | None:
    """The figure's failure when its header says it decodes to more than ``max_bytes``."""
    size = header_decoded_bytes(image) if image else 0
    if size <= max_bytes:
        return None
    message = f"the image decodes to {size} bytes (limit {max_bytes})"
    return FailureRecord(key, IMAGE_STAGE, "image_too_large", message)


def too_many_panels(found: FigurePanels, max_panels: int) -> FailureRecord | None:
    if len(found.panels) <= max_panels:
        return None
    message = f"{len(found.panels)} panels detected (limit {max_panels}); the figure fails whole"
    return FailureRecord(found.figure_key, STAGE, "too_many_panels", message)


def left_of(figure: Row) -> float:
    """Seconds the figure's article has left (no budget on rows made outside the build)."""
    left = figure["record"].get(BUDGET_LEFT)
    return float("inf") if left is None else left


def panel_rows(
    figures: list[Row],
    detector: PanelDetector,
    settings: Settings,
    gallery: Callable[[Row, FigurePanels, list[dict[str, Any]]], object] | None = None,
) -> list[list[Row]]:
    """One list of rows per figure row: its panels, or its failure. ``gallery`` sees each
    figure that became panels (the report's sample of figures is thumbnailed there)."""
    limits = settings.detector
    failed: dict[str, FailureRecord] = {}
    for f in figures:
        if (refused := oversized(f["key"], f["image"], limits.max_decoded_bytes)) is not None:
            failed[f["key"]] = refused
    for f in figures:  # a figure whose article spent its budget is not detected at all
        late = budget.overrun(f["key"], STAGE, 0.0, left_of(f), "the article's earlier work")
        if f["key"] not in failed and late is not None:
            failed[f["key"]] = late
    todo = [(f["key"], f["image"]) for f in figures if f["key"] not in failed]
    start = time.monotonic()
    found, failures = detector.detect(todo)
    share = (time.monotonic() - start) / max(len(todo), 1)
    by_key = {f.figure_key: f for f in found}
    failed |= {f.source_key: f for f in failures}
    for f in found:
        if (crowded := too_many_panels(f, limits.max_panels)) is not None:
            failed[f.figure_key] = crowded
    out: list[list[Row]] = []
    for figure in figures:
        article_key = figure["record"]["article_key"]
        try:
            if figure["key"] in failed:
                out.append([failure_row(failed[figure["key"]], "figure", article_key)])
                continue
            start = time.monotonic()
            rows = figure_panel_rows(figure, by_key[figure["key"]], settings)
            spent = share + time.monotonic() - start
            what = "detection, pairing and crops"
            late = budget.overrun(figure["key"], STAGE, spent, left_of(figure), what)
            if late is None and gallery is not None:
                gallery(figure, by_key[figure["key"]], [r["record"] for r in rows])
            out.append(rows if late is None else [failure_row(late, "figure", article_key)])
        except Exception as exc:  # a pairing fault fails this figure only
            failure = FailureRecord.from_exception(figure["key"], STAGE, exc)
            out.append([failure_row(failure, "figure", article_key)])
    return out
