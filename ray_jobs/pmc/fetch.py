"""One article from listing to parsed record, with the one guard and the one outcome mapping
that ingest and the dataset build share.

Any failure of one article (a fetch error, a hostile archive, malformed XML) becomes that
article's failure row with the stage it happened in; nothing else is affected. How an
article's outcome reads in the ledger (ok, skipped for a retraction, failed and whether a
retry may help) is decided here once, so the two jobs never disagree about it.
"""

from __future__ import annotations

import logging

from ray_jobs.contract.failures import FailureRecord, StageError
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.jats import parse_package
from ray_jobs.pmc.ledger import LedgerEntry
from ray_jobs.pmc.records import Article, ArticlePackage
from ray_jobs.pmc.sources import ArticleSource

log = logging.getLogger(__name__)

RETRACTED = "retracted"
IDENTITY = "identity"


def fetch_and_parse(
    source: ArticleSource, ref: ArticleRef, max_xml_bytes: int
) -> tuple[ArticlePackage, Article] | FailureRecord:
    """The article's package and parsed record, or its failure row."""
    stage = "fetch"
    try:
        package = source.fetch(ref)
        stage = "parse"
        article = parse_package(package, max_xml_bytes)
        check_identity(ref, article)
        return package, article
    except Exception as exc:  # any failure of one article is that article's failure row
        if not isinstance(exc, StageError):
            log.debug("unexpected error on %s", ref.key, exc_info=True)
        return FailureRecord.from_exception(ref.key, stage, exc)


def check_identity(ref: ArticleRef, article: Article) -> None:
    """Refuse a package whose own ids contradict its listing's.

    Keys, ledger rows and tombstones are all built from an article's identity, so a package
    that claims another article's PMCID (or version) would write into that article's key
    space. Where the listing names a PMCID (S3, bundles, ``PMC*`` folders) it is the
    authority; a package listed without one (a dev folder named ``article-7``) keeps its own.
    """
    claims = []
    if ref.pmcid.startswith("PMC") and article.pmcid not in (None, ref.pmcid):
        claims.append(f"PMCID {article.pmcid}")
    if None not in (ref.version, article.version) and article.version != ref.version:
        claims.append(f"version {article.version}")
    if claims:
        raise StageError(
            IDENTITY,
            "identity_mismatch",
            f"the package claims {' and '.join(claims)} but is listed as {ref.key}",
        )


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
