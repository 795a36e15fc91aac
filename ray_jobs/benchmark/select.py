"""Which pairs make the benchmark: one per article, from the most recent articles.

Pure functions over index rows (dicts with the :data:`INDEX_SCHEMA` fields), so the choice is
testable without shards. Recent articles are the ones a model trained on older data has least
likely seen elsewhere, and one pair per article keeps an article's near-identical panels from
competing with each other in retrieval (as BMC-LongCLIP's benchmarks do).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ray_jobs.training.exclusion import article_id

# the caption a pair is scored on, best first: the enriched long caption when the build wrote
# one, else the panel's own subcaption, else the training text
CAPTION_SOURCES = ("long_caption", "subcaption", "text")


@dataclass(frozen=True)
class Pair:
    article: str  # normalised PMCID: the unit of exclusion
    year: int | None
    key: str
    caption: str
    caption_source: str  # one of CAPTION_SOURCES
    row: Mapping[str, Any]  # the index row it came from (shard, member, sha256, ...)


def pick_caption(row: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(caption, source)``: the first non-empty of :data:`CAPTION_SOURCES`, else None."""
    for source in CAPTION_SOURCES:
        value = row.get(source)
        if isinstance(value, str) and value.strip():
            return value.strip(), source
    return None


def _pmc_number(article: str) -> int:
    digits = re.sub(r"\D", "", article)
    return int(digits) if digits else -1


def recency_order(article: str, year: int | None) -> tuple[bool, int, int, str]:
    """Sort key: newest year first, undated last; ties by the higher PMCID (PMC numbers are
    given out in deposit order, so the higher is the later article), then the text."""
    return (year is None, -(year or 0), -_pmc_number(article), article)


def select_pairs(rows: Iterable[Mapping[str, Any]], size: int) -> list[Pair]:
    """One pair from each of the ``size`` most recent articles (fewer when fewer exist).

    Within an article the pair with the best caption source wins, ties by key, so the same
    index always gives the same benchmark. Rows without a PMCID, an image member or any caption
    are not eligible.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    best: dict[str, Pair] = {}
    years: dict[str, int | None] = {}
    for row in rows:
        article = article_id(row.get("pmcid"))
        picked = pick_caption(row)
        if article is None or picked is None or not row.get("member"):
            continue
        year = row.get("year")  # an article's versions may differ: its latest year counts
        years[article] = max((y for y in (year, years.get(article)) if y is not None), default=None)
        pair = Pair(article, year, str(row["key"]), picked[0], picked[1], row)
        current = best.get(article)
        if current is None or _pair_rank(pair) < _pair_rank(current):
            best[article] = pair
    articles = sorted(best, key=lambda a: recency_order(a, years[a]))[:size]
    return [_with_year(best[a], years[a]) for a in articles]


def _pair_rank(pair: Pair) -> tuple[int, str]:
    return CAPTION_SOURCES.index(pair.caption_source), pair.key


def _with_year(pair: Pair, year: int | None) -> Pair:
    if pair.year == year:
        return pair
    return Pair(pair.article, year, pair.key, pair.caption, pair.caption_source, pair.row)
