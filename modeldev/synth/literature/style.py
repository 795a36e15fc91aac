"""The look one literature figure shares across its panels.

A :class:`Style` (resolution, type size, font family, palette, spines), the fonts it is set
in (Liberation Sans registered with matplotlib; the bold face of the panel letters), the
matplotlib settings that apply it while a figure is drawn, and the words panels are labelled
with. Every drawer and the composer read these; this module reads none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from matplotlib import rcParams
from PIL import ImageFont

from ray_jobs.figures.fonts import font_path

_LIBERATION_BOLD = Path("/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf")

PALETTES = (
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"],
    ["#000000", "#7f7f7f", "#c0c0c0", "#e41a1c", "#377eb8"],
    ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE"],
    ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00"],
    ["#3B4992", "#EE0000", "#008B45", "#631879", "#008280"],
)
GROUPS = ("WT", "KO", "Ctrl", "siRNA", "Vehicle", "Drug", "DMSO", "shCtrl", "shKD", "Mock")
YLABELS = (
    "Relative expression",
    "Fold change",
    "Cell viability (%)",
    "Tumour volume (mm³)",
    "Intensity (a.u.)",
    "% of control",
    "Normalized counts",
    "Body weight (g)",
)
XLABELS = ("Time (h)", "Days", "Concentration (µM)", "Distance (µm)", "Time (min)", "Dose")
GENES = ("ACTB", "GAPDH", "p-ERK", "ERK", "AKT", "p-AKT", "TP53", "MYC", "LC3B", "Tubulin")


@dataclass
class Style:
    """One figure's look, shared by its panels."""

    dpi: float
    font_pt: float
    family: str
    palette: list[str]
    despine: bool

    @property
    def fs(self) -> float:  # font size in pixels
        return self.font_pt * self.dpi / 72


@lru_cache(maxsize=1)
def _register_fonts() -> None:
    """Liberation Sans (Arial's metrics: most figures are set in Arial) from the OS's font
    folder, when there is one; matplotlib's own cache may not list it."""
    from matplotlib import font_manager

    for path in sorted(_LIBERATION_BOLD.parent.glob("LiberationSans-*.ttf")):
        font_manager.fontManager.addfont(str(path))


def families() -> tuple[str, ...]:
    _register_fonts()
    return ("DejaVu Sans", "Liberation Sans") if _LIBERATION_BOLD.exists() else ("DejaVu Sans",)


@lru_cache(maxsize=64)
def bold_letter_font(size: int, liberation: bool) -> ImageFont.FreeTypeFont:
    path = _LIBERATION_BOLD if liberation and _LIBERATION_BOLD.exists() else font_path(bold=True)
    return ImageFont.truetype(str(path), size=size)


class FigureRc:
    """matplotlib settings of one figure (font family, sizes, thin lines), restored after."""

    def __init__(self, st: Style) -> None:
        self.values = {
            "font.family": st.family,
            "font.size": st.font_pt,
            "axes.linewidth": 0.8,
            "xtick.major.width": 0.8,
            "ytick.major.width": 0.8,
            "xtick.major.size": 3,
            "ytick.major.size": 3,
            "axes.titlesize": st.font_pt,
            "axes.labelsize": st.font_pt,
            "legend.fontsize": st.font_pt,
            "svg.hashsalt": "pmcvl",
        }

    def __enter__(self) -> None:
        self.saved = {k: rcParams[k] for k in self.values}
        rcParams.update(self.values)

    def __exit__(self, *exc: object) -> None:
        rcParams.update(self.saved)
