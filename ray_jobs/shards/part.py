"""One part of a run, assembled on a worker: its staged rows in, its files and record out.

The part's rows (staged by the pipeline, enriched when enrichment ran) are sorted by key, the
duplicate verdicts applied, and written as shards named after the part
(``shards/<split>-<part>-<n>.tar``), with their index and stats, the part's rejects, failures
and skips tables, and ``parts/<part>.json``. Nothing here depends on which worker or node
ran the part, or when: the same rows and config give the same bytes. The driver then
commits the part by writing its ledger segment from the entries returned here.

The part also settles the plan's other rows for its articles: stale versions are recorded as
superseded, and the samples of versions already in the dataset that this part replaces get
tombstones (``ray_jobs.shards.superseded``), whatever became of the new version: the dataset
follows the newest version the source lists, and a failure row says when that one failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from ray_jobs.config import OutputSettings
from ray_jobs.contract.failures import FAILURE_SCHEMA, FailureRecord
from ray_jobs.contract.records import REJECT_SCHEMA, SKIP_SCHEMA, PanelRecord
from ray_jobs.contract.rows import ARTICLE, DROPPED, FAILED, OK, Row, failure_row
from ray_jobs.pipeline.plan import REPLACE
from ray_jobs.pmc import license_policy
from ray_jobs.pmc.fetch import RETRACTED, ledger_entry
from ray_jobs.pmc.ledger import LedgerEntry
from ray_jobs.pmc.licenses import label
from ray_jobs.shards import manifest as mf
from ray_jobs.shards import superseded
from ray_jobs.shards.writer import ShardInfo, ShardWriter
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import Storage, open_storage

FAILURES, REJECTS, SKIPS = "failures", "rejects", license_policy.SKIPS
DEDUP_STAGE = "dedup"


def _counts() -> dict[str, Any]:
    names = (
        "articles",
        "articles_failed",
        "articles_skipped",
        "figures",
        "figures_failed",
        "panels",
        "panels_failed",
        "kept",
        "enriched",
        "present",
        "failures",
        "articles_superseded",
        "superseded",
    )
    by_license = {license_policy.KEPT: {}, license_policy.SKIPPED: {}}
    return {**dict.fromkeys(names, 0), "dropped": {}, "detector_dropped": {}, **by_license}


def apply_verdicts(
    rows: list[Row], verdicts: dict[str, dict[str, Any]], unpublished: set[str]
) -> list[Row]:
    """Duplicates become drops pointing at the copy that stays. A duplicate whose copy did not
    make it into the dataset this run (its enrichment failed) is held back as a retryable
    failure instead: a panel is never dropped in favour of one that is not published."""
    out = []
    for row in rows:
        verdict = verdicts.get(row["key"]) if row["status"] == OK else None
        if verdict is None:
            out.append(row)
            continue
        rec = row["record"]
        if verdict["dst"] in unpublished:
            failure = FailureRecord(
                row["key"],
                DEDUP_STAGE,
                "canonical_not_published",
                f"duplicate of {verdict['dst']}, which failed this run; judged again next run",
                retryable=True,
            )
            out.append(failure_row(failure, "panel", rec["article_key"]))
            continue
        rec["drop_reason"], rec["duplicate_of"] = verdict["reason"], verdict["dst"]
        out.append({**row, "status": DROPPED, "image": None})
    return out


class PartAssembler:
    """Everything one part commits, from its rows (in any order)."""

    def __init__(self, name: str, run_id: str):
        self.name = name
        self.run_id = run_id
        self.failures: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []
        self.skips: list[dict[str, Any]] = []
        self.entries: list[LedgerEntry] = []
        self.counts = _counts()
        self._article_failures: dict[str, dict[str, Any]] = {}
        self._retry: set[str] = set()  # articles where a figure or panel failed retryably

    def _detector_drops(self, rec: dict[str, Any]) -> None:
        mf.add_counts(self.counts["detector_dropped"], rec.get("detector_dropped") or {})

    def _take(self, row: Row, writers: dict[str, ShardWriter]) -> None:
        rec, status = row["record"], row["status"]
        if status == OK:
            self._detector_drops(rec)
            text = rec.get("long_caption") or rec["subcaption"]
            record = PanelRecord.from_dict({**rec, "text": text})
            writers[record.split].add(record, row["image"])
            self.counts["panels"] += 1
            self.counts["kept"] += 1
            self.counts["enriched"] += record.long_caption is not None
            mf.add_counts(self.counts[license_policy.KEPT], {label(record.license): 1})
        elif status == DROPPED:
            self._detector_drops(rec)
            reason = rec["drop_reason"]
            if reason == "present":  # written by an earlier run; a retried article
                self.counts["present"] += 1
                return
            self.counts["panels"] += 1
            mf.add_counts(self.counts["dropped"], {reason: 1})
            self.rejects.append(
                {name: rec.get(name) for name in REJECT_SCHEMA.names} | {"reason": reason}
            )
        elif status == FAILED:
            failure, level = rec["failure"], rec["level"]
            self.failures.append(failure)
            self.counts["failures"] += 1
            if level == "figure":
                self.counts["figures_failed"] += 1
            elif level == "panel":
                self.counts["panels"] += 1
                self.counts["panels_failed"] += 1
            if level == "article":
                self._article_failures[rec["article_key"]] = failure
                skipped = failure["error_type"] == RETRACTED
                self.counts["articles_skipped" if skipped else "articles_failed"] += 1
            elif failure["retryable"]:
                self._retry.add(rec["article_key"])

    def _close_article(self, rec: dict[str, Any]) -> None:
        from ray_jobs.pipeline.explode import ref_of

        ref = ref_of(rec)
        self.counts["articles"] += 1
        self.counts["figures"] += rec["figures"]
        failure = self._article_failures.pop(ref.key, None)
        if rec.get("skipped"):  # the license policy left it out: a decision, not a failure
            entry = license_policy.skip_entry(ref, self.name)
            self.skips.append(license_policy.skip_row(ref, rec.get("license"), rec["skipped"]))
            self.counts["articles_skipped"] += 1
            mf.add_counts(self.counts[license_policy.SKIPPED], {label(rec.get("license")): 1})
        elif failure is not None:
            entry = ledger_entry(ref, self.name, failure["error_type"], failure["retryable"])
        else:  # a figure or panel of it may have failed for a reason worth retrying
            entry = ledger_entry(ref, self.name, retryable=ref.key in self._retry)
        self.entries.append(entry)

    def _retire(self, storage: Storage, others: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """Superseded entries for the older versions, tombstones for their samples."""
        from ray_jobs.contract.refs import ArticleRef

        seen = {(e.pmcid, e.version) for e in self.entries}
        by_old_part: dict[str, list[tuple[str, int | None]]] = {}
        for row in others:
            if row["role"] == REPLACE:
                by_old_part.setdefault(row["old_part"], []).append((row["pmcid"], row["version"]))
            if (row["pmcid"], row["version"]) in seen:
                continue  # the same version, republished: its new entry stands
            seen.add((row["pmcid"], row["version"]))
            ref = ArticleRef(row["pmcid"], row["version"], row["etag"], "", "")
            self.entries.append(LedgerEntry.for_ref(ref, "superseded", self.name))
            self.counts["articles_superseded"] += 1
        tables = [
            superseded.retired(storage, mf.read_part(storage, old), articles, self.name)
            for old, articles in sorted(by_old_part.items())
        ]
        if not tables:
            return None
        table = pa.concat_tables(tables)
        self.counts["superseded"] += table.num_rows
        return superseded.write(storage, self.name, table)

    def assemble(
        self,
        storage: Storage,
        rows: list[Row],
        samples_per_shard: int,
        others: Sequence[dict[str, Any]] = (),
        max_shard_bytes: int = 2**30,
    ) -> dict[str, Any]:
        """Write the part's shards and tables and its record; returns the record. ``others``
        are the part's stale and replace plan rows."""
        rows = sorted(rows, key=lambda r: (r["key"], r["status"]))
        writers = {
            split: ShardWriter(
                storage, split, samples_per_shard, self.name, self.run_id, max_shard_bytes
            )
            for split in ("train", "val")
        }
        for row in rows:
            if row["status"] != ARTICLE:
                self._take(row, writers)
        for row in rows:
            if row["status"] == ARTICLE:
                self._close_article(row["record"])
        shards: list[ShardInfo] = [s for w in writers.values() for s in w.close()]
        retired = self._retire(storage, others)
        for folder, rows_, schema in (
            (FAILURES, self.failures, FAILURE_SCHEMA),
            (REJECTS, self.rejects, REJECT_SCHEMA),
            (SKIPS, self.skips, SKIP_SCHEMA),
        ):
            if rows_:
                table = pa.Table.from_pylist(rows_, schema=schema)
                write_parquet(storage, f"{folder}/{self.name}.parquet", table)
        record = {
            "part": self.name,
            "run_id": self.run_id,
            "shards": [s.to_dict() for s in shards],
            "counts": self.counts,
            "entries": [asdict(e) for e in self.entries],
        }
        if retired:
            record["superseded"] = retired
        mf.write_json(
            storage, mf.part_key(self.name), {k: v for k, v in record.items() if k != "entries"}
        )
        return record


def assemble_part(
    output: OutputSettings,
    part: str,
    run_id: str,
    staged: list[str],
    enriched: list[str] | None,
    unpublished: list[str],
    samples_per_shard: int,
    others: list[dict[str, Any]],
    max_shard_bytes: int,
) -> dict[str, Any]:
    """A Ray task: the part's staged rows (their enriched versions, when enrichment ran) with
    the duplicate verdicts applied, written out, and its plan's other rows settled; returns
    the part record with its entries."""
    from ray_jobs.pipeline import staging

    storage = open_storage(output.uri, output.s3)
    rows = staging.read_rows(storage, staged)
    verdicts = staging.read_verdicts(storage, part)
    if enriched is not None:  # kept panels that stay were sent through enrichment
        rows = [r for r in rows if r["status"] != OK or r["key"] in verdicts]
        rows += staging.read_rows(storage, enriched)
    rows = apply_verdicts(rows, verdicts, set(unpublished))
    return PartAssembler(part, run_id).assemble(
        storage, rows, samples_per_shard, others, max_shard_bytes
    )
