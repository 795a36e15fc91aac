"""The one row format every stage of the Ray Data pipeline reads and writes.

A row is a key, a status, an image (bytes or null), its part (the work unit its article
belongs to), its credit, and its record: one typed Arrow struct column per kind of row
(``ref``, ``figure``, ``panel``, ``failure``, ``article``), filled for the row's kind and null
for the others. The schemas are explicit and fixed (:data:`ROW_SCHEMA`), so stages never fight
Ray Data over nested or all-null column types, nothing is serialised to text between stages,
and a record field no schema names is an error at the stage that wrote it, not a silent loss.
In Python a stage sees ``row["record"]`` as a dict of its kind's fields (absent ones ``None``)
and passes rows it does not own (failures, drops, article markers) through untouched.

Rows may arrive anywhere in any order (nothing waits for order). How the writer knows a part
is complete is credit: each article enters with ``ARTICLE_CREDIT``; a row that becomes
several rows splits its credit among them exactly, and one that becomes none leaves a
``credit`` row carrying it. Credit is never created or lost, so once the credit a part's
articles brought in has all reached the writer, every row of the part has.

Statuses, and the record each carries:

- ``ref``: an article of the plan, before it is fetched (``ref``: :data:`REF_RECORD`);
- ``figure``: a figure waiting for panel detection (image = the figure; ``figure``);
- ``ok``: a panel still in the dataset (image = the crop; ``panel``: :data:`PANEL_RECORD`);
- ``dropped``: a panel left out on purpose (relevance, duplicate), with its reason (``panel``);
- ``failed``: a failure at article, figure or panel level (``failure``: the typed failure, its
  level and its article);
- ``article``: the end marker of one article (its ref, figure count and license), from which
  the part's writer decides the article's ledger outcome (``article``);
- ``credit``: no content, only credit (what a row that became nothing left behind).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ray_jobs.contract.failures import FAILURE_SCHEMA, FailureRecord
from ray_jobs.contract.records import RECORD_SCHEMA

REF, FIGURE, OK, DROPPED, FAILED, ARTICLE, CREDIT = (
    "ref",
    "figure",
    "ok",
    "dropped",
    "failed",
    "article",
    "credit",
)
ARTICLE_CREDIT = 1 << 40  # what one article brings in: divisible far below one row
Row = dict[str, Any]
BUDGET_LEFT = "_budget_s"  # figure record: seconds its article has left (``pipeline.budget``)


def _wide(t: pa.DataType) -> pa.DataType:
    """In flight, numbers keep Python's width (a float32 here would round a score before the
    writer does, and change what the ``.json`` of a sample says)."""
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(_wide(t.value_type))
    return t


_ARTICLE_FIELDS = [
    ("article_key", pa.string()),
    ("pmcid", pa.string()),
    ("pmc_version", pa.int64()),
    ("pmid", pa.string()),
    ("doi", pa.string()),
    ("journal", pa.string()),
    ("year", pa.int64()),
    ("license", pa.string()),
    ("license_url", pa.string()),
]
MENTION = pa.struct([("sentence", pa.string()), ("panels", pa.list_(pa.string()))])
_REF_FIELDS = [
    ("pmcid", pa.string()),
    ("version", pa.int64()),
    ("etag", pa.string()),
    ("source", pa.string()),
    ("location", pa.string()),
]
REF_RECORD = pa.struct(_REF_FIELDS)
ARTICLE_RECORD = pa.struct(
    [
        ("article_key", pa.string()),
        *_REF_FIELDS,
        ("figures", pa.int64()),
        ("license", pa.string()),
        ("skipped", pa.string()),  # why the license policy left it out; None when built
        # enrichment's context (when it is on): once per article, never on its panel rows
        ("abstract", pa.string()),
        ("acronyms", pa.map_(pa.string(), pa.string())),
    ]
)
FIGURE_RECORD = pa.struct(
    [
        *_ARTICLE_FIELDS,
        ("figure_key", pa.string()),
        ("figure_id", pa.string()),
        ("figure_label", pa.string()),
        ("caption", pa.string()),
        ("bold_labels", pa.list_(pa.string())),
        ("mentions", pa.list_(MENTION)),
        ("split", pa.string()),
        (BUDGET_LEFT, pa.float64()),
    ]
)
_PANEL_EXTRAS = [
    ("article_key", pa.string()),
    ("mentions", pa.list_(MENTION)),
    ("figure_width", pa.int64()),
    ("figure_height", pa.int64()),
    ("detector_dropped", pa.map_(pa.string(), pa.int64())),  # on a figure's first panel
    ("drop_reason", pa.string()),
    ("duplicate_of", pa.string()),
    ("llm_calls", pa.int64()),
]
# the panel record of the dataset (``records.PanelRecord``) and what travels with it until
# its part is written
PANEL_RECORD = pa.struct(
    [pa.field(f.name, _wide(f.type)) for f in RECORD_SCHEMA] + [pa.field(*e) for e in _PANEL_EXTRAS]
)
FAILURE_ROW_RECORD = pa.struct(
    [
        ("failure", pa.struct(list(FAILURE_SCHEMA))),
        ("level", pa.string()),  # article, figure or panel: what the failure's key names
        ("article_key", pa.string()),
    ]
)
# each status's record column (a ``credit`` row has none)
RECORD_COLUMN = {
    REF: "ref",
    FIGURE: "figure",
    OK: "panel",
    DROPPED: "panel",
    FAILED: "failure",
    ARTICLE: "article",
}
RECORD_TYPES = {
    "ref": REF_RECORD,
    "figure": FIGURE_RECORD,
    "panel": PANEL_RECORD,
    "failure": FAILURE_ROW_RECORD,
    "article": ARTICLE_RECORD,
}
ROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("status", pa.string()),
        ("image", pa.binary()),
        ("part", pa.string()),
        ("credit", pa.int64()),
        *RECORD_TYPES.items(),
    ]
)
ROW_FORMAT = "pmcvl-rows/4"  # staged fragments of another format are staged again
_NAMES = {
    column: frozenset(t.field(i).name for i in range(t.num_fields))
    for column, t in RECORD_TYPES.items()
}


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


def _as_dicts(record: dict[str, Any], kind: pa.StructType) -> dict[str, Any]:
    """Arrow gives a map as (key, value) pairs: the record gets its dicts back."""
    for i in range(kind.num_fields):
        field = kind.field(i)
        value = record.get(field.name)
        if value is None:
            continue
        if pa.types.is_map(field.type):
            record[field.name] = dict(value)
        elif pa.types.is_struct(field.type):
            _as_dicts(value, field.type)
    return record


_HAS_MAPS = {
    column: any(pa.types.is_map(f.type) or pa.types.is_struct(f.type) for f in t)
    for column, t in RECORD_TYPES.items()
}


def decode(table: pa.Table) -> list[Row]:
    """A batch as rows, each with its record (a dict of its kind's fields) under ``record``."""
    columns = [c for c in RECORD_TYPES if c in table.column_names]
    rows = table.to_pylist()
    for row in rows:
        column = RECORD_COLUMN.get(row["status"])
        record = row.get(column) if column else None
        for c in columns:
            del row[c]
        if record is not None and _HAS_MAPS[column]:
            _as_dicts(record, RECORD_TYPES[column])
        row["record"] = record if record is not None else {}
    return rows


def encode(rows: list[Row]) -> pa.Table:
    """Rows as a batch of :data:`ROW_SCHEMA`; a record field its kind does not name raises
    (Arrow would drop it without a word)."""
    plain = []
    for row in rows:
        out = {name: row.get(name) for name in ("key", "status", "image", "part", "credit")}
        column = RECORD_COLUMN.get(row["status"])
        record = row["record"]
        if column is not None:
            unknown = record.keys() - _NAMES[column]
            if unknown:
                raise ValueError(
                    f"row {row['key']} ({row['status']}): record fields {sorted(unknown)} are "
                    f"not in the {column} record schema (ray_jobs/contract/rows.py)"
                )
            out[column] = record
        elif record:
            raise ValueError(f"row {row['key']} ({row['status']}) carries a record it cannot")
        plain.append(out)
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
