"""Colour-bar legends beside the panels are dropped; no panel of either figure family is taken
for one. Both families draw their legends (and their gradient panels) in their own code."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from ray_jobs.config import DetectorSettings
from ray_jobs.figures.colour_bars import is_colour_bar
from ray_jobs.figures.heldout.figure import make_heldout_figure
from ray_jobs.figures.panels import PANEL, RawBox, build_panels
from ray_jobs.figures.synth.generate import make_figure


def _legend_figures(n: int) -> list[tuple[str, Image.Image, list[tuple[int, int, int, int]]]]:
    """Figures with a colour legend right of their panels, from both families."""
    out = []
    for index in range(200):
        data, fig = make_heldout_figure(31, index)
        if fig.params["legend"] and len(fig.panels) > 1:
            out.append((fig.name, data, fig.panels))
        data, fig = make_figure(4242, index, furniture=1.0, hard=0.5)
        if "legend" in fig.params.get("furniture", []) and len(fig.panels) > 1:
            out.append((fig.name, data, fig.panels))
        if len(out) >= n:
            break
    return [
        (name, Image.open(io.BytesIO(data)).convert("RGB"), [tuple(map(int, b)) for b in boxes])
        for name, data, boxes in out
    ]


def test_a_colour_legend_boxed_beside_the_panels_is_dropped() -> None:
    figures = _legend_figures(12)
    assert {name.split("-")[0] for name, _, _ in figures} == {"heldout", "synth"}
    for name, image, gold in figures:
        # the legend's box: right of every panel, as tall as the panels
        legend = (
            max(b[2] for b in gold) + 2,
            min(b[1] for b in gold),
            image.width,
            max(b[3] for b in gold),
        )
        raw = [RawBox(tuple(map(float, b)), 0.9, PANEL) for b in gold]
        raw.append(RawBox(tuple(map(float, legend)), 0.8, PANEL))
        found = build_panels(name, image, raw, DetectorSettings(), "d", "v", False)
        assert sorted(p.bbox for p in found.panels) == sorted(gold), name
        assert [d.bbox for d in found.dropped if d.reason == "colour_bar"] == [legend], name
        off = DetectorSettings(drop_colour_bars=False)
        assert len(build_panels(name, image, raw, off, "d", "v", False).panels) == len(gold) + 1


def _bar(horizontal: bool, quality: int) -> Image.Image:
    """A colour bar with five ticks on a white page, as a figure's legend box, in JPEG."""
    long, short = 240, 60
    image = Image.new("RGB", (long, short) if horizontal else (short, long), "white")
    draw = ImageDraw.Draw(image)
    for k in range(long - 20):
        t = k / (long - 20)
        colour = (int(40 + 200 * t), int(200 - 150 * t), 90)
        if horizontal:
            draw.line((10 + k, 4, 10 + k, 20), fill=colour)
        else:
            draw.line((4, 10 + k, 20, 10 + k), fill=colour)
    for k in range(5):
        at = 10 + k * (long - 20) / 4
        draw.text((at - 8, 26) if horizontal else (26, at - 5), f"{k / 4:.1f}", fill="black")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def test_colour_bars_are_recognised_either_way_up_and_through_jpeg() -> None:
    for horizontal in (False, True):
        for quality in (35, 90):
            assert is_colour_bar(_bar(horizontal, quality)), (horizontal, quality)
    big = _bar(False, 90).resize((600, 2400))  # judged at a bounded size
    assert is_colour_bar(big)
    square = _bar(False, 90).crop((0, 0, 60, 60))  # not a strip
    assert not is_colour_bar(square)


def test_no_panel_of_either_family_is_taken_for_a_colour_bar() -> None:
    """Every gold panel, of every kind both families draw, stays; among them narrow smooth
    gradients (a colour bar's nearest look-alike) that fill their box."""
    crops = []
    for index in range(60):
        data, fig = make_figure(4321, index, hard=0.6, nested=0.3, furniture=0.5, dense=0.3)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        crops += [image.crop(b) for b in fig.panels]
        data, fig = make_heldout_figure(7, 200 + index)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        crops += [image.crop(tuple(map(int, b))) for b in fig.panels]
    for index in (209, 277, 281, 473):  # narrow gradient panels of the held-out family
        data, fig = make_heldout_figure(7, index)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        crops += [image.crop(tuple(map(int, b))) for b in fig.panels]
    strips = [c for c in crops if max(c.size) >= 3 * min(c.size)]
    assert len(crops) > 800 and len(strips) >= 20
    assert [i for i, c in enumerate(crops) if is_colour_bar(c)] == []
    assert np.mean([min(c.size) for c in strips]) > 4
