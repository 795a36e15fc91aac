"""One article from listing to parsed record, with the one guard and the one outcome mapping
that ingest and the dataset build share.

Any failure of one article (a fetch error, a hostile archive, malformed XML) becomes that
article's failure row with the stage it happened in; nothing else is affected. How an
article's outcome reads in the ledger (ok, skipped for a retraction, failed and whether a
retry may help) is decided here once, so the two jobs never disagree about it.
"""

from __future__ import annotations

import logging

from ray_jobs.failures import FailureRecord, StageError
from ray_jobs.pmc.jats import parse_package
from ray_jobs.pmc.ledger import LedgerEntry
from ray_jobs.pmc.records import Article, ArticlePackage, ArticleRef
from ray_jobs.pmc.sources import ArticleSource

log = logging.getLogger(__name__)

RETRACTED = "retracted"


def fetch_and_parse(
    source: ArticleSource, ref: ArticleRef, max_xml_bytes: int
) -> tuple[ArticlePackage, Article] | FailureRecord:
    """The article's package and parsed record, or its failure row."""
    stage = "fetch"
    try:
        package = source.fetch(ref)
        stage = "parse"
        return package, parse_package(package, max_xml_bytes)
    except Exception as exc:  # any failure of one article is that article's failure row
        if not isinstance(exc, StageError):
            log.debug("unexpected error on %s", ref.key, exc_info=True)
        return FailureRecord.from_exception(ref.key, stage, exc)


def ledger_entry(
    ref: ArticleRef, part: str, error_type: str | None = None, retryable: bool = False
) -> LedgerEntry:
    """The article's ledger entry. ``error_type``: its article-level failure, if any (a
    retraction is a skip, not a failure); ``retryable``: that failure, or one of a figure or
    panel of it, is worth another try."""
    if error_type == RETRACTED:
        return LedgerEntry.for_ref(ref, "skipped", part)
    if error_type is not None or retryable:
        return LedgerEntry.for_ref(ref, "failed", part, retryable)
    return LedgerEntry.for_ref(ref, "ok", part)
