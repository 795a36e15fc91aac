"""Samples a newer version of their article replaced: tombstones beside immutable shards.

Published shards are never rewritten (a reader may be streaming them, and their checksums are
in the manifest). When a part builds a new version of an article that is already in the
dataset (a new PMC version, or the same version with new content), the part lists the old
version's samples in ``superseded/<part>.parquet`` (shard and key: the same key may live on
in a newer shard) and commits that file with its own shards. The manifest counts them per
shard, and every reader of the dataset (dedup, training, the report, the benchmark) drops them
with :func:`current`, so no reader sees both versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.pmc.ledger import version_id, version_ids
from ray_jobs.pmc.licenses import UNKNOWN
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage

SUPERSEDED = "superseded"
SCHEMA = pa.schema(
    [
        ("shard", pa.string()),
        ("key", pa.string()),
        ("pmcid", pa.string()),
        ("pmc_version", pa.int64()),
        ("by_part", pa.string()),  # the part that built the newer version
    ]
)
# what :func:`retired` gives: the samples' licenses too, which :func:`write` counts (the
# manifest's ``licenses`` are per-part counts less these) and leaves out of the file
RETIRED_SCHEMA = SCHEMA.append(pa.field("license", pa.string()))


def file_of(part: str) -> str:
    return f"{SUPERSEDED}/{part}.parquet"


def retired(
    storage: Storage, old_part: dict[str, Any], articles: Iterable[tuple[str, int | None]], by: str
) -> pa.Table:
    """The samples of ``articles`` (pmcid, version) in the shards of the part record
    ``old_part``, as tombstone rows; the part's index files are read by column."""
    wanted = pa.array(sorted(version_id(p, v) for p, v in articles), pa.string())
    tables = []
    for shard in old_part["shards"]:
        index = read_parquet(storage, shard["index"], [*SCHEMA.names[:-1], "license"])
        ids = version_ids(index["pmcid"], index["pmc_version"])
        tables.append(index.filter(pc.fill_null(pc.is_in(ids, wanted), False)))
    if not tables:
        return RETIRED_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    table = table.append_column("by_part", pa.array([by] * table.num_rows, pa.string()))
    return table.select(RETIRED_SCHEMA.names).cast(RETIRED_SCHEMA)


def write(storage: Storage, part: str, table: pa.Table) -> dict[str, Any] | None:
    """Write the part's tombstones (:func:`retired` rows); the summary its part record
    carries (None: none), with the retired samples counted by shard and by license."""
    if table.num_rows == 0:
        return None
    table = table.sort_by([("shard", "ascending"), ("key", "ascending")])
    write_parquet(storage, file_of(part), table.select(SCHEMA.names))
    summary = {"file": file_of(part), "samples": table.num_rows, "shards": _count(table["shard"])}
    if "license" in table.column_names:
        summary["licenses"] = _count(pc.fill_null(table["license"], UNKNOWN))
    return summary


def _count(column: pa.ChunkedArray) -> dict[str, int]:
    """Rows per value, by value."""
    counted = pc.value_counts(column)
    values, counts = counted.field("values").to_pylist(), counted.field("counts").to_pylist()
    return dict(sorted(zip(values, counts, strict=True)))


def files(parts: Iterable[dict[str, Any]]) -> list[str]:
    return [p["superseded"]["file"] for p in parts if p.get("superseded")]


def per_shard(parts: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """Shard name → the tombstone files that name it."""
    out: dict[str, list[str]] = {}
    for part in parts:
        summary = part.get("superseded")
        for shard in (summary or {}).get("shards", {}):
            out.setdefault(shard, []).append(summary["file"])
    return out


def read(storage: Storage, keys: Iterable[str], shard: str | None = None) -> pa.Table:
    """Tombstone rows from the given files, only those of ``shard`` when one is named."""
    tables = []
    for key in keys:
        table = read_parquet(storage, key, ["shard", "key"])
        if shard is not None:
            table = table.filter(pc.equal(table["shard"], shard))
        tables.append(table)
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table().select(["shard", "key"])


def current(index: pa.Table, tombstones: pa.Table) -> pa.Table:
    """The index rows no tombstone names (matched on shard and key)."""
    if tombstones.num_rows == 0 or index.num_rows == 0:
        return index
    gone = pc.binary_join_element_wise(tombstones["shard"], tombstones["key"], "\0")
    mine = pc.binary_join_element_wise(index["shard"], index["key"], "\0")
    return index.filter(pc.invert(pc.is_in(mine, gone)))


def from_manifest(storage: Storage, manifest: dict[str, Any], shard: str | None = None) -> pa.Table:
    """Every tombstone the manifest lists (of one shard, when named)."""
    return read(storage, manifest.get("superseded", {}).get("files", []), shard)
