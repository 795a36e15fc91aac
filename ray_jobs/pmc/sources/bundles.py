"""Legacy PMC packages: one ``.tar.gz`` per article, from a folder or a legacy CSV file list."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ray_jobs.config import ArchiveLimits, SourceSettings
from ray_jobs.contract.failures import StageError
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.archive import read_tar_gz
from ray_jobs.pmc.records import ArticlePackage
from ray_jobs.pmc.sources.base import FETCH, package_from_files, split_pmc_name

FILE_LIST_COLUMNS = ("File", "Article Citation", "Accession ID", "Last Updated", "PMID", "License")


class BundleSource:
    name = "bundles"

    def __init__(self, settings: SourceSettings, limits: ArchiveLimits):
        self.file_list = Path(settings.file_list) if settings.file_list else None
        root = settings.path or (str(self.file_list.parent) if self.file_list else None)
        if root is None:
            raise ValueError("the bundles source needs source.path or source.file_list")
        self.root = Path(root)
        self.limits = limits
        self.limit = settings.limit

    def _from_folder(self) -> Iterator[ArticleRef]:
        for path in sorted(self.root.rglob("*.tar.gz")):
            if path.is_symlink() or not path.is_file():
                continue
            pmcid, version = split_pmc_name(path.name)
            stat = path.stat()
            yield ArticleRef(
                pmcid=pmcid or path.name[: -len(".tar.gz")],
                version=version,
                etag=f"{stat.st_size}-{stat.st_mtime_ns}",
                source=self.name,
                location=str(path),
            )

    def _from_file_list(self, file_list: Path) -> Iterator[ArticleRef]:
        with file_list.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ("File", "Accession ID") if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{file_list}: not a PMC file list, missing columns {missing}")
            for row in reader:
                rel = (row.get("File") or "").strip()
                if not rel:
                    continue
                pmcid, version = split_pmc_name((row.get("Accession ID") or "").strip())
                yield ArticleRef(
                    pmcid=pmcid or Path(rel).name.split(".")[0],
                    version=version,
                    etag=(row.get("Last Updated") or "").strip(),
                    source=self.name,
                    location=rel,
                )

    def refs(self) -> Iterator[ArticleRef]:
        refs = self._from_file_list(self.file_list) if self.file_list else self._from_folder()
        for count, ref in enumerate(refs, start=1):
            yield ref
            if self.limit and count >= self.limit:
                return

    def _resolve(self, location: str) -> Path:
        path = Path(location)
        if not path.is_absolute():
            path = self.root / path
        # a file list is data too: its paths must stay inside the source folder
        resolved = path.resolve()
        if self.file_list and not resolved.is_relative_to(self.root.resolve()):
            raise StageError(FETCH, "unsafe_path", f"{location!r} points outside {self.root}")
        return resolved

    def fetch(self, ref: ArticleRef) -> ArticlePackage:
        path = self._resolve(ref.location)
        if not path.is_file():
            raise StageError(FETCH, "missing_file", f"{path} does not exist", retryable=True)
        size = path.stat().st_size
        if size > self.limits.max_total_bytes:
            raise StageError(FETCH, "archive_too_large", f"{path.name} is {size} bytes")
        return package_from_files(ref, read_tar_gz(path.read_bytes(), self.limits))
