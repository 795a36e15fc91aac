"""PNG charts for the run report, drawn with matplotlib's Agg canvas.

No pyplot: figures are built as plain objects on an Agg canvas, so drawing needs no display,
keeps no global state and is safe in a worker. Fonts are the DejaVu ones matplotlib ships.
PNGs are written without a software or date stamp, so the same stats give the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from itertools import pairwise

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ray_jobs.report.stats import Histogram, ReportStats, TokenStats

_COLOR = "#3b6ea5"
_WINDOW_COLOR = "#c0392b"


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def _short(label: object, width: int = 40) -> str:
    text = str(label)
    return text if len(text) <= width else text[: width - 1] + "…"


def _top(counts: Mapping[object, int], limit: int) -> dict[object, int]:
    """The ``limit`` first items, the rest summed as "(others)": a chart stays readable."""
    items = list(counts.items())
    if len(items) <= limit:
        return dict(items)
    head = dict(items[: limit - 1])
    head[f"({len(items) - limit + 1} others)"] = sum(v for _, v in items[limit - 1 :])
    return head


def bar_chart(
    title: str, counts: Mapping[object, int], *, xlabel: str = "count", limit: int = 30
) -> bytes:
    """Horizontal bars, first item on top, each labelled with its value."""
    counts = _top(counts, limit)
    labels = [_short(k) for k in counts]
    fig = Figure(figsize=(8, 1.2 + 0.32 * len(labels)), layout="constrained")
    ax = fig.add_subplot()
    bars = ax.barh(range(len(labels)), list(counts.values()), color=_COLOR)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.bar_label(bars, padding=3, fontsize=8)
    ax.margins(x=0.15)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _png(fig)


def column_chart(title: str, counts: Mapping[int, int], *, xlabel: str, ylabel: str) -> bytes:
    """Vertical bars over integer categories (panels per figure)."""
    fig = Figure(figsize=(8, 3.5), layout="constrained")
    ax = fig.add_subplot()
    bars = ax.bar([str(k) for k in counts], list(counts.values()), color=_COLOR)
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _png(fig)


def histogram_chart(
    title: str, hist: Histogram, windows: Sequence[int], waste: Mapping[int, float]
) -> bytes:
    """Token-length histogram with each encoder window marked and its token waste named."""
    fig = Figure(figsize=(8, 3.5), layout="constrained")
    ax = fig.add_subplot()
    edges = hist.edges
    widths = [b - a for a, b in pairwise(edges)]
    ax.bar(edges[:-1], hist.counts, width=widths, align="edge", color=_COLOR)
    for window in windows:
        if window <= edges[-1]:
            ax.axvline(window, color=_WINDOW_COLOR, linestyle="--", linewidth=1)
            ax.annotate(
                f"{window}: {waste.get(window, 0.0):.1%} waste",
                (window, 1),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
                color=_WINDOW_COLOR,
            )
    ax.set_xlabel("tokens")
    ax.set_ylabel("captions")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    return _png(fig)


def message_chart(title: str, message: str) -> bytes:
    """A placeholder that says why a chart is empty (e.g. enrichment not run)."""
    fig = Figure(figsize=(8, 2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, _short(message, 90), ha="center", va="center", fontsize=11, wrap=True)
    return _png(fig)


def _token_title(t: TokenStats) -> str:
    return f"{t.name.replace('_', ' ')}: tokens per {t.unit} ({t.tokenizer}, n={t.n})"


def token_chart(t: TokenStats, windows: Sequence[int]) -> bytes | None:
    if t.n:
        return histogram_chart(_token_title(t), t.histogram, windows, t.waste)
    return message_chart(_token_title(t), t.note) if t.note else None


def drop_counts(stats: ReportStats) -> dict[str, int]:
    """Detector drops (crops that never became panels) and filter drops in one series."""
    merged = {f"detector: {k}": v for k, v in stats.detector_dropped.items()}
    merged.update(stats.dropped)
    return dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))


def charts(stats: ReportStats) -> dict[str, bytes]:
    """File name -> PNG, for every chart that has data (or a reason to show none)."""
    out: dict[str, bytes | None] = {}
    if any(stats.funnel.values()):
        out["funnel.png"] = bar_chart("Funnel", stats.funnel)
    drops = drop_counts(stats)
    if drops:
        out["drops.png"] = bar_chart("Dropped, by reason", drops, xlabel="panels")
    if stats.modality_l1:
        out["modality_l1.png"] = bar_chart("Modality L1 (kept)", stats.modality_l1)
    if stats.modality_l2:
        out["modality_l2.png"] = bar_chart("Modality L2 (kept)", stats.modality_l2)
    if stats.panels_per_figure:
        out["panels_per_figure.png"] = column_chart(
            "Panels per figure (figures with a kept panel)",
            stats.panels_per_figure,
            xlabel="panels detected",
            ylabel="figures",
        )
    for t in stats.tokens:
        out[f"tokens_{t.name}.png"] = token_chart(t, stats.windows)
    if stats.licenses:
        out["licenses.png"] = bar_chart("Licenses (kept panels)", stats.licenses)
    if stats.failures_by_stage:
        out["failures_stage.png"] = bar_chart("Failures by stage", stats.failures_by_stage)
        by_type = {f"{f.stage}/{f.error_type}": f.count for f in stats.failures}
        out["failures_type.png"] = bar_chart("Failures by stage/type", by_type)
    return {name: png for name, png in out.items() if png is not None}
