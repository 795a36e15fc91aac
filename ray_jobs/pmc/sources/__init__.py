"""Article sources: each lists ArticleRefs and fetches ArticlePackages, one article at a time."""

from __future__ import annotations

from ray_jobs.config import ArchiveLimits, SourceSettings
from ray_jobs.pmc.sources.base import ArticleSource, package_from_path
from ray_jobs.pmc.sources.bundles import BundleSource
from ray_jobs.pmc.sources.local import LocalFolderSource
from ray_jobs.pmc.sources.s3 import PmcS3Source


def open_source(settings: SourceSettings, limits: ArchiveLimits) -> ArticleSource:
    if settings.kind == "s3":
        return PmcS3Source(settings, limits)
    if settings.kind == "bundles":
        return BundleSource(settings, limits)
    return LocalFolderSource(settings, limits)


__all__ = [
    "ArticleSource",
    "BundleSource",
    "LocalFolderSource",
    "PmcS3Source",
    "open_source",
    "package_from_path",
]
