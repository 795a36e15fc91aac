"""Synthetic compound figures: the ground truth is exact, and the output is reproducible."""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from modeldev.synth.generate import coco, make_figure, write_dataset, yolo_lines
from modeldev.synth.hard_panels import HARD
from modeldev.synth.labels import SCHEMES, label_text, roman
from modeldev.synth.layout import nested_layout


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "data.yaml"  # holds the absolute dataset path
    }


def test_same_seed_same_bytes_whatever_the_worker_count(tmp_path: Path) -> None:
    write_dataset(tmp_path / "one", 14, seed=5, workers=1)
    write_dataset(tmp_path / "two", 14, seed=5, workers=2)
    write_dataset(tmp_path / "other", 14, seed=6, workers=2)
    one, two = tree_digest(tmp_path / "one"), tree_digest(tmp_path / "two")
    assert one == two
    assert one != tree_digest(tmp_path / "other")
    assert len([k for k in one if k.startswith("images/")]) == 14


def test_boxes_match_the_drawn_panels() -> None:
    """Inside every panel box the figure differs from the page; in the gap around a box it is
    the page itself."""
    checked = 0
    for index in range(40):
        data, fig = make_figure(21, index)
        img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)
        page = np.array(fig.params["background"], dtype=np.int16)
        assert img.shape[:2] == (fig.height, fig.width)
        occupied = np.zeros(img.shape[:2], dtype=bool)
        for box in fig.panels + [b for b in fig.labels if b]:
            x0, y0, x1, y1 = box
            assert 0 <= x0 < x1 <= fig.width and 0 <= y0 < y1 <= fig.height
            occupied[y0:y1, x0:x1] = True
        gap = fig.params["margin"] * fig.params["scale"]
        for x0, y0, x1, y1 in fig.panels:
            inside = img[y0 + 2 : y1 - 2, x0 + 2 : x1 - 2]
            assert inside.size and np.abs(inside - page).mean() > 4, (index, "blank panel")
            if gap < 4:
                continue
            # a 1-pixel ring 2 px outside the box, where no other panel or label lies
            ring = np.zeros_like(occupied)
            ring[max(0, y0 - 2) : y1 + 2, max(0, x0 - 2) : x1 + 2] = True
            ring[max(0, y0 - 1) : y1 + 1, max(0, x0 - 1) : x1 + 1] = False
            ring &= ~occupied
            if ring.sum() > 20:
                assert np.abs(img[ring] - page).mean() < 30, (index, "box edge misses panel")
                checked += 1
    assert checked > 20


def test_yolo_coco_and_meta_agree(tmp_path: Path) -> None:
    figures = write_dataset(tmp_path, 20, seed=3, workers=2)
    for split in ("train", "val"):
        spec = json.loads((tmp_path / "annotations" / f"{split}.json").read_text())
        chosen = [f for f in figures if f["split"] == split]
        assert [i["file_name"] for i in spec["images"]] == [f"{f['name']}.jpg" for f in chosen]
        n_boxes = sum(len(f["panels"]) + sum(1 for b in f["labels"] if b) for f in chosen)
        assert len(spec["annotations"]) == n_boxes
    fig = figures[1]
    lines = (tmp_path / "labels" / fig["split"] / f"{fig['name']}.txt").read_text().splitlines()
    n_labels = sum(1 for b in fig["labels"] if b)
    assert (
        Counter(line.split()[0] for line in lines)
        == Counter({"0": len(fig["panels"]), "1": n_labels}) - Counter()
    )  # Counter() drops a zero label count
    cls, cx, cy, w, h = lines[0].split()
    x0, y0, x1, y1 = fig["panels"][0]
    assert cls == "0"
    assert float(cx) * fig["width"] == pytest.approx((x0 + x1) / 2, abs=0.01)
    assert float(cy) * fig["height"] == pytest.approx((y0 + y1) / 2, abs=0.01)
    assert float(w) * fig["width"] == pytest.approx(x1 - x0, abs=0.01)
    assert float(h) * fig["height"] == pytest.approx(y1 - y0, abs=0.01)
    meta = json.loads((tmp_path / "meta" / f"{fig['name']}.json").read_text())
    assert meta["panels"] == [list(b) for b in fig["panels"]] and meta["params"]["seed"] == 3
    assert (tmp_path / "data.yaml").read_text().count("panel") == 1


