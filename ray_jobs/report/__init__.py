"""``pmcvl report``: the statistics the Open-PMC and LongCAP papers report, for one's own run.

:func:`compute_stats` reads a dataset output (local folder or ``s3://`` prefix) into a typed
:class:`ReportStats`; :func:`write_report` draws it as ``report/index.html`` with PNGs and a
``stats.json`` next to the data, with a gallery of sampled figures (:mod:`.gallery`).
:func:`build_report` does all of it from a config.
"""

from __future__ import annotations

import json

from ray_jobs.config import Settings, load_settings
from ray_jobs.report.gallery import build_gallery
from ray_jobs.report.page import write_report
from ray_jobs.report.stats import ReportStats, compute_stats
from ray_jobs.storage.store import open_storage

__all__ = ["ReportStats", "build_report", "compute_stats", "write_report"]


def build_report(uri: str, settings: Settings | None = None) -> tuple[ReportStats, str]:
    """Compute and write the report for the output at ``uri``; the stats and the page's URI."""
    settings = settings or load_settings()
    storage = open_storage(uri, settings.output.s3)
    stats = compute_stats(
        storage,
        windows=settings.captions.token_windows,
        long_tokenizer=settings.captions.long_tokenizer,
    )
    try:
        manifest = json.loads(storage.read_bytes("manifest.json")) if stats.manifest_found else {}
    except (FileNotFoundError, ValueError):  # compute_stats has warned already
        manifest = {}
    gallery = build_gallery(
        storage, manifest if isinstance(manifest, dict) else {}, settings.report
    )
    key = write_report(storage, stats, gallery=gallery)
    return stats, f"{storage.uri}/{key}"
