"""A part's rows between the pipeline and its shards: fragments under ``staging/<part>/``.

The pipeline's last step is a Ray task that writes each batch's rows, split by part, as one
Parquet fragment per part (the pipeline's own row schema plus the panels' hashes as columns,
so dedup reads only those) and returns one small summary row per fragment: how much credit
it carried. The driver sums credit; a part whose articles' credit is all in is complete, and
its fragment list is written to ``staging/<part>/_staged.json``, so a later run reuses it
instead of running the part's articles through the detector again. Fragment names are a
digest of their rows: a retried task rewrites the same file, never adds a second copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.config import OutputSettings
from ray_jobs.contract.rows import ARTICLE, CREDIT, OK, ROW_FORMAT, ROW_SCHEMA, Row, decode
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage, open_storage

STAGING = "staging"
STAGED = "_staged.json"
VERDICTS = "_duplicates.parquet"
FRAGMENT_SCHEMA = pa.schema([*ROW_SCHEMA, ("sha256", pa.string()), ("phash", pa.string())])
SUMMARY_SCHEMA = pa.schema(
    [
        ("part", pa.string()),
        ("fragment", pa.string()),  # null: the batch held only credit for this part
        ("rows", pa.int64()),
        ("ok", pa.int64()),
        ("credit", pa.int64()),
        ("failed", pa.list_(pa.string())),  # keys of failure rows (enrichment's, for dedup)
    ]
)


def part_prefix(part: str) -> str:
    return f"{STAGING}/{part}/"


def _digest(table: pa.Table) -> str:
    h = hashlib.sha256()
    for column in ("key", "status", "credit"):
        h.update(json.dumps(table[column].to_pylist()).encode())
    return h.hexdigest()[:20]


def _hashes(table: pa.Table) -> tuple[pa.Array, pa.Array]:
    """The kept panels' hashes as columns (null on every other row), read from the typed
    panel column: dedup then reads these two columns and nothing else."""
    ok = pc.equal(table["status"], OK)
    return tuple(  # type: ignore[return-value]
        pc.if_else(ok, pc.struct_field(table["panel"], name), None) for name in ("sha256", "phash")
    )


def write_fragments(batch: pa.Table, output: OutputSettings, kind: str) -> pa.Table:
    """The pipeline's terminal step (a Ray Data task): this batch's rows, one fragment per
    part; a summary row per part."""
    storage = open_storage(output.uri, output.s3)
    summaries = []
    for part in sorted(set(batch["part"].to_pylist())):
        rows = batch.filter(pc.equal(batch["part"], part))
        credit = pc.sum(rows["credit"]).as_py() or 0
        content = rows.filter(pc.not_equal(rows["status"], CREDIT)).cast(ROW_SCHEMA)
        fragment, ok, failed = None, 0, []
        if content.num_rows:
            sha, ph = _hashes(content)
            table = content.append_column("sha256", sha).append_column("phash", ph)
            fragment = f"{part_prefix(part)}{kind}-{_digest(content)}.parquet"
            write_parquet(storage, fragment, table)
            statuses = content["status"].to_pylist()
            ok = statuses.count(OK)
            failed = [
                k
                for k, s in zip(content["key"].to_pylist(), statuses, strict=True)
                if s == "failed"
            ]
        summaries.append(
            {
                "part": part,
                "fragment": fragment,
                "rows": content.num_rows,
                "ok": ok,
                "credit": credit,
                "failed": failed,
            }
        )
    return pa.Table.from_pylist(summaries, schema=SUMMARY_SCHEMA)


def read_rows(storage: Storage, fragments: Iterable[str]) -> list[Row]:
    tables = [read_parquet(storage, f).select(ROW_SCHEMA.names) for f in fragments]
    return decode(pa.concat_tables(tables)) if tables else []


def article_contexts(storage: Storage, part: str) -> dict[str, dict[str, Any]]:
    """Enrichment's context of each article of a staged part (article key -> abstract and
    acronyms), read from its end markers: the context rides once per article, on the marker,
    never on the article's panel rows."""
    record = staged(storage, part)
    contexts: dict[str, dict[str, Any]] = {}
    for fragment in (record or {}).get("fragments", {}):
        table = read_parquet(storage, fragment, ["key", "status", "article"])  # no images
        markers = table.filter(pc.equal(table["status"], ARTICLE))
        for row in decode(markers):
            rec = row["record"]
            contexts[rec["article_key"]] = {
                "abstract": rec["abstract"] or "",
                "acronyms": rec["acronyms"] or {},
            }
    return contexts


def mark_staged(storage: Storage, part: str, fragments: dict[str, int]) -> None:
    """``fragments``: each fragment's path and how many panels in it are still kept."""
    record = {"part": part, "format": ROW_FORMAT, "fragments": dict(sorted(fragments.items()))}
    storage.write_bytes(part_prefix(part) + STAGED, json.dumps(record, indent=1).encode())


def staged(storage: Storage, part: str) -> dict[str, Any] | None:
    """The part's staged record; None when it is not staged, or was staged in another row
    format (by another version of the code): that part is staged again."""
    key = part_prefix(part) + STAGED
    record = json.loads(storage.read_bytes(key)) if storage.exists(key) else None
    return record if record is not None and record.get("format") == ROW_FORMAT else None


def read_verdicts(storage: Storage, part: str) -> dict[str, dict[str, Any]]:
    """The part's dropped duplicates: key -> ``EDGE_SCHEMA`` row."""
    key = part_prefix(part) + VERDICTS
    if not storage.exists(key):
        return {}
    return {row["src"]: row for row in read_parquet(storage, key).to_pylist()}


def write_verdicts(output: OutputSettings, verdicts: pa.Table) -> list[str]:
    """One verdict file per part that has any (a Ray task per bucket runs this)."""
    storage = open_storage(output.uri, output.s3)
    parts = sorted(set(verdicts["src_part"].to_pylist()))
    for part in parts:
        rows = verdicts.filter(pc.equal(verdicts["src_part"], part))
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("src", "ascending")]))
        write_parquet(storage, part_prefix(part) + VERDICTS, rows)
    return parts


def clear(storage: Storage, part: str, keep_staged: bool = False) -> None:
    """Remove a part's staging files (all of them, or all but the staged fragments)."""
    record = staged(storage, part) if keep_staged else None
    keep = set(record["fragments"]) | {part_prefix(part) + STAGED} if record else set()
    for key in list(storage.list(part_prefix(part))):
        if key not in keep:
            storage.delete(key)


def read_canonical(batch: pa.Table, output: OutputSettings) -> pa.Table:
    """The enrichment pipeline's source (a Ray Data task): the kept panels of staged
    fragments that no verdict drops, with their part and credit."""
    storage = open_storage(output.uri, output.s3)
    tables = []
    for part, fragment in zip(
        batch["part"].to_pylist(), batch["fragment"].to_pylist(), strict=True
    ):
        dropped = pa.array(sorted(read_verdicts(storage, part)), pa.string())
        table = read_parquet(storage, fragment).select(ROW_SCHEMA.names)
        keep = pc.and_(pc.equal(table["status"], OK), pc.invert(pc.is_in(table["key"], dropped)))
        tables.append(table.filter(keep))
    return pa.concat_tables(tables).cast(ROW_SCHEMA) if tables else ROW_SCHEMA.empty_table()
