"""The independent held-out figure family and the protocol that scores methods on it."""

from __future__ import annotations

import ast
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from modeldev.detector import protocol
from modeldev.detector.metrics import Detections, f1_at
from modeldev.heldout.figure import label_for, make_heldout_figure
from ray_jobs.figures.boxes import iou_matrix

REPO = Path(__file__).resolve().parents[1]


def test_same_seed_same_bytes_and_exact_boxes() -> None:
    seen: Counter[str] = Counter()
    for index in range(30):
        data, fig = make_heldout_figure(7, index)
        if index < 3:
            assert make_heldout_figure(7, index)[0] == data
        img = Image.open(io.BytesIO(data))
        assert img.size == (fig.width, fig.height)
        boxes = np.array(fig.panels)
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= fig.width).all()
        assert (boxes[:, 3] <= fig.height).all() and (boxes[:, 2:] > boxes[:, :2]).all()
        ious = iou_matrix(boxes, boxes) - np.eye(len(boxes))
        assert (ious <= 0).all(), "panels of a figure never overlap"
        assert len(fig.labels) == len(fig.label_texts) == len(fig.panels)
        p = fig.params
        seen[p["gutter_style"]] += 1
        seen.update(k for k in ("title", "legend", "caption", "labels_outside") if p[k])
        seen["inset"] += p["insets"] > 0
        seen.update(f"kind:{k}" for k in p["kinds"])
    assert {"none", "thin", "wide", "title", "caption", "inset"} <= set(seen)
    assert {"kind:bars", "kind:stripes", "kind:gradient", "kind:table"} <= set(seen)
    assert make_heldout_figure(8, 0)[0] != make_heldout_figure(7, 0)[0]


def test_touching_panels_touch() -> None:
    """Gutterless figures are really gutterless: neighbouring boxes share an edge."""
    touching = 0
    for index in range(40):
        _, fig = make_heldout_figure(3, index)
        if fig.params["gutter"] == 0 and len(fig.panels) > 1:
            edges = {b[2] for b in fig.panels} & {b[0] for b in fig.panels}
            touching += bool(edges)
    assert touching >= 5


def test_label_schemes() -> None:
    assert [label_for("A", i) for i in range(3)] == ["A", "B", "C"]
    assert label_for("(a)", 1) == "(b)" and label_for("i", 3) == "iv"
    assert label_for("a1", 2) == "a3" and label_for("A.", 0) == "A."


def test_family_is_independent_of_the_training_generator() -> None:
    """No module of the family imports the training generator, and nothing that trains
    imports the family."""
    for path in (REPO / "modeldev/heldout").glob("*.py"):
        tree = ast.parse(path.read_text())
        names = [
            n.module if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in (n.names if isinstance(n, ast.Import) else [n])
        ]
        assert not any(name and "synth" in name for name in names), path
    for trainer in ("modeldev/detector/train.py", "modeldev/synth/generate.py"):
        assert "heldout" not in (REPO / trainer).read_text()


@pytest.mark.parametrize(
    ("caption", "count"),
    [
        ("Figure 4. Nuclear magnetic resonance scan.", 1),
        ("Figure 1. (A) Barium enema and (B) endoscopic image.", 2),
        ("Brain CT (A) and MR diffusion images (B, C) showing no lesion.", 3),
        ("Mid sagittal (A, C) and axial MRI (B, D) of the spine.", 4),
        ("Serial images (A–D) of the lesion.", 4),
    ],
)
def test_caption_count(caption: str, count: int) -> None:
    assert protocol.caption_count(caption) == count


def test_real_figures_gold_is_their_caption_count() -> None:
    items = protocol.real()
    assert len(items) == 10 and all(i.boxes is None for i in items)
    assert sorted(i.count for i in items) == [1, 1, 1, 1, 1, 2, 2, 2, 3, 4]


