"""Pseudo-labels from a built dataset: the real figures whose caption, letters and boxes agree.

At whole-PMC scale millions of real compound figures come out of a build with every panel
paired by the letter read on it (``caption_agreement`` ``letters``, or ``anchored`` with each
anchor's letter read: ``alignment`` ``letter`` on every sample). Three independent sources
agreeing (the caption's labels, the label reader, the detector's boxes) make those boxes
a far better training signal for real figures than any generator: this module selects them
from the dataset's index, fetches each figure from the build's source and writes a YOLO set
(class 0 panel: the published ``panel_bbox``; class 1 label: ``label_bbox``) that
``pmcvl-dev train-detector`` fine-tunes on beside generated figures.

The loop: build → ``pmcvl-dev pseudo-labels`` → ``train-detector --fine-tune`` on the union →
``eval-real`` on the hand-boxed real set (and the generator's held-out seed) → publish the
checkpoint only when it wins. Figures published whole, paired by count or position, or with
any panel paired without its letter are never selected: agreement is the whole point. The
kept-out truth articles must not be in the build this reads (``--exclude``).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from ray_jobs.config import Settings
from ray_jobs.contract.rows import FIGURE
from ray_jobs.pipeline.explode import explode_article
from ray_jobs.pmc.sources import open_source

AGREEING = ("letters", "anchored")
COLUMNS = ["figure_key", "caption_agreement", "alignment", "panel_bbox", "label_bbox"]


@dataclass(frozen=True)
class PseudoFigure:
    figure_key: str
    panels: tuple[tuple[int, int, int, int], ...]
    labels: tuple[tuple[int, int, int, int], ...]


def read_panels(out: Path) -> pa.Table:
    """Every panel the build judged: published (``index/``) and rejected (``rejects/``: a
    chart the relevance filter dropped still shows where its figure's panels are)."""
    files = sorted((out / "index").glob("*.parquet"))
    if not files:
        raise SystemExit(f"{out}: no index/*.parquet (not a built output)")
    files += sorted((out / "rejects").glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(
        [t.select(COLUMNS) for t in tables if set(COLUMNS) <= set(t.column_names)]
    )


def select(index: pa.Table) -> list[PseudoFigure]:
    """The figures all of whose panels (``read_panels``) are paired by a letter read on them,
    in an agreeing layout, with two panels or more."""
    ok = pc.and_(
        pc.is_in(index["caption_agreement"], pa.array(AGREEING)),
        pc.equal(index["alignment"], "letter"),
    )
    flagged = index.append_column("ok", ok)
    by_figure: dict[str, list[dict]] = {}
    for row in flagged.to_pylist():
        by_figure.setdefault(row["figure_key"], []).append(row)
    chosen = []
    for key, rows in sorted(by_figure.items()):
        if len(rows) < 2 or not all(r["ok"] for r in rows):
            continue
        panels = tuple(tuple(r["panel_bbox"]) for r in rows)
        labels = tuple(tuple(r["label_bbox"]) for r in rows if r["label_bbox"])
        chosen.append(PseudoFigure(key, panels, labels))  # type: ignore[arg-type]
    return chosen


def figure_images(settings: Settings, keys: Iterable[str]) -> dict[str, bytes]:
    """The figures' image bytes, fetched from the build's source as the build fetched them."""
    wanted = set(keys)
    source = open_source(settings.source, settings.archive)
    found: dict[str, bytes] = {}
    for ref in source.refs():
        if len(found) == len(wanted):
            break
        if not any(k.startswith(ref.pmcid) for k in wanted):
            continue
        rows, _ = explode_article(source, ref, settings)
        for row in rows:
            if row["status"] == FIGURE and row["key"] in wanted and row["image"]:
                found[row["key"]] = row["image"]
    return found


def _yolo(box: tuple[int, int, int, int], w: int, h: int, cls: int) -> str:
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2 / w, (y0 + y1) / 2 / h
    return f"{cls} {cx:.6f} {cy:.6f} {(x1 - x0) / w:.6f} {(y1 - y0) / h:.6f}"


def write_yolo(figures: list[PseudoFigure], images: dict[str, bytes], out: Path) -> int:
    """A YOLO training set (``images/train``, ``labels/train``, ``data.yaml``); returns the
    figures written. Names are hashes of the figure key (keys hold characters paths dislike)."""
    (out / "images" / "train").mkdir(parents=True, exist_ok=True)
    (out / "labels" / "train").mkdir(parents=True, exist_ok=True)
    written = 0
    for fig in figures:
        data = images.get(fig.figure_key)
        if data is None:
            continue
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
        w, h = rgb.size
        name = hashlib.sha1(fig.figure_key.encode()).hexdigest()[:16]
        rgb.save(out / "images" / "train" / f"{name}.png")
        lines = [_yolo(b, w, h, 0) for b in fig.panels] + [_yolo(b, w, h, 1) for b in fig.labels]
        (out / "labels" / "train" / f"{name}.txt").write_text("\n".join(lines) + "\n")
        written += 1
    (out / "data.yaml").write_text(
        f"path: {out.resolve()}\ntrain: images/train\nval: images/train\n"
        "names:\n  0: panel\n  1: label\n"
    )
    return written
