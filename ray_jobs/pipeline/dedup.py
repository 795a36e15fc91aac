"""Duplicate panels: exact (sha256 of the crop bytes) and near (64-bit DCT perceptual hash).

The same image reaches PMC many times: a figure reused across article versions, a panel
repeated inside a figure, stock images. The first occurrence in input order is kept; later
ones are dropped with the key they duplicate. Near duplicates are found with the pigeonhole
trick: if two 64-bit hashes differ in at most ``bits`` < 4 positions, at least one of their
four 16-bit bands is identical, so only hashes sharing a band are compared.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from PIL import Image

BANDS = 4


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


def _bands(h: int) -> list[tuple[int, int]]:
    return [(b, (h >> (16 * b)) & 0xFFFF) for b in range(BANDS)]


class Deduper:
    """Remembers kept panels (from earlier runs and this one) and judges new ones."""

    def __init__(self, near_bits: int = 3, known: Iterable[tuple[str, str, str]] = ()):
        if near_bits >= BANDS:
            raise ValueError(f"near_bits must be below {BANDS} for banded search")
        self.near_bits = near_bits
        self.by_sha: dict[str, str] = {}
        self.keys: set[str] = set()
        self.by_band: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
        for key, digest, ph in known:
            self.add(key, digest, ph)

    def add(self, key: str, digest: str, ph: str) -> None:
        self.keys.add(key)
        self.by_sha.setdefault(digest, key)
        if self.near_bits >= 0 and ph:
            h = int(ph, 16)
            for band in _bands(h):
                self.by_band[band].append((h, key))

    def judge(self, key: str, digest: str, ph: str) -> tuple[str | None, str | None]:
        """(reason, duplicate_of): ``present`` when this very key was written before (a
        retried article), ``duplicate_exact``/``duplicate_near`` for copies, else (None, None)
        and the panel is remembered."""
        if key in self.keys:
            return "present", key
        if digest in self.by_sha:
            return "duplicate_exact", self.by_sha[digest]
        if self.near_bits >= 0 and ph:
            h = int(ph, 16)
            for band in _bands(h):
                for other, other_key in self.by_band.get(band, ()):
                    if (h ^ other).bit_count() <= self.near_bits:
                        return "duplicate_near", other_key
        self.add(key, digest, ph)
        return None, None
