"""A run's work written down before it starts: numbered parts of the pending articles.

The pending refs (sorted by pmcid and version) are cut into consecutive parts of
``articles_per_part``. Parts are numbered through the life of the output (``000000``,
``000001``, ...), so their names, and the shard names derived from them, depend only on the
output's history and the input, never on a clock or on which worker ran them. The plan goes
to ``plans/<run_id>.parquet`` (the refs with their part) and ``plans/<run_id>.json`` (its part
names) before any work; a run killed midway leaves a plan with uncommitted parts, and the next
run takes those parts over under the same names before planning anything new.

One version of an article is in the dataset at a time. Each plan row has a role: ``build`` (the
newest version of its article, to be processed), ``stale`` (an older version listed beside a
newer one: recorded, not built) or ``replace`` (a version already in the dataset that the
part's ``build`` row replaces, with the part that published it: ``old_part``). Every row of an
article is in one part, so the part that builds the new version also retires the old one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.pmc.ledger import REF_SCHEMA, version_ids
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage

PLANS = "plans"
BUILD, STALE, REPLACE = "build", "stale", "replace"
PLAN_SCHEMA = pa.schema(
    [
        *REF_SCHEMA,
        pa.field("part", pa.string()),
        pa.field("role", pa.string()),
        pa.field("old_part", pa.string()),  # replace rows: the part that published them
    ]
)
# the ledger entries a replace row can retire: those that may have published samples
_PUBLISHED = ("ok", "failed")


def part_name(seq: int) -> str:
    return f"{seq:06d}"


@dataclass
class Plan:
    """The parts a run works on, in order, and their refs (``PLAN_SCHEMA``)."""

    parts: list[str]
    refs: pa.Table
    resumed: list[str]  # parts taken over from an earlier, unfinished run

    def _in(self, parts: set[str]) -> pa.Table:
        return self.refs.filter(pc.is_in(self.refs["part"], pa.array(sorted(parts), pa.string())))

    def refs_of(self, parts: set[str]) -> pa.Table:
        """The refs of ``parts`` that go through the pipeline, with their part."""
        table = self._in(parts)
        return table.filter(pc.equal(table["role"], BUILD)).select([*REF_SCHEMA.names, "part"])

    def others_of(self, part: str) -> list[dict]:
        """The part's stale and replace rows: a few per part, settled when it is assembled."""
        table = self._in({part})
        return table.filter(pc.not_equal(table["role"], BUILD)).to_pylist()

    def replaced(self) -> pa.Table:
        """The published versions this run replaces (``old_part`` says where they are)."""
        return self.refs.filter(pc.equal(self.refs["role"], REPLACE))

    def sizes(self) -> dict[str, int]:
        """Refs built per part (a part may build none: it only retires stale versions)."""
        built = self.refs.filter(pc.equal(self.refs["role"], BUILD))
        counts = built.group_by("part").aggregate([("part", "count")])
        sizes = dict.fromkeys(self.parts, 0)
        sizes.update(zip(counts["part"].to_pylist(), counts["part_count"].to_pylist(), strict=True))
        return sizes

    def count(self, role: str) -> int:
        return pc.sum(pc.equal(self.refs["role"], role)).as_py() or 0


def _version(table: pa.Table) -> pa.Array:
    return pc.fill_null(table["version"], -1)


def _article_version_etag(table: pa.Table) -> pa.Array:
    ids = version_ids(table["pmcid"], table["version"])
    return pc.binary_join_element_wise(ids, table["etag"], "\0")


def _starts(pmcids: pa.Array) -> np.ndarray:
    """True at each row whose pmcid differs from the row before (rows sorted by pmcid)."""
    start = np.ones(len(pmcids), bool)
    if len(pmcids) > 1:
        start[1:] = pc.not_equal(pmcids[1:], pmcids[:-1]).to_numpy(zero_copy_only=False)
    return start


