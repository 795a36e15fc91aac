"""A build of the sample corpus against its ``truth.jsonl``: which panels were published, with
which modality, against the kind each panel was drawn as (``panel_kinds``).

The sample corpus writes captions that name every panel's content under its label and draws
each panel as its subcaption says, so a build of it can be scored end to end: non-clinical
panels published (charts: the taxonomy's ``keep: false`` classes), clinical panels published,
and published modality right. Panels are matched to the truth by figure and label; a figure
published whole (``alignment: figure``) is counted apart, as it has no one kind; duplicates
the build dropped (the corpus draws look-alike tiles) count as not published.

    pmcvl-dev eval-sample-build OUT CORPUS
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ray_jobs.figures.taxonomy import load_taxonomy

COLUMNS = ["pmcid", "figure_id", "panel_label", "alignment", "modality"]


def truth_panels(corpus: Path) -> dict[tuple[str, str, str], str]:
    """(pmcid, figure id, label) → the panel's taxonomy class, for every drawn panel."""
    out = {}
    for line in (corpus / "truth.jsonl").read_text().splitlines():
        article = json.loads(line)
        for fig in article["figures"]:
            for label, kind in zip(fig["panels"], fig.get("panel_kinds") or [], strict=False):
                out[(article["pmcid"], fig["id"], label)] = kind
    return out


def published(out: Path) -> list[dict[str, Any]]:
    files = sorted((out / "index").glob("*.parquet"))
    return pa.concat_tables(pq.read_table(f, columns=COLUMNS) for f in files).to_pylist()


def score(out: Path, corpus: Path) -> dict[str, Any]:
    truth = truth_panels(corpus)
    keep = {name: cls.keep for name, cls in load_taxonomy().classes.items()}
    rows = published(out)
    seen: dict[tuple[str, str, str], str | None] = {}
    whole = 0
    labels: dict[tuple[str, str], list[str]] = {}
    for pmcid, fig, label in truth:
        labels.setdefault((pmcid, fig), []).append(label)
    for r in rows:
        label = r["panel_label"]
        only = labels.get((r["pmcid"], r["figure_id"]), [])
        if r["alignment"] == "single" and len(only) == 1:  # a one-panel figure: its panel
            label = only[0]
        if r["alignment"] == "figure" or not label:
            whole += 1
            continue
        seen[(r["pmcid"], r["figure_id"], label)] = r["modality"]
    clinical = [k for k, kind in truth.items() if keep.get(kind, True)]
    other = [k for k, kind in truth.items() if not keep.get(kind, True)]
    out_clinical = [k for k in clinical if k in seen]
    right = [k for k in out_clinical if seen[k] == truth[k]]
    return {
        "panels": len(truth),
        "clinical": len(clinical),
        "clinical_published": len(out_clinical),
        "clinical_published_share": round(len(out_clinical) / max(1, len(clinical)), 3),
        "modality_right": len(right),
        "modality_right_share": round(len(right) / max(1, len(out_clinical)), 3),
        "non_clinical": len(other),
        "non_clinical_published": sum(k in seen for k in other),
        "non_clinical_published_share": round(
            sum(k in seen for k in other) / max(1, len(other)), 3
        ),
        "published_whole_figures": whole,
        "wrong_modality": sorted(
            {f"{truth[k]}→{seen[k]}" for k in out_clinical if seen[k] != truth[k]}
        ),
    }
