"""Colour-bar legends: figure furniture the detector sometimes boxes as a panel.

A heat map's colour bar set beside the panels (not inside one) is a narrow strip whose colour
runs smoothly and monotonically from one end to the other, uniform across its width, with tick
values beside it. Kept as a panel it becomes a sample pairing a gradient with a caption written
about something else, and it costs the figure its exact panel count. A box is taken for a
colour bar only when all of that holds and the bar leaves room in the box for its ticks: a
gradient panel fills its box, and a plot's bars change colour in one step, not smoothly.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

WORK_SIDE = 512  # each side of the crop is judged at most this long: a huge box costs no more
MIN_ASPECT = 3.0  # long side over short side
MIN_RANGE = 60.0  # grey levels (in its most varying channel) a bar spans end to end
MAX_STEP = 10.0  # largest change between neighbouring rows once smoothed over 5 px: no edges
MAX_WANDER = 1.6  # total variation over range: 1 is strictly monotone
MAX_BAR_SHARE = 0.6  # of the box's short side; the rest holds the ticks
MIN_PAGE_SHARE = 0.75  # of the rest: page colour (the ticks are sparse ink)


def _bar_columns(body: np.ndarray) -> np.ndarray:
    """Which columns of ``body`` (rows along the bar, RGB) run smoothly and monotonically
    over a wide range."""
    width = body.shape[1]
    cum = np.cumsum(np.pad(body, ((1, 0), (0, 0), (0, 0))), axis=0)
    smooth = (cum[5:] - cum[:-5]) / 5  # a 5 px moving mean: JPEG and scan noise are not edges
    steps = np.diff(smooth, axis=0)
    ranges = smooth.max(axis=0) - smooth.min(axis=0)  # (width, 3)
    channel = ranges.argmax(axis=1)
    columns = np.arange(width)
    span = ranges[columns, channel]
    wander = np.abs(steps[:, columns, channel]).sum(axis=0)
    return (
        (span >= MIN_RANGE)
        & (np.abs(steps).max(axis=(0, 2)) <= MAX_STEP)
        & (wander <= MAX_WANDER * np.maximum(span, 1.0))
    )


def is_colour_bar(crop: Image.Image) -> bool:
    """Whether a box's crop is a colour-bar legend: a narrow strip holding a smooth monotone
    gradient at least 3 px wide, alike across its width, with room beside it for ticks."""
    width, height = crop.size
    if max(width, height) < MIN_ASPECT * min(width, height) or min(width, height) < 4:
        return False
    if max(width, height) > WORK_SIDE:  # each side capped on its own: the bar keeps its width
        crop = crop.resize(
            (min(width, WORK_SIDE), min(height, WORK_SIDE)), Image.Resampling.BILINEAR
        )
    pixels = np.asarray(crop.convert("RGB"), dtype=np.float32)
    if width > height:  # the bar runs down the rows
        pixels = pixels.transpose(1, 0, 2)
    rows, cols = pixels.shape[:2]
    body = pixels[int(0.1 * rows) : int(0.9 * rows)]
    if len(body) < 12:
        return False
    good = _bar_columns(body)
    alike = np.abs(np.diff(body, axis=1)).mean(axis=(0, 2)) < 10  # column c like column c + 1
    widest = run = end = 0
    for c in range(cols):
        run = run + 1 if good[c] and run and alike[c - 1] else int(good[c])
        if run > widest:
            widest, end = run, c + 1
    if not 3 <= widest <= MAX_BAR_SHARE * cols:
        return False
    # beside the bar: flat page with sparse ticks, not more picture (a gradient panel's other
    # columns, a photograph)
    rest = np.concatenate([body[:, : max(0, end - widest - 1)], body[:, end + 1 :]], axis=1)
    if rest.size == 0:
        return False
    rest = rest.reshape(-1, 3)
    bins = np.clip(rest, 0, 255).astype(int) // 16
    counts = np.bincount(bins[:, 0] * 256 + bins[:, 1] * 16 + bins[:, 2], minlength=4096)
    mode = counts.argmax()
    page = np.array([mode // 256, mode // 16 % 16, mode % 16]) * 16 + 8
    return float((np.abs(rest - page).max(axis=1) <= 24).mean()) >= MIN_PAGE_SHARE