def test_generator_covers_layouts_schemes_and_placements() -> None:
    seen: Counter[str] = Counter()
    grids = set()
    for index in range(120):
        _, fig = make_figure(8, index, max_side=256)
        p = fig.params
        seen[p["layout"]] += 1
        seen[f"scheme:{p['scheme']}"] += 1
        seen[f"place:{p['label_placement']}"] += 1
        grids.add(tuple(p["grid"]))
        coco_doc = coco(
            [
                {
                    "name": fig.name,
                    "width": fig.width,
                    "height": fig.height,
                    "panels": fig.panels,
                    "labels": fig.labels,
                }
            ]
        )
        assert len(coco_doc["annotations"]) == len(yolo_lines(fig).splitlines())
    assert {"grid", "span", "ragged"} <= set(seen)
    assert {"place:inside", "place:outside", "place:None"} <= set(seen)
    assert sum(1 for k in seen if k.startswith("scheme:")) >= 8
    assert (1, 1) in grids or (1, 2) in grids
    assert any(r >= 4 and c >= 4 for r, c in grids)


def test_label_schemes() -> None:
    assert [label_text("A", i, 0, i) for i in range(3)] == ["A", "B", "C"]
    assert label_text("i", 3, 0, 3) == "iv" and roman(12) == "xii"
    assert label_text("a1", 4, 1, 2) == "b3" and label_text("a-1", 0, 0, 0) == "a-1"
    assert label_text("(a)", 1, 0, 1) == "(b)" and label_text("a)", 2, 0, 2) == "c)"
    assert len(SCHEMES) == 10
    with pytest.raises(ValueError):
        label_text("?", 0, 0, 0)


def test_hard_figures_keep_exact_truth_and_furniture_outside_panels() -> None:
    """Figures drawn without the shortcuts: uneven and gutterless grids, gap-filled plots,
    textures, insets, titles and legends; every panel box still holds a drawn panel, and the
    title and legend lie outside every box."""
    seen: Counter[str] = Counter()
    for index in range(16):
        data, fig = make_figure(31, index, max_side=512, hard=1.0)
        img = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
        assert img.shape == (fig.height, fig.width) and fig.params["hard"]
        for x0, y0, x1, y1 in fig.panels:
            assert 0 <= x0 < x1 <= fig.width and 0 <= y0 < y1 <= fig.height
            assert img[y0:y1, x0:x1].std() > 3, (index, "blank panel")
        top = min(b[1] for b in fig.panels + [lb for lb in fig.labels if lb])
        right = max(b[2] for b in fig.panels)
        if "title" in fig.params["furniture"]:
            assert top >= 20 * fig.params["scale"]  # the title band is above every box
        if "legend" in fig.params["furniture"]:
            assert right <= fig.width - 30 * fig.params["scale"]
        seen[fig.params["layout"]] += 1
        seen.update(fig.params["furniture"])
        seen.update(k for k in fig.params["panel_kinds"] if k in HARD)
    assert {"uneven", "title", "legend"} <= set(seen)
    assert len([k for k in seen if k in HARD]) >= 5


def test_hard_share_is_reproducible_and_zero_changes_nothing(tmp_path: Path) -> None:
    write_dataset(tmp_path / "one", 8, seed=4, workers=1, max_side=256, hard=0.5)
    write_dataset(tmp_path / "two", 8, seed=4, workers=2, max_side=256, hard=0.5)
    assert tree_digest(tmp_path / "one") == tree_digest(tmp_path / "two")
    hard = [make_figure(4, i, max_side=256, hard=0.5)[1].params["hard"] for i in range(8)]
    assert 0 < sum(hard) < 8
    assert make_figure(4, 1, max_side=256)[0] == make_figure(4, 1, max_side=256, hard=0.0)[0]


