"""The dataset-building job: PMC articles in, WebDataset + Parquet shards and a manifest out.

``python -m ray_jobs.jobs.build_dataset --config CONFIG`` (or ``pmcvl run``) runs it as a Ray
job on a cluster (``RAY_ADDRESS``) or on a local Ray instance. One streaming Ray Data pipeline:

    refs ─▶ FetchStage ─▶ PanelStage ─▶ RelevanceStage ─▶ DedupStage ─▶ [EnrichStage] ─▶ driver

Order is preserved end to end, so the driver sees each article's rows followed by its end
marker. It writes samples into shards as they come and, every ``articles_per_part``
articles, commits a part: shards + indexes + stats, rejects and failures, the part record,
then the ledger segment. ``manifest.json`` is rebuilt from committed parts and written last.
A killed run leaves only uncommitted files, removed at the next start; the articles of the
unfinished part are processed again and nothing is written twice.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from ray_jobs import __version__
from ray_jobs.config import Settings, load_settings
from ray_jobs.failures import FAILURE_SCHEMA
from ray_jobs.logs import setup_logging
from ray_jobs.pipeline.rows import ARTICLE, DROPPED, FAILED, OK, Row
from ray_jobs.pmc.ledger import Ledger, LedgerEntry
from ray_jobs.shards import manifest as mf
from ray_jobs.shards.records import REJECT_SCHEMA, PanelRecord
from ray_jobs.shards.writer import ShardInfo, ShardWriter
from ray_jobs.storage.lease import OutputLease
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage, open_storage

log = logging.getLogger(__name__)

FAILURES, REJECTS, RUNS = "failures", "rejects", "runs"
# Crash testing: the job exits hard right after committing this many parts, so a test of
# kill-and-resume always checks the same point. Unset in production.
CRASH_AFTER_PARTS_ENV = "PMCVL_CRASH_AFTER_PARTS"
CRASH_EXIT_CODE = 137


@dataclass
class BuildReport:
    run_id: str
    output: str
    config_hash: str
    code_version: str = __version__
    listed: int = 0
    unchanged: int = 0
    pending: int = 0
    parts: list[str] = field(default_factory=list)
    new_shards: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    enrichment: dict[str, Any] = field(default_factory=dict)
    orphans_removed: list[str] = field(default_factory=list)
    manifest: str = mf.MANIFEST
    started: str = ""
    finished: str = ""


def enrichment_plan(settings: Settings) -> dict[str, Any]:
    """Whether this run enriches captions, and if not, why (the report says so)."""
    from ray_jobs.longcap.client import server_url

    cfg = settings.longcap
    try:
        base_url = server_url(cfg)
    except ValueError:
        base_url = None
    if not cfg.enabled:
        reason = "disabled in the config (longcap.enabled: false)"
    elif not base_url:
        reason = "no LLM server configured (set PMCVL_LLM_BASE_URL or longcap.base_url)"
    else:
        from ray_jobs.longcap.prompting import load_prompts

        return {
            "enabled": True,
            "reason": None,
            "base_url": base_url,
            "model": cfg.model,
            "vision_model": cfg.vision_model or cfg.model,
            "prompt_version": load_prompts().version,
        }
    return {"enabled": False, "reason": reason, "model": None, "prompt_version": None}


class PartBuilder:
    """Everything one part of a run will commit, gathered from the row stream."""

    def __init__(self, name: str):
        self.name = name
        self.failures: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []
        self.entries: list[LedgerEntry] = []
        self.shards: list[ShardInfo] = []
        self.counts: dict[str, Any] = {
            k: 0
            for k in (
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
            )
        }
        self.counts["dropped"] = {}
        self.counts["detector_dropped"] = {}
        self._article_failures: dict[str, dict[str, Any]] = {}
        self._retry: set[str] = set()  # articles where a figure or panel failed retryably

    def _detector_drops(self, rec: dict[str, Any]) -> None:
        mf.add_counts(self.counts["detector_dropped"], rec.get("detector_dropped") or {})

    def take(self, row: Row, writers: dict[str, ShardWriter]) -> None:
        rec, status = row["record"], row["status"]
        if status == OK:
            self._detector_drops(rec)
            text = rec.get("long_caption") or rec["subcaption"]
            record = PanelRecord.from_dict({**rec, "text": text})
            info = writers_for(writers, record.split, self.name).add(record, row["image"])
            if info:
                self.shards.append(info)
            self.counts["panels"] += 1
            self.counts["kept"] += 1
            self.counts["enriched"] += record.long_caption is not None
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
                retracted = failure["error_type"] == "retracted"
                self.counts["articles_skipped" if retracted else "articles_failed"] += 1
            elif failure["retryable"]:
                self._retry.add(rec["article_key"])
        elif status == ARTICLE:
            self._commit_article(rec)

    def _commit_article(self, rec: dict[str, Any]) -> None:
        from ray_jobs.pipeline.explode import ref_of

        ref = ref_of(rec)
        self.counts["articles"] += 1
        self.counts["figures"] += rec["figures"]
        failure = self._article_failures.pop(ref.key, None)
        if failure is not None and failure["error_type"] == "retracted":
            entry = LedgerEntry.for_ref(ref, "skipped", self.name)
        elif failure is not None:
            entry = LedgerEntry.for_ref(ref, "failed", self.name, failure["retryable"])
        elif ref.key in self._retry:  # a figure or panel failed for a reason worth retrying
            entry = LedgerEntry.for_ref(ref, "failed", self.name, True)
        else:
            entry = LedgerEntry.for_ref(ref, "ok", self.name)
        self.entries.append(entry)

    def commit(
        self, storage: Storage, ledger: Ledger, writers: dict[str, ShardWriter], run_id: str
    ) -> dict[str, Any]:
        """Flush the part's shards, write its tables and record, then its ledger segment."""
        for writer in writers.values():
            if info := writer.flush():
                self.shards.append(info)
        if self.failures:
            table = pa.Table.from_pylist(self.failures, schema=FAILURE_SCHEMA)
            write_parquet(storage, f"{FAILURES}/{self.name}.parquet", table)
        if self.rejects:
            table = pa.Table.from_pylist(self.rejects, schema=REJECT_SCHEMA)
            write_parquet(storage, f"{REJECTS}/{self.name}.parquet", table)
        record = {
            "part": self.name,
            "run_id": run_id,
            "shards": [s.to_dict() for s in self.shards],
            "counts": self.counts,
        }
        mf.write_json(storage, mf.part_key(self.name), record)
        ledger.commit(self.name, self.entries)
        return record


