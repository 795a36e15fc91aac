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
import logging
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.contract.refs import ArticleRef
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

LEDGER_PREFIX = "_ledger"
# superseded: an older version, replaced in the dataset by a newer one of the same article
Status = Literal["ok", "failed", "skipped", "superseded"]
REF_SCHEMA = pa.schema(
    [
        ("pmcid", pa.string()),
        ("version", pa.int64()),
        ("etag", pa.string()),
        ("source", pa.string()),
        ("location", pa.string()),
    ]
)
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


def _join_version(version: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Arrow joins never match nulls: an unversioned article joins as version -1."""
    return pc.fill_null(version, -1)


def version_ids(
    pmcids: pa.ChunkedArray | pa.Array, versions: pa.ChunkedArray | pa.Array
) -> pa.Array:
    """One string per article version (pmcid, NUL, version; -1 when unversioned), to match
    article versions across tables with ``is_in``."""
    return pc.binary_join_element_wise(pmcids, pc.cast(_join_version(versions), pa.string()), "\0")


def version_id(pmcid: str, version: int | None) -> str:
    """:func:`version_ids` of one article version."""
    return f"{pmcid}\0{-1 if version is None else version}"


def latest_entries(history: pa.Table) -> pa.Table:
    """The latest entry (by time, then part) of each (pmcid, version), in columns. Most
    article versions have one entry: only those with several are sorted."""
    if history.num_rows == 0:
        return history
    keys = ["pmcid", "_version"]
    keyed = history.append_column("_version", _join_version(history["version"]))
    counts = keyed.group_by(keys, use_threads=False).aggregate([("etag", "count")])
    repeated = counts.filter(pc.greater(counts["etag_count"], 1)).select(keys)
    if repeated.num_rows == 0:
        return history
    single = keyed.join(repeated, keys, join_type="left anti")
    several = keyed.join(repeated, keys, join_type="left semi").sort_by(
        [(k, "ascending") for k in ("pmcid", "_version", "time", "part")]
    )
    several = several.append_column("_row", pa.array(range(several.num_rows), pa.int64()))
    last = several.group_by(keys, use_threads=False).aggregate([("_row", "max")])["_row_max"]
    chosen = several.take(pc.take(last, pc.array_sort_indices(last)))
    return pa.concat_tables(
        [single.drop_columns(["_version"]), chosen.drop_columns(["_version", "_row"])]
    )


def _read_history(storage: Storage) -> pa.Table:
    tables = [
        read_parquet(storage, key).select(LEDGER_SCHEMA.names).cast(LEDGER_SCHEMA)
        for key in sorted(storage.list(LEDGER_PREFIX))
        if key.endswith(".parquet")
    ]
    return pa.concat_tables(tables) if tables else LEDGER_SCHEMA.empty_table()


def refs_table(refs: Iterable[ArticleRef]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "pmcid": r.pmcid,
                "version": r.version,
                "etag": r.etag,
                "source": r.source,
                "location": r.location,
            }
            for r in refs
        ],
        schema=REF_SCHEMA,
    )


def ref_batches(refs: Iterable[ArticleRef], size: int = 250_000) -> Iterator[pa.Table]:
    """A listing's refs as Arrow tables of at most ``size`` rows: memory bounded per batch."""
    batch: list[ArticleRef] = []
    for ref in refs:
        batch.append(ref)
        if len(batch) >= size:
            yield refs_table(batch)
            batch = []
    if batch:
        yield refs_table(batch)


def table_refs(table: pa.Table) -> list[ArticleRef]:
    return [ArticleRef(**row) for row in table.to_pylist()]


class Ledger:
    """The ledger in columns: the latest entry of each article version (``latest``, an Arrow
    table) and the names of the committed parts, so planning against millions of entries is
    joins and filters, not a Python object per article. The full history stays in storage;
    only :meth:`compact` reads all of it."""

    def __init__(self, storage: Storage, latest: pa.Table, parts: set[str]):
        self.storage = storage
        self._latest = latest
        self._unfolded: list[pa.Table] = []  # committed since load, folded in when asked
        self.parts = parts

    @classmethod
    def load(cls, storage: Storage) -> Ledger:
        history = _read_history(storage)
        return cls(storage, latest_entries(history), set(pc.unique(history["part"]).to_pylist()))

    @property
    def latest(self) -> pa.Table:
        if self._unfolded:
            self._latest = latest_entries(pa.concat_tables([self._latest, *self._unfolded]))
            self._unfolded = []
        return self._latest

    def __len__(self) -> int:
        return self.latest.num_rows

    @property
    def entries(self) -> dict[tuple[str, int | None], LedgerEntry]:
        """The latest entries as objects: for small ledgers and tests, not for planning."""
        return {(e["pmcid"], e["version"]): LedgerEntry(**e) for e in self.latest.to_pylist()}

    def pending_table(
        self,
        listing: Iterable[pa.Table],
        *,
        retry_failed: bool = False,
        revisit: pa.Array | None = None,
    ) -> tuple[pa.Table, int]:
        """The listed refs a run must process (new version, changed content, a failure worth
        another try, or one of ``revisit``: :func:`version_ids` of known versions to process
        again though unchanged), sorted by (pmcid, version), and how many were listed."""
        known = self.latest.select(["pmcid", "version", "etag", "status", "retryable"])
        known = known.append_column("_version", _join_version(known["version"]))
        known = known.drop_columns(["version"]).rename_columns(
            ["pmcid", "_known_etag", "_status", "_retryable", "_version"]
        )
        listed, chunks = 0, []
        for batch in listing:
            listed += batch.num_rows
            keyed = batch.append_column("_version", _join_version(batch["version"]))
            # the batch is the right side, the one Arrow builds its hash table on: small, and
            # built once per batch (the ledger as build side would be rebuilt for every batch)
            joined = known.join(keyed, ["pmcid", "_version"], join_type="right outer")
            failed = pc.equal(joined["_status"], "failed")
            worth_retry = pc.or_(joined["_retryable"], pa.scalar(retry_failed))
            needs = pc.or_kleene(
                pc.or_kleene(
                    pc.is_null(joined["_known_etag"]),
                    pc.not_equal(joined["_known_etag"], joined["etag"]),
                ),
                pc.and_(failed, worth_retry),
            )
            if revisit is not None and len(revisit):
                again = pc.is_in(version_ids(joined["pmcid"], joined["version"]), revisit)
                needs = pc.or_kleene(needs, again)
            chunks.append(joined.filter(pc.fill_null(needs, True)).select(REF_SCHEMA.names))
        pending = pa.concat_tables(chunks) if chunks else REF_SCHEMA.empty_table()
        order = pc.sort_indices(
            pa.table({"p": pending["pmcid"], "v": _join_version(pending["version"])}),
            sort_keys=[("p", "ascending"), ("v", "ascending")],
        )
        return pending.take(order), listed

    def pending(
        self, refs: Iterable[ArticleRef], *, retry_failed: bool = False
    ) -> tuple[list[ArticleRef], int]:
        """:meth:`pending_table` over a listing of refs, as refs (the ingest's unit of work)."""
        table, listed = self.pending_table(ref_batches(refs), retry_failed=retry_failed)
        return table_refs(table), listed

    def committed_parts(self) -> set[str]:
        return set(self.parts)

    def commit(self, part: str, entries: list[LedgerEntry]) -> None:
        """Record the articles of an output part; call only after the part is written."""
        if not entries:
            return
        table = pa.Table.from_pylist([asdict(e) for e in entries], schema=LEDGER_SCHEMA)
        write_parquet(self.storage, f"{LEDGER_PREFIX}/{part}.parquet", table)
        self._unfolded.append(table)
        self.parts.add(part)

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
        history = _read_history(self.storage)  # every entry: they name the committed parts
        history = history.group_by(LEDGER_SCHEMA.names, use_threads=False).aggregate([])
        name = "compacted-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        write_parquet(
            self.storage, f"{LEDGER_PREFIX}/{name}.parquet", history.select(LEDGER_SCHEMA.names)
        )
        for key in keys:
            self.storage.delete(key)
        return True
