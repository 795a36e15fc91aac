"""The separator analysis and the checks it puts on the detector's boxes."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from modeldev.detector.second_opinion import cut_panels, second_opinion, split_box
from modeldev.detector.separators import clear_lines, to_grey, xy_cut


def noise(w: int, h: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 200, (h, w, 3), dtype=np.uint8))


def grid(gap: int) -> Image.Image:
    """2x2 noise panels of 100x80 on white with ``gap`` px gutters."""
    page = Image.new("RGB", (200 + gap, 160 + gap), (255, 255, 255))
    for k, (x, y) in enumerate([(0, 0), (100 + gap, 0), (0, 80 + gap), (100 + gap, 80 + gap)]):
        page.paste(noise(100, 80, k), (x, y))
    return page


def test_xy_cut_finds_a_gutter_grid() -> None:
    leaves = sorted(xy_cut(to_grey(grid(6))))
    assert leaves == [(0, 0, 100, 80), (0, 86, 100, 166), (106, 0, 206, 80), (106, 86, 206, 166)]
    assert len(cut_panels(grid(6))) == 4
    assert len(cut_panels(grid(0))) == 1  # no gutter: the cut cannot tell


def test_an_axis_line_is_not_a_separator() -> None:
    """The white gap between two bars is crossed by the x axis, so it does not cut."""
    img = Image.new("RGB", (200, 120), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    draw.rectangle((20, 40, 60, 100), fill=(30, 60, 200))
    draw.rectangle((140, 20, 180, 100), fill=(30, 60, 200))
    draw.line((10, 100, 190, 100), fill=(0, 0, 0))
    grey = to_grey(img)
    columns = clear_lines(grey.ink[:, 10:190], axis=0)
    assert not columns.any()
    assert split_box(grey, (0, 0, 200, 120)) is None
    assert len(cut_panels(img)) == 1


def test_a_box_over_two_panels_is_split_at_the_gutter() -> None:
    page = Image.new("RGB", (220, 100), (255, 255, 255))
    page.paste(noise(100, 100, 1), (0, 0))
    page.paste(noise(100, 100, 2), (120, 0))
    boxes, scores, notes = second_opinion(page, [(0, 0, 220, 100)], [0.8])
    assert notes["split"] == 1 and scores == [0.8, 0.8]
    assert [b[0] for b in boxes] == [0, 120] and boxes[0][2] in range(99, 103)


def test_a_split_through_a_smooth_picture_is_vetoed() -> None:
    ramp = np.tile(np.linspace(40, 220, 300, dtype=np.float32), (150, 1))
    img = Image.fromarray(ramp.astype(np.uint8)).convert("RGB")
    boxes, scores, notes = second_opinion(img, [(0, 0, 150, 150), (150, 0, 300, 150)], [0.6, 0.7])
    assert notes["vetoed"] == 1 and boxes == [(0, 0, 300, 150)] and scores == [0.7]


def test_splits_on_a_gutter_or_a_visible_edge_stand() -> None:
    gutter = grid(6)
    halves = [(0, 0, 100, 166), (106, 0, 206, 166)]
    assert second_opinion(gutter, halves, [0.9, 0.9], frozenset({"veto"}))[0] == halves
    touching = Image.new("RGB", (200, 100))
    touching.paste(Image.new("RGB", (100, 100), (30, 30, 30)), (0, 0))
    touching.paste(Image.new("RGB", (100, 100), (200, 200, 200)), (100, 0))
    pair = [(0, 0, 100, 100), (100, 0, 200, 100)]
    assert second_opinion(touching, pair, [0.9, 0.9])[0] == pair


def test_a_fallback_figure_takes_the_cut_grid() -> None:
    boxes, scores, notes = second_opinion(grid(8), [(0, 0, 208, 168)], [None])
    assert notes["from_cut"] == 4 and len(boxes) == 4 and scores == [0.5] * 4
