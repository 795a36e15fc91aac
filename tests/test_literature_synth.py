"""The literature-style figure generator: exact, consistent, reproducible boxes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modeldev.synth.literature import (
    ink_box,
    make_figure,
    make_literature_figure,
    write_literature_dataset,
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("lit")
    figures = write_literature_dataset(out, 4, seed=3, workers=1, max_side=512)
    return out, figures


def test_boxes_inside_image_and_labels_at_corners(dataset) -> None:  # type: ignore[no-untyped-def]
    _, figures = dataset
    for fig in figures:
        assert len(fig["panels"]) == len(fig["labels"]) >= 1
        for x0, y0, x1, y1 in fig["panels"]:
            assert 0 <= x0 < x1 <= fig["width"] and 0 <= y0 < y1 <= fig["height"]
        for panel, label in zip(fig["panels"], fig["labels"], strict=True):
            if label is None:
                continue
            assert panel[0] - 2 <= label[0] and panel[1] - 2 <= label[1]
            assert label[2] <= panel[2] + 2 and label[3] <= panel[3] + 2
            # the top-left corner: within a few pixels of the panel's left and top edges
            assert label[0] - panel[0] <= 6 and label[1] - panel[1] <= 6


def test_panels_do_not_overlap(dataset) -> None:  # type: ignore[no-untyped-def]
    _, figures = dataset
    for fig in figures:
        boxes = fig["panels"]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                ix = min(a[2], b[2]) - max(a[0], b[0])
                iy = min(a[3], b[3]) - max(a[1], b[1])
                assert min(ix, iy) <= 3, (fig["name"], a, b)


def test_yolo_labels_match_truth(dataset) -> None:  # type: ignore[no-untyped-def]
    out, figures = dataset
    assert (out / "data.yaml").read_text().count("names:") == 1
    for fig in figures:
        lines = (out / "labels" / fig["split"] / f"{fig['name']}.txt").read_text().split("\n")
        rows = [list(map(float, line.split())) for line in lines if line]
        truth = [(0, b) for b in fig["panels"]] + [(1, b) for b in fig["labels"] if b]
        assert len(rows) == len(truth)
        for row, (cls, (x0, y0, x1, y1)) in zip(rows, truth, strict=True):
            assert row[0] == cls
            w, h = fig["width"], fig["height"]
            assert row[1] == pytest.approx((x0 + x1) / 2 / w, abs=1e-5)
            assert row[3] == pytest.approx((x1 - x0) / w, abs=1e-5)
            assert row[2] == pytest.approx((y0 + y1) / 2 / h, abs=1e-5)
            assert row[4] == pytest.approx((y1 - y0) / h, abs=1e-5)
        meta = json.loads((out / "meta" / f"{fig['name']}.json").read_text())
        assert meta["panels"] == [list(b) for b in fig["panels"]]
        assert max(fig["width"], fig["height"]) <= 512
    coco = json.loads((out / "annotations" / "train.json").read_text())
    assert {c["name"] for c in coco["categories"]} == {"panel", "label"}


def test_same_seed_same_bytes() -> None:
    a, ta = make_figure(5, 2, max_side=400)
    b, tb = make_figure(5, 2, max_side=400)
    assert a == b and ta == tb
    c, _ = make_figure(5, 3, max_side=400)
    assert c != a


def test_small_multiples_panel_covers_its_grid() -> None:
    rng = np.random.default_rng(11)
    fig = make_literature_figure(rng, width=900, n_panels=3, kinds=["small_multiples", "bars"])
    arr = np.asarray(fig.image)
    for kind, cell, box in zip(fig.kinds, fig.cells, fig.panels, strict=True):
        # the box lies in its cell and holds every ink pixel of the cell: no sub-plot, tick
        # label, header or legend of the panel is left out
        assert cell[0] <= box[0] and cell[1] <= box[1] and box[2] <= cell[2] and box[3] <= cell[3]
        ink = ink_box(arr[cell[1] : cell[3], cell[0] : cell[2]])
        assert ink is not None
        assert box[0] - cell[0] <= ink[0] and box[1] - cell[1] <= ink[1]
        assert ink[2] <= box[2] - cell[0] and ink[3] <= box[3] - cell[1]
        if kind == "small_multiples":  # one box for the whole grid, not one per plot
            area = (box[2] - box[0]) * (box[3] - box[1])
            assert area > 0.5 * (cell[2] - cell[0]) * (cell[3] - cell[1])
    assert "small_multiples" in fig.kinds
