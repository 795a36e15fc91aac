"""The run's pending refs: the listing against the ledger. Airflow's plan task calls it too,
to show what a run will build before it submits the job."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ray_jobs.config import Settings
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.shards import manifest as mf
from ray_jobs.storage.store import open_storage


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
