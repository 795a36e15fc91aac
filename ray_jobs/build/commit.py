"""Commits: a part's ledger segment makes its written files part of the dataset, in plan
order; the run record and then the manifest come last, so the manifest only ever lists
complete shards."""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import asdict
from typing import Any

from ray_jobs import __version__
from ray_jobs.build.report import BuildReport
from ray_jobs.config import Settings
from ray_jobs.pmc.ledger import Ledger, LedgerEntry
from ray_jobs.shards import manifest as mf
from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

# Crash testing: the job exits hard right after committing this many parts, so a test of
# kill-and-resume always checks the same point. Unset in production.
CRASH_AFTER_PARTS_ENV = "PMCVL_CRASH_AFTER_PARTS"
CRASH_EXIT_CODE = 137


def commit_part(
    record: dict[str, Any],
    storage: Storage,
    ledger: Ledger,
    report: BuildReport,
    parts: list[dict[str, Any]],
) -> None:
    """The part's files are written: its ledger segment makes it part of the dataset."""
    from ray_jobs.pipeline import staging

    entries = [LedgerEntry(**e) for e in record.pop("entries")]
    ledger.commit(record["part"], entries)
    parts.append(record)
    report.parts.append(record["part"])
    report.new_shards.extend(record["shards"])
    mf.add_counts(report.counts, record["counts"])
    staging.clear(storage, record["part"])
    log.info(
        "committed part %s: %d articles, %d panels kept, %d shard(s)",
        record["part"],
        record["counts"]["articles"],
        record["counts"]["kept"],
        len(record["shards"]),
    )
    crash_after = os.environ.get(CRASH_AFTER_PARTS_ENV)
    if crash_after and len(report.parts) >= int(crash_after):
        log.warning(
            "%s=%s: exiting hard after part %s", CRASH_AFTER_PARTS_ENV, crash_after, record["part"]
        )
        os._exit(CRASH_EXIT_CODE)  # like a SIGKILL: no cleanup, no manifest


def write_outputs(
    storage: Storage, settings: Settings, parts: list[dict[str, Any]], report: BuildReport
) -> None:
    """The run record, then the manifest: last, so it only ever lists complete shards."""
    report.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    from ray_jobs.longcap.client import redact_url

    record = asdict(report)
    if record["enrichment"].get("base_url"):  # a URL may carry credentials: never written
        record["enrichment"]["base_url"] = redact_url(record["enrichment"]["base_url"])
    mf.write_json(storage, mf.run_key(report.run_id), record)
    enrichment = {k: v for k, v in report.enrichment.items() if k != "base_url"}
    manifest = mf.build_manifest(
        parts,
        code_version=__version__,
        config_hash=report.config_hash,
        enrichment=enrichment,
        tokenizer_long=settings.captions.long_tokenizer,
        **{
            mf.LICENSES: mf.license_counts(storage, parts),
            mf.LICENSE_POLICY: report.license_policy,
        },
    )
    from ray_jobs.shards import facts, publish

    about = facts.collect(settings, __version__, report.config_hash, report.run_id, enrichment)
    publish.write_card_files(storage, manifest, about)  # README.md, croissant.json: before it
    mf.write_json(storage, mf.MANIFEST, manifest)
    log.info(
        "run %s: %d new shard(s); dataset has %d samples in %d shard(s) at %s",
        report.run_id,
        len(report.new_shards),
        sum(s["samples"] for s in manifest["shards"]),
        len(manifest["shards"]),
        storage.uri,
    )
