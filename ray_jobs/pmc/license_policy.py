"""The build's license policy (``output.licenses.allow``): which articles a dataset admits.

BIOMEDICA splits its release by license because commercial users may take only some of it;
here the subset is made at build time. An article outside the allow-list is never built and
never lost quietly: its end marker carries the reason (``skipped``), and its part writes it to
``skips/<part>.parquet`` (``SKIP_SCHEMA``), counts it under ``skipped_by_license`` and gives it
the ledger status ``skipped`` with ``retryable`` set. A skip is a decision, not a fault, so it
is not a failure row (datasets built before this table exist hold their skips as failure rows
of stage ``license``, with the license as ``error_type``; :func:`current_skips` reads both).

The ledger plans no skipped entry again, so a run under the same policy fetches nothing
anew. A run whose policy admits a license that was skipped plans those articles again
(:func:`revisits`): the current skips are the skip rows whose article's latest ledger entry
is that part's license skip (:func:`current_skips`), so each is found exactly, by its
license, and the parts read are only those whose counts name an admitted license.

Narrowing the policy of an output that holds samples it no longer admits is refused
(:func:`narrowing`): published shards are immutable, and a subset is a build of its own, in
its own output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.ledger import LedgerEntry, version_ids
from ray_jobs.pmc.licenses import label
from ray_jobs.storage.parquet import read_parquet
from ray_jobs.storage.store import Storage

SKIPPED = "skipped_by_license"  # part counts: articles skipped, by license
KEPT = "kept_by_license"  # part counts: samples written, by license
SKIPS = "skips"  # the parts' skips tables (``SKIP_SCHEMA``)
LEGACY_STAGE = "license"  # failure rows that held skips before ``skips/`` existed
FAILURES = "failures"  # the parts' failures tables (``ray_jobs.shards.part.FAILURES``)
SKIPS_SCHEMA = pa.schema(
    [
        ("pmcid", pa.string()),
        ("version", pa.int64()),
        ("part", pa.string()),
        ("license", pa.string()),
    ]
)


def admits(allow: list[str] | None, code: str | None) -> bool:
    """``allow`` is a parsed allow-list (``parse_allow_list``); None admits everything."""
    return allow is None or label(code) in allow


def refusal(allow: list[str] | None, code: str | None) -> str | None:
    """Why the article is not built, or None when the policy admits it."""
    if admits(allow, code):
        return None
    return f"license {label(code)} not in allow-list [{', '.join(allow or ())}]"


def skip_row(ref: ArticleRef, code: str | None, reason: str) -> dict[str, Any]:
    """The article's row of its part's skips table."""
    return {
        "source_key": ref.key,
        "pmcid": ref.pmcid,
        "version": ref.version,
        "license": label(code),
        "reason": reason,
    }


def skip_entry(ref: ArticleRef, part: str) -> LedgerEntry:
    """``skipped``, and ``retryable``: a wider policy may admit it (a retraction's skip is
    not retryable, so it is never planned again)."""
    return LedgerEntry.for_ref(ref, "skipped", part, retryable=True)


def _keys(table: pa.Table) -> pa.Array:
    """``ArticleRef.key`` in columns: ``PMC1.2``, or ``PMC1`` when unversioned."""
    versioned = pc.binary_join_element_wise(
        table["pmcid"], pc.cast(table["version"], pa.string()), "."
    )
    return pc.coalesce(versioned, table["pmcid"])


def _part_skips(storage: Storage, part: str) -> pa.Table | None:
    """key, part, license of one part's skips: its ``skips/`` table, or the failure rows of
    stage ``license`` in a part committed before that table existed."""
    key = f"{SKIPS}/{part}.parquet"
    if storage.exists(key):
        table = read_parquet(storage, key, ["source_key", "license"])
        keys, codes = table["source_key"], table["license"]
    else:
        key = f"{FAILURES}/{part}.parquet"
        if not storage.exists(key):
            return None
        table = read_parquet(storage, key, ["source_key", "stage", "error_type"])
        table = table.filter(pc.equal(table["stage"], LEGACY_STAGE))
        keys, codes = table["source_key"], table["error_type"]
    parts = pa.array([part] * table.num_rows, pa.string())
    return pa.table({"key": keys, "part": parts, "license": codes})


def current_skips(storage: Storage, latest: pa.Table, parts: Iterable[str]) -> pa.Table:
    """The license skips of ``parts`` that still stand (``SKIPS_SCHEMA``): skip rows whose
    article's latest ledger entry is that part's skip. A skip that a
    later run built, or skipped again elsewhere, is not one of them."""
    rows = [_part_skips(storage, part) for part in sorted(set(parts))]
    rows = [t for t in rows if t is not None]
    if not rows or latest.num_rows == 0:
        return SKIPS_SCHEMA.empty_table()
    skipped = latest.filter(
        pc.and_(pc.equal(latest["status"], "skipped"), pc.fill_null(latest["retryable"], False))
    )
    entries = pa.table(
        {
            "key": _keys(skipped),
            "part": skipped["part"],
            "pmcid": skipped["pmcid"],
            "version": skipped["version"],
        }
    )
    joined = entries.join(pa.concat_tables(rows), ["key", "part"], join_type="inner")
    return joined.select(SKIPS_SCHEMA.names).cast(SKIPS_SCHEMA).sort_by("pmcid")


def _skipped(part: Mapping[str, Any]) -> dict[str, int]:
    return (part.get("counts") or {}).get(SKIPPED) or {}


def revisits(
    storage: Storage,
    latest: pa.Table,
    parts: Iterable[Mapping[str, Any]],
    allow: list[str] | None,
) -> pa.Array:
    """Article-version ids (``version_ids``) of the standing license skips ``allow`` admits:
    what a run under it plans again though unchanged. Only the failures tables of parts
    whose counts name an admitted license are read."""
    wanted = [p["part"] for p in parts if any(admits(allow, c) for c in _skipped(p))]
    if not wanted:
        return pa.array([], pa.string())
    skips = current_skips(storage, latest, wanted)
    codes = [c for c in pc.unique(skips["license"]).to_pylist() if admits(allow, c)]
    skips = skips.filter(pc.is_in(skips["license"], pa.array(codes, pa.string())))
    return version_ids(skips["pmcid"], skips["version"])


def skipped_articles(storage: Storage, latest: pa.Table, parts: Iterable[str]) -> dict[str, int]:
    """The standing license skips of ``parts``, by license, most first (the report's table:
    a skip a later, wider run built is not counted, unlike the parts' history counts)."""
    skips = current_skips(storage, latest, parts)
    counted = pc.value_counts(skips["license"])
    values, counts = counted.field("values").to_pylist(), counted.field("counts").to_pylist()
    return dict(sorted(zip(values, counts, strict=True), key=lambda cn: (-cn[1], cn[0])))


def narrowing(licenses: Mapping[str, int] | None, allow: list[str] | None) -> str | None:
    """Why a run under ``allow`` may not extend an output whose current samples count
    ``licenses`` (code → samples, the manifest's), or None when it may."""
    if allow is None or not licenses:
        return None
    outside = {c: n for c, n in licenses.items() if n and c not in allow}
    if not outside:
        return None
    held = ", ".join(f"{c}: {n} samples" for c, n in sorted(outside.items()))
    return (
        f"the output holds samples of licenses the allow-list [{', '.join(allow)}] leaves out "
        f"({held}); published shards are not rewritten, so give the filtered build its own "
        "output.uri"
    )
