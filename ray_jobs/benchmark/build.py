"""``pmcvl build-benchmark``: the retrieval benchmark and the articles training must leave out.

The benchmark is written as its own small dataset (images copied out of the source shards,
so it outlives them and a later build cannot change it): ``shards/bench-*.tar`` in our
WebDataset contract, ``pairs.parquet`` (one row per pair, no image bytes), ``benchmark.json``
and ``excluded_articles.txt``. Shards mix articles, so exclusion is per article, not per shard:
the trainer drops every sample whose JSON ``pmcid`` is in that file (``--exclude-articles``),
which removes all of a benchmark article's panels and figures, in every version, and nothing else.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa

from ray_jobs import __version__
from ray_jobs.benchmark.select import CAPTION_SOURCES, Pair, select_pairs
from ray_jobs.config import S3Settings
from ray_jobs.shards import superseded
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import LocalStorage, Storage, open_storage

FORMAT = "pmcvl-benchmark/1"
META, PAIRS, EXCLUDED, SHARDS = "benchmark.json", "pairs.parquet", "excluded_articles.txt", "shards"
PAIRS_PER_SHARD = 1000
INDEX_COLUMNS = [
    "key", "pmcid", "year", "figure_key", "caption", "subcaption", "long_caption", "text",
    "modality", "modality_l1", "sha256", "shard", "member",
]  # fmt: skip
PAIR_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("article", pa.string()),  # the normalised PMCID, as in excluded_articles.txt
        ("year", pa.int64()),
        ("figure_key", pa.string()),
        ("caption", pa.string()),
        ("caption_source", pa.string()),
        ("modality", pa.string()),
        ("modality_l1", pa.string()),
        ("sha256", pa.string()),  # of the image bytes
        ("shard", pa.string()),  # in the benchmark
        ("member", pa.string()),
        ("source_shard", pa.string()),  # in the dataset it came from
        ("source_member", pa.string()),
    ]
)


def split_rows(storage: Storage, manifest: dict[str, Any], split: str) -> Iterator[dict[str, Any]]:
    """Index rows of every ``split`` shard the manifest lists (the index, not the tars), less
    the samples a newer version of their article superseded."""
    for shard in manifest.get("shards", []):
        if shard.get("split") == split:
            table = read_parquet(storage, shard["index"])
            if shard.get("superseded"):  # a newer version of the article replaced these
                table = superseded.current(
                    table, superseded.from_manifest(storage, manifest, shard["name"])
                )
            yield from table.select(
                [c for c in INDEX_COLUMNS if c in table.column_names]
            ).to_pylist()


def _open_tar(storage: Storage, name: str) -> tarfile.TarFile:
    if isinstance(storage, LocalStorage):  # random access, no copy into memory
        return tarfile.open(storage.root / name)
    return tarfile.open(fileobj=io.BytesIO(storage.read_bytes(name)))


def copy_images(storage: Storage, pairs: list[Pair]) -> dict[str, bytes]:
    """Image bytes by pair key, each source shard opened once; checked against the index's
    sha256, so a benchmark never holds an image its record does not describe."""
    by_shard: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_shard[str(pair.row["shard"])].append(pair)
    images: dict[str, bytes] = {}
    for shard, wanted in sorted(by_shard.items()):
        with _open_tar(storage, shard) as tar:
            for pair in wanted:
                member = tar.extractfile(str(pair.row["member"]))
                if member is None:
                    raise ValueError(f"{shard}: {pair.row['member']} is not a file")
                data = member.read()
                expected = pair.row.get("sha256")
                if expected and hashlib.sha256(data).hexdigest() != expected:
                    raise ValueError(f"{shard}: {pair.row['member']} does not match its sha256")
                images[pair.key] = data
    return images


def _shard_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """A tar with fixed member metadata: the same pairs give the same bytes and sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _pair_json(pair: Pair) -> dict[str, Any]:
    row = pair.row
    return {
        "key": pair.key,
        "pmcid": row.get("pmcid"),
        "article": pair.article,
        "year": pair.year,
        "figure_key": row.get("figure_key"),
        "caption": pair.caption,
        "caption_source": pair.caption_source,
        "modality": row.get("modality"),
        "modality_l1": row.get("modality_l1"),
    }


def build_benchmark(
    dataset_uri: str,
    out_uri: str,
    *,
    size: int = 1000,
    split: str = "train",
    s3: S3Settings | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Select, copy and write the benchmark; returns what ``benchmark.json`` holds."""
    source = open_storage(dataset_uri, s3)
    out = open_storage(out_uri, s3)
    if out.exists(META) and not overwrite:
        raise FileExistsError(f"{out.uri}/{META} exists; pass overwrite to rebuild it")
    manifest = json.loads(source.read_bytes("manifest.json"))
    pairs = select_pairs(split_rows(source, manifest, split), size)
    if not pairs:
        raise ValueError(f"{source.uri}: no {split!r} sample with a PMCID and a caption")
    images = copy_images(source, pairs)

    shards, rows = [], []
    for start in range(0, len(pairs), PAIRS_PER_SHARD):
        chunk = pairs[start : start + PAIRS_PER_SHARD]
        name = f"{SHARDS}/bench-{start // PAIRS_PER_SHARD:06d}.tar"
        members = []
        for pair in chunk:
            member = f"{pair.key}{PurePosixPath(str(pair.row['member'])).suffix}"
            meta = json.dumps(_pair_json(pair), ensure_ascii=False, sort_keys=True).encode()
            members += [
                (member, images[pair.key]),
                (f"{pair.key}.json", meta),
                (f"{pair.key}.txt", pair.caption.encode()),
            ]
            rows.append(
                {
                    **{k: v for k, v in _pair_json(pair).items() if k in PAIR_SCHEMA.names},
                    "sha256": hashlib.sha256(images[pair.key]).hexdigest(),
                    "shard": name,
                    "member": member,
                    "source_shard": pair.row["shard"],
                    "source_member": pair.row["member"],
                }
            )
        data = _shard_bytes(members)
        out.write_bytes(name, data)
        shards.append(
            {"name": name, "samples": len(chunk), "sha256": hashlib.sha256(data).hexdigest()}
        )
    write_parquet(out, PAIRS, pa.Table.from_pylist(rows, schema=PAIR_SCHEMA))
    articles = sorted({p.article for p in pairs})
    out.write_bytes(EXCLUDED, ("\n".join(articles) + "\n").encode())

    years = [p.year for p in pairs if p.year is not None]
    sources = Counter(p.caption_source for p in pairs)
    meta = {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code_version": __version__,
        "size": len(pairs),
        "requested_size": size,
        "split": split,
        "source": {
            "dataset": source.uri,
            "manifest_created": manifest.get("created"),
            "runs": manifest.get("runs", []),
            "config_hash": manifest.get("config_hash"),
        },
        "selection": (
            "one pair per article from the most recent articles: publication year, newest "
            "first, ties by the higher PMCID; within an article the best caption source, "
            "then the lowest key"
        ),
        "caption_policy": list(CAPTION_SOURCES),
        "caption_sources": {s: sources.get(s, 0) for s in CAPTION_SOURCES},
        "years": {"min": min(years, default=None), "max": max(years, default=None)},
        "exclusion": {
            "unit": "article",
            "field": "pmcid",
            "file": EXCLUDED,
            "articles": len(articles),
            "how": "training drops every sample whose json pmcid is listed "
            "(python -m ray_jobs.training.train --exclude-articles FILE)",
        },
        "pairs": PAIRS,
        "shards": shards,
    }
    out.write_bytes(META, json.dumps(meta, indent=2, ensure_ascii=False).encode())
    return meta
