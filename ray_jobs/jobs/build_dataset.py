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
from ray_jobs.logs import setup_logging
from ray_jobs.pipeline.plan import BUILD, REPLACE, STALE, Plan, make_plan
from ray_jobs.pmc.ledger import Ledger, LedgerEntry
from ray_jobs.pmc.license_policy import narrowing
from ray_jobs.shards import manifest as mf
from ray_jobs.shards import superseded
from ray_jobs.shards.part import FAILURES, REJECTS
from ray_jobs.storage.lease import OutputLease
from ray_jobs.storage.store import Storage, open_storage

log = logging.getLogger(__name__)

RUNS = "runs"
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
    pending: int = 0  # article versions built
    stale: int = 0  # older versions listed beside a newer one: recorded, not built
    replaced: int = 0  # published versions that a newer one replaces
    parts: list[str] = field(default_factory=list)
    new_shards: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    enrichment: dict[str, Any] = field(default_factory=dict)
    orphans_removed: list[str] = field(default_factory=list)
    resumed_parts: list[str] = field(default_factory=list)
    manifest: str = mf.MANIFEST
    license_policy: list[str] | None = None  # output.licenses.allow; None: every license
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


def _check_reachable(address: str, timeout_s: float) -> None:
    """A cluster address (``host:port`` or ``ray://host:port``) must answer within
    ``timeout_s``: ``ray.init`` would wait on a dead one with no message."""
    import socket
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise SystemExit(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise SystemExit(
            f"the Ray cluster at {address} does not answer ({exc}); set pipeline.ray_address "
            "or RAY_ADDRESS to a live one, or neither for a local Ray instance of this run"
        ) from exc


def connect_ray(settings: Settings) -> None:
    """The configured cluster (``pipeline.ray_address``, else ``RAY_ADDRESS``), checked to
    answer; else a local instance of the run's own, not whatever cluster Ray last recorded."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the cluster
    address = settings.pipeline.ray_address or os.environ.get("RAY_ADDRESS") or "local"
    _check_reachable(address, settings.pipeline.ray_connect_timeout_s)
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


def _resolve_llm(settings: Settings, base_url: str) -> Settings:
    """The server URL and key as the driver sees them (config, else environment), written into
    the settings the workers get: a cluster's workers do not share the driver's environment."""
    from pydantic import SecretStr

    from ray_jobs.longcap.client import api_key

    longcap = settings.longcap.model_copy(
        update={"base_url": base_url, "api_key": SecretStr(api_key(settings.longcap))}
    )
    return settings.model_copy(update={"longcap": longcap})


def _without_llm_key(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"longcap": settings.longcap.model_copy(update={"api_key": None})}
    )


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

    from ray_jobs.longcap.client import redact_url

    where = redact_url(plan["base_url"])
    try:
        code, models = asyncio.run(probe())
    except Exception as exc:
        raise SystemExit(f"LLM server {where} is not reachable: {exc}") from exc
    missing = sorted({plan["model"], plan["vision_model"]} - set(models))
    if code != 200 or missing:
        why = f"/health answered {code}" if code != 200 else f"it does not serve {missing}"
        raise SystemExit(f"LLM server {where} is not usable: {why}")


def pending_refs(
    settings: Settings, ledger: Ledger | None = None, parts: list[dict[str, Any]] | None = None
) -> tuple[pa.Table, int]:
    """The run's plan: what the listing has that the ledger lacks (and the license skips this
    run's policy now admits), as an Arrow table (``REF_SCHEMA``, sorted by pmcid and
    version), and how many article versions were listed. The listing streams through in
    batches; nothing here is a Python object per article."""
    from ray_jobs.pmc.ledger import ref_batches
    from ray_jobs.pmc.license_policy import revisits
    from ray_jobs.pmc.sources import open_source

    storage = open_storage(settings.output.uri, settings.output.s3)
    if ledger is None:
        ledger = Ledger.load(storage)
    if parts is None:
        parts = mf.load_parts(storage, ledger.committed_parts())
    source = open_source(settings.source, settings.archive)
    allow = settings.output.licenses.allow
    return ledger.pending_table(
        ref_batches(source.refs()),
        retry_failed=settings.ingest.retry_failed,
        revisit=revisits(storage, ledger.latest, parts, allow),
    )


def run_build(settings: Settings) -> BuildReport:
    storage = open_storage(settings.output.uri, settings.output.s3)
    now = dt.datetime.now(dt.UTC)
    run_id = now.strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:6]
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
        (FAILURES, REJECTS, superseded.SUPERSEDED)
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
    _clear_staging(storage, set(plan.parts))
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
            _check_llm(report.enrichment, settings)
            with_key = _resolve_llm(settings, report.enrichment["base_url"])
        else:
            log.warning("caption enrichment skipped: %s", report.enrichment["reason"])
        settings = _without_llm_key(settings)  # only the enrichment actors get the key
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
            _commit(record, storage, ledger, report, parts)

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


def _clear_staging(storage: Storage, live: set[str]) -> None:
    """Staging of parts no plan still needs goes; a live part keeps only what it staged."""
    from ray_jobs.pipeline import staging

    seen: set[str] = set()
    for key in list(storage.list(staging.STAGING + "/")):
        part = key.split("/")[1]
        if part not in live:
            storage.delete(key)
        elif part not in seen:
            seen.add(part)
            staging.clear(storage, part, keep_staged=True)


def _pipeline_context(settings: Settings) -> None:
    import ray

    ctx = ray.data.DataContext.get_current()
    # order is not needed: each part is assembled from its staged rows, sorted by key
    ctx.execution_options.preserve_order = False
    p = settings.pipeline
    ctx.wait_for_min_actors_s = p.actor_start_timeout_s
    ctx.execution_no_progress_timeout_s = p.no_progress_timeout_s


def _writer_args(settings: Settings, kind: str) -> dict[str, Any]:
    from ray_jobs.pipeline.staging import write_fragments

    w = settings.pipeline.write
    return {
        "fn": write_fragments,
        "fn_kwargs": {"output": settings.output, "kind": kind},
        "batch_format": "pyarrow",
        "batch_size": w.batch_size,
        "num_cpus": w.num_cpus,
    }


def stage_parts(
    settings: Settings, storage: Storage, plan: Plan, lease: OutputLease
) -> dict[str, dict[str, int]]:
    """Run the parts not staged yet through fetch, panels and relevance; returns every plan
    part's staged fragments (path -> panels kept in it)."""
    import ray

    from ray_jobs.contract.rows import ARTICLE_CREDIT
    from ray_jobs.pipeline import stages, staging
    from ray_jobs.pipeline.resources import map_batches_args

    staged = {p: staging.staged(storage, p) for p in plan.parts}
    sizes = plan.sizes()
    for part in plan.parts:
        if staged[part] is None and sizes[part] == 0:  # it only records older versions
            staging.mark_staged(storage, part, {})
            staged[part] = {"fragments": {}}
    todo = [p for p in plan.parts if staged[p] is None]
    if todo:
        refs = plan.refs_of(set(todo))
        expected = {p: sizes[p] * ARTICLE_CREDIT for p in todo}
        _pipeline_context(settings)
        p = settings.pipeline
        n = refs.num_rows
        # blocks cut here, not by a repartition: an all-to-all step needs a whole free CPU on
        # one node for its tasks and turns Ray Data's no-progress guard off
        step = max(1, math.ceil(n / min(math.ceil(n / p.fetch.batch_size), 10_000)))
        ds = ray.data.from_arrow([refs.slice(i, step) for i in range(0, n, step)])
        for stage, res in (
            (stages.FetchStage, p.fetch),
            (stages.PanelStage, p.panels),
            (stages.RelevanceStage, p.relevance),
        ):
            ds = ds.map_batches(stage, fn_constructor_args=(settings,), **map_batches_args(res))
        ds = ds.map_batches(**_writer_args(settings, "stage"))
        got: dict[str, int] = dict.fromkeys(todo, 0)
        fragments: dict[str, dict[str, int]] = {t: {} for t in todo}
        for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in batch.to_pylist():
                part = row["part"]
                got[part] += row["credit"]
                if row["fragment"]:
                    fragments[part][row["fragment"]] = row["ok"]
                if got[part] == expected[part]:
                    lease.check()
                    staging.mark_staged(storage, part, fragments.pop(part))
                    log.info("staged part %s", part)
        short = {t: (got[t], expected[t]) for t in todo if got[t] != expected[t]}
        if short:
            raise RuntimeError(
                f"parts whose rows did not all arrive (credit got, expected): {short}"
            )
        staged = {p: staging.staged(storage, p) for p in plan.parts}
    return {p: record["fragments"] for p, record in staged.items()}


