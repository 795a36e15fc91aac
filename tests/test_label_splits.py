"""A box holding a later panel's label is cut at the edge that label marks, and only there:
drawn figures read by the shipped label reader, through ``build_panels``."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from ray_jobs.config import DetectorSettings
from ray_jobs.figures.boxes import iou_matrix
from ray_jobs.figures.fonts import font
from ray_jobs.figures.label_splits import follows, sequence
from ray_jobs.figures.letters.model import LabelReader
from ray_jobs.figures.panels import LABEL, PANEL, RawBox, build_panels

Box = tuple[int, int, int, int]


@pytest.fixture(scope="module")
def reader() -> LabelReader:
    return LabelReader()


def _plot(draw: ImageDraw.ImageDraw, box: Box, rng: np.random.Generator) -> None:
    """A white line chart whose axes stop short of its cell: no frame, white all round."""
    x0, y0, x1, y1 = box
    ax0, ay1 = x0 + 40, y1 - 24
    draw.line((ax0, y0 + 36, ax0, ay1, x1 - 16, ay1), fill=(0, 0, 0), width=2)
    xs = np.linspace(ax0 + 8, x1 - 24, 9)
    ys = rng.uniform(y0 + 44, ay1 - 8, 9)
    draw.line(list(zip(xs.tolist(), ys.tolist(), strict=True)), fill=(30, 90, 200), width=2)


def _label(draw: ImageDraw.ImageDraw, panel: Box, text: str, size: int = 22) -> RawBox:
    x, y = panel[0] + 5, panel[1] + 4
    face = font(size, bold=True)
    draw.text((x, y), text, font=face, fill=(0, 0, 0))
    left, top, right, bottom = draw.textbbox((x, y), text, font=face)
    return RawBox((left - 1, top - 1, right + 1, bottom + 1), 0.8, LABEL)


def _grid(gutter: int) -> tuple[Image.Image, list[Box], list[RawBox]]:
    """Four unframed white charts, two by two, labelled A-D at their top-left corners."""
    w, h = 260, 200
    image = Image.new("RGB", (2 * w + gutter, 2 * h + gutter), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    rng = np.random.default_rng(3)
    panels = [
        (c * (w + gutter), r * (h + gutter), c * (w + gutter) + w, r * (h + gutter) + h)
        for r in range(2)
        for c in range(2)
    ]
    labels = []
    for panel, text in zip(panels, "ABCD", strict=True):
        _plot(draw, panel, rng)
        labels.append(_label(draw, panel, text))
    return image, panels, labels


def _panels(image: Image.Image, raw: list[RawBox], reader: LabelReader, split: bool = True):  # type: ignore[no-untyped-def]
    settings = DetectorSettings(split_at_labels=split)
    return build_panels("fig", image, raw, settings, "d", "v", False, reader)


@pytest.mark.parametrize("gutter", [0, 8])
def test_a_box_over_two_labelled_panels_is_cut_between_them(reader, gutter) -> None:  # type: ignore[no-untyped-def]
    """The detector boxed the top row as one; B's label marks where its panel starts."""
    image, panels, labels = _grid(gutter)
    top_row = (0, 0, image.width, panels[0][3])
    raw = [RawBox(top_row, 0.9, PANEL), *(RawBox(p, 0.9, PANEL) for p in panels[2:]), *labels]
    result = _panels(image, raw, reader)
    found = np.array([p.bbox for p in result.panels])
    assert len(found) == 4 and [d.reason for d in result.dropped] == ["split"]
    assert (iou_matrix(found, np.array(panels)).max(1) >= 0.9).all(), found
    assert [p.letter for p in result.panels] == ["a", "b", "c", "d"]
    # the same boxes with the cut turned off: the merge stands
    assert len(_panels(image, raw, reader, split=False).panels) == 3


def test_a_column_of_two_is_cut_above_the_lower_label(reader) -> None:  # type: ignore[no-untyped-def]
    image, panels, labels = _grid(4)
    left_column = (0, 0, panels[0][2], image.height)
    raw = [RawBox(left_column, 0.9, PANEL), RawBox(panels[1], 0.9, PANEL)]
    raw += [RawBox(panels[3], 0.9, PANEL), *labels]
    found = np.array([p.bbox for p in _panels(image, raw, reader).panels])
    assert len(found) == 4 and (iou_matrix(found, np.array(panels)).max(1) >= 0.9).all()


def test_tick_numbers_and_marks_without_an_edge_never_cut(reader) -> None:  # type: ignore[no-untyped-def]
    """Axis ticks read as numbers, not the letter after A; a letter drawn on a photograph
    where no edge runs through the picture is an annotation, not a panel's corner."""
    image = Image.new("RGB", (520, 400), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    _plot(draw, (0, 0, 520, 400), np.random.default_rng(5))
    raw = [RawBox((0, 0, 520, 400), 0.9, PANEL), _label(draw, (0, 0, 520, 400), "A")]
    for k, tick in enumerate(("100", "75", "50", "25")):
        y = 40 + k * 80
        draw.text((4, y), tick, font=font(18), fill=(0, 0, 0))
        raw.append(RawBox(draw.textbbox((4, y), tick, font=font(18)), 0.6, LABEL))
    assert len(_panels(image, raw, reader).panels) == 1

    rng = np.random.default_rng(1)
    noise = rng.normal(128, 60, (400, 520, 1)).clip(0, 255).astype(np.uint8).repeat(3, 2)
    photo = Image.fromarray(noise).filter(ImageFilter.GaussianBlur(1))
    draw = ImageDraw.Draw(photo)
    raw = [RawBox((0, 0, 520, 400), 0.9, PANEL), _label(draw, (0, 0, 520, 400), "A")]
    raw.append(_label(draw, (260, 0, 520, 400), "B"))
    result = _panels(photo, raw, reader)
    assert len(result.panels) == 1 and not result.dropped


def test_label_sequences() -> None:
    assert follows(("a", 0.9), ("b", 0.9), 0.7) and not follows(("b", 0.9), ("a", 0.9), 0.7)
    assert follows(("i", 0.9), ("ii", 0.9), 0.7) and follows(("a2", 0.9), ("b1", 0.9), 0.7)
    assert not follows(("v", 0.9), ("7", 0.9), 0.7)  # a letter, then a number: no sequence
    assert not follows(("a", 0.9), ("b", 0.5), 0.7)  # an unsure reading is no reading
    assert follows(("b", 0.9), ("e", 0.9), 0.7, 3) and not follows(("b", 0.9), ("o", 0.9), 0.7, 5)
    assert sequence("v") == {("letter", 21), ("roman", 5)}
