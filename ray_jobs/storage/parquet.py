"""Parquet tables on a :class:`~ray_jobs.storage.store.Storage`: one object per table,
zstd-compressed, written in one atomic put."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from ray_jobs.storage.store import Storage


def write_parquet(storage: Storage, key: str, table: pa.Table) -> None:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    storage.write_bytes(key, buffer.getvalue())


def read_parquet(storage: Storage, key: str, columns: list[str] | None = None) -> pa.Table:
    """``columns``: decode only these (a fragment's hashes without its image bytes)."""
    return pq.read_table(io.BytesIO(storage.read_bytes(key)), columns=columns)
