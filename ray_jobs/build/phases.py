"""The staged phases of a build, each a Ray Data pipeline or a set of Ray tasks over the plan's
parts: stage (fetch, panels, relevance, fragment writers), dedup, enrich and assemble. Each
phase reads what the previous one left in ``staging/`` and returns only paths and counts, so a
killed run resumes from what is staged."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

from ray_jobs.build.cluster import pipeline_context
from ray_jobs.build.report import BuildReport
from ray_jobs.config import Settings
from ray_jobs.pipeline.plan import Plan
from ray_jobs.shards import superseded
from ray_jobs.storage.lease import OutputLease
from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)


def clear_staging(storage: Storage, live: set[str]) -> None:
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
    from ray_jobs.pipeline import ray_adapter, stages, staging

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
        pipeline_context(settings)
        p = settings.pipeline
        n = refs.num_rows
        # blocks cut here, not by a repartition: an all-to-all step needs a whole free CPU on
        # one node for its tasks and turns Ray Data's no-progress guard off
        step = max(1, math.ceil(n / min(math.ceil(n / p.fetch.batch_size), 10_000)))
        ds = ray.data.from_arrow([refs.slice(i, step) for i in range(0, n, step)])
        ds = ray_adapter.apply(ds, stages.STAGE_PHASE, settings)
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

    from ray_jobs.pipeline import ray_adapter, stages
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
    pipeline_context(settings)
    p = settings.pipeline
    ds = ray.data.from_items(items)
    ds = ds.map_batches(
        read_canonical,
        fn_kwargs={"output": settings.output},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=p.write.num_cpus,
    )
    ds = ray_adapter.apply(ds, stages.ENRICH_PHASE, settings)
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
