"""The faces the label reader learns from: every local sans and serif face, so it reads type it
was not drawn in (the generator itself draws labels in DejaVu Sans only).

Faces come from matplotlib's own folder and the OS's DejaVu and Liberation folders (Liberation
Sans, Serif and Sans Narrow carry Arial's, Times' and Arial Narrow's metrics, the faces most
figures are set in); nothing is fetched. Monospace faces, STIX and Computer Modern are never
used: the independent held-out family labels in DejaVu Sans Mono and STIX, so it stays a test
of unseen type, and matplotlib's Computer Modern files map brackets and dots to other glyphs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PIL import ImageFont

_SYSTEM = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/truetype/liberation"))
_FAMILIES = ("DejaVuSans", "DejaVuSerif", "LiberationSans", "LiberationSerif")
_NEVER = ("Mono", "Display", "STIX", "MathTeX")


@lru_cache(maxsize=1)
def faces() -> tuple[Path, ...]:
    """The faces found, one per file name (matplotlib's copy first), sorted by name."""
    import matplotlib

    found: dict[str, Path] = {}
    for folder in (Path(matplotlib.get_data_path()) / "fonts" / "ttf", *_SYSTEM):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.ttf")):
            name = path.name
            if name.startswith(_FAMILIES) and not any(n in name for n in _NEVER):
                found.setdefault(name, path)
    return tuple(found[name] for name in sorted(found))


@lru_cache(maxsize=512)
def face(index: int, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(faces()[index]), size=max(6, int(size)))
