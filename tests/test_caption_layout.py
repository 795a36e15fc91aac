"""The caption as evidence (``captions.layout``): boxes, letters read and caption labels checked
against each other per figure; then through the panel stage, where a figure that disagrees is
published whole with its whole caption (or refused) and its boxes go to the rejects."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from ray_jobs.captions.layout import joined, judge
from ray_jobs.captions.pairing import PanelBox, pair_panels
from ray_jobs.captions.split import split_caption
from ray_jobs.config import load_settings
from ray_jobs.contract.rows import DROPPED, FIGURE, OK, make_row
from ray_jobs.figures.panels import FigurePanels, Panel
from ray_jobs.pipeline.panels_stage import DISAGREEMENT, WHOLE_SUFFIX, figure_panel_rows

CAPTION = "Prostate biopsy. (A) H&E staining. (B) Ki-67 staining. Scale bars, 50 µm."
LABELS = ["A", "B"]


def row(n: int, boxed: tuple[int, ...] = (), letters: dict[int, str] | None = None):
    """``n`` boxes side by side, 90 px wide with 10 px gutters, in reading order."""
    letters = letters or {}
    return [
        PanelBox(i, (i * 100, 0, i * 100 + 90, 90), i in boxed, letters.get(i)) for i in range(n)
    ]


def test_agreeing_counts_pair_as_before() -> None:
    assert judge(row(2), LABELS).case == "count"
    assert judge(row(2, letters={0: "a", 1: "b"}), LABELS).case == "letters"
    assert judge(row(3), []).case == "unlabelled"  # a caption naming no panels cannot disagree
    assert judge(row(1), LABELS, (90, 90)).case == "single"


def test_one_small_box_of_a_compound_figure_disagrees() -> None:
    layout = judge(row(1), LABELS, (400, 300))  # 90x90 of a 400x300 figure: the rest is lost
    assert layout.case == "disagree" and "covering part of the figure" in layout.reason


def test_pieces_join_the_label_before_them() -> None:
    # the detector cut A in two (boxes 0 and 1); only 0 and 2 carry a label
    layout = judge(row(3, boxed=(0, 2)), LABELS)
    assert layout.case == "anchored" and layout.groups == ((0, 1), (2,))
    merged = joined(row(3, boxed=(0, 2)), layout)
    assert [p.bbox for p in merged] == [(0, 0, 190, 90), (200, 0, 290, 90)]
    paired = pair_panels(merged, split_caption(CAPTION), CAPTION)
    assert [(p.label, p.alignment) for p in paired] == [("A", "label"), ("B", "label")]
    # read letters anchor too, and win over label boxes: B read on the third box
    layout = judge(row(3, letters={0: "a", 2: "b"}), LABELS)
    assert layout.case == "anchored" and layout.groups == ((0, 1), (2,))


def test_no_anchor_or_too_few_boxes_disagree() -> None:
    for boxes in (row(3), row(3, boxed=(0,)), row(3, boxed=(0, 1, 2))):
        layout = judge(boxes, LABELS)
        assert layout.case == "disagree" and layout.groups == ()
        assert "the caption names 2 panels, the detector found 3" in layout.reason
    assert judge(row(2), ["A", "B", "C"]).case == "disagree"


def test_joined_panels_that_would_overlap_disagree() -> None:
    # a piece under B joins B (the label before it in reading order)
    boxes = [
        PanelBox(0, (0, 0, 90, 90), True),
        PanelBox(1, (100, 0, 190, 90), True),
        PanelBox(2, (100, 100, 190, 190), False),
    ]
    layout = judge(boxes, LABELS)
    assert (layout.case, layout.groups) == ("anchored", ((0,), (1, 2)))
    # a piece under both: joined to B, B would cover A's column; it belongs to no one label
    boxes[2] = PanelBox(2, (0, 100, 190, 190), False)
    assert judge(boxes, LABELS).case == "disagree"


def _figure(width: int = 300, height: int = 100) -> tuple[dict, bytes]:
    img = Image.new("RGB", (width, height), "white")
    for i in range(3):
        img.paste((40 * i + 60, 90, 200), (i * 100 + 5, 5, i * 100 + 85, 85))
    out = io.BytesIO()
    img.save(out, format="PNG")
    record = {
        "figure_key": "PMC1_1_fig1",
        "article_key": "PMC1.1",
        "caption": CAPTION,
        "bold_labels": [],
        "mentions": [{"sentence": "Ki-67 was high (Fig. 1B).", "panels": ["B"]}],
    }
    return record, out.getvalue()


def _found(boxed: tuple[int, ...]) -> FigurePanels:
    panels = []
    for i in range(3):
        box = (i * 100, 0, i * 100 + 90, 90)
        crop = io.BytesIO()
        Image.new("RGB", (90, 90), (i * 50, 0, 0)).save(crop, format="PNG")
        panels.append(
            Panel(
                "PMC1_1_fig1",
                i,
                box,
                0.9,
                label_bbox=(box[0], 0, box[0] + 10, 10) if i in boxed else None,
                detector="yolo",
                detector_version="t",
                crop=crop.getvalue(),
                crop_size=(90, 90),
            )
        )
    return FigurePanels("PMC1_1_fig1", 300, 100, panels)


@pytest.mark.parametrize("mode", ["whole", "reject"])
def test_a_disagreeing_figure_is_published_whole_or_refused(mode: str) -> None:
    record, image = _figure()
    figure = make_row(record["figure_key"], FIGURE, record, image)
    settings = load_settings(environ={}, captions={"on_disagreement": mode})
    rows = figure_panel_rows(figure, _found(boxed=()), settings)
    refused = [r for r in rows if r["status"] == DROPPED]
    assert [r["record"]["drop_reason"] for r in refused] == [DISAGREEMENT] * 3
    assert all(r["image"] is None for r in refused)
    assert "names 2 panels, the detector found 3" in refused[0]["record"]["layout_reason"]
    published = [r for r in rows if r["status"] == OK]
    if mode == "reject":
        assert published == []
        return
    (whole,) = published
    rec = whole["record"]
    assert whole["key"] == "PMC1_1_fig1" + WHOLE_SUFFIX
    assert (rec["alignment"], rec["subcaption"], rec["panel_label"]) == ("figure", CAPTION, None)
    assert rec["caption_agreement"] == "disagree" and rec["panel_bbox"] == [0, 0, 300, 100]
    assert rec["inline_mentions"] == ["Ki-67 was high (Fig. 1B)."]
    with Image.open(io.BytesIO(whole["image"])) as img:
        assert img.size == (300, 100)  # the whole figure, not one of its boxes


def test_an_anchored_figure_publishes_the_joined_panels_with_their_own_text() -> None:
    record, image = _figure()
    figure = make_row(record["figure_key"], FIGURE, record, image)
    settings = load_settings(environ={})
    rows = figure_panel_rows(figure, _found(boxed=(0, 2)), settings)
    assert [r["status"] for r in rows] == [OK, OK]
    first, second = (r["record"] for r in rows)
    assert (first["panel_label"], second["panel_label"]) == ("A", "B")
    assert first["caption_agreement"] == "anchored" and first["panel_bbox"] == [0, 0, 190, 90]
    assert "H&E" in first["subcaption"] and "Ki-67" not in first["subcaption"]
    pad = settings.detector.pad_px
    with Image.open(io.BytesIO(rows[0]["image"])) as img:  # cut again: both pieces, padded
        assert img.size == (min(300, 190 + pad), min(100, 90 + pad))


def test_a_grid_of_small_plots_joins_the_letter_above_left_of_it() -> None:
    # A: a 3x2 grid of small plots under one letter; B and C: a column on the right, whose
    # rows interleave with the grid's in reading order (reading order alone would split A)
    grid = [(x * 60, y * 60, x * 60 + 50, y * 60 + 50) for y in range(2) for x in range(3)]
    right = [(200, 0, 300, 50), (200, 60, 300, 110)]
    boxes = [
        PanelBox(0, grid[0], True, "a"),
        PanelBox(1, grid[1]),
        PanelBox(2, grid[2]),
        PanelBox(3, right[0], True, "b"),
        PanelBox(4, grid[3]),
        PanelBox(5, grid[4]),
        PanelBox(6, grid[5]),
        PanelBox(7, right[1], True, "c"),
    ]
    layout = judge(boxes, ["A", "B", "C"])
    assert layout.case == "anchored"
    assert layout.groups == ((0, 1, 2, 4, 5, 6), (3,), (7,))
    assert [p.bbox for p in joined(boxes, layout)] == [(0, 0, 170, 110), *right]


def test_a_piece_taller_than_its_row_joins_the_letter_of_its_row() -> None:
    # D's letter sits low in its row; the piece beside it starts higher than D's box
    boxes = [
        PanelBox(0, (0, 0, 100, 100), True, "c"),
        PanelBox(1, (0, 140, 100, 200), True, "d"),
        PanelBox(2, (110, 120, 200, 200)),
    ]
    layout = judge(boxes, ["C", "D"])
    assert layout.groups == ((0,), (1, 2))


def test_an_unread_box_out_of_sequence_is_not_paired() -> None:
    caption = "Cells. (A) One. (B) Two. (C) Three. (D) Four."
    split = split_caption(caption)
    # read: a, b, d; the unread box comes last in reading order, but C falls between b and d
    boxes = row(4, letters={0: "a", 1: "b", 2: "d"})
    assert judge(boxes, split.labels).case == "count"
    paired = pair_panels(boxes, split, caption)
    assert [p.label for p in paired] == ["A", "B", "D", None]
    # in sequence, the left-over label is taken
    boxes = row(4, letters={0: "a", 1: "b", 3: "d"})
    assert [p.label for p in pair_panels(boxes, split, caption)] == ["A", "B", "C", "D"]


@pytest.fixture(scope="module")
def real_rows(jats_dir) -> tuple[list, Path, list[dict]]:
    """The panel stage's published rows for the five real articles, as the build makes them
    (the shipped detector; no Ray, no relevance filter)."""
    from modeldev.real_figures import published, truth

    root = jats_dir.parent / "real_articles"
    return truth.load_all(root), root, published.stage_rows(root, load_settings(environ={}))


def test_real_labelled_figures_are_paired_by_their_labels_or_published_whole(real_rows) -> None:
    """On every real figure whose caption names two panels or more, the published samples
    are the whole figure with its whole caption, or panels each with a distinct label of the
    caption: never a panel with the whole caption, never more panels than labels."""
    from modeldev.real_figures import published

    articles, root, rows = real_rows
    scores = published.published(articles, root, rows)
    labelled = [s for s in scores if len(s.figure.caption_labels) >= 2]
    assert len(labelled) >= 15
    for s in labelled:
        if s.whole:
            assert s.panels == 1 and s.case == "disagree", s.figure.key
            continue
        assert s.case in ("letters", "count", "anchored"), (s.figure.key, s.case)
        assert 0 < s.panels <= len(s.figure.caption_labels), s.figure.key
        assert s.labelled_right + s.labelled_wrong == s.panels, s.figure.key
    assert {"disagree", "anchored"} <= {s.case for s in labelled}  # both happen on real ones
    # a caption naming no panels: its figure is published whole too (by default)
    assert not [r for r in rows if r["alignment"] == "full_caption"]
    unlabelled = [r for r in rows if r["caption_agreement"] == "unlabelled"]
    assert unlabelled and {r["alignment"] for r in unlabelled} == {"figure"}
