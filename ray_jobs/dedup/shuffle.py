"""Duplicate verdicts for a whole dataset with Ray tasks: route, judge, pick, follow.

Hash rows (the published index and this run's staged panels) are read by ``route`` tasks of
at most ``rows_per_bucket`` rows each and sent to ``n`` buckets, ``n`` growing with the data
so a bucket stays near ``rows_per_bucket`` rows: every task's memory is set by that number,
not by the dataset. ``judge`` tasks find candidate verdicts per bucket; they are regrouped
by the dropped panel's part and reduced to one verdict per panel (``best``); chains through
dropped panels are then followed, a round at a time, until every verdict points at a panel
that stays. The driver holds object references and counts only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.config import OutputSettings
from ray_jobs.dedup import groups
from ray_jobs.pmc.ledger import version_id, version_ids
from ray_jobs.shards import superseded
from ray_jobs.storage.parquet import read_parquet
from ray_jobs.storage.store import Storage, open_storage

MAX_ROUNDS = 64  # chain doubling: far more than any real chain of near copies needs


@dataclass(frozen=True)
class HashSource:
    """One file of hash rows: a published index file or a staged fragment of this run. A
    published file's samples of the ``drop`` article versions (replaced this run) and those
    its shard's ``tombstones`` files name (superseded earlier) are not read as published."""

    path: str
    published: bool
    rows: int
    drop: tuple[tuple[str, int | None], ...] = ()
    shard: str = ""  # the published file's shard: the one its tombstones are read for
    tombstones: tuple[str, ...] = ()


def _published_hashes(storage: Storage, source: HashSource) -> pa.Table:
    """The file's hash columns (and the article columns only when some are dropped)."""
    extra = ["pmcid", "pmc_version"] if source.drop else []
    table = read_parquet(storage, source.path, ["key", "sha256", "phash", *extra])
    if source.drop:
        ids = version_ids(table["pmcid"], table["pmc_version"])
        gone = pa.array([version_id(p, v) for p, v in source.drop], pa.string())
        table = table.filter(pc.invert(pc.fill_null(pc.is_in(ids, gone), False)))
    if source.tombstones:
        gone = superseded.read(storage, source.tombstones, source.shard)["key"]
        table = table.filter(pc.invert(pc.is_in(table["key"], gone)))
    return table.select(["key", "sha256", "phash"])


def read_hashes(output: OutputSettings, source: HashSource) -> pa.Table:
    storage = open_storage(output.uri, output.s3)
    if source.published:
        table = _published_hashes(storage, source)
        table = table.append_column("part", pa.nulls(table.num_rows, pa.string()))
    else:  # a staged fragment: only panels still in the dataset take part
        table = read_parquet(storage, source.path, ["key", "sha256", "phash", "part", "status"])
        table = table.filter(pc.equal(table["status"], "ok")).drop_columns(["status"])
    n = table.num_rows
    return table.append_column("published", pa.array([source.published] * n, pa.bool_())).select(
        groups.HASH_SCHEMA.names
    )


def part_bucket(part: str, n: int) -> int:
    return int(groups.string_buckets([part], n)[0])


def by_part(edges: pa.Table, n: int, column: str = "src_part") -> list[pa.Table]:
    """Verdict rows split by the bucket of a part (``src_part`` or ``dst_part``)."""
    parts = edges[column].to_pylist()
    names = sorted({p for p in parts if p is not None})
    bucket_of = {p: part_bucket(p, n) for p in names}
    buckets = pa.array([bucket_of.get(p, -1) if p is not None else -1 for p in parts], pa.int64())
    return [edges.filter(pc.equal(buckets, b)) for b in range(n)]


def task_options(num_cpus: float, returns: int = 1) -> dict[str, object]:
    """Spread over the nodes (Ray would pack small tasks onto the driver's node), and retried:
    every task is a pure function of its inputs."""
    return {
        "num_cpus": num_cpus,
        "num_returns": returns,
        "max_retries": 3,
        "scheduling_strategy": "SPREAD",
    }


def _unpack(refs, n: int) -> list:  # type: ignore[no-untyped-def]
    return [refs] if n == 1 else list(refs)


