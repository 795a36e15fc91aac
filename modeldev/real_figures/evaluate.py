"""The product's panel detector scored on the hand-made truth of real article figures.

Each figure goes through ``PanelDetector.detect`` alone (the product's whole path: label cuts,
zoom, colour-bar drop, blank-cell drop), timed with ``time.process_time`` (CPU seconds of the
whole process, every thread counted) and ``time.perf_counter``. Per figure: the boxes matched
at IoU 0.5 (``modeldev.detector.metrics``, greedy by score, as every other detector score
here), F1@0.5, whether the predicted count is the true count, and, for a figure whose caption
names two labels or more, whether the predicted count is the caption's.

Aggregated per split (``tune``: the tuning articles, ``kept_out``: the two kept-out ones,
``all``), each also for its compound figures only (figures, not tables, of two panels or
more). F1 is over panels (2·TP / (predicted + true)); exact count and caption agreement are
shares of figures. Kept-out figures are reported in aggregate only: :func:`figure_rows` and
:func:`write_overlays` refuse them unless asked by name, so nothing gets tuned on them by
looking.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from modeldev.detector.metrics import Detections, f1_of, match_counts
from modeldev.real_figures.truth import TruthFigure

BoxF = tuple[float, float, float, float]
SPLITS = ("tune", "kept_out", "all")


@dataclass
class Prediction:
    """What a method kept for one figure, and what it cost."""

    boxes: list[BoxF]
    scores: list[float | None] = field(default_factory=list)  # None: a whole-figure fallback
    cpu_s: float = 0.0
    wall_s: float = 0.0
    imgsz: int | None = None  # the letterbox size the detector settled on (zoom: the larger)
    failure: str | None = None  # the detector's failure record, when the figure failed


Predictor = Callable[[TruthFigure], Prediction]


def detector_predictor(detector: Any) -> Predictor:
    """The product's ``PanelDetector`` as a :data:`Predictor`: one figure a call, timed."""

    def predict(fig: TruthFigure) -> Prediction:
        data = fig.path.read_bytes()
        cpu, wall = time.process_time(), time.perf_counter()
        found, failures = detector.detect([(fig.key, data)], with_crops=False)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if failures or not found:
            reason = f"{failures[0].error_type}: {failures[0].message}" if failures else "no result"
            return Prediction([], [], cpu, wall, None, str(reason))
        panels = found[0].panels
        return Prediction(
            [tuple(float(v) for v in p.bbox) for p in panels],  # type: ignore[misc]
            [p.score for p in panels],
            cpu,
            wall,
            found[0].imgsz,
        )

    return predict


def truth_predictor(fig: TruthFigure) -> Prediction:
    """The truth itself, as a method: what a perfect detector keeps."""
    return Prediction([tuple(float(v) for v in p.box) for p in fig.panels], [1.0] * len(fig.panels))  # type: ignore[misc]


