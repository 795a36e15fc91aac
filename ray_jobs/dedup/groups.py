"""Which copy of a duplicated panel stays: the verdicts of one bucket, in Arrow and numpy.

Every panel of the dataset is ranked: published panels first (they are in the dataset and are
never judged again), then new panels by key. A new panel is dropped when it has a neighbour
ranked before it (same key already published: ``present``; same bytes: ``duplicate_exact``;
pHash within ``bits``: ``duplicate_near``), and points at the best-ranked such neighbour. The
rank depends only on keys, so the verdicts do not depend on timing, worker count or the order
rows arrive in. A neighbour that is itself dropped is followed (``follow``) until the chain
ends at a panel that stays, so nothing is dropped in favour of a panel outside the dataset.

Near duplicates use the pigeonhole bands: two 64-bit hashes at most ``bits`` < 4 apart share
at least one of their four 16-bit bands, so only panels sharing a band are compared, and a
bucket holds whole band groups.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PRESENT, EXACT, NEAR = "present", "duplicate_exact", "duplicate_near"
BANDS = 4

HASH_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("part", pa.string()),  # null for published panels
        ("sha256", pa.string()),
        ("phash", pa.string()),
        ("published", pa.bool_()),
    ]
)
# one verdict: ``src`` is dropped for ``dst``
EDGE_SCHEMA = pa.schema(
    [
        ("src", pa.string()),
        ("src_part", pa.string()),
        ("dst", pa.string()),
        ("dst_published", pa.bool_()),
        ("dst_part", pa.string()),
        ("reason", pa.string()),
    ]
)
_HEX = np.full(256, 255, np.uint8)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def hex_digits(column: pa.ChunkedArray | pa.Array, width: int) -> np.ndarray:
    """The first ``width`` hex digits of each string as unsigned integers (vectorised)."""
    arr = pc.utf8_slice_codeunits(column, 0, width)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    raw = pc.cast(arr, pa.binary(width)).buffers()[1]
    digits = _HEX[np.frombuffer(raw, np.uint8)[: len(arr) * width].reshape(-1, width)]
    if (digits == 255).any():
        raise ValueError("a hash column holds a character that is not a hex digit")
    out = np.zeros(len(arr), np.uint64)
    for i in range(width):
        out = (out << np.uint64(4)) | digits[:, i].astype(np.uint64)
    return out


def string_buckets(values: Sequence[str | None], n: int) -> np.ndarray:
    """A bucket per string that every process agrees on (Python's ``hash`` is salted)."""
    return np.fromiter(
        (zlib.crc32(v.encode()) % n if v is not None else 0 for v in values), np.int64, len(values)
    )


def _mix(values: np.ndarray, n: int) -> np.ndarray:
    return (
        (values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    ) % np.uint64(n)


@dataclass
class BucketRows:
    """The rows one bucket receives from one routed table."""

    keys: pa.Table  # key, part, published
    shas: pa.Table  # key, part, sha256, published
    bands: pa.Table  # band, h, key, part, published


def route(table: pa.Table, n: int, bits: int) -> list[BucketRows]:
    """Split hash rows into ``n`` buckets three ways: by key, by sha256 and, when near search
    is on, by each of the four pHash bands (a row appears in up to six places)."""
    table = table.cast(HASH_SCHEMA)
    base = table.select(["key", "part", "published"])
    key_bucket = string_buckets(table["key"].to_pylist(), n)
    sha_bucket = string_buckets(table["sha256"].to_pylist(), n)
    band_tables = []
    if bits >= 0:
        with_ph = pc.greater(pc.utf8_length(table["phash"].fill_null("")), 0)
        ph = table.filter(with_ph)
        h = hex_digits(ph["phash"], 16)
        for b in range(BANDS):
            band = (np.uint64(b) << np.uint64(16)) | ((h >> np.uint64(16 * b)) & np.uint64(0xFFFF))
            band_tables.append(
                pa.table(
                    {
                        "band": pa.array(band),
                        "h": pa.array(h),
                        "key": ph["key"],
                        "part": ph["part"],
                        "published": ph["published"],
                    }
                )
            )
    bands = pa.concat_tables(band_tables) if band_tables else None
    band_bucket = _mix(bands["band"].to_numpy(), n).astype(np.int64) if bands else None
    out = []
    for b in range(n):
        shas = table.filter(pa.array(sha_bucket == b)).select(
            ["key", "part", "sha256", "published"]
        )
        out.append(
            BucketRows(
                keys=base.filter(pa.array(key_bucket == b)),
                shas=shas,
                bands=bands.filter(pa.array(band_bucket == b)) if bands else _EMPTY_BANDS,
            )
        )
    return out


_EMPTY_BANDS = pa.table(
    {
        "band": pa.array([], pa.uint64()),
        "h": pa.array([], pa.uint64()),
        "key": pa.array([], pa.string()),
        "part": pa.array([], pa.string()),
        "published": pa.array([], pa.bool_()),
    }
)


def _edges(src: pa.Table, dst: pa.Table, reason: str) -> pa.Table:
    return pa.table(
        {
            "src": src["key"],
            "src_part": src["part"],
            "dst": dst["key"],
            "dst_published": dst["published"],
            "dst_part": dst["part"],
            "reason": pa.array([reason] * src.num_rows, pa.string()),
        },
        schema=EDGE_SCHEMA,
    )


def _ranked(table: pa.Table, group: str) -> pa.Table:
    order = [(group, "ascending"), ("published", "descending"), ("key", "ascending")]
    return table.take(pc.sort_indices(table, sort_keys=order))


def _group_starts(values: np.ndarray) -> np.ndarray:
    starts = np.ones(len(values), bool)
    starts[1:] = values[1:] != values[:-1]
    return starts


def present_edges(keys: pa.Table) -> pa.Table:
    """New panels whose key is published already (an article retried after a partial run)."""
    published = pc.unique(keys.filter(keys["published"])["key"])
    new = keys.filter(pc.and_(pc.invert(keys["published"]), pc.is_in(keys["key"], published)))
    n = new.num_rows
    dst = pa.table(
        {"key": new["key"], "published": pa.array([True] * n), "part": pa.nulls(n, pa.string())}
    )
    return _edges(new, dst, PRESENT)


def exact_edges(shas: pa.Table) -> pa.Table:
    """Every new panel but the best-ranked of its sha256 group points at that one."""
    if not shas.num_rows:
        return EDGE_SCHEMA.empty_table()
    ranked = _ranked(shas, "sha256")
    starts = _group_starts(np.asarray(ranked["sha256"].to_pylist(), dtype=object))
    first = np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))
    dropped = ~starts & ~ranked["published"].to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(dropped)
    return _edges(ranked.take(rows), ranked.take(first[rows]), EXACT)