def find_and_record_duplicates(
    settings: Settings,
    parts: list[dict[str, Any]],
    staged: dict[str, dict[str, int]],
    plan: Plan,
) -> int:
    """Verdicts for this run's kept panels against the published ones and each other, written
    per part; returns how many panels are duplicates. Published samples that an earlier part
    superseded, or that this run replaces, take no part: a new version is never judged a
    copy of the version it replaces."""
    import ray

    from ray_jobs.dedup.shuffle import HashSource, find_duplicates, task_options
    from ray_jobs.pipeline import staging

    new = [
        HashSource(path, False, ok)
        for fragments in staged.values()
        for path, ok in fragments.items()
        if ok
    ]
    if not new:
        return 0
    replaced: dict[str, list[tuple[str, int | None]]] = {}
    for row in plan.replaced().to_pylist():
        replaced.setdefault(row["old_part"], []).append((row["pmcid"], row["version"]))
    tombstones = superseded.per_shard(parts)
    published = [
        HashSource(
            s["index"],
            True,
            s["samples"],
            drop=tuple(replaced.get(p["part"], ())),
            shard=s["name"],
            tombstones=tuple(tombstones.get(s["name"], ())),
        )
        for p in parts
        for s in p["shards"]
    ]
    p = settings.pipeline
    verdicts = find_duplicates(
        settings.output,
        published + new,
        bits=p.near_duplicate_bits,
        rows_per_bucket=p.dedup_rows_per_bucket,
        num_cpus=p.dedup.num_cpus,
    )
    write = ray.remote(staging.write_verdicts).options(**task_options(p.dedup.num_cpus))
    ray.get([write.remote(settings.output, ref) for ref in verdicts.buckets])
    log.info("%d duplicate panel(s) in %d chain round(s)", verdicts.dropped, verdicts.rounds)
    return verdicts.dropped