def writers_for(writers: dict[str, ShardWriter], split: str, part: str) -> ShardWriter:
    writer = writers[split]
    writer.part = part
    return writer


def known_panels(storage: Storage, parts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(key, sha256, phash) of every panel already in the dataset, for cross-run dedup."""
    known = []
    for part in parts:
        for shard in part["shards"]:
            table = read_parquet(storage, shard["index"]).select(["key", "sha256", "phash"])
            known.extend(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))
    return known


def connect_ray(settings: Settings) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the cluster
    address = settings.pipeline.ray_address or os.environ.get("RAY_ADDRESS")
    ray.init(address=address, log_to_driver=True, configure_logging=False)


def preflight(settings: Settings, enrich: bool) -> None:
    """Refuse, before any work, a pipeline whose minimum pools the cluster cannot place."""
    import ray

    from ray_jobs.pipeline.preflight import check_cluster, nodes_from_ray, stage_asks

    check_cluster(
        stage_asks(settings.pipeline, enrich),
        nodes_from_ray(ray.nodes()),
        autoscaling=settings.pipeline.autoscaling,
    )


def build_pipeline(
    settings: Settings, refs: pa.Table, known: list[tuple[str, str, str]], enrich: bool
):  # type: ignore[no-untyped-def]
    """The streaming Ray Data pipeline over ``refs``; rows come out in input order."""
    import ray

    from ray_jobs.pipeline import stages
    from ray_jobs.pipeline.resources import map_batches_args

    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    p = settings.pipeline
    ctx.wait_for_min_actors_s = p.actor_start_timeout_s
    ctx.execution_no_progress_timeout_s = p.no_progress_timeout_s
    # blocks cut here, not by a repartition: an all-to-all step needs a whole free CPU on one
    # node for its tasks (it hung on nodes whose CPUs the actors had shared out) and turns
    # Ray Data's no-progress guard off
    n = refs.num_rows
    step = max(1, math.ceil(n / min(math.ceil(n / p.fetch.batch_size), 10_000)))
    ds = ray.data.from_arrow([refs.slice(i, step) for i in range(0, n, step)])
    ds = ds.map_batches(
        stages.FetchStage, fn_constructor_args=(settings,), **map_batches_args(p.fetch)
    )
    ds = ds.map_batches(
        stages.PanelStage, fn_constructor_args=(settings,), **map_batches_args(p.panels)
    )
    ds = ds.map_batches(
        stages.RelevanceStage, fn_constructor_args=(settings,), **map_batches_args(p.relevance)
    )
    ds = ds.map_batches(
        stages.DedupStage,
        fn_constructor_args=(settings, known),
        **map_batches_args(p.dedup, single_actor=True),
    )
    if enrich:
        ds = ds.map_batches(
            stages.EnrichStage, fn_constructor_args=(settings,), **map_batches_args(p.enrich)
        )
    return ds


def iter_rows(ds) -> Iterator[Row]:  # type: ignore[no-untyped-def]
    from ray_jobs.pipeline.rows import decode

    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield from decode(batch)


def _resolve_llm(settings: Settings, base_url: str) -> Settings:
    """The server URL and key as the driver sees them (config, else environment), written into
    the settings the workers get: a cluster's workers do not share the driver's environment."""
    from pydantic import SecretStr

    from ray_jobs.longcap.client import api_key

    longcap = settings.longcap.model_copy(
        update={"base_url": base_url, "api_key": SecretStr(api_key(settings.longcap))}
    )
    return settings.model_copy(update={"longcap": longcap})


def _check_llm(plan: dict[str, Any], settings: Settings) -> None:
    """A dead LLM server, or one without our models, stops the run before any work."""
    import asyncio

    from ray_jobs.longcap.client import LLMClient

    async def probe() -> tuple[int, list[str]]:
        client = LLMClient(settings.longcap.model_copy(update={"max_retries": 0}))
        try:
            code = await client.health()
            return code, (await client.models() if code == 200 else [])
        finally:
            await client.aclose()

    try:
        code, models = asyncio.run(probe())
    except Exception as exc:
        raise SystemExit(f"LLM server {plan['base_url']} is not reachable: {exc}") from exc
    missing = sorted({plan["model"], plan["vision_model"]} - set(models))
    if code != 200 or missing:
        why = f"/health answered {code}" if code != 200 else f"it does not serve {missing}"
        raise SystemExit(f"LLM server {plan['base_url']} is not usable: {why}")


def pending_refs(settings: Settings, ledger: Ledger | None = None) -> tuple[pa.Table, int]:
    """The run's plan: what the listing has that the ledger lacks, as an Arrow table
    (``REF_SCHEMA``, sorted by pmcid and version), and how many article versions were listed.
    The listing streams through in batches; nothing here is a Python object per article."""
    from ray_jobs.pmc.ledger import ref_batches
    from ray_jobs.pmc.sources import open_source

    if ledger is None:
        ledger = Ledger.load(open_storage(settings.output.uri, settings.output.s3))
    source = open_source(settings.source, settings.archive)
    return ledger.pending_table(
        ref_batches(source.refs()), retry_failed=settings.ingest.retry_failed
    )


def run_build(settings: Settings) -> BuildReport:
    storage = open_storage(settings.output.uri, settings.output.s3)
    now = dt.datetime.now(dt.UTC)
    run_id = now.strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:6]
    report = BuildReport(run_id, storage.uri, settings.fingerprint(), started=now.isoformat())
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
    run_id = report.run_id
    ledger = Ledger.load(storage)
    committed = ledger.committed_parts()
    report.orphans_removed = ledger.remove_orphans((FAILURES, REJECTS)) + mf.remove_orphans(
        storage, committed
    )
    parts = mf.load_parts(storage, committed)

    pending, report.listed = pending_refs(settings, ledger)
    report.pending = pending.num_rows
    report.unchanged = report.listed - pending.num_rows
    log.info("%d of %d listed articles are new or changed", pending.num_rows, report.listed)

    if pending.num_rows:
        if report.enrichment["enabled"]:
            _check_llm(report.enrichment, settings)
            settings = _resolve_llm(settings, report.enrichment["base_url"])
        else:
            log.warning("caption enrichment skipped: %s", report.enrichment["reason"])
        connect_ray(settings)
        preflight(settings, report.enrichment["enabled"])
        ds = build_pipeline(
            settings, pending, known_panels(storage, parts), report.enrichment["enabled"]
        )
        writers = {
            split: ShardWriter(
                storage,
                split,
                settings.pipeline.samples_per_shard,
                mf.next_shard_index(parts, split),
                run_id,
            )
            for split in ("train", "val")
        }
        per_part = settings.output.articles_per_part
        part = PartBuilder(f"{run_id}-00000")
        for row in iter_rows(ds):
            part.take(row, writers)
            if part.counts["articles"] >= per_part:
                lease.check()
                _commit(part, storage, ledger, writers, run_id, report, parts)
                part = PartBuilder(f"{run_id}-{len(report.parts):05d}")
        if part.counts["articles"]:
            lease.check()
            _commit(part, storage, ledger, writers, run_id, report, parts)

    current = mf.read_manifest(storage)
    if (
        not pending
        and current is not None
        and current["shards"] == [s for p in parts for s in p["shards"]]
    ):
        log.info("nothing to do: the dataset at %s is up to date", storage.uri)
        return report  # a rerun over the same input writes nothing
    lease.check()
    ledger.compact()
    write_outputs(storage, settings, parts, report)
    return report


def _commit(
    part: PartBuilder,
    storage: Storage,
    ledger: Ledger,
    writers: dict[str, ShardWriter],
    run_id: str,
    report: BuildReport,
    parts: list[dict[str, Any]],
) -> None:
    record = part.commit(storage, ledger, writers, run_id)
    parts.append(record)
    report.parts.append(part.name)
    report.new_shards.extend(record["shards"])
    mf.add_counts(report.counts, record["counts"])
    log.info(
        "committed part %s: %d articles, %d panels kept, %d shard(s)",
        part.name,
        part.counts["articles"],
        part.counts["kept"],
        len(record["shards"]),
    )
    crash_after = os.environ.get(CRASH_AFTER_PARTS_ENV)
    if crash_after and len(report.parts) >= int(crash_after):
        log.warning(
            "%s=%s: exiting hard after part %s", CRASH_AFTER_PARTS_ENV, crash_after, part.name
        )
        os._exit(CRASH_EXIT_CODE)  # like a SIGKILL: no cleanup, no manifest


def write_outputs(
    storage: Storage, settings: Settings, parts: list[dict[str, Any]], report: BuildReport
) -> None:
    """The run record, then the manifest: last, so it only ever lists complete shards."""
    report.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    mf.write_json(storage, f"{RUNS}/{report.run_id}.json", asdict(report))
    enrichment = {k: v for k, v in report.enrichment.items() if k != "base_url"}
    manifest = mf.build_manifest(
        parts,
        code_version=__version__,
        config_hash=report.config_hash,
        enrichment=enrichment,
        tokenizer_long=settings.captions.long_tokenizer,
    )
    mf.write_json(storage, mf.MANIFEST, manifest)
    log.info(
        "run %s: %d new shard(s); dataset has %d samples in %d shard(s) at %s",
        report.run_id,
        len(report.new_shards),
        sum(s["samples"] for s in manifest["shards"]),
        len(manifest["shards"]),
        storage.uri,
    )


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
