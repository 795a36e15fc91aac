"""Colour-bar legends: figure furniture the detector sometimes boxes as a panel.

A heat map's colour bar set beside the panels (not inside one) is a narrow strip whose colour
changes smoothly all along it, from one end of a colour map to the other, uniform across its
width, with tick values beside it. Kept as a panel it becomes a sample pairing a gradient with
a caption written about something else, and it costs the figure its exact panel count. A box
is taken for a colour bar only when all of that holds, the bar leaves room in the box for its
ticks on a flat page, and the bar never sinks back to the page's colour on its way: a gradient
panel fills its box, a plot's bars change colour in one step, and blurred spots on a dark
ground return to the ground between them.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from ray_jobs.figures.runs import true_runs

WORK_SIDE = 512  # each side of the crop is judged at most this long: a huge box costs no more
MIN_ASPECT = 2.5  # long side over short side
MIN_RANGE = 60.0  # grey levels (in its most varying channel) a bar spans end to end
MAX_STEP = 10.0  # largest change between neighbouring rows once smoothed over 5 px: no edges
MAX_WANDER = 3.0  # colour travelled over the channels' ranges: 1 is monotone (jet, RdBu: ~2)
SPREAD, EVEN = 0.1, 0.3  # a tenth of the colour change comes within the first 30% of the
# bar and the last tenth within the last 30%: the change runs all along it
MAX_BAR_SHARE = 0.6  # of the box's short side; the rest holds the ticks
MIN_PAGE_SHARE = 0.75  # of the rest: page colour (the ticks are sparse ink)
MAX_PAGE_RUN = 0.15  # of the bar's length: the longest stretch of it in the page's colour


def _bar_columns(body: np.ndarray) -> np.ndarray:
    """Which columns of ``body`` (rows along the bar, RGB) change colour smoothly, over a wide
    range, all along their length: a ramp of one hue or a colour map's path (jet, RdBu), not
    a step (a plot's bar) and not a bump in one place (a blurred spot on a dark ground)."""
    cum = np.cumsum(np.pad(body, ((1, 0), (0, 0), (0, 0))), axis=0)
    smooth = (cum[5:] - cum[:-5]) / 5  # a 5 px moving mean: JPEG and scan noise are not edges
    steps = np.diff(smooth, axis=0)  # (rows, width, 3)
    ranges = smooth.max(axis=0) - smooth.min(axis=0)  # (width, 3)
    path = np.abs(steps).sum(axis=2)  # colour travelled from row to row
    travelled = np.cumsum(path, axis=0) / np.maximum(path.sum(axis=0), 1e-6)
    rows = len(path)
    early = np.argmax(travelled >= SPREAD, axis=0)  # first row past a tenth of the way
    late = np.argmax(travelled >= 1 - SPREAD, axis=0)
    return (
        (ranges.max(axis=1) >= MIN_RANGE)
        & (np.abs(steps).max(axis=(0, 2)) <= MAX_STEP)
        & (path.sum(axis=0) <= MAX_WANDER * np.maximum(ranges.sum(axis=1), 1.0))
        & (early <= EVEN * rows)
        & (late >= (1 - EVEN) * rows)
    )


def is_colour_bar(crop: Image.Image) -> bool:
    """Whether a box's crop is a colour-bar legend: a strip holding a smooth colour ramp at
    least 3 px wide, alike across its width, with flat page beside it for the ticks."""
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
    if float((np.abs(rest - page).max(axis=1) <= 24).mean()) < MIN_PAGE_SHARE:
        return False
    # a bar does not sink back to the page colour on its way: spots on a dark ground do
    bar = body[:, end - widest : end].mean(axis=1)
    on_page = np.abs(bar - page).max(axis=1) <= 24
    return max((e - s for s, e in true_runs(on_page)), default=0) <= MAX_PAGE_RUN * len(bar)
