"""A panel's two fingerprints: sha256 of the crop bytes (exact copies) and a 64-bit DCT
perceptual hash (the same image re-encoded, rescaled or slightly retouched).

The same image reaches PMC many times: a figure reused across article versions, a panel
repeated inside a figure, stock images. ``ray_jobs.dedup.groups`` decides which copy stays.
"""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image


def _dct_matrix(n: int) -> np.ndarray:
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    m = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2 / n)
    m[0] /= np.sqrt(2)
    return m


_DCT32 = _dct_matrix(32)


def phash(image: Image.Image) -> str:
    """The classic pHash: 32x32 grey, 2-D DCT, the 8x8 lowest frequencies against their
    median (the DC term excluded from the median), as 16 hex digits."""
    grey = np.asarray(image.convert("L").resize((32, 32), Image.Resampling.LANCZOS), np.float64)
    low = (_DCT32 @ grey @ _DCT32.T)[:8, :8].flatten()
    bits = low > np.median(low[1:])
    return f"{int(''.join('1' if b else '0' for b in bits), 2):016x}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
