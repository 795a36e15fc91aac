"""Colour-bar legends beside the panels are dropped; no panel of either figure family is taken
for one. Both families draw their legends (and their gradient panels) in their own code, and
matplotlib draws a third kind of bar."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from modeldev.heldout.figure import make_heldout_figure
from modeldev.synth.generate import make_figure
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.colour_bars import is_colour_bar
from ray_jobs.figures.panels import PANEL, RawBox, build_panels


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


def _matplotlib_bar(cmap: str, vertical: bool, length: float) -> Image.Image:
    """A colour bar as matplotlib draws one (outline, ticks, tick labels), boxed tightly to
    its ink as a detector boxes it, in JPEG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1.0, length) if vertical else (length, 1.0), dpi=100)
    ax = fig.add_axes((0.1, 0.1, 0.25, 0.8) if vertical else (0.1, 0.6, 0.8, 0.25))
    matplotlib.colorbar.ColorbarBase(
        ax, cmap=cmap, orientation="vertical" if vertical else "horizontal"
    )
    out = io.BytesIO()
    fig.savefig(out, format="jpeg", pil_kwargs={"quality": 75})
    plt.close(fig)
    image = Image.open(io.BytesIO(out.getvalue())).convert("RGB")
    ink = np.asarray(image.convert("L")) < 200
    ys, xs = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return image.crop((max(0, xs[0] - 2), max(0, ys[0] - 2), xs[-1] + 3, ys[-1] + 3))


def test_colour_bars_of_common_colour_maps_as_matplotlib_draws_them() -> None:
    """Not only the two families' own bars: sequential, diverging and rainbow maps, short and
    long, either way up (a diverging map's channels rise and fall; "hot" moves one channel at
    a time)."""
    missed = [
        (cmap, vertical, length)
        for cmap in ("viridis", "gray", "hot", "RdBu", "jet", "Spectral")
        for vertical in (True, False)
        for length in (2.0, 4.0)
        if not is_colour_bar(_matplotlib_bar(cmap, vertical, length))
    ]
    assert missed == []


def test_blurred_spots_on_a_dark_ground_are_not_a_colour_bar() -> None:
    """A fluorescence strip of the training generator: its colour changes smoothly all along
    it and the ground beside the spots is flat, but it returns to the ground between them."""
    data, fig = make_figure(
        4321, 70, hard=0.6, nested=0.3, furniture=0.5, localizers=0.2, dense=0.3
    )
    image = Image.open(io.BytesIO(data)).convert("RGB")
    assert (186, 0, 564, 120) in fig.panels
    strip = image.crop((186, 0, 564, 120))
    assert not is_colour_bar(strip)
    assert not is_colour_bar(strip.transpose(Image.Transpose.ROTATE_90))


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
    smooth = []
    for index in (209, 277, 281, 473):  # each has a narrow smooth 2-D colour field as a panel
        data, fig = make_heldout_figure(7, index)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        smooth += [image.crop(tuple(map(int, b))) for b in fig.panels]
    crops += smooth
    strips = [c for c in crops if max(c.size) >= 2.5 * min(c.size)]
    assert len(crops) > 800 and len(strips) >= 20
    assert sum(max(c.size) >= 3 * min(c.size) for c in smooth) >= 4
    assert [i for i, c in enumerate(crops) if is_colour_bar(c)] == []
