"""What one build run did: written to ``runs/<run_id>.json`` and returned by ``run_build``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ray_jobs import __version__
from ray_jobs.shards import manifest as mf


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
