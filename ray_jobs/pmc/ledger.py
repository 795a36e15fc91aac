"""The incremental ledger: which article versions a run has already turned into output.

It lives in the output location as append-only Parquet segments, ``_ledger/<part>.parquet``.
A segment is written only after the output part it describes is written, and it carries that
part's name: it is the part's commit record. A part without a segment is the leftover of an
interrupted run and is removed before the next run writes (:meth:`Ledger.remove_orphans`), so
the articles in it are processed again and nothing is counted twice. Append-only segments need
no read-modify-write, which S3 cannot do atomically; :meth:`Ledger.compact` folds them together.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ray_jobs.pmc.records import ArticleRef
from ray_jobs.shards.storage import Storage

log = logging.getLogger(__name__)

LEDGER_PREFIX = "_ledger"
Status = Literal["ok", "failed", "skipped"]
LEDGER_SCHEMA = pa.schema(
    [
        ("pmcid", pa.string()),
        ("version", pa.int64()),
        ("etag", pa.string()),
        ("status", pa.string()),
        ("retryable", pa.bool_()),
        ("part", pa.string()),
        ("time", pa.string()),
    ]
)


@dataclass(slots=True, frozen=True)
class LedgerEntry:
    pmcid: str
    version: int | None
    etag: str
    status: Status
    retryable: bool
    part: str
    time: str

    @classmethod
    def for_ref(
        cls, ref: ArticleRef, status: Status, part: str, retryable: bool = False
    ) -> LedgerEntry:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        return cls(ref.pmcid, ref.version, ref.etag, status, retryable, part, now)


def write_parquet(storage: Storage, key: str, table: pa.Table) -> None:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    storage.write_bytes(key, buffer.getvalue())


def read_parquet(storage: Storage, key: str) -> pa.Table:
    return pq.read_table(io.BytesIO(storage.read_bytes(key)))


class Ledger:
    def __init__(
        self,
        storage: Storage,
        entries: dict[tuple[str, int | None], LedgerEntry],
        history: list[LedgerEntry],
    ):
        self.storage = storage
        self.entries = entries  # the latest entry of each article version
        self.history = history  # every entry ever committed (compaction keeps them all)

    @classmethod
    def load(cls, storage: Storage) -> Ledger:
        entries: dict[tuple[str, int | None], LedgerEntry] = {}
        history: dict[LedgerEntry, None] = {}
        for key in sorted(storage.list(LEDGER_PREFIX)):
            if not key.endswith(".parquet"):
                continue
            for row in read_parquet(storage, key).to_pylist():
                history[LedgerEntry(**row)] = None
        for entry in sorted(history, key=lambda e: (e.time, e.part)):
            entries[(entry.pmcid, entry.version)] = entry
        return cls(storage, entries, list(history))

    def __len__(self) -> int:
        return len(self.entries)

    def needs(self, ref: ArticleRef, *, retry_failed: bool = False) -> bool:
        """New version, changed content, or a failure worth another try."""
        entry = self.entries.get((ref.pmcid, ref.version))
        if entry is None or entry.etag != ref.etag:
            return True
        if entry.status == "failed":
            return entry.retryable or retry_failed
        return False

    def pending(
        self, refs: Iterable[ArticleRef], *, retry_failed: bool = False
    ) -> tuple[list[ArticleRef], int]:
        """The listed refs a run must process, in a stable order, and how many were listed."""
        listed, todo = 0, []
        for ref in refs:
            listed += 1
            if self.needs(ref, retry_failed=retry_failed):
                todo.append(ref)
        todo.sort(key=lambda r: (r.pmcid, r.version or 0))
        return todo, listed

    def committed_parts(self) -> set[str]:
        return {e.part for e in self.history}

    def commit(self, part: str, entries: list[LedgerEntry]) -> None:
        """Record the articles of an output part; call only after the part is written."""
        if not entries:
            return
        table = pa.Table.from_pylist([asdict(e) for e in entries], schema=LEDGER_SCHEMA)
        write_parquet(self.storage, f"{LEDGER_PREFIX}/{part}.parquet", table)
        for entry in entries:
            self.entries[(entry.pmcid, entry.version)] = entry
        self.history.extend(entries)

    def remove_orphans(self, prefixes: tuple[str, ...]) -> list[str]:
        """Delete output parts under ``prefixes`` that no ledger segment committed."""
        committed = self.committed_parts()
        removed: list[str] = []
        for prefix in prefixes:
            for key in list(self.storage.list(prefix)):
                part = key.rsplit("/", 1)[-1].removesuffix(".parquet")
                if key.endswith(".parquet") and part not in committed:
                    self.storage.delete(key)
                    removed.append(key)
        if removed:
            log.warning("removed %d uncommitted part(s) of an interrupted run", len(removed))
        return removed

    def compact(self, *, min_segments: int = 64) -> bool:
        """Fold many segments into one; a crash midway leaves duplicates, never a loss."""
        keys = [k for k in self.storage.list(LEDGER_PREFIX) if k.endswith(".parquet")]
        if len(keys) < min_segments:
            return False
        rows = [asdict(e) for e in self.history]
        name = "compacted-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        write_parquet(
            self.storage,
            f"{LEDGER_PREFIX}/{name}.parquet",
            pa.Table.from_pylist(rows, schema=LEDGER_SCHEMA),
        )
        for key in keys:
            self.storage.delete(key)
        return True