def test_nested_layouts_tile_the_page_without_overlap() -> None:
    """Successive cuts: the panels never overlap, stay on the page, respect the gutter and the
    minimum side, and reach many panels of very different sizes; rows and columns are read
    top to bottom, then left to right."""
    counts, spreads = [], []
    for index in range(60):
        rng = np.random.default_rng([3, index])
        margin = int(rng.choice([0, 2, 8]))
        layout = nested_layout(rng, label_band=0, margin=margin)
        boxes = layout.boxes
        assert layout.kind == "nested" and layout.margin == margin
        for k, (x0, y0, x1, y1) in enumerate(boxes):
            assert 0 <= x0 < x1 <= layout.width and 0 <= y0 < y1 <= layout.height
            assert min(x1 - x0, y1 - y0) >= 40
            for a0, b0, a1, b1 in boxes[k + 1 :]:  # apart by at least the gutter on one axis
                gap = max(a0 - x1, x0 - a1, b0 - y1, y0 - b1)
                assert gap >= margin
        covered = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes)
        if margin == 0:  # gutterless: the panels tile the page exactly
            assert covered == layout.width * layout.height
        assert sorted(boxes, key=lambda b: (b[1], b[0])) == boxes
        assert [(layout.row_of[k], layout.col_of[k]) for k in range(len(boxes))] == sorted(
            zip(layout.row_of, layout.col_of, strict=True)
        )
        areas = [(x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes]
        counts.append(len(boxes))
        spreads.append(max(areas) / min(areas))
    assert max(counts) >= 12 and min(counts) <= 4
    assert max(spreads) >= 8  # a large panel beside small ones


def test_nested_share_changes_only_layouts_and_is_reproducible() -> None:
    """``nested`` draws from its own stream: at 0 a hard figure is what it was, and a nested
    figure's panels hold drawn content, bytes identical on a second call."""
    assert (
        make_figure(9, 2, max_side=256, hard=1.0)[0]
        == make_figure(9, 2, max_side=256, hard=1.0, nested=0.0)[0]
    )
    seen = 0
    for index in range(12):
        data, fig = make_figure(9, index, max_side=384, hard=0.5, nested=1.0)
        assert (
            fig.params["layout"] == "nested"
            and data == make_figure(9, index, max_side=384, hard=0.5, nested=1.0)[0]
        )
        img = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
        for x0, y0, x1, y1 in fig.panels:
            assert img[y0:y1, x0:x1].std() > 3, (index, "blank panel")
        seen += len(fig.panels)
    assert seen >= 12 * 3


def test_furniture_share_adds_ink_outside_every_panel_and_nothing_else() -> None:
    """``furniture`` has its own stream: at 0 figures are what they were; at 1 the plain
    figures that draw a title or legend keep every panel inside the page, shifted below the
    title, and the added ink lies outside every panel."""
    assert (
        make_figure(4, 3, max_side=256, hard=1.0)[0]
        == make_figure(4, 3, max_side=256, hard=1.0, furniture=1.0)[0]
    )
    furnished = 0
    for index in range(16):
        plain_data, plain = make_figure(4, index, max_side=4096)
        data, fig = make_figure(4, index, max_side=4096, furniture=1.0)
        assert not fig.params["hard"] and len(fig.panels) == len(plain.panels)
        if not fig.params["furniture"]:
            assert data == plain_data, index
            continue
        furnished += 1
        shift = fig.panels[0][1] - plain.panels[0][1]
        assert shift >= 0 and (shift > 0) == ("title" in fig.params["furniture"])
        assert fig.panels == [(a, b + shift, c, d + shift) for a, b, c, d in plain.panels]
        if "legend" in fig.params["furniture"]:
            assert fig.width > plain.width
            img = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
            strip = img[:, max(p[2] for p in fig.panels) + 2 :]
            assert (np.abs(strip - strip[0, -1]) > 40).mean() > 0.02, (index, "no legend ink")
    assert furnished >= 3


def test_localizers_draw_a_second_scan_inside_one_panel_box() -> None:
    """A localized panel holds two pictures side by side on one dark ground and stays one
    box; a figure without a localized panel is byte for byte the figure drawn without the
    option (the option draws from its own stream)."""
    seen = 0
    for index in range(40):
        plain_data, plain = make_figure(6, index, max_side=4096)
        data, fig = make_figure(6, index, max_side=4096, localizers=1.0)
        assert fig.panels == plain.panels
        if not fig.params["localized"]:
            assert data == plain_data, index
            continue
        img = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
        for i in fig.params["localized"]:
            assert fig.params["panel_kinds"][i] in ("ct", "fundus")
            x0, y0, x1, y1 = fig.panels[i]
            # columns where the picture fills more than a stroke's share: two runs, two scans
            filled = np.r_[False, (img[y0:y1, x0:x1] > 60).mean(0) > 0.05, False]
            edges = np.flatnonzero(np.diff(filled.astype(int)))
            runs = [b - a for a, b in zip(edges[::2], edges[1::2], strict=True)]
            assert sum(r >= 20 for r in runs) >= 2, (index, i, runs)
            seen += 1
    assert seen >= 3


def test_one_panel_makers_hold_what_looks_like_gutters() -> None:
    """The makers for tables, prose, heat maps and sketches draw one panel whose inside shows
    the cues the detector must not cut at: a table's white corridors run its full height
    between columns, prose has white rows, a heat map's cells are many colours with its own
    colour bar, a sketch is mostly page. Always the asked size, always some ink."""
    seen: Counter[str] = Counter()
    for index in range(24):
        rng = np.random.default_rng([9, index])
        w, h = int(rng.integers(140, 320)), int(rng.integers(110, 260))
        for name in ("column_table", "paragraph", "cell_matrix", "line_sketch"):
            img = HARD[name](rng, w, h)
            grey = np.asarray(img.convert("L"), dtype=np.float32)
            assert img.size == (w, h) and (grey < 200).mean() > 0.002, (name, index)
            ink = grey < 200
            white_rows = int((~ink.any(1)).sum())
            if name == "column_table":
                rules = ink.mean(1) > 0.6  # horizontal rules cross the corridors
                used = np.flatnonzero(ink[~rules, 4:-4].any(0))
                seen[name] += len(used) and used[-1] - used[0] + 1 - len(used) >= 6
            elif name == "paragraph":
                seen[name] += white_rows >= 0.2 * h
            elif name == "cell_matrix":
                colours = len(np.unique(np.asarray(img).reshape(-1, 3), axis=0))
                seen[name] += colours >= 6
            else:
                seen[name] += (grey > 235).mean() > 0.85
    assert all(seen[name] >= 20 for name in HARD if name in seen), seen
    assert len(seen) == 4


def test_label_faces_set_labels_in_the_readers_type_inside_their_boxes() -> None:
    """``label_faces`` has its own stream: a figure it leaves in DejaVu Sans is byte for byte
    the figure drawn without it; the others name one of the reader's faces (never the held-out
    family's mono or STIX), their ink differs (unless the face drawn is the generator's own),
    and every label's ink lies inside its box."""
    from modeldev.letters.fonts import faces

    names = {p.name for p in faces()}
    seen: set[str] = set()
    for index in range(16):
        plain_data, plain = make_figure(8, index, max_side=4096)
        data, fig = make_figure(8, index, max_side=4096, label_faces=0.7)
        assert fig.panels == plain.panels and fig.label_texts == plain.label_texts
        face = fig.params["label_face"]
        if face is None or not any(fig.labels):
            assert face is not None or data == plain_data, index
            continue
        assert face in names and "Mono" not in face and "STIX" not in face
        seen.add(face)
        if face in ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"):  # the generator's own type
            continue
        assert data != plain_data
        img = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
        before = np.asarray(Image.open(io.BytesIO(plain_data)).convert("L"), dtype=np.float32)
        changed = np.abs(img - before) > 60
        inside = np.zeros_like(changed)
        for box in (b for b in fig.labels + plain.labels if b):
            inside[box[1] : box[3], box[0] : box[2]] = True
        assert changed.sum() > 0 and (changed & ~inside).sum() <= 0.02 * changed.sum(), index
    assert len(seen) >= 3


def test_dense_plates_are_many_small_framed_panels_on_their_own_stream() -> None:
    """``dense`` draws from its own stream: a figure it does not pick is byte for byte the
    figure drawn without it. A plate holds 8 to 36 panels that never overlap, nearly touch
    (gutter ≤ 3 px), share one kind when the style names one, and, when framed, carry the
    style's grey on all four edges: the only boundary between touching panels of one kind."""
    plates = framed = 0
    for index in range(30):
        plain_data, _ = make_figure(11, index, max_side=4096)
        data, fig = make_figure(11, index, max_side=4096, dense=0.5)
        style = fig.params["dense"]
        if style is None:
            assert data == plain_data, index
            continue
        plates += 1
        boxes = fig.panels
        assert 7 <= len(boxes) <= 36 and fig.params["layout"] == "dense"
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert min(a[2], b[2]) <= max(a[0], b[0]) or min(a[3], b[3]) <= max(a[1], b[1])
            gaps = [
                max(b[0] - a[2], a[0] - b[2], b[1] - a[3], a[1] - b[3]) for b in boxes if b != a
            ]
            assert min(gaps) <= style["margin"], (index, a)
        if style["kind"]:
            assert set(fig.params["panel_kinds"]) == {style["kind"]}
        if not style["frame_width"]:
            continue
        grey = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float32)
        labelled = [lb for lb in fig.labels if lb]
        for x0, y0, x1, y1 in boxes:
            edges = [grey[y0, x0:x1], grey[y1 - 1, x0:x1], grey[y0:y1, x0], grey[y0:y1, x1 - 1]]
            if any(lb[0] < x1 and x0 < lb[2] and lb[1] < y1 and y0 < lb[3] for lb in labelled):
                edges = edges[1:3]  # a label at a corner may cover part of a frame
            for edge in edges:
                assert np.median(np.abs(edge - style["frame_grey"])) < 25, (index, style)
        framed += 1
    assert plates >= 10 and framed >= 5
