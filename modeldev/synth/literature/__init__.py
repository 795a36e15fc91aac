"""Compound figures that look like the biomedical literature, for the panel detector.

Each panel is a real matplotlib drawing (Agg, no pyplot): bar charts with points, error bars
and significance brackets, line charts with error bands, reference lines and broken axes,
scatter with a regression line, box and violin plots, histograms, heat maps with colour bar
and dendrogram, Kaplan-Meier curves with censor ticks and numbers at risk, flow-cytometry
density plots with gates, Venn diagrams, western blots, rows of micrographs and fluorescence
channels, schematics, tables with rules only, and small multiples (one lettered panel holding
a grid of tiny plots with shared headers and legend: one box). Panels are composed with
Pillow in rows of unequal heights and widths, with spanning panels and thin or no gutters,
and get bold letters at their top-left corner.

The truth follows the hand-made real-figure truth (``modeldev/real_figures/truth``): a panel's
box is the ink of everything that belongs to its letter (plot, axes, tick labels, axis
titles, its own legend or colour bar) together with the letter; the letter's box is the
glyph's bounding box measured from the drawn text. Ink that belongs to no letter (a legend
shared by a row of panels) lies outside every box. A figure without letters (about 15%) is
one panel covering all its ink.

Figure ``i`` of seed ``s`` depends only on ``(s, i)``; the output layout is
:mod:`modeldev.synth.generate`'s (YOLO labels, meta JSON, COCO, ``data.yaml``).
"""

from __future__ import annotations

from modeldev.synth.literature.dataset import make_figure, write_literature_dataset
from modeldev.synth.literature.kinds import CHARTS, KINDS, WEIGHTS, Box, ink_box, render_panel
from modeldev.synth.literature.layout import LiteratureFigure, make_literature_figure
from modeldev.synth.literature.style import Style

__all__ = [
    "CHARTS",
    "KINDS",
    "WEIGHTS",
    "Box",
    "LiteratureFigure",
    "Style",
    "ink_box",
    "make_figure",
    "make_literature_figure",
    "render_panel",
    "write_literature_dataset",
]
