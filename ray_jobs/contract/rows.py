"""The one row format every stage of the Ray Data pipeline reads and writes.

Six columns with a fixed Arrow schema: ``key``, ``status``, ``image`` (bytes or null),
``record`` (JSON), ``part`` (the work unit the row's article belongs to) and ``credit``.
Everything a stage knows about a figure or panel travels in ``record``, so stages never fight
Ray Data over nested or all-null column types, and a stage passes rows it does not own
(failures, drops, article markers) through untouched.

Rows may arrive anywhere in any order (nothing waits for order). How the writer knows a part
is complete is credit: each article enters with ``ARTICLE_CREDIT``; a row that becomes
several rows splits its credit among them exactly, and one that becomes none leaves a
``credit`` row carrying it. Credit is never created or lost, so once the credit a part's
articles brought in has all reached the writer, every row of the part has.

Statuses:

- ``figure``: a figure waiting for panel detection (image = the figure);
- ``ok``: a panel still in the dataset (image = the crop);
- ``dropped``: a panel left out on purpose (relevance, duplicate), with its reason;
- ``failed``: a failure row (``record["failure"]``) at article, figure or panel level;
- ``article``: the end marker of one article (its ref and figure count), from which the
  part's writer decides the article's ledger outcome;
- ``credit``: no content, only credit (what a row that became nothing left behind).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ray_jobs.contract.failures import FailureRecord

ROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("status", pa.string()),
        ("image", pa.binary()),
        ("record", pa.string()),
        ("part", pa.string()),
        ("credit", pa.int64()),
    ]
)
FIGURE, OK, DROPPED, FAILED, ARTICLE, CREDIT = (
    "figure",
    "ok",
    "dropped",
    "failed",
    "article",
    "credit",
)
ARTICLE_CREDIT = 1 << 40  # what one article brings in: divisible far below one row
Row = dict[str, Any]


def make_row(key: str, status: str, record: dict[str, Any], image: bytes | None = None) -> Row:
    return {
        "key": key,
        "status": status,
        "image": image,
        "record": record,
        "part": None,
        "credit": 0,
    }


def share_credit(parent: Row, children: list[Row]) -> list[Row]:
    """``children`` with the parent's part and its credit split among them exactly (the first
    child takes the remainder); no children gives a ``credit`` row."""
    credit, part = parent.get("credit") or 0, parent.get("part")
    if not children:
        children = [make_row(parent["key"], CREDIT, {})]
    share, rest = divmod(credit, len(children))
    for i, child in enumerate(children):
        child["part"] = part
        child["credit"] = share + (rest if i == 0 else 0)
    return children


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
    splice what each one became, with its credit, back into its place; every other row passes
    through as is."""
    todo = [r for r in rows if r["status"] == status]
    results = iter(work(todo) if todo else [])
    out: list[Row] = []
    for row in rows:
        if row["status"] == status:
            out.extend(share_credit(row, next(results)))
        else:
            out.append(row)
    return out