def plan_rows(
    pending: pa.Table, latest: pa.Table, per_part: int, next_seq: int
) -> tuple[list[str], pa.Table]:
    """The new parts' names and their rows (``PLAN_SCHEMA``): ``pending`` (sorted by pmcid and
    version) with roles against the ledger's ``latest`` entries, cut into parts.

    Per article the newest version wins, a listed one over the ledger's on a tie (the same
    version republished with new content). A listed winner is built and the ledger's versions
    that may have published samples are replaced; the article's other listed versions are
    stale. A winner from the ledger (an older version listed after a newer one was built) makes
    the listed versions stale and replaces nothing. Columnar throughout: the work beyond the
    listing itself grows with the articles that have several versions, not with the corpus.
    """
    listed = pending.select(REF_SCHEMA.names)
    n = listed.num_rows
    pmcids = listed["pmcid"].combine_chunks()
    start = _starts(pmcids)
    last = np.append(start[1:], True) if n else start
    newest = listed.filter(pa.array(last))
    known = latest.filter(
        pc.and_(
            pc.is_in(latest["status"], pa.array(_PUBLISHED)),
            pc.is_in(latest["pmcid"], newest["pmcid"]),
        )
    )
    # a failed version listed again unchanged and newest is retried, not replaced
    known = known.filter(
        pc.invert(pc.is_in(_article_version_etag(known), _article_version_etag(newest)))
    )
    best_known = (
        known.append_column("_v", _version(known)).group_by("pmcid").aggregate([("_v", "max")])
    )
    rival = pc.take(best_known["_v_max"], pc.index_in(newest["pmcid"], best_known["pmcid"]))
    wins = pc.fill_null(pc.greater_equal(_version(newest), rival), True)  # no rival: it wins
    wins_np = wins.to_numpy(zero_copy_only=False)
    build = np.zeros(n, bool)
    build[np.flatnonzero(last)[wins_np]] = True
    names, parts = _cut(start, per_part, next_seq)
    rows = listed.append_column("part", parts)
    rows = rows.append_column("role", pa.array(np.where(build, BUILD, STALE), pa.string()))
    rows = rows.append_column("old_part", pa.nulls(n, pa.string()))
    winners = newest.filter(wins)
    replaced = known.filter(pc.is_in(known["pmcid"], winners["pmcid"]))
    m = replaced.num_rows
    last_parts = parts.filter(pa.array(last))
    replace = pa.table(
        {
            "pmcid": replaced["pmcid"],
            "version": replaced["version"],
            "etag": replaced["etag"],
            "source": pa.nulls(m, pa.string()),
            "location": pa.nulls(m, pa.string()),
            "part": pc.take(last_parts, pc.index_in(replaced["pmcid"], newest["pmcid"])),
            "role": pa.array([REPLACE] * m, pa.string()),
            "old_part": replaced["part"],
        }
    )
    return names, pa.concat_tables([_plan_table(rows), _plan_table(replace)])


def _cut(start: np.ndarray, per_part: int, next_seq: int) -> tuple[list[str], pa.Array]:
    """Part names for sorted rows (``start`` marks each article's first row): consecutive
    chunks of ``per_part`` rows, every row of an article in the part of its first row."""
    n = len(start)
    first_row = np.maximum.accumulate(np.where(start, np.arange(n), 0)) if n else start
    chunks, dense = np.unique(np.asarray(first_row, np.int64) // per_part, return_inverse=True)
    names = [part_name(next_seq + i) for i in range(len(chunks))]
    return names, pa.array(names, pa.string()).take(pa.array(dense.astype(np.int64)))


def _records(storage: Storage) -> list[dict]:
    return [
        json.loads(storage.read_bytes(key))
        for key in sorted(storage.list(f"{PLANS}/"))
        if key.endswith(".json")
    ]


def _prune(storage: Storage, records: list[dict], committed: set[str]) -> None:
    """Plans whose parts are all committed go, but the newest, which carries the numbering."""
    newest = max(records, key=lambda r: r["next_seq"], default=None)
    for record in records:
        if record is not newest and all(p in committed for p in record["parts"]):
            storage.delete(f"{PLANS}/{record['run_id']}.parquet")
            storage.delete(f"{PLANS}/{record['run_id']}.json")


def _plan_table(table: pa.Table) -> pa.Table:
    """A stored plan as ``PLAN_SCHEMA``; plans written before roles existed build every row."""
    if "role" not in table.column_names:
        table = table.append_column("role", pa.array([BUILD] * table.num_rows, pa.string()))
    if "old_part" not in table.column_names:
        table = table.append_column("old_part", pa.nulls(table.num_rows, pa.string()))
    return table.select(PLAN_SCHEMA.names).cast(PLAN_SCHEMA)


def make_plan(
    storage: Storage,
    run_id: str,
    pending: pa.Table,
    latest: pa.Table,
    committed: set[str],
    per_part: int,
    max_parts: int | None = None,
) -> Plan:
    """Take over the uncommitted parts of earlier plans, then give what else is pending its
    roles against the ledger's ``latest`` entries, cut it into new parts, and write the plan
    down."""
    records = _records(storage)
    next_seq = max((r["next_seq"] for r in records), default=0)
    resumed_tables, resumed = [], []
    for record in records:
        left = [p for p in record["parts"] if p not in committed]
        if left:
            table = read_parquet(storage, f"{PLANS}/{record['run_id']}.parquet")
            table = table.filter(pc.is_in(table["part"], pa.array(left, pa.string())))
            resumed_tables.append(_plan_table(table))
            resumed.extend(left)
    taken = pa.concat_tables(resumed_tables) if resumed_tables else PLAN_SCHEMA.empty_table()
    if taken.num_rows:
        # an article in a resumed part waits for the next run, when the ledger knows how that
        # part ended: planned twice, two parts would retire the same old version
        pending = pending.filter(pc.invert(pc.is_in(pending["pmcid"], pc.unique(taken["pmcid"]))))
    new_parts, fresh = plan_rows(pending, latest, per_part, next_seq)
    if max_parts is not None and len(new_parts) > max_parts:
        new_parts = new_parts[:max_parts]  # the rest stays pending for the next run
        fresh = fresh.filter(pc.is_in(fresh["part"], pa.array(new_parts, pa.string())))
    plan = Plan(resumed + new_parts, pa.concat_tables([taken, fresh]), resumed)
    _prune(storage, records, committed)
    if new_parts:
        write_parquet(storage, f"{PLANS}/{run_id}.parquet", fresh)
        record = {"run_id": run_id, "parts": new_parts, "next_seq": next_seq + len(new_parts)}
        storage.write_bytes(f"{PLANS}/{run_id}.json", json.dumps(record, indent=1).encode())
    return plan