def test_score_counts_hits_misses_and_exact_counts() -> None:
    items = protocol.family(3, seed=5)
    perfect = [(item.boxes.tolist(), [0.9] * item.count) for item in items]
    scores = protocol.score(items, perfect, 1.0)
    assert scores["F1@0.5"] == 1.0 and scores["mAP@0.5"] == 1.0 and scores["exact_count"] == 1.0
    whole = [([(0, 0, 10_000, 10_000)], [None]) for _ in items]
    missed = protocol.score(items, whole, 1.0)
    assert missed["F1@0.5"] < 0.5 and missed["panels"] == 3
    assert missed["exact_count"] == pytest.approx(np.mean([i.count == 1 for i in items]))


def test_intervals_and_paired_gains() -> None:
    """F1 from per-figure counts is the matcher's F1; the bootstrap intervals hold the point
    and vanish when nothing varies; a paired gain is zero between equal methods and clear of
    zero when one method fails figures the other gets right."""
    items = protocol.family(24, seed=5)
    perfect = [(item.boxes.tolist(), [0.9] * item.count) for item in items]
    rng = np.random.default_rng(1)
    noisy = [  # every other figure loses a panel and gains a stray box
        ([*b[1:], [0, 0, 5, 5]], s) if k % 2 else (b, s) for k, (b, s) in enumerate(perfect)
    ]
    scored = protocol.score(items, noisy, 1.0)
    preds = [Detections(np.array(b, float), rng.uniform(0.5, 1, len(b))) for b, _ in noisy]
    assert scored["F1@0.5"] == pytest.approx(
        f1_at(preds, [i.boxes for i in items], 0.0)[2], abs=1e-4
    )
    lo, hi = scored["F1_ci"]
    assert lo < scored["F1@0.5"] < hi < 1.0
    assert protocol.score(items, perfect, 1.0)["F1_ci"] == (1.0, 1.0)
    same = protocol.gain(items, noisy, noisy)
    assert same["F1"] == 0 and same["F1_ci"] == (0.0, 0.0) and same["exact_count_ci"] == (0.0, 0.0)
    better = protocol.gain(items, perfect, noisy)
    assert better["F1"] == pytest.approx(1.0 - scored["F1@0.5"], abs=1e-4)
    assert 0 < better["F1_ci"][0] <= better["F1"] <= better["F1_ci"][1]
    assert better["exact_count"] == 0.0  # a panel swapped for a stray box keeps the count
    real = protocol.real()
    whole = [([(0, 0, 1, 1)], [None]) for _ in real]
    assert protocol.gain(real, whole, whole)["F1"] is None


def test_proposal_ceiling_takes_the_best_proposal_for_each_gold_panel() -> None:
    """Each gold panel gets the proposal that overlaps it most, if IoU 0.5 or more, and no
    proposal serves two; a merge, a fragment or a duplicate of a taken box is left out, and
    a figure where nothing is chosen keeps the whole figure, as the stage does."""
    page = io.BytesIO()
    Image.new("RGB", (400, 200), "white").save(page, "PNG")
    gold = np.array([(0, 0, 100, 200), (100, 0, 200, 200), (200, 0, 400, 200)], float)
    items = [protocol.Item(f"three-{k}", page.getvalue(), gold, 3) for k in range(2)]
    merged, fragment, near = (0, 0, 210, 200), (0, 0, 40, 200), (2, 1, 99, 198)
    proposals = [  # IoU with the first panel: 0.48, 0.4, 1, 0.95
        [(merged, 0.9), (fragment, 0.8), ((0, 0, 100, 200), 0.3), (near, 0.6)],
        [((150, 0, 250, 200), 0.9)],  # astride two panels: IoU 1/3 and 1/5
    ]
    (boxes, scores), (fallback, _) = protocol.proposal_ceiling(items, proposals)
    assert boxes == [(0.0, 0.0, 100.0, 200.0)] and scores == [1.0]
    assert fallback == [(0.0, 0.0, 400.0, 200.0)]
    assert protocol.score(items[:1], [(boxes, scores)], 0)["F1@0.5"] == 0.5
    with pytest.raises(ValueError, match="gold boxes"):
        protocol.proposal_ceiling(protocol.real()[:1], [[]])
