"""The dataset-building job: PMC articles in, WebDataset + Parquet shards and a manifest out.

``python -m ray_jobs.jobs.build_dataset --config CONFIG`` (or ``pmcvl run``) runs it as a Ray
job on a cluster (``RAY_ADDRESS``) or on a local Ray instance. The driver plans and commits;
workers do all the work, writing included:

1. plan: the listing against the ledger, in Arrow, cut into numbered parts (``plan.py``);
2. stage: refs ─▶ FetchStage ─▶ PanelStage ─▶ RelevanceStage ─▶ fragment writer tasks,
   streaming, in no particular order; a part is staged once all its articles' credit is in
   (``staging.py``);
3. dedup: exact and near duplicates over the published index and the staged panels, as
   bucketed Ray tasks (``ray_jobs.dedup``);
4. enrich (optional): the panels that stay ─▶ EnrichStage ─▶ fragment writer tasks, so no
   duplicate costs an LLM call;
5. assemble: one task per part writes its shards, index, stats, rejects and failures;
6. commit: the driver writes each part's ledger segment, in plan order, then the manifest.

The driver only ever holds the plan's refs (Arrow), per-part counters and commit records.
A killed run leaves a plan with uncommitted parts; the next run takes them over under the same
names, reuses the parts already staged, and files no committed part lists are removed first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import sys
import uuid

from ray_jobs.build.cluster import connect_ray, preflight
from ray_jobs.build.commit import commit_part, write_outputs
from ray_jobs.build.llm_gate import check_llm, enrichment_plan, resolve_llm, without_llm_key
from ray_jobs.build.phases import (
    assemble_parts,
    clear_staging,
    enrich_parts,
    find_and_record_duplicates,
    stage_parts,
)
from ray_jobs.build.planning import pending_refs
from ray_jobs.build.report import BuildReport
from ray_jobs.config import Settings, load_settings
from ray_jobs.logs import setup_logging
from ray_jobs.pipeline.plan import BUILD, REPLACE, STALE, make_plan
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.pmc.license_policy import narrowing
from ray_jobs.shards import manifest as mf
from ray_jobs.shards import superseded
from ray_jobs.shards.part import FAILURES, REJECTS, SKIPS
from ray_jobs.storage.lease import OutputLease
from ray_jobs.storage.store import Storage, open_storage

log = logging.getLogger(__name__)
RUN_ID_ENV = "PMCVL_RUN_ID"  # a caller's name for the run (pmc_dataset: its Ray submission id)


def run_build(settings: Settings) -> BuildReport:
    storage = open_storage(settings.output.uri, settings.output.s3)
    now = dt.datetime.now(dt.UTC)
    run_id = os.environ.get(RUN_ID_ENV) or now.strftime("%Y%m%dT%H%M%S%f-") + uuid.uuid4().hex[:6]
    if not re.fullmatch(r"[A-Za-z0-9_-]+", run_id):  # it names files: runs/<run_id>.json
        raise SystemExit(f"{RUN_ID_ENV}={run_id!r}: letters, digits, '_' and '-' only")
    report = BuildReport(run_id, storage.uri, settings.fingerprint(), started=now.isoformat())
    report.license_policy = settings.output.licenses.allow
    report.enrichment = enrichment_plan(settings)

    if next(iter(storage.list("articles/")), None) is not None:
        raise SystemExit(
            f"{storage.uri} holds a `pmcvl ingest` articles table; the two jobs keep separate "
            "ledgers, so give the dataset build its own output.uri"
        )
    with OutputLease(storage, run_id, settings.output.lease_ttl_s) as lease:
        return _build(settings, storage, report, lease)


def _build(
    settings: Settings, storage: Storage, report: BuildReport, lease: OutputLease
) -> BuildReport:
    """The run, holding the output's lease: orphans of a killed run are removed only now (they
    cannot be a live run's files), and every commit first checks the lease is still ours."""
    ledger = Ledger.load(storage)
    committed = ledger.committed_parts()
    report.orphans_removed = ledger.remove_orphans(
        (FAILURES, REJECTS, SKIPS, superseded.SUPERSEDED)
    ) + mf.remove_orphans(storage, committed)
    parts = mf.load_parts(storage, committed)
    if report.license_policy is not None and parts:
        refused = narrowing(mf.license_counts(storage, parts), report.license_policy)
        if refused:
            raise SystemExit(f"{storage.uri}: {refused}")
    current = mf.read_manifest(storage)

    pending, report.listed = pending_refs(settings, ledger, parts)
    report.unchanged = report.listed - pending.num_rows
    plan = make_plan(
        storage,
        report.run_id,
        pending,
        ledger.latest,
        committed,
        settings.output.articles_per_part,
        settings.output.max_parts_per_run,
    )
    report.pending = plan.count(BUILD)
    report.stale, report.replaced = plan.count(STALE), plan.count(REPLACE)
    report.resumed_parts = plan.resumed
    clear_staging(storage, set(plan.parts))
    log.info(
        "%d of %d listed articles are new or changed (%d to build, %d older versions to skip, "
        "%d published versions to replace); %d part(s), %d taken over",
        pending.num_rows,
        report.listed,
        report.pending,
        report.stale,
        report.replaced,
        len(plan.parts),
        len(plan.resumed),
    )

    if plan.parts:
        enrich = report.enrichment["enabled"]
        if enrich:
            check_llm(report.enrichment, settings)
            with_key = resolve_llm(settings, report.enrichment["base_url"])
        else:
            log.warning("caption enrichment skipped: %s", report.enrichment["reason"])
        settings = without_llm_key(settings)  # only the enrichment actors get the key
        connect_ray(settings)
        preflight(settings, enrich)
        staged = stage_parts(settings, storage, plan, lease)
        find_and_record_duplicates(settings, parts, staged, plan)
        enriched: dict[str, list[str]] | None = None
        unpublished: set[str] = set()
        if enrich:
            enriched, unpublished = enrich_parts(with_key, staged)
        for record in assemble_parts(settings, plan, staged, enriched, unpublished, report):
            lease.check()
            commit_part(record, storage, ledger, report, parts)

    from ray_jobs.shards.card import CARD
    from ray_jobs.shards.croissant import CROISSANT

    same = current is not None and current["shards"] == mf.manifest_shards(parts)
    same = same and current.get(mf.LICENSE_POLICY) == report.license_policy
    if not plan.parts and same and storage.exists(CARD) and storage.exists(CROISSANT):
        log.info("nothing to do: the dataset at %s is up to date", storage.uri)
        return report  # a rerun over the same input writes nothing
    lease.check()
    ledger.compact()
    write_outputs(storage, settings, parts, report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="YAML config (PMCVL__SECTION__KEY env overrides it)")
    args = parser.parse_args(argv)
    settings = load_settings(args.config)
    setup_logging(settings.log_level)
    report = run_build(settings)
    summary = {
        "run_id": report.run_id,
        "output": report.output,
        "manifest": f"{report.output.rstrip('/')}/{report.manifest}",
        "listed": report.listed,
        "unchanged": report.unchanged,
        "new_shards": len(report.new_shards),
        "counts": report.counts,
        "enrichment": report.enrichment.get("reason") or "on",
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
