"""Leave held-out articles out of training, sample by sample.

Shards mix articles, so dropping whole shards would either leak (a shard holding one benchmark
article among others kept) or waste data. open_clip's webdataset loader passes every raw sample
through ``filter_no_caption_or_no_image`` before decoding; this module wraps whichever filter is
installed (open_clip's own, or the caption-key one) with one that first drops each sample whose
JSON ``pmcid`` is held out. A sample whose JSON cannot be read is dropped too: its article is
unknown, so it cannot be shown not to be held out.

The same filter drops the samples a newer version of their article superseded (the manifest's
tombstone files, matched on shard file and key), so training never sees two versions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow.parquet as pq

from ray_jobs.training.caption_key import IMAGE_EXTS


def article_id(pmcid: object) -> str | None:
    """``" pmc123 "`` → ``"PMC123"``; no PMCID → None. The benchmark and the filter both use it."""
    if not isinstance(pmcid, str) or not pmcid.strip():
        return None
    return pmcid.strip().upper()


def read_excluded(path: str | Path) -> frozenset[str]:
    """Article ids from an ``excluded_articles.txt``, one a line (``#`` comments skipped)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    ids = (article_id(line) for line in lines if not line.lstrip().startswith("#"))
    return frozenset(i for i in ids if i)


_UNKNOWN = object()


def sample_article(raw: bytes | str | None) -> str | object | None:
    """The article of a sample's JSON member: an id, None (no PMCID), or ``_UNKNOWN``."""
    try:
        record = json.loads(raw) if raw is not None else None
    except ValueError:
        return _UNKNOWN
    return article_id(record.get("pmcid")) if isinstance(record, dict) else _UNKNOWN


@dataclass(frozen=True)
class HasCaptionAndImage:
    """open_clip's ``filter_no_caption_or_no_image``, as a class so workers can unpickle it."""

    def __call__(self, sample: dict[str, Any]) -> bool:
        return "txt" in sample and any(ext in sample for ext in IMAGE_EXTS)


def sample_id(shard: str, key: str) -> str:
    """A sample's identity across versions: its shard's file name and its key."""
    return f"{PurePosixPath(shard).name}\0{key}"


def read_superseded(manifest_path: str | Path) -> frozenset[str]:
    """The superseded samples of a pulled dataset, as :func:`sample_id` values."""
    manifest_path = Path(manifest_path)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    root = manifest_path.resolve().parent
    ids: set[str] = set()
    for name in (manifest.get("superseded") or {}).get("files", []):
        table = pq.read_table(root / name, columns=["shard", "key"])
        ids.update(map(sample_id, table["shard"].to_pylist(), table["key"].to_pylist()))
    return frozenset(ids)


@dataclass(frozen=True)
class ExcludeArticles:
    """Drop held-out (or unidentifiable) and superseded samples, then apply the caption
    filter ``then``."""

    articles: frozenset[str]
    then: Callable[[dict[str, Any]], bool]
    superseded: frozenset[str] = frozenset()

    def __call__(self, sample: dict[str, Any]) -> bool:
        if self.superseded and (
            sample_id(str(sample.get("__url__", "")), str(sample.get("__key__", "")))
            in self.superseded
        ):
            return False
        article = sample_article(sample.get("json"))
        if article is _UNKNOWN or article in self.articles:
            return False
        return self.then(sample)


def install_exclusion(articles: Iterable[str], superseded: frozenset[str] = frozenset()) -> None:
    """Make open_clip's webdataset loader (this process) skip ``articles``.

    Call after ``install_caption_key``: the caption filter it installed runs second.
    """
    from open_clip_train import data

    current = data.filter_no_caption_or_no_image
    if isinstance(current, ExcludeArticles):
        current = current.then
    elif getattr(current, "__module__", "") == data.__name__:
        current = HasCaptionAndImage()  # open_clip's function, which would not pickle once swapped
    data.filter_no_caption_or_no_image = ExcludeArticles(frozenset(articles), current, superseded)


def count_kept(
    manifest_path: str | Path,
    split: str,
    shard_urls: Iterable[str],
    articles: frozenset[str],
    superseded: frozenset[str] = frozenset(),
) -> tuple[int, int]:
    """``(kept, dropped)`` samples of the chosen shards, counted from their Parquet index.

    open_clip needs the number of samples it will see (``--train-num-samples``); the manifest's
    count includes the held-out ones.
    """
    manifest_path = Path(manifest_path)
    root = manifest_path.resolve().parent
    chosen = {str(Path(u).resolve()) for u in shard_urls}
    kept = dropped = 0
    for shard in json.loads(manifest_path.read_text(encoding="utf-8")).get("shards", []):
        if shard.get("split") != split or str((root / shard["name"]).resolve()) not in chosen:
            continue
        if not shard.get("index"):
            raise ValueError(f"{manifest_path}: {shard['name']} has no index to count exclusions")
        index = pq.read_table(root / shard["index"], columns=["pmcid", "key"])
        pmcids = index["pmcid"].to_pylist()
        held = sum(
            article_id(p) in articles or sample_id(shard["name"], k) in superseded
            for p, k in zip(pmcids, index["key"].to_pylist(), strict=True)
        )
        kept += len(pmcids) - held
        dropped += held
    return kept, dropped
