"""Fetch and parse one article, then explode it into one row per figure.

The article's end marker follows its figure rows; a fetch or parse failure becomes a failure
row before the marker. A figure whose image is missing from the package fails alone.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ray_jobs.config import Settings
from ray_jobs.failures import FailureRecord
from ray_jobs.pipeline.rows import ARTICLE, FIGURE, Row, failure_row, make_row
from ray_jobs.pmc.fetch import fetch_and_parse
from ray_jobs.pmc.records import Article, ArticleRef
from ray_jobs.pmc.sources import ArticleSource
from ray_jobs.shards.records import figure_key

STAGE = "explode"


def split_of(pmcid: str, val_fraction: float) -> str:
    """A stable split by article: the same PMCID lands in the same split in every run."""
    if val_fraction <= 0:
        return "train"
    bucket = int.from_bytes(hashlib.sha256(pmcid.encode()).digest()[:8], "big") / 2**64
    return "val" if bucket < val_fraction else "train"


def article_fields(ref: ArticleRef, article: Article) -> dict[str, Any]:
    pmcid, version = article.identity(ref)
    return {
        "article_key": ref.key,
        "pmcid": pmcid,
        "pmc_version": version,
        "pmid": article.pmid,
        "doi": article.doi,
        "journal": article.journal,
        "year": article.year,
        "license": article.license.code,
        "license_url": article.license.url,
    }


def figure_rows(
    ref: ArticleRef,
    article: Article,
    media: dict[str, bytes],
    split: str,
    with_context: bool = True,
) -> list[Row]:
    """``with_context`` carries the abstract and acronyms along, for enrichment only."""
    base = article_fields(ref, article)
    context = {"abstract": article.abstract, "acronyms": article.acronyms} if with_context else {}
    rows: list[Row] = []
    used: set[str] = set()
    for figure in article.figures:
        # ids that sanitise alike ("F1.a", "F1_a") must still get distinct keys
        ordinal = 0
        while (key := figure_key(base["pmcid"], base["pmc_version"], figure.id, ordinal)) in used:
            ordinal += 1
        used.add(key)
        image = media.get(figure.image) if figure.image else None
        if image is None:
            why = (
                f"no media file for graphics {figure.graphics}" if figure.graphics else "no graphic"
            )
            failure = FailureRecord(key, STAGE, "missing_image", why)
            rows.append(failure_row(failure, "figure", ref.key))
            continue
        record = {
            **base,
            "figure_key": key,
            "figure_id": figure.id,
            "figure_label": figure.label,
            "caption": figure.caption,
            "bold_labels": figure.bold_labels,
            "mentions": [{"sentence": m.sentence, "panels": m.panels} for m in figure.mentions],
            "split": split,
            "_context": context,
        }
        rows.append(make_row(key, FIGURE, record, image))
    return rows


def explode_article(
    source: ArticleSource, ref: ArticleRef, settings: Settings
) -> tuple[list[Row], Row]:
    """The article's figure (or failure) rows, and its end marker."""
    marker = {
        "article_key": ref.key,
        "pmcid": ref.pmcid,
        "version": ref.version,
        "etag": ref.etag,
        "source": ref.source,
        "location": ref.location,
        "figures": 0,
    }
    got = fetch_and_parse(source, ref, settings.archive.max_xml_bytes)
    if isinstance(got, FailureRecord):
        return [failure_row(got, "article", ref.key)], make_row(ref.key, ARTICLE, marker)
    package, article = got
    pmcid, _ = article.identity(ref)
    split = split_of(pmcid, settings.pipeline.val_fraction)
    rows = figure_rows(ref, article, package.media, split, settings.longcap.enabled)
    marker["figures"] = len(article.figures)
    return rows, make_row(ref.key, ARTICLE, marker)


def ref_of(record: dict[str, Any]) -> ArticleRef:
    return ArticleRef(
        record["pmcid"], record["version"], record["etag"], record["source"], record["location"]
    )
