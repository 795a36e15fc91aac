"""What counts as a panel, in what order, with which label; and the metrics that score it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from modeldev.detector.metrics import Detections, average_precision, f1_at, summarize
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.boxes import iou_matrix
from ray_jobs.figures.panels import (
    LABEL,
    PANEL,
    RawBox,
    attach_labels,
    build_panels,
    figure_guard,
    reading_order,
    select_panels,
)

SETTINGS = DetectorSettings(conf=0.3, min_side_px=10, min_area_fraction=0.001)


def test_reading_order_rows_then_columns() -> None:
    # two rows; the second row's panels have uneven tops
    boxes = [
        (210, 120, 300, 200),
        (0, 0, 100, 100),
        (110, 130, 200, 190),
        (105, 0, 200, 100),
        (0, 110, 100, 210),
    ]
    assert reading_order(boxes) == [1, 3, 4, 2, 0]


def test_select_panels_drops_small_degenerate_containers_and_duplicates() -> None:
    raw = [
        RawBox((0, 0, 100, 100), 0.9, PANEL),
        RawBox((100, 0, 200, 100), 0.8, PANEL),
        RawBox((0, 0, 200, 100), 0.7, PANEL),  # the whole row: contains both panels
        RawBox((1, 1, 99, 99), 0.6, PANEL),  # near-duplicate of the first
        RawBox((50, 50, 55, 54), 0.9, PANEL),  # tiny
        RawBox((30, 30, 30, 60), 0.9, PANEL),  # degenerate
        RawBox((0, 0, 90, 90), 0.1, PANEL),  # below the threshold: ignored, not "dropped"
        RawBox((2, 2, 12, 12), 0.9, LABEL),  # a label is not a panel
        RawBox((-20, -5, 100, 100), 0.5, PANEL),  # out of the image: clipped, then duplicate
    ]
    kept, dropped = select_panels("fig", raw, 200, 100, SETTINGS)
    assert [b for b, _ in kept] == [(0, 0, 100, 100), (100, 0, 200, 100)]
    assert sorted(d.reason for d in dropped) == [
        "container",
        "degenerate",
        "duplicate",
        "duplicate",
        "too_small",
    ]


def test_overlapping_halves_of_one_picture_are_merged() -> None:
    raw = [RawBox((29, 0, 371, 577), 0.25, PANEL), RawBox((279, 0, 597, 499), 0.32, PANEL)]
    kept, dropped = select_panels("ct", raw, 662, 580, SETTINGS.model_copy(update={"conf": 0.2}))
    assert kept == [((29, 0, 597, 577), 0.32)]
    assert [d.reason for d in dropped] == ["merged", "merged"]
    # a weak box straddling a confident one is dropped, not merged
    straddle = [
        RawBox((1, 1, 360, 438), 0.61, PANEL),
        RawBox((111, 2, 634, 468), 0.28, PANEL),
        RawBox((368, 10, 634, 442), 0.7, PANEL),
    ]
    kept, dropped = select_panels(
        "mri", straddle, 634, 468, SETTINGS.model_copy(update={"conf": 0.2})
    )
    assert [b for b, _ in kept] == [(1, 1, 360, 438), (368, 10, 634, 442)]
    assert [d.reason for d in dropped] == ["overlap"]
    # neighbours that touch are not merged
    side_by_side = [RawBox((0, 0, 100, 100), 0.9, PANEL), RawBox((98, 0, 200, 100), 0.9, PANEL)]
    assert len(select_panels("k", side_by_side, 200, 100, SETTINGS)[0]) == 2


def test_a_fragment_inside_one_panel_is_dropped() -> None:
    raw = [
        RawBox((0, 0, 300, 340), 0.83, PANEL),
        RawBox((0, 0, 150, 340), 0.34, PANEL),
        RawBox((320, 0, 700, 340), 0.94, PANEL),
    ]
    kept, dropped = select_panels("fig", raw, 700, 380, SETTINGS)
    assert [b for b, _ in kept] == [(0, 0, 300, 340), (320, 0, 700, 340)]
    assert [(d.bbox, d.reason) for d in dropped] == [((0, 0, 150, 340), "nested")]


def test_a_box_far_surer_than_the_pieces_it_holds_is_the_panel() -> None:
    """A bar chart boxed whole at 0.87 and also as two halves at 0.4 and 0.5 is one panel;
    the same halves under a box no surer than they are stay two panels (a row box)."""
    halves = [RawBox((0, 0, 100, 100), 0.4, PANEL), RawBox((102, 0, 200, 100), 0.5, PANEL)]
    kept, dropped = select_panels(
        "bars", [RawBox((0, 0, 200, 100), 0.87, PANEL), *halves], 220, 120, SETTINGS
    )
    assert kept == [((0, 0, 200, 100), 0.87)]
    assert sorted(d.reason for d in dropped) == ["nested", "nested"]
    kept, dropped = select_panels(
        "row", [RawBox((0, 0, 200, 100), 0.55, PANEL), *halves], 220, 120, SETTINGS
    )
    assert [b for b, _ in kept] == [(0, 0, 100, 100), (102, 0, 200, 100)]
    assert [d.reason for d in dropped] == ["container"]


def test_labels_attach_inside_or_just_above() -> None:
    panels = [(0, 30, 100, 130), (110, 30, 210, 130)]
    labels = [((112, 32, 125, 45), 0.9), ((2, 10, 15, 26), 0.8), ((180, 300, 190, 310), 0.9)]
    assert attach_labels(panels, labels) == [1, 0]


def test_label_above_a_panel_goes_to_it_when_the_box_above_runs_over_it() -> None:
    """In a figure whose labels sit outside their panels, the top row's box overshoots by
    15 px over the label of the panel below: the label names the panel whose top edge is right
    under it. In a figure whose labels sit inside, one in a bottom-left corner stays."""
    panels = [(0, 20, 200, 155), (0, 160, 200, 280), (210, 20, 400, 140)]
    outside = [((2, 2, 16, 18), 0.9), ((212, 2, 226, 18), 0.9)]
    below = ((2, 138, 16, 156), 0.9)
    assert attach_labels(panels, [*outside, below]) == [0, 2, 1]
    inside = [((4, 24, 18, 40), 0.9), ((214, 24, 228, 40), 0.9)]
    assert attach_labels(panels, [*inside, below]) == [0, None, 1]
    # nothing below: an overshooting bottom row keeps its label
    assert attach_labels([panels[0], panels[2]], [*outside, below]) == [0, 1]


def jpeg(w: int, h: int, blank_left: int = 0) -> Image.Image:
    """Noise (so every region has content), with the first ``blank_left`` columns white."""
    pixels = np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)
    pixels[:, :blank_left] = 255
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG")
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def test_empty_grid_cells_are_dropped_as_blank() -> None:
    raw = [RawBox((0, 0, 58, 80), 0.9, PANEL), RawBox((60, 0, 120, 80), 0.9, PANEL)]
    fig = build_panels("k", jpeg(120, 80, blank_left=59), raw, SETTINGS, "det", "v1")
    assert [p.bbox for p in fig.panels] == [(60, 0, 120, 80)]
    assert [(d.bbox, d.reason) for d in fig.dropped] == [((0, 0, 58, 80), "blank")]
    off = SETTINGS.model_copy(update={"blank_std": 0})
    assert len(build_panels("k", jpeg(120, 80, 59), raw, off, "det", "v1").panels) == 2


def test_bare_page_with_a_speck_is_blank_but_a_sparse_sketch_is_not() -> None:
    """A strip of white page with one stray mark has a std no flat-cell threshold catches;
    what counts is how little of it is off the page's colour. A sketch of a few thin lines
    on the same page keeps its box."""
    image = Image.new("RGB", (400, 240), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.rectangle((12, 100, 13, 101), fill=(0, 0, 0))  # the speck, in a 30 px strip
    for k in range(6):  # a sketch: six thin strokes, about 1% of its box
        draw.line((60 + 40 * k, 30, 90 + 30 * k, 200), fill=(20, 20, 90), width=1)
    raw = [RawBox((0, 0, 30, 240), 0.6, PANEL), RawBox((40, 0, 400, 240), 0.9, PANEL)]
    strip = np.asarray(image.convert("L"), dtype=np.float32)[:, :30]
    assert strip.std() > SETTINGS.blank_std  # the std rule alone keeps the strip
    fig = build_panels("k", image, raw, SETTINGS, "det", "v1")
    assert [p.bbox for p in fig.panels] == [(40, 0, 400, 240)]
    assert [(d.bbox, d.reason) for d in fig.dropped] == [((0, 0, 30, 240), "blank")]
    off = SETTINGS.model_copy(update={"blank_ink_share": 0})
    assert len(build_panels("k", image, raw, off, "det", "v1").panels) == 2


def test_figure_without_confident_boxes_is_one_fallback_panel() -> None:
    fig = build_panels(
        "k", jpeg(120, 80), [RawBox((0, 0, 50, 50), 0.05, PANEL)], SETTINGS, "det", "v1"
    )
    (panel,) = fig.panels
    assert panel.status == "fallback" and panel.score is None
    assert panel.reason == "no_confident_panel"
    assert panel.bbox == (0, 0, 120, 80) and panel.crop_size == (120, 80)
    assert Image.open(io.BytesIO(panel.crop)).size == (120, 80)


def test_panels_carry_crops_labels_and_order() -> None:
    raw = [
        RawBox((60, 0, 120, 80), 0.9, PANEL),
        RawBox((0, 0, 58, 80), 0.8, PANEL),
        RawBox((62, 2, 72, 14), 0.7, LABEL),
    ]
    settings = SETTINGS.model_copy(update={"pad_px": 4})
    fig = build_panels("k", jpeg(120, 80), raw, settings, "det", "v1")
    assert [p.bbox for p in fig.panels] == [(0, 0, 58, 80), (60, 0, 120, 80)]
    assert [p.panel_index for p in fig.panels] == [0, 1]
    assert fig.panels[1].label_bbox == (62, 2, 72, 14) and fig.panels[0].label_bbox is None
    assert fig.panels[0].crop_size == (62, 80)  # padded by 4 on the right, clipped elsewhere


def test_iou_and_average_precision() -> None:
    assert iou_matrix([[0, 0, 10, 10]], [[5, 0, 15, 10]])[0, 0] == pytest.approx(1 / 3)
    gt = [np.array([[0, 0, 10, 10], [20, 20, 30, 30]]), np.array([[0, 0, 5, 5]])]
    perfect = [Detections(g.astype(float), np.ones(len(g))) for g in gt]
    assert average_precision(perfect, gt, 0.5) == pytest.approx(1.0)
    shifted = [Detections(g + np.array([0, 0, 2, 0]), np.ones(len(g))) for g in gt]  # IoU≈0.6-0.8
    assert average_precision(shifted, gt, 0.5) == pytest.approx(1.0)
    assert average_precision(shifted, gt, 0.85) == pytest.approx(0.0)
    # a confident false positive ranked first halves precision at the first recall step
    noisy = [
        Detections(np.vstack([[50, 50, 60, 60], gt[0]]), np.array([0.99, 0.9, 0.8])),
        perfect[1],
    ]
    assert 0.5 < average_precision(noisy, gt, 0.5) < 1.0
    precision, recall, f1 = f1_at(noisy, gt, conf=0.5)
    assert (precision, recall) == (0.75, 1.0) and f1 == pytest.approx(6 / 7)
    summary = summarize(perfect, gt, 0.25)
    assert summary["mAP50"] == 1.0 and summary["mAP50_95"] == 1.0 and summary["F1@0.5"] == 1.0
    assert average_precision([Detections(np.zeros((0, 4)), np.zeros(0))] * 2, gt, 0.5) == 0.0


@pytest.mark.parametrize(
    ("size", "reason"),
    [((2000, 100), "extreme_aspect"), ((70, 1500), "extreme_aspect"), ((63, 200), "tiny_figure")],
)
def test_strips_and_tiny_figures_are_one_panel_with_a_reason(size, reason) -> None:  # type: ignore[no-untyped-def]
    assert figure_guard(*size) == reason
    confident = [RawBox((0, 0, size[0] // 2, size[1]), 0.9, PANEL)]
    fig = build_panels("k", jpeg(*size), confident, SETTINGS, "det", "v1")
    (panel,) = fig.panels
    assert (panel.status, panel.reason, panel.bbox) == ("fallback", reason, (0, 0, *size))
    assert figure_guard(1900, 100) is None and figure_guard(64, 64) is None
