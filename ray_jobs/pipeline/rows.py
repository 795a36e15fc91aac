"""The one row format every stage of the Ray Data pipeline reads and writes.

Four columns with a fixed Arrow schema: ``key``, ``status``, ``image`` (bytes or null) and
``record`` (JSON). Everything a stage knows about a figure or panel travels in ``record``, so
stages never fight Ray Data over nested or all-null column types, and a stage passes rows it
does not own (failures, drops, article markers) through untouched, in order.

Statuses:

- ``figure``: a figure waiting for panel detection (image = the figure);
- ``ok``: a panel still in the dataset (image = the crop);
- ``dropped``: a panel left out on purpose (relevance, duplicate), with its reason;
- ``failed``: a failure row (``record["failure"]``) at article, figure or panel level;
- ``article``: the end marker of one article (its ref and figure count). Rows arrive at the
  writer in input order, so once the marker is seen the article's rows are all in and the
  driver can decide its ledger outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ray_jobs.failures import FailureRecord

ROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("status", pa.string()),
        ("image", pa.binary()),
        ("record", pa.string()),
    ]
)
FIGURE, OK, DROPPED, FAILED, ARTICLE = "figure", "ok", "dropped", "failed", "article"
Row = dict[str, Any]


def make_row(key: str, status: str, record: dict[str, Any], image: bytes | None = None) -> Row:
    return {"key": key, "status": status, "image": image, "record": record}


def failure_row(failure: FailureRecord, level: str, article_key: str) -> Row:
    """``level`` is article, figure or panel: what the failure's source key names."""
    record = {"failure": failure.to_row(), "level": level, "article_key": article_key}
    return make_row(failure.source_key, FAILED, record)


def decode(table: pa.Table) -> list[Row]:
    """A batch as rows with their records parsed."""
    rows = table.to_pylist()
    for row in rows:
        row["record"] = json.loads(row["record"])
    return rows


def encode(rows: list[Row]) -> pa.Table:
    plain = [
        {**row, "record": json.dumps(row["record"], ensure_ascii=False, sort_keys=True)}
        for row in rows
    ]
    return pa.Table.from_pylist(plain, schema=ROW_SCHEMA)


def expand(rows: list[Row], status: str, work: Callable[[list[Row]], list[list[Row]]]) -> list[Row]:
    """Run ``work`` on the rows with ``status`` (all at once, so models see whole batches) and
    splice what each one became back into its place; every other row passes through as is."""
    todo = [r for r in rows if r["status"] == status]
    results = iter(work(todo) if todo else [])
    out: list[Row] = []
    for row in rows:
        if row["status"] == status:
            out.extend(next(results))
        else:
            out.append(row)
    return out
