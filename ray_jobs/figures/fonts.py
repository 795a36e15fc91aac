"""Fonts that ship inside installed packages (matplotlib's DejaVu): never fetched.

In the product because inference draws and loads type too: ``overlay`` captions the boxes of
``pmcvl detect --overlay`` and ``yolo_env`` hands ultralytics a local Arial.ttf. The figure
generator (``modeldev.synth``) draws its labels in the same faces from here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PIL import ImageFont


def font_path(bold: bool = False, serif: bool = False) -> Path:
    import matplotlib

    name = ("DejaVuSerif" if serif else "DejaVuSans") + ("-Bold" if bold else "") + ".ttf"
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name


@lru_cache(maxsize=256)
def font(size: int, bold: bool = False, serif: bool = False) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(font_path(bold, serif)), size=max(6, int(size)))