def enrich_parts(
    settings: Settings, staged: dict[str, dict[str, int]]
) -> tuple[dict[str, list[str]], set[str]]:
    """LongCAP captions for the panels that stay: their enriched fragments per part, and the
    keys whose enrichment failed."""
    import ray

    from ray_jobs.pipeline import stages
    from ray_jobs.pipeline.resources import map_batches_args
    from ray_jobs.pipeline.staging import read_canonical

    enriched: dict[str, list[str]] = {part: [] for part in staged}
    failed: set[str] = set()
    items = [
        {"part": part, "fragment": path}
        for part, fragments in staged.items()
        for path, ok in fragments.items()
        if ok
    ]
    if not items:
        return enriched, failed
    _pipeline_context(settings)
    p = settings.pipeline
    ds = ray.data.from_items(items)
    ds = ds.map_batches(
        read_canonical,
        fn_kwargs={"output": settings.output},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=p.write.num_cpus,
    )
    ds = ds.map_batches(
        stages.EnrichStage, fn_constructor_args=(settings,), **map_batches_args(p.enrich)
    )
    ds = ds.map_batches(**_writer_args(settings, "enrich"))
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        for row in batch.to_pylist():
            if row["fragment"]:
                enriched[row["part"]].append(row["fragment"])
            failed.update(row["failed"])
    return enriched, failed


def assemble_parts(
    settings: Settings,
    plan: Plan,
    staged: dict[str, dict[str, int]],
    enriched: dict[str, list[str]] | None,
    unpublished: set[str],
    report: BuildReport,
) -> Iterator[dict[str, Any]]:
    """Assemble every part in a task of its own; yield their records in plan order."""
    import ray

    from ray_jobs.dedup.shuffle import task_options
    from ray_jobs.shards.part import assemble_part

    task = ray.remote(assemble_part).options(**task_options(settings.pipeline.write.num_cpus))
    unpublished_ref = ray.put(sorted(unpublished))
    window = max(2, int(ray.cluster_resources().get("CPU", 1)) * 2)
    futures: dict[str, Any] = {}
    done: dict[str, dict[str, Any]] = {}
    queue = list(plan.parts)
    for name in plan.parts:
        while queue and len(futures) < window:
            part = queue.pop(0)
            futures[part] = task.remote(
                settings.output,
                part,
                report.run_id,
                sorted(staged[part]),
                None if enriched is None else sorted(enriched[part]),
                unpublished_ref,
                settings.pipeline.samples_per_shard,
                plan.others_of(part),
                settings.pipeline.max_shard_bytes,
            )
        while name not in done:
            ready, _ = ray.wait(list(futures.values()), num_returns=1)
            for part, future in list(futures.items()):
                if future in ready:
                    done[part] = ray.get(future)
                    del futures[part]
        yield done.pop(name)


def _commit(
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
    mf.write_json(storage, f"{RUNS}/{report.run_id}.json", record)
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
