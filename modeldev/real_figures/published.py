"""What a build published from the real articles, against the hand truth: the dataset's view.

The detector's own scores (``evaluate``) say how its boxes compare with the truth; this says
what reached the shards after the caption was used as evidence (``ray_jobs.captions.layout``):
per compound figure, whether it was published as paired panels or whole, and for each
published panel whether its box matches a true panel (IoU ≥ 0.5) and carries that panel's
label. A panel published with another panel's label is the error that matters most (wrong
text on an image); a figure published whole is a loss of granularity, not an error.

    pmcvl-dev eval-published          the panel stage itself on the real articles (no Ray, no
                                      relevance filter: what the layout decided, before the
                                      classifier drops charts)
    pmcvl-dev eval-published OUT      a build of ../shared/data/real_articles
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from modeldev.real_figures.truth import Split, TruthArticle, TruthFigure
from ray_jobs.config import Settings, SourceSettings
from ray_jobs.figures.boxes import iou_matrix
from ray_jobs.pmc.jats import parse_article

IOU = 0.5
COLUMNS = ["doi", "figure_id", "panel_label", "panel_bbox", "alignment", "caption_agreement"]


@dataclass(frozen=True)
class PublishedFigure:
    figure: TruthFigure
    case: str | None  # caption_agreement of its samples; None: nothing published
    whole: bool  # published as the whole figure
    panels: int  # samples published
    matched: int  # published boxes matching a true panel
    labelled_right: int  # matched, with the true panel's label
    labelled_wrong: int  # published with a label that is not its true panel's

    @property
    def split(self) -> Split:
        return self.figure.split


def _label(value: str | None) -> str | None:
    return value.strip("().").lower() if value else None


def _doi_of(article: TruthArticle, root: Path) -> str | None:
    xml = root / article.article / "main.jats.xml"
    return parse_article(xml.read_bytes()).doi


def read_index(out: Path) -> pa.Table:
    tables = [pq.read_table(f, columns=COLUMNS) for f in sorted((out / "index").glob("*.parquet"))]
    if not tables:
        raise SystemExit(f"{out}: no index/*.parquet (not a built output)")
    return pa.concat_tables(tables)


def score(figure: TruthFigure, rows: list[dict[str, Any]]) -> PublishedFigure:
    """One truth figure against the index rows published from it."""
    if not rows:
        return PublishedFigure(figure, None, False, 0, 0, 0, 0)
    whole = any(r["alignment"] == "figure" for r in rows)
    boxes = np.array([r["panel_bbox"] for r in rows], float).reshape(-1, 4)
    ious = iou_matrix(boxes, figure.boxes) if len(figure.panels) else np.zeros((len(rows), 0))
    matched = right = wrong = 0
    for i, r in enumerate(rows):
        j = int(np.argmax(ious[i])) if ious.shape[1] else -1
        hit = bool(j >= 0 and ious[i, j] >= IOU)
        matched += hit
        label = _label(r["panel_label"])
        if label is None:
            continue
        if hit and label == _label(figure.panels[j].label):
            right += 1
        else:
            wrong += 1
    case = rows[0]["caption_agreement"]
    return PublishedFigure(figure, case, whole, len(rows), matched, right, wrong)


def stage_rows(root: Path, settings: Settings) -> list[dict[str, Any]]:
    """The panel stage's published rows for every article under ``root``, as the build makes
    them (fetch and parse, detection, the caption as evidence, pairing), without Ray and
    without the relevance filter."""
    from ray_jobs.contract.rows import FIGURE, OK
    from ray_jobs.figures.panels import PanelDetector
    from ray_jobs.pipeline.explode import explode_article
    from ray_jobs.pipeline.panels_stage import panel_rows
    from ray_jobs.pmc.sources import open_source

    source = open_source(SourceSettings(kind="local", path=str(root)), settings.archive)
    detector = PanelDetector(settings.detector)
    out = []
    for ref in source.refs():
        rows, _ = explode_article(source, ref, settings)
        figures = [r for r in rows if r["status"] == FIGURE]
        for produced in panel_rows(figures, detector, settings):
            out += [r["record"] for r in produced if r["status"] == OK]
    return out


def published(
    articles: Iterable[TruthArticle], root: Path, rows: list[dict[str, Any]]
) -> list[PublishedFigure]:
    """Each truth figure scored against the published ``rows`` (index rows or stage records)."""
    by_figure: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_figure.setdefault((row["doi"], row["figure_id"]), []).append(row)
    scores = []
    for article in articles:
        doi = _doi_of(article, root)
        for figure in article.figures:
            if figure.kind_of_object == "figure":
                scores.append(score(figure, by_figure.get((doi, figure.xml_id), [])))
    return scores


def summary(scores: list[PublishedFigure]) -> dict[str, Any]:
    """Over compound figures (two true panels or more); and how many one-panel figures came
    out as one sample matching their panel."""
    compound = [s for s in scores if s.figure.is_compound]
    single = [s for s in scores if not s.figure.is_compound]
    single_right = sum(s.panels == 1 and s.matched == 1 for s in single)
    n = len(compound)
    as_panels = [s for s in compound if s.panels and not s.whole]
    exact = [s for s in as_panels if s.panels == len(s.figure.panels)]
    labelled = sum(s.labelled_right + s.labelled_wrong for s in compound)
    cases: dict[str, int] = {}
    for s in compound:
        cases[s.case or "nothing"] = cases.get(s.case or "nothing", 0) + 1
    return {
        "compound_figures": n,
        "published_as_panels": len(as_panels),
        "published_whole": sum(s.whole for s in compound),
        "nothing_published": sum(not s.panels for s in compound),
        "as_panels_exact_count": len(exact),
        "panels_published": sum(s.panels for s in as_panels),
        "panels_matching_truth": sum(s.matched for s in as_panels),
        "labelled_panels": labelled,
        "labelled_wrong": sum(s.labelled_wrong for s in compound),
        "wrong_label_rate": round(sum(s.labelled_wrong for s in compound) / labelled, 3)
        if labelled
        else 0.0,
        "cases": dict(sorted(cases.items())),
        "one_panel_figures": len(single),
        "one_panel_figures_as_one_matching_sample": single_right,
    }


def by_split(scores: list[PublishedFigure]) -> dict[str, dict[str, Any]]:
    return {
        "tune": summary([s for s in scores if s.split == "tune"]),
        "kept_out": summary([s for s in scores if s.split == "kept_out"]),
        "all": summary(scores),
    }
