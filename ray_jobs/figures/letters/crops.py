"""A label crop as the label reader takes it: grey, fitted into H x W, standardised.

One function for both sides of the model: the reader (``letters.model``) prepares the
detector's label crops with it, and its training data (``modeldev.letters.data``) prepare the
crops they draw with it, so what the model learns from is what it is shown.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

H, W = 32, 64  # model input: labels are wider than tall ("(a)", "b12")


def prepare(crop: Image.Image) -> np.ndarray:
    """A crop → (H, W) float32, aspect kept, padded with its border colour, standardised."""
    grey = np.asarray(crop.convert("L"), dtype=np.float32)
    if grey.size == 0:
        return np.zeros((H, W), np.float32)
    h, w = grey.shape
    scale = min(H / h, W / w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    small = np.asarray(
        Image.fromarray(grey.astype(np.uint8)).resize((nw, nh), Image.Resampling.BILINEAR),
        np.float32,
    )
    border = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    out = np.full((H, W), float(np.median(border)), np.float32)
    top, left = (H - nh) // 2, (W - nw) // 2
    out[top : top + nh, left : left + nw] = small
    return (out - out.mean()) / (out.std() + 1e-3)
