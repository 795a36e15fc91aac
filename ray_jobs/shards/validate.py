"""Checks a build's output before anything downstream (training, the Asset event) sees it.

The manifest must be well formed and add up (split totals, kept samples), and each shard a
run added must be what the manifest says it is: present, the listed size and sha256, its index
in the index schema with one row per sample, its stats file agreeing; a sample of index rows
must point at members that exist in the shard. Only the run's new shards are downloaded (older
ones were checked by the run that wrote them); ``verify="all"`` checks every shard.

No Airflow here: ``pmcvl validate`` and the ``pmc_dataset`` DAG (through
``operators.shard_validation``) run this same code and get the same :class:`ValidationReport`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pyarrow.parquet as pq

from ray_jobs.config import OutputS3Settings
from ray_jobs.contract.records import INDEX_SCHEMA, RECORD_FORMAT
from ray_jobs.shards import manifest as mf
from ray_jobs.storage.store import Storage, open_storage

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class ValidationReport:
    uri: str
    run_id: str | None
    shards: int = 0  # in the manifest
    checked: list[str] = field(default_factory=list)  # shards downloaded and verified
    rows_checked: int = 0
    samples: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def describe(self) -> str:
        """One line for people: the verdict and what was looked at."""
        verdict = "valid" if self.ok else f"INVALID ({len(self.problems)} problem(s))"
        return (
            f"{self.uri}: {verdict}; {self.shards} shard(s), {self.samples} samples; "
            f"verified {len(self.checked)} shard(s), {self.rows_checked} index rows"
        )


def read_run_record(storage: Storage, run_id: str) -> dict[str, Any] | None:
    """The build's record of run ``run_id`` (its counts and new shards), None if it wrote none:
    what the DAG reads instead of the job's log."""
    key = mf.run_key(run_id)
    return json.loads(storage.read_bytes(key)) if storage.exists(key) else None


def _check_manifest(manifest: dict[str, Any], report: ValidationReport) -> None:
    problems = report.problems
    if manifest.get("format") != mf.FORMAT:
        problems.append(f"manifest format is {manifest.get('format')!r}, not {mf.FORMAT!r}")
    shards = manifest.get("shards") or []
    names = [s.get("name") for s in shards]
    if len(set(names)) != len(names):
        problems.append("the manifest lists a shard more than once")
    totals: dict[str, dict[str, int]] = {}
    for shard in shards:  # splits count what readers see: less superseded samples
        entry = totals.setdefault(shard.get("split"), {"shards": 0, "samples": 0})
        entry["shards"] += 1
        entry["samples"] += _current(shard)
    splits = manifest.get("splits") or {}
    if totals != splits:
        problems.append(f"split totals {totals} differ from the manifest's {splits}")
    report.shards = len(shards)
    report.samples = sum(_current(s) for s in shards)
    held = sum(int(s.get("samples") or 0) for s in shards)
    gone = (manifest.get("superseded") or {}).get("samples", 0)
    if held - report.samples != gone:
        problems.append(f"{held - report.samples} samples superseded in shards, {gone} listed")
    kept = (manifest.get("counts") or {}).get("kept")
    if kept is not None and kept != held:
        problems.append(f"counts.kept is {kept} but the shards hold {held} samples")


def _current(shard: dict[str, Any]) -> int:
    return int(shard.get("current", shard.get("samples")) or 0)


def _as_written(shard: dict[str, Any]) -> dict[str, Any]:
    """A manifest's shard entry as its part wrote it (the manifest adds supersession)."""
    return {k: v for k, v in shard.items() if k not in ("superseded", "current")}


