"""Fetch and parse one article, then explode it into one row per figure.

The article's end marker follows its figure rows; a fetch or parse failure becomes a failure
row before the marker. A figure whose image is missing from the package fails alone.

What one article puts into the pipeline is bounded (``pipeline.max_figures_per_article`` and
``pipeline.max_decoded_bytes_per_article``): every ``<fig>`` of an article may name the same
huge image, and each figure row carries its own copy through every stage.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from ray_jobs.config import PipelineSettings, Settings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.records import figure_key
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.contract.rows import ARTICLE, BUDGET_LEFT, FIGURE, Row, failure_row, make_row
from ray_jobs.figures.images import header_decoded_bytes
from ray_jobs.pipeline import budget
from ray_jobs.pmc import license_policy
from ray_jobs.pmc.fetch import fetch_and_parse
from ray_jobs.pmc.licenses import label
from ray_jobs.pmc.records import Article, Figure
from ray_jobs.pmc.sources import ArticleSource

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


_LIMITS = PipelineSettings()


def kept_figures(
    figures: list[Figure], media: dict[str, bytes], max_figures: int, max_decoded_bytes: int
) -> tuple[int, str | None]:
    """How many of the figures, in document order, go on, and why the rest do not: the first
    ``max_figures`` while their images' decoded sizes (read from the headers, once per image;
    each figure counts its own, since each carries its own copy) stay within the budget."""
    sizes: dict[str, int] = {}
    total = 0
    for n, figure in enumerate(figures):
        if n >= max_figures:
            return n, "too_many_figures"
        image = media.get(figure.image) if figure.image else None
        if image is None:
            continue  # a missing image costs nothing: it fails alone
        if figure.image not in sizes:
            sizes[figure.image] = max(len(image), header_decoded_bytes(image))
        total += sizes[figure.image]
        if total > max_decoded_bytes:
            return n, "too_many_decoded_bytes"
    return len(figures), None


def excess_failure(
    key: str, figures: list[Figure], kept: int, reason: str, max_figures: int, max_bytes: int
) -> FailureRecord:
    """One failure row for all the figures left out, keyed by the first of them. One, not one
    per figure: an article of a million ``<fig>`` elements must not become a million rows."""
    bound = (
        f"more than {max_figures} figures"
        if reason == "too_many_figures"
        else f"their images decode to more than {max_bytes} bytes"
    )
    return FailureRecord(
        key,
        STAGE,
        reason,
        f"{len(figures) - kept} of {len(figures)} figures left out, from {figures[kept].id!r} "
        f"on: {bound}",
    )


def figure_rows(
    ref: ArticleRef,
    article: Article,
    media: dict[str, bytes],
    split: str,
    *,
    max_figures: int = _LIMITS.max_figures_per_article,
    max_decoded_bytes: int = _LIMITS.max_decoded_bytes_per_article,
) -> list[Row]:
    """The figures past the article's bounds become one figure-level failure row: the article's
    other figures are good data, and its ledger entry stays ``ok`` (a rerun would cut the
    same figures again)."""
    base = article_fields(ref, article)
    kept, reason = kept_figures(article.figures, media, max_figures, max_decoded_bytes)
    rows: list[Row] = []
    used: set[str] = set()
    for n, figure in enumerate(article.figures):
        # ids that sanitise alike ("F1.a", "F1_a") must still get distinct keys
        ordinal = 0
        while (key := figure_key(base["pmcid"], base["pmc_version"], figure.id, ordinal)) in used:
            ordinal += 1
        used.add(key)
        if n == kept and reason is not None:
            failure = excess_failure(
                key, article.figures, kept, reason, max_figures, max_decoded_bytes
            )
            rows.append(failure_row(failure, "figure", ref.key))
            break
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
        }
        rows.append(make_row(key, FIGURE, record, image))
    return rows


def end_marker(ref: ArticleRef, license: str | None = None) -> dict[str, Any]:
    """The record of an article's end marker: its ref, figure count and license label."""
    marker: dict[str, Any] = {
        "article_key": ref.key,
        "pmcid": ref.pmcid,
        "version": ref.version,
        "etag": ref.etag,
        "source": ref.source,
        "location": ref.location,
        "figures": 0,
    }
    if license is not None:
        marker["license"] = license
    return marker


def explode_article(
    source: ArticleSource, ref: ArticleRef, settings: Settings
) -> tuple[list[Row], Row]:
    """The article's figure (or failure) rows, and its end marker."""
    marker = end_marker(ref)
    start = time.monotonic()
    limit = settings.pipeline.max_seconds_per_article
    got = fetch_and_parse(source, ref, settings.archive.max_xml_bytes)
    if not isinstance(got, FailureRecord):
        spent = time.monotonic() - start
        got = budget.overrun(ref.key, "parse", spent, limit, "fetch and parse") or got
    if isinstance(got, FailureRecord):
        return [failure_row(got, "article", ref.key)], make_row(ref.key, ARTICLE, marker)
    package, article = got
    marker["license"] = label(article.license.code)
    if settings.longcap.enabled:  # enrichment's context, once per article (``enrich_stage``)
        marker["abstract"], marker["acronyms"] = article.abstract, article.acronyms
    skipped = license_policy.refusal(settings.output.licenses.allow, marker["license"])
    if skipped is not None:  # never built: its marker says why, its part's skips table keeps it
        marker["skipped"] = skipped
        return [], make_row(ref.key, ARTICLE, marker)
    pmcid, _ = article.identity(ref)
    split = split_of(pmcid, settings.pipeline.val_fraction)
    limits = settings.pipeline
    rows = figure_rows(
        ref,
        article,
        package.media,
        split,
        max_figures=limits.max_figures_per_article,
        max_decoded_bytes=limits.max_decoded_bytes_per_article,
    )
    left = limit - (time.monotonic() - start)
    for row in rows:
        if row["status"] == FIGURE:
            row["record"][BUDGET_LEFT] = left
    marker["figures"] = len(article.figures)
    return rows, make_row(ref.key, ARTICLE, marker)


def ref_of(record: dict[str, Any]) -> ArticleRef:
    return ArticleRef(
        record["pmcid"], record["version"], record["etag"], record["source"], record["location"]
    )