@dataclass
class Verdicts:
    """Where the verdicts are: one object per part bucket (``EDGE_SCHEMA`` rows)."""

    buckets: list  # list[ray.ObjectRef[pa.Table]]
    dropped: int
    rounds: int

    def ref_for(self, part: str):  # type: ignore[no-untyped-def]
        return self.buckets[part_bucket(part, len(self.buckets))]


def find_duplicates(
    output: OutputSettings,
    sources: Sequence[HashSource],
    *,
    bits: int,
    rows_per_bucket: int,
    num_cpus: float = 1.0,
) -> Verdicts:
    import ray

    # the two tasks that hold a whole bucket get a fresh worker each: a reused worker keeps
    # the high-water mark of every bucket it has held, so its memory would grow with the data
    @ray.remote(max_calls=1)
    def route(batch: list[HashSource], n: int) -> list[groups.BucketRows]:
        table = pa.concat_tables([read_hashes(output, s) for s in batch])
        out = groups.route(table, n, bits)
        return out[0] if n == 1 else out

    @ray.remote(max_calls=1)
    def judge(*rows: groups.BucketRows) -> pa.Table:
        return groups.judge(rows, bits)

    @ray.remote
    def split(edges: pa.Table, n: int, column: str) -> list[pa.Table]:
        out = by_part(edges, n, column)
        return out[0] if n == 1 else out

    @ray.remote
    def pick(*edges: pa.Table) -> pa.Table:
        return groups.best(pa.concat_tables(edges))

    @ray.remote
    def hop(verdicts: pa.Table, *probes: pa.Table) -> pa.Table:
        """Probes whose target is one of this bucket's dropped panels, moved one step on."""
        return groups.follow(pa.concat_tables(probes), verdicts)

    @ray.remote
    def count(table: pa.Table) -> int:
        return table.num_rows

    @ray.remote
    def settle(verdicts: pa.Table, *moved: pa.Table) -> tuple[pa.Table, int]:
        moved_rows = pa.concat_tables(moved)
        return groups.apply(verdicts, moved_rows), moved_rows.num_rows

    total = sum(s.rows for s in sources)
    n = max(1, math.ceil(total / rows_per_bucket))
    batches: list[list[HashSource]] = [[]]
    filled = 0
    for source in sources:
        if batches[-1] and filled + source.rows > rows_per_bucket:
            batches.append([])
            filled = 0
        batches[-1].append(source)
        filled += source.rows
    routed = [
        _unpack(route.options(**task_options(num_cpus, n)).remote(b, n), n) for b in batches if b
    ]
    judged = [
        judge.options(**task_options(num_cpus)).remote(*(r[b] for r in routed)) for b in range(n)
    ]
    del routed
    regrouped = [
        _unpack(split.options(**task_options(num_cpus, n)).remote(j, n, "src_part"), n)
        for j in judged
    ]
    verdicts = [
        pick.options(**task_options(num_cpus)).remote(*(r[b] for r in regrouped)) for b in range(n)
    ]
    del judged, regrouped
    rounds = 0
    while True:
        probes = [
            _unpack(split.options(**task_options(num_cpus, n)).remote(v, n, "dst_part"), n)
            for v in verdicts
        ]
        moved = [
            hop.options(**task_options(num_cpus)).remote(verdicts[c], *(p[c] for p in probes))
            for c in range(n)
        ]
        back = [
            _unpack(split.options(**task_options(num_cpus, n)).remote(m, n, "src_part"), n)
            for m in moved
        ]
        settled = [
            settle.options(**task_options(num_cpus, 2)).remote(verdicts[b], *(r[b] for r in back))
            for b in range(n)
        ]
        verdicts = [s[0] for s in settled]
        changed = sum(ray.get([s[1] for s in settled]))
        rounds += 1
        if not changed:
            break
        if rounds >= MAX_ROUNDS:
            raise RuntimeError(f"duplicate chains did not settle in {MAX_ROUNDS} rounds")
    dropped = sum(ray.get([count.options(**task_options(num_cpus)).remote(v) for v in verdicts]))
    return Verdicts(verdicts, dropped, rounds)
