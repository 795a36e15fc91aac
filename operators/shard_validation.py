"""Checks a build's output before anything downstream (training, the Asset event) sees it.

The manifest must be well formed and add up (split totals, kept samples), and each shard a
run added must be what the manifest says it is: present, the listed size and sha256, its index
in the index schema with one row per sample, its stats file agreeing; a sample of index rows
must point at members that exist in the shard. Only the run's new shards are downloaded (older
ones were checked by the run that wrote them); ``verify="all"`` checks every shard.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from operators.connections import S3_CONN_ID, aws_environment

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class DatasetInvalid(AirflowFailException):
    """The output is inconsistent; retrying the check would not change that."""


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


def _check_manifest(manifest: dict[str, Any], report: ValidationReport) -> None:
    from ray_jobs.shards import manifest as mf

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
    from ray_jobs.contract.records import RECORD_FORMAT

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


def _check_shard(storage: Any, shard: dict[str, Any], sample_rows: int) -> tuple[list[str], int]:
    import pyarrow.parquet as pq

    from ray_jobs.contract.records import INDEX_SCHEMA

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
    s3: Any = None,
    verify: Literal["new", "all"] = "new",
    sample_rows: int = 32,
) -> ValidationReport:
    """Check the dataset at ``uri``; ``run_id``'s new shards (or all of them) in depth."""
    from ray_jobs.shards import manifest as mf
    from ray_jobs.storage.store import open_storage

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
        key = f"runs/{run_id}.json"
        if not storage.exists(key):
            report.problems.append(f"{key}: missing")
            return report
        targets = []
        for shard in json.loads(storage.read_bytes(key)).get("new_shards") or []:
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


class ShardValidationOperator(BaseOperator):
    """Fails (without retries) when :func:`validate_dataset` finds a problem; returns the
    report otherwise.

    :param output_uri: the dataset (``output.uri``)
    :param run_id: the build run whose new shards are checked in depth
    :param s3_conn_id: AWS connection for an ``s3://`` output
    """

    template_fields = ("output_uri", "run_id")

    def __init__(
        self,
        *,
        output_uri: str,
        run_id: str | None = None,
        verify: Literal["new", "all"] = "new",
        sample_rows: int = 32,
        s3_conn_id: str | None = S3_CONN_ID,
        s3_endpoint_url: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.output_uri = output_uri
        self.run_id = run_id
        self.verify = verify
        self.sample_rows = sample_rows
        self.s3_conn_id = s3_conn_id
        self.s3_endpoint_url = s3_endpoint_url

    def execute(self, context: Any) -> dict[str, Any]:
        from ray_jobs.config import OutputS3Settings

        s3 = OutputS3Settings(endpoint_url=self.s3_endpoint_url)
        with aws_environment(self.s3_conn_id):
            report = validate_dataset(
                self.output_uri, self.run_id or None, s3, self.verify, self.sample_rows
            )
        return check_report(report, self.log)


def check_report(report: ValidationReport, log: Any) -> dict[str, Any]:
    """Log the report; raise :class:`DatasetInvalid` with every problem when it has any."""
    if report.problems:
        for problem in report.problems:
            log.error("invalid: %s", problem)
        raise DatasetInvalid(
            f"{len(report.problems)} problem(s) in {report.uri}: " + "; ".join(report.problems[:5])
        )
    log.info(
        "%s is valid: %d shard(s), %d samples; verified %d new shard(s), %d index rows",
        report.uri,
        report.shards,
        report.samples,
        len(report.checked),
        report.rows_checked,
    )
    return report.to_dict()