@dataclass
class FigureScore:
    key: str
    article: str
    image: str
    split: str
    kind_of_object: str
    compound: bool
    width: int
    height: int
    true_count: int
    pred_count: int
    matched: int  # predicted boxes matched to a true one at IoU >= 0.5
    caption_count: int  # labels the caption names (0: none named)
    cpu_s: float
    wall_s: float
    imgsz: int | None
    failure: str | None
    pred_boxes: list[BoxF]

    @property
    def f1(self) -> float:
        return f1_of(np.array([self.matched, self.pred_count, self.true_count]))

    @property
    def exact(self) -> bool:
        return self.pred_count == self.true_count

    @property
    def caption_agrees(self) -> bool | None:
        """Whether the predicted count is the caption's; None where it names under two."""
        return self.pred_count == self.caption_count if self.caption_count >= 2 else None

    @property
    def megapixels(self) -> float:
        return self.width * self.height / 1e6

    def row(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(f1=round(self.f1, 4), exact=self.exact, caption_agrees=self.caption_agrees)
        return out


def score_figure(fig: TruthFigure, pred: Prediction) -> FigureScore:
    """One figure's prediction against its truth, matched as ``metrics.match_counts`` does."""
    boxes = np.array(pred.boxes, float).reshape(-1, 4)
    scores = np.array([1.0 if s is None else s for s in pred.scores] or [1.0] * len(boxes))
    matched, n_pred, n_true = match_counts([Detections(boxes, scores)], [fig.boxes])[0]
    return FigureScore(
        key=fig.key,
        article=fig.article,
        image=fig.image,
        split=fig.split,
        kind_of_object=fig.kind_of_object,
        compound=fig.is_compound,
        width=fig.width,
        height=fig.height,
        true_count=int(n_true),
        pred_count=int(n_pred),
        matched=int(matched),
        caption_count=len(fig.caption_labels),
        cpu_s=pred.cpu_s,
        wall_s=pred.wall_s,
        imgsz=pred.imgsz,
        failure=pred.failure,
        pred_boxes=list(pred.boxes),
    )


def evaluate(figures: Iterable[TruthFigure], predict: Predictor) -> list[FigureScore]:
    return [score_figure(fig, predict(fig)) for fig in figures]


def evaluate_detector(detector: Any, figures: list[TruthFigure]) -> list[FigureScore]:
    """``evaluate`` with the product's detector, after one warm-up figure (first-call
    allocations and lazy imports are not any figure's cost)."""
    if figures:
        detector.detect([(figures[0].key, figures[0].path.read_bytes())], with_crops=False)
    return evaluate(figures, detector_predictor(detector))


def aggregate(rows: list[FigureScore]) -> dict[str, Any]:
    """Panel F1@0.5 over the rows, exact-count share, caption agreement (over the figures whose
    caption names two labels or more), and CPU seconds."""
    counts = np.array([[r.matched, r.pred_count, r.true_count] for r in rows]).reshape(-1, 3)
    captioned = [r.caption_agrees for r in rows if r.caption_agrees is not None]
    cpu = sum(r.cpu_s for r in rows)
    megapixels = sum(r.megapixels for r in rows)
    return {
        "figures": len(rows),
        "true_panels": int(counts[:, 2].sum()),
        "pred_panels": int(counts[:, 1].sum()),
        "matched": int(counts[:, 0].sum()),
        "F1@0.5": round(f1_of(counts), 4) if rows else None,
        "mean_figure_F1": round(float(np.mean([r.f1 for r in rows])), 4) if rows else None,
        "exact_count": round(float(np.mean([r.exact for r in rows])), 4) if rows else None,
        "exact_figures": sum(r.exact for r in rows),
        "caption_figures": len(captioned),
        "caption_agreement": round(float(np.mean(captioned)), 4) if captioned else None,
        "over_split": sum(r.pred_count > r.true_count for r in rows),
        "under_split": sum(r.pred_count < r.true_count for r in rows),
        "failures": sum(r.failure is not None for r in rows),
        "cpu_s": round(cpu, 3),
        "cpu_s_per_figure": round(cpu / len(rows), 4) if rows else None,
        "cpu_s_per_megapixel": round(cpu / megapixels, 4) if megapixels else None,
    }


def report(rows: list[FigureScore]) -> dict[str, dict[str, Any]]:
    """``aggregate`` for each split and ``all``, each also over its compound figures only."""
    out: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        in_split = [r for r in rows if split == "all" or r.split == split]
        out[split] = aggregate(in_split)
        out[f"{split} compound"] = aggregate([r for r in in_split if r.compound])
    return out


def figure_rows(rows: list[FigureScore], kept_out: bool = False) -> list[FigureScore]:
    """The rows one may look at one by one: the tuning articles' (kept-out ones only when
    asked by name, once a change is decided)."""
    return [r for r in rows if kept_out or r.split != "kept_out"]


def worst(rows: list[FigureScore], n: int) -> list[FigureScore]:
    """The ``n`` worst of the figures one may look at: lowest F1, then furthest off count."""
    shown = figure_rows(rows)
    return sorted(shown, key=lambda r: (r.f1, -abs(r.pred_count - r.true_count), r.key))[:n]


def medicat(detector: Any) -> dict[str, Any]:
    """The ten medicat figures of the held-out protocol (their truth is the count their caption
    names): exact-count rate through ``protocol.run``."""
    from modeldev.detector import protocol

    def method(inputs: list[tuple[str, bytes]]) -> list[tuple[list, list]]:
        found, _ = detector.detect(inputs, with_crops=False)
        by_key = {f.figure_key: f for f in found}
        return [
            ([p.bbox for p in by_key[k].panels], [p.score for p in by_key[k].panels])
            if k in by_key
            else ([], [])
            for k, _ in inputs
        ]

    return protocol.run(method, protocol.real())


COLUMNS = (
    ("figures", 7, "d"),
    ("true_panels", 6, "d"),
    ("pred_panels", 6, "d"),
    ("F1@0.5", 7, ".3f"),
    ("exact_count", 6, ".3f"),
    ("caption_agreement", 8, ".3f"),
    ("caption_figures", 5, "d"),
    ("over_split", 5, "d"),
    ("under_split", 5, "d"),
    ("cpu_s_per_figure", 8, ".3f"),
)
HEADINGS = (
    "figs",
    "true",
    "pred",
    "F1@0.5",
    "exact",
    "caption",
    "(n)",
    "over",
    "under",
    "cpu s/fig",
)


def format_table(summary: dict[str, dict[str, Any]], name: str = "", width: int = 18) -> str:
    """One line per group of :func:`report`; ``name`` (a checkpoint) heads the first column."""
    header = f"{name or 'split':<{width}}" + "".join(
        f" {h:>{w}}" for h, (_, w, _) in zip(HEADINGS, COLUMNS, strict=True)
    )
    lines = [header, "-" * len(header)]
    for group, agg in summary.items():
        cells = []
        for key, w, fmt in COLUMNS:
            value = agg[key]
            cells.append(f" {value:>{w}{fmt}}" if value is not None else f" {'-':>{w}}")
        lines.append(f"{group:<{width}}" + "".join(cells))
    return "\n".join(lines)


def format_worst(rows: list[FigureScore]) -> str:
    header = (
        f"{'figure':<40} {'kind':<6} {'true':>4} {'pred':>4} {'match':>5} {'F1':>6} "
        f"{'caption':>7} {'imgsz':>5} {'cpu s':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        caption = str(r.caption_count) if r.caption_count >= 2 else "-"
        lines.append(
            f"{r.key:<40} {r.kind_of_object:<6} {r.true_count:>4} {r.pred_count:>4} "
            f"{r.matched:>5} {r.f1:>6.3f} {caption:>7} {r.imgsz or '-':>5} {r.cpu_s:>6.3f}"
            + (f"  failed: {r.failure}" if r.failure else "")
        )
    return "\n".join(lines)


TRUE_COLOUR, PRED_COLOUR = (230, 30, 30), (0, 190, 0)


def overlay(fig: TruthFigure, pred_boxes: list[BoxF]) -> Image.Image:
    """The figure with its true boxes in red and the predicted ones in green over them."""
    with Image.open(fig.path) as img:
        out = img.convert("RGB")
    draw = ImageDraw.Draw(out)
    line = max(2, round(max(out.size) / 300))
    for panel in fig.panels:
        x0, y0, x1, y1 = panel.box
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=TRUE_COLOUR, width=line + 1)
    for x0, y0, x1, y1 in pred_boxes:
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=PRED_COLOUR, width=line)
    return out


def write_overlays(
    figures: list[TruthFigure], rows: list[FigureScore], out_dir: Path, kept_out: bool = False
) -> list[Path]:
    """``out_dir/<article>/<image>.png`` for each figure of a tuning article (kept-out ones
    only when asked by name): truth red, prediction green."""
    by_key = {r.key: r for r in rows}
    written = []
    for fig in figures:
        if fig.key not in by_key or (fig.split == "kept_out" and not kept_out):
            continue
        path = Path(out_dir) / fig.article / f"{fig.image}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        overlay(fig, by_key[fig.key].pred_boxes).save(path, format="PNG")
        written.append(path)
    return written
