"""The article reference: what a listing knows about one article version, the unit every stage,
the plan and the ledger name an article by."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class ArticleRef:
    """What a listing knows about one article version before anything is fetched.

    ``etag`` identifies the content as the source sees it (S3 ETag, a file list's timestamp, a
    folder's size and mtimes): when it changes, the article is processed again.
    """

    pmcid: str
    version: int | None
    etag: str
    source: str  # "s3", "bundles", "local"
    location: str  # where to fetch: an S3 prefix, a file path, a folder path

    @property
    def key(self) -> str:
        """Stable source key, used in failure rows and the ledger (``PMC123.2``, ``PMC9``)."""
        return self.pmcid if self.version is None else f"{self.pmcid}.{self.version}"