def _check_rows(table: Any, shard: dict[str, Any], members: set[str], limit: int) -> list[str]:
    """Index rows against the shard: safe unique keys, placement, members, record format."""
    problems = []
    keys = table.column("key").to_pylist()
    if len(set(keys)) != len(keys):
        problems.append(f"{shard['index']}: duplicate keys")
    step = max(1, table.num_rows // max(1, limit))
    for row in table.take(list(range(0, table.num_rows, step))[:limit]).to_pylist():
        where = f"{shard['index']} row {row.get('key')!r}"
        key = row.get("key") or ""
        if not _KEY.match(key):
            problems.append(f"{where}: key is not WebDataset-safe")
        if row.get("shard") != shard["name"] or row.get("split") != shard["split"]:
            problems.append(f"{where}: placed in {row.get('shard')} / {row.get('split')}")
        wanted = {row.get("member"), f"{key}.json", f"{key}.txt"}
        if missing := sorted(str(m) for m in wanted - members):
            problems.append(f"{where}: not in the shard: {', '.join(missing)}")
        if row.get("format") != RECORD_FORMAT or not (row.get("width") and row.get("height")):
            problems.append(f"{where}: not a {RECORD_FORMAT} record with an image size")
    return problems


def _check_shard(storage: Storage, shard: dict[str, Any], sample_rows: int) -> tuple[list, int]:
    name = shard["name"]
    if not storage.exists(name):
        return [f"{name}: missing"], 0
    data = storage.read_bytes(name)
    problems = []
    if len(data) != shard["bytes"]:
        problems.append(f"{name}: {len(data)} bytes, the manifest says {shard['bytes']}")
    if hashlib.sha256(data).hexdigest() != shard["sha256"]:
        problems.append(f"{name}: sha256 differs from the manifest")
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = set(tar.getnames())
    except tarfile.TarError as exc:
        return [*problems, f"{name}: not a readable tar ({exc})"], 0
    if not storage.exists(shard["index"]):
        return [*problems, f"{shard['index']}: missing"], 0
    table = pq.read_table(io.BytesIO(storage.read_bytes(shard["index"])))
    if not table.schema.remove_metadata().equals(INDEX_SCHEMA.remove_metadata()):
        return [*problems, f"{shard['index']}: not in the index schema"], 0
    if table.num_rows != shard["samples"]:
        problems.append(f"{shard['index']}: {table.num_rows} rows for {shard['samples']} samples")
    if not storage.exists(shard["stats"]):
        problems.append(f"{shard['stats']}: missing")
    elif json.loads(storage.read_bytes(shard["stats"])).get("samples") != shard["samples"]:
        problems.append(f"{shard['stats']}: sample count differs from the manifest")
    problems += _check_rows(table, shard, members, sample_rows)
    return problems, min(table.num_rows, sample_rows)


def validate_dataset(
    uri: str,
    run_id: str | None = None,
    s3: OutputS3Settings | None = None,
    verify: Literal["new", "all"] = "new",
    sample_rows: int = 32,
) -> ValidationReport:
    """Check the dataset at ``uri``; ``run_id``'s new shards (or all of them) in depth."""
    storage = open_storage(uri, s3)
    report = ValidationReport(storage.uri, run_id)
    manifest = mf.read_manifest(storage)
    if manifest is None:
        report.problems.append(f"no {mf.MANIFEST} at {storage.uri}")
        return report
    _check_manifest(manifest, report)
    listed = {s["name"]: s for s in manifest.get("shards") or []}
    if verify == "all":
        targets = list(listed.values())
    elif run_id:
        record = read_run_record(storage, run_id)
        if record is None:
            report.problems.append(f"{mf.run_key(run_id)}: missing")
            return report
        targets = []
        for shard in record.get("new_shards") or []:
            if _as_written(listed.get(shard["name"]) or {}) != shard:
                report.problems.append(f"{shard['name']}: run {run_id} wrote it; not so listed")
            targets.append(shard)
    else:
        targets = []
    for shard in targets:
        problems, rows = _check_shard(storage, shard, sample_rows)
        report.problems += problems
        report.checked.append(shard["name"])
        report.rows_checked += rows
    return report
