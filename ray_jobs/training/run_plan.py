"""What one ``clip_training`` DAG run does, decided in plain functions the DAG calls.

Kept out of the DAG file so the decisions (which manifest, what the run is called, which shards,
the two Job specs, what gets recorded) are tested without a scheduler, and the DAG file stays
a thin wiring of tasks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from ray_jobs.config import S3Settings, TrainingSettings
from ray_jobs.training import k8s_job


def manifest_from_events(events: Iterable[Any], fallback: str) -> str:
    """The newest triggering event's ``extra["manifest"]``; ``fallback`` (the Asset's URI) when
    no event names one (a manual trigger, an older publisher)."""
    newest = sorted(
        events,
        key=lambda e: getattr(e, "timestamp", None) or dt.datetime.min.replace(tzinfo=dt.UTC),
        reverse=True,
    )
    for event in newest:
        manifest = (getattr(event, "extra", None) or {}).get("manifest")
        if isinstance(manifest, str) and manifest:
            return manifest
    return fallback


def run_name(run_id: str, when: dt.datetime) -> str:
    """``clip-20261130-171200-1a2b3c``: sortable by time, unique per DAG run (a hash of its id)."""
    digest = hashlib.sha1(run_id.encode()).hexdigest()[:6]
    return k8s_job.check_run(f"clip-{when.astimezone(dt.UTC):%Y%m%d-%H%M%S}-{digest}")


def manifest_summary(manifest_uri: str, split: str, s3: S3Settings | None = None) -> dict[str, Any]:
    """The shard list the run will train on, from the manifest: count, samples, provenance.
    Fails here, before any GPU is asked for, when the split has no shards."""
    from ray_jobs.storage.store import open_storage

    parsed = urlparse(manifest_uri)
    if parsed.scheme == "s3":
        root, name = manifest_uri.rsplit("/", 1)
    elif parsed.scheme in ("", "file"):
        root, name = posixpath.split(parsed.path)
    else:
        raise ValueError(f"manifest {manifest_uri!r}: s3:// or a local path")
    manifest = json.loads(open_storage(root, s3).read_bytes(name))
    shards = [s for s in manifest.get("shards", []) if s.get("split") == split]
    if not shards:
        raise ValueError(f"{manifest_uri}: no {split!r} shards to train on")
    return {
        "shards": len(shards),
        "samples": sum(int(s["samples"]) for s in shards),
        "created": manifest.get("created"),
        "runs": manifest.get("runs", []),
        "config_hash": manifest.get("config_hash"),
    }


def plan_run(
    settings: TrainingSettings, manifest_uri: str, run: str, summary: dict[str, Any]
) -> dict[str, Any]:
    """Everything downstream tasks need, as JSON-able values (it travels as XCom)."""
    return {
        "run": run,
        "manifest": manifest_uri,
        "split": settings.split,
        "dataset": summary,
        "model": settings.model,
        "context_length": settings.context_length,
        "checkpoint": k8s_job.checkpoint_path(settings, run),
        "output": f"{settings.output_uri.rstrip('/')}/{run}" if settings.output_uri else None,
        "train_job": k8s_job.render_training_job(settings, manifest_uri, run),
        "eval_job": k8s_job.render_eval_job(settings, run, xcom=True),
    }


def scores_record(plan: dict[str, Any], scores: dict[str, Any]) -> dict[str, Any]:
    """The run's result in brief: where the checkpoint is and its headline scores (the full
    JSON lies next to the checkpoint)."""
    retrieval = scores.get("retrieval") or {}
    record = {
        "run": plan["run"],
        "manifest": plan["manifest"],
        "checkpoint": plan["checkpoint"],
        "output": plan.get("output"),
        "model": scores.get("model", plan["model"]),
        "context_length": scores.get("context_length", plan["context_length"]),
        "benchmark_size": (scores.get("benchmark") or {}).get("size"),
        "image_to_text": {
            k: v for k, v in (retrieval.get("image_to_text") or {}).items() if k.startswith("R@")
        },
        "text_to_image": {
            k: v for k, v in (retrieval.get("text_to_image") or {}).items() if k.startswith("R@")
        },
        "mean_recall": retrieval.get("mean_recall"),
    }
    if "zero_shot" in scores:
        record["zero_shot_top1"] = scores["zero_shot"].get("top1")
    return record
