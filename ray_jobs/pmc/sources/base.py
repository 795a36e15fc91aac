"""What every article source provides, and reading one article from a path."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ray_jobs.config import ArchiveLimits
from ray_jobs.contract.failures import StageError
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.archive import read_tar_gz
from ray_jobs.pmc.records import ArticlePackage

FETCH = "fetch"
_PMC_VERSION = re.compile(r"(PMC\d+)(?:\.(\d+))?", re.I)


class ArticleSource(Protocol):
    """Lists article versions cheaply, then fetches one package at a time on demand."""

    name: str

    def refs(self) -> Iterator[ArticleRef]: ...
    def fetch(self, ref: ArticleRef) -> ArticlePackage: ...


def split_pmc_name(name: str) -> tuple[str | None, int | None]:
    """``PMC123.2`` → ("PMC123", 2); ``PMC9.tar.gz`` → ("PMC9", None); otherwise (None, None)."""
    m = _PMC_VERSION.match(name)
    if not m:
        return None, None
    return m.group(1).upper(), int(m.group(2)) if m.group(2) else None


def check_retracted(ref: ArticleRef, metadata: dict[str, Any] | None) -> None:
    if metadata and metadata.get("is_retracted") in (True, "true", "True", 1):
        raise StageError(FETCH, "retracted", "the article is retracted (is_retracted in PMC JSON)")


def package_from_files(ref: ArticleRef, files: dict[str, bytes]) -> ArticlePackage:
    """Pick the JATS file and the PMC JSON among a package's files; the rest is media.

    Names may carry folders (bundles hold ``PMC123/...``); media are indexed by base name.
    """
    xml_names = sorted(n for n in files if n.lower().endswith((".nxml", ".xml")))
    # prefer .nxml (the legacy article file) and the PMC Cloud "<pmcid>.<v>.xml" over others
    xml_names.sort(key=lambda n: (not n.lower().endswith(".nxml"), ref.key not in n, n))
    if not xml_names:
        raise StageError(FETCH, "no_xml", "the package holds no .xml or .nxml file")
    xml_name = xml_names[0]
    metadata = None
    media: dict[str, bytes] = {}
    for name, data in files.items():
        base = name.rsplit("/", 1)[-1]
        if name == xml_name:
            continue
        if base.lower().endswith(".json") and base.startswith(("PMC", "pmc")):
            try:
                metadata = json.loads(data)
            except ValueError as exc:
                raise StageError(FETCH, "bad_metadata", f"{base}: {exc}") from None
            continue
        media[base] = data
    check_retracted(ref, metadata)
    return ArticlePackage(
        ref=ref, xml=files[xml_name], xml_name=xml_name, media=media, metadata=metadata
    )


def _listing(folder: Path, limits: ArchiveLimits) -> list[Path]:
    """The folder's entries, sorted; more than ``max_members`` is refused before the listing
    is held whole (a package folder of a million files is not an article)."""
    entries = list(itertools.islice(folder.iterdir(), limits.max_members + 1))
    if len(entries) > limits.max_members:
        raise StageError(
            FETCH, "too_many_members", f"{folder.name}: more than {limits.max_members} files"
        )
    return sorted(entries)


def _read_files(paths: list[Path], limits: ArchiveLimits) -> dict[str, bytes]:
    """``{name: bytes}`` of the regular files among ``paths`` (no links, no dot files), each
    within ``max_member_bytes`` and all within ``max_total_bytes``, judged by their sizes
    before reading and again by what was read (a file may grow meanwhile)."""
    files: dict[str, bytes] = {}
    total = 0
    for path in paths:
        if path.is_symlink() or not path.is_file() or path.name.startswith("."):
            continue
        if path.stat().st_size > limits.max_member_bytes:
            raise StageError(
                FETCH, "member_too_large", f"{path.name} exceeds {limits.max_member_bytes} B"
            )
        with path.open("rb") as handle:
            data = handle.read(limits.max_member_bytes + 1)
        if len(data) > limits.max_member_bytes:
            raise StageError(
                FETCH, "member_too_large", f"{path.name} exceeds {limits.max_member_bytes} B"
            )
        total += len(data)
        if total > limits.max_total_bytes:
            raise StageError(
                FETCH, "archive_too_large", f"the package's files exceed {limits.max_total_bytes} B"
            )
        files[path.name] = data
    return files


def read_folder(folder: Path, limits: ArchiveLimits) -> dict[str, bytes]:
    """A folder package's files, under the same bounds as an archive's members."""
    return _read_files(_listing(folder, limits), limits)


def package_from_path(path: str | Path, limits: ArchiveLimits | None = None) -> ArticlePackage:
    """One article from an ``.xml``/``.nxml`` file (media beside it), a folder or a ``.tar.gz``."""
    limits = limits or ArchiveLimits()
    path = Path(path)
    pmcid, version = split_pmc_name(path.name)
    ref = ArticleRef(
        pmcid=pmcid or path.name.split(".")[0],
        version=version,
        etag="",
        source="path",
        location=str(path),
    )
    if path.is_dir():
        return package_from_files(ref, read_folder(path, limits))
    if path.name.lower().endswith((".tar.gz", ".tgz")):
        return package_from_files(ref, read_tar_gz(path.read_bytes(), limits))
    if path.suffix.lower() in (".xml", ".nxml"):
        # every sibling is a candidate medium: the folder is bounded like a package
        siblings = [
            p
            for p in _listing(path.parent, limits)
            if p != path
            and not p.name.lower().endswith((".xml", ".nxml", ".json"))
            and p.is_file()
            and p.stat().st_size <= limits.max_member_bytes  # an oversized sibling is skipped
        ]
        media = _read_files(siblings, limits)
        meta_path = path.with_suffix(".json")
        metadata = json.loads(meta_path.read_bytes()) if meta_path.is_file() else None
        return ArticlePackage(
            ref=ref, xml=path.read_bytes(), xml_name=path.name, media=media, metadata=metadata
        )
    raise StageError(FETCH, "unsupported_path", f"{path}: not an .xml/.nxml, folder or .tar.gz")
