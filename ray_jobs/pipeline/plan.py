"""A run's work written down before it starts: numbered parts of the pending articles.

The pending refs (sorted by pmcid and version) are cut into consecutive parts of
``articles_per_part``. Parts are numbered through the life of the output (``000000``,
``000001``, ...), so their names, and the shard names derived from them, depend only on the
output's history and the input, never on a clock or on which worker ran them. The plan goes
to ``plans/<run_id>.parquet`` (the refs with their part) and ``plans/<run_id>.json`` (its part
names) before any work; a run killed midway leaves a plan with uncommitted parts, and the next
run takes those parts over under the same names before planning anything new.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.pmc.ledger import REF_SCHEMA
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage

PLANS = "plans"
PLAN_SCHEMA = pa.schema([*REF_SCHEMA, pa.field("part", pa.string())])


def part_name(seq: int) -> str:
    return f"{seq:06d}"


@dataclass
class Plan:
    """The parts a run works on, in order, and their refs (``PLAN_SCHEMA``)."""

    parts: list[str]
    refs: pa.Table
    resumed: list[str]  # parts taken over from an earlier, unfinished run

    def refs_of(self, parts: set[str]) -> pa.Table:
        return self.refs.filter(pc.is_in(self.refs["part"], pa.array(sorted(parts), pa.string())))

    def sizes(self) -> dict[str, int]:
        counts = self.refs.group_by("part").aggregate([("part", "count")])
        return dict(zip(counts["part"].to_pylist(), counts["part_count"].to_pylist(), strict=True))


def _records(storage: Storage) -> list[dict]:
    return [
        json.loads(storage.read_bytes(key))
        for key in sorted(storage.list(f"{PLANS}/"))
        if key.endswith(".json")
    ]


def make_plan(
    storage: Storage, run_id: str, pending: pa.Table, committed: set[str], per_part: int
) -> Plan:
    """Take over the uncommitted parts of earlier plans, then cut what else is pending into new
    parts, and write the plan down."""
    records = _records(storage)
    next_seq = max((r["next_seq"] for r in records), default=0)
    resumed_tables, resumed = [], []
    for record in records:
        left = [p for p in record["parts"] if p not in committed]
        if left:
            table = read_parquet(storage, f"{PLANS}/{record['run_id']}.parquet")
            table = table.filter(pc.is_in(table["part"], pa.array(left, pa.string())))
            resumed_tables.append(table.cast(PLAN_SCHEMA))
            resumed.extend(left)
    taken = pa.concat_tables(resumed_tables) if resumed_tables else PLAN_SCHEMA.empty_table()
    if taken.num_rows:  # refs already in a resumed part are not planned twice
        keys = pc.binary_join_element_wise(
            taken["pmcid"], pc.cast(pc.fill_null(taken["version"], -1), pa.string()), "\0"
        )
        mine = pc.binary_join_element_wise(
            pending["pmcid"], pc.cast(pc.fill_null(pending["version"], -1), pa.string()), "\0"
        )
        pending = pending.filter(pc.invert(pc.is_in(mine, keys)))
    n = pending.num_rows
    new_parts = [part_name(next_seq + i) for i in range((n + per_part - 1) // per_part)]
    part_column = pa.array(new_parts, pa.string()).take(pa.array(np.arange(n) // per_part))
    fresh = pending.select(REF_SCHEMA.names).append_column("part", part_column).cast(PLAN_SCHEMA)
    plan = Plan(resumed + new_parts, pa.concat_tables([taken, fresh]), resumed)
    if new_parts:
        write_parquet(storage, f"{PLANS}/{run_id}.parquet", fresh)
        record = {"run_id": run_id, "parts": new_parts, "next_seq": next_seq + len(new_parts)}
        storage.write_bytes(f"{PLANS}/{run_id}.json", json.dumps(record, indent=1).encode())
    return plan
