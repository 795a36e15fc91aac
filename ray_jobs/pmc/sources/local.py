"""Local folders: one folder per article, in the PMC Cloud layout or the legacy one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from ray_jobs.config import ArchiveLimits, SourceSettings
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.records import ArticlePackage
from ray_jobs.pmc.sources.base import package_from_files, read_folder, split_pmc_name


def folder_etag(folder: Path) -> str:
    """Names, sizes and mtimes of the folder's files: changes when any file does."""
    digest = hashlib.md5(usedforsecurity=False)
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class LocalFolderSource:
    name = "local"

    def __init__(self, settings: SourceSettings, limits: ArchiveLimits):
        if not settings.path:
            raise ValueError("the local source needs source.path")
        self.root = Path(settings.path)
        self.limits = limits
        self.limit = settings.limit

    def refs(self) -> Iterator[ArticleRef]:
        if not self.root.is_dir():
            raise FileNotFoundError(f"source folder {self.root} does not exist")
        count = 0
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()):
            if not any(f.suffix.lower() in (".xml", ".nxml") for f in folder.iterdir()):
                continue
            pmcid, version = split_pmc_name(folder.name)
            yield ArticleRef(
                pmcid=pmcid or folder.name,
                version=version,
                etag=folder_etag(folder),
                source=self.name,
                location=str(folder),
            )
            count += 1
            if self.limit and count >= self.limit:
                return

    def fetch(self, ref: ArticleRef) -> ArticlePackage:
        return package_from_files(ref, read_folder(Path(ref.location), self.limits))