def _first_neighbours(h: np.ndarray, bits: int, cells: int = 1 << 22) -> np.ndarray:
    """For each hash (in rank order), the index of the first earlier one within ``bits``,
    else -1. Hashes repeated exactly are compared once: a repeat takes its first copy's
    answer, or that first copy itself. At most ``cells`` comparisons are held at a time."""
    unique, first_at, inverse = np.unique(h, return_index=True, return_inverse=True)
    order = np.argsort(first_at, kind="stable")  # the distinct hashes in rank order
    u, f = unique[order], first_at[order]
    position = np.empty(len(u), np.int64)
    position[order] = np.arange(len(u))
    k = position[inverse.reshape(-1)]
    answer = np.full(len(u), -1, np.int64)
    a = 1
    while a < len(u):
        b = min(len(u), a + max(1, cells // a))
        close = np.bitwise_count(u[a:b, None] ^ u[None, :b]) <= bits
        close &= np.arange(b)[None, :] < np.arange(a, b)[:, None]
        answer[a:b] = np.where(close.any(axis=1), close.argmax(axis=1), -1)
        a = b
    nearest = np.where(answer[k] >= 0, f[np.maximum(answer[k], 0)], f[k])
    alone = (np.arange(len(h)) == f[k]) & (answer[k] < 0)
    return np.where(alone, -1, nearest)


def near_edges(bands: pa.Table, bits: int) -> pa.Table:
    """Within each band group, each new panel points at its first earlier neighbour."""
    if bits < 0 or not bands.num_rows:
        return EDGE_SCHEMA.empty_table()
    ranked = _ranked(bands, "band")
    band = ranked["band"].to_numpy()
    h = ranked["h"].to_numpy()
    published = ranked["published"].to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(_group_starts(band))
    ends = np.append(starts[1:], len(band))
    src_rows: list[np.ndarray] = []
    dst_rows: list[np.ndarray] = []
    for s, e in zip(starts[ends - starts > 1], ends[ends - starts > 1], strict=True):
        if published[s:e].all():
            continue
        first = _first_neighbours(h[s:e], bits)
        hit = np.flatnonzero((first >= 0) & ~published[s:e])
        src_rows.append(s + hit)
        dst_rows.append(s + first[hit])
    if not src_rows:
        return EDGE_SCHEMA.empty_table()
    src, dst = np.concatenate(src_rows), np.concatenate(dst_rows)
    return _edges(ranked.take(src), ranked.take(dst), NEAR)


def judge(buckets: Sequence[BucketRows], bits: int) -> pa.Table:
    """Candidate verdicts of one bucket: at most one per new panel per group kind and band."""
    keys = pa.concat_tables([b.keys for b in buckets])
    shas = pa.concat_tables([b.shas for b in buckets])
    bands = pa.concat_tables([b.bands for b in buckets])
    return pa.concat_tables([present_edges(keys), exact_edges(shas), near_edges(bands, bits)])


_REASON_ORDER = {PRESENT: 0, EXACT: 1, NEAR: 2}


def best(edges: pa.Table) -> pa.Table:
    """One verdict per dropped panel: ``present`` first, else its best-ranked neighbour (an
    exact copy before a near one pointing at the same panel)."""
    if not edges.num_rows:
        return EDGE_SCHEMA.empty_table()
    is_present = pc.equal(edges["reason"], PRESENT)
    exact = pc.equal(edges["reason"], EXACT)
    ranked = edges.append_column("p", pc.invert(is_present)).append_column("x", pc.invert(exact))
    order = [
        ("src", "ascending"),
        ("p", "ascending"),
        ("dst_published", "descending"),
        ("dst", "ascending"),
        ("x", "ascending"),
    ]
    ranked = ranked.take(pc.sort_indices(ranked, sort_keys=order))
    starts = _group_starts(np.asarray(ranked["src"].to_pylist(), dtype=object))
    return ranked.filter(pa.array(starts)).select(EDGE_SCHEMA.names)


def follow(verdicts: pa.Table, targets: pa.Table) -> pa.Table:
    """The verdicts whose ``dst`` is itself dropped (a row of ``targets``), pointed one step
    further on; a near hop anywhere on the way makes the whole chain near."""
    movable = verdicts.filter(pc.invert(verdicts["dst_published"]))
    if not movable.num_rows or not targets.num_rows:
        return EDGE_SCHEMA.empty_table()
    hop = targets.select(["src", "dst", "dst_published", "dst_part", "reason"]).rename_columns(
        ["dst", "dst2", "dst_published2", "dst_part2", "reason2"]
    )
    joined = movable.join(hop, keys="dst", join_type="inner")
    if not joined.num_rows:
        return EDGE_SCHEMA.empty_table()
    chained_exact = pc.and_(pc.equal(joined["reason"], EXACT), pc.equal(joined["reason2"], EXACT))
    reason = pc.if_else(chained_exact, EXACT, NEAR)
    return pa.table(
        {
            "src": joined["src"],
            "src_part": joined["src_part"],
            "dst": joined["dst2"],
            "dst_published": joined["dst_published2"],
            "dst_part": joined["dst_part2"],
            "reason": reason,
        },
        schema=EDGE_SCHEMA,
    )


def apply(verdicts: pa.Table, moved: pa.Table) -> pa.Table:
    """``verdicts`` with the rows of ``moved`` (same ``src``) replaced."""
    if not moved.num_rows:
        return verdicts
    kept = verdicts.filter(pc.invert(pc.is_in(verdicts["src"], moved["src"])))
    return pa.concat_tables([kept, moved.select(EDGE_SCHEMA.names)])


def verdicts_in_one(table: pa.Table, bits: int) -> pa.Table:
    """Every verdict for ``table`` (``HASH_SCHEMA``) in this process, one bucket: what the
    distributed version computes, for small inputs and for tests."""
    found = best(judge(route(table, 1, bits), bits))
    while (moved := follow(found, found)).num_rows:
        found = apply(found, moved)
    return found.take(pc.sort_indices(found, sort_keys=[("src", "ascending")]))
