"""Part records and the dataset manifest.

Each committed part of a run writes ``parts/<part>.json`` (its shards with checksums, and its
counts) before its ledger segment; ``manifest.json`` is rebuilt from the committed part records
and written last, so every shard it lists is complete, and files of a part no ledger segment
committed (a killed run) are removed before anything new is written.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from ray_jobs.pmc.license_policy import KEPT
from ray_jobs.shards.writer import INDEX, SHARDS, STATS
from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

PARTS = "parts"
MANIFEST = "manifest.json"
FORMAT = "pmcvl-dataset/1"
# top-level keys a dataset card reads: current samples by license, and the allow-list the
# output was built under (null: every license)
LICENSES, LICENSE_POLICY = "licenses", "license_policy"


def part_key(part: str) -> str:
    return f"{PARTS}/{part}.json"


def run_key(run_id: str) -> str:
    """``runs/<run_id>.json``: what one build run did (the build writes it, the DAG and
    ``pmcvl validate --run-id`` read it)."""
    return f"runs/{run_id}.json"


def read_part(storage: Storage, part: str) -> dict[str, Any]:
    return json.loads(storage.read_bytes(part_key(part)))


def load_parts(storage: Storage, committed: set[str]) -> list[dict[str, Any]]:
    records = []
    for key in sorted(storage.list(PARTS)):
        part = key.rsplit("/", 1)[-1].removesuffix(".json")
        if key.endswith(".json") and part in committed:
            records.append(json.loads(storage.read_bytes(key)))
    return records


def remove_orphans(storage: Storage, committed: set[str]) -> list[str]:
    """Delete part records, shards, indexes, stats and gallery files that no committed part
    lists."""
    from ray_jobs.report.gallery_files import ENTRIES, THUMBS  # it imports this module

    removed = []
    for key in list(storage.list(PARTS)):
        if key.rsplit("/", 1)[-1].removesuffix(".json") not in committed:
            storage.delete(key)
            removed.append(key)
    listed = {
        name
        for part in load_parts(storage, committed)
        for shard in part["shards"]
        for name in (shard["name"], shard["index"], shard["stats"])
    }
    for prefix in (SHARDS, INDEX, STATS):
        for key in list(storage.list(prefix)):
            if key not in listed:
                storage.delete(key)
                removed.append(key)
    for prefix in (ENTRIES, THUMBS):  # gallery files sit in a folder per part
        for key in list(storage.list(prefix)):
            if key[len(prefix) + 1 :].split("/", 1)[0] not in committed:
                storage.delete(key)
                removed.append(key)
    if removed:
        log.warning("removed %d file(s) of uncommitted parts", len(removed))
    return removed


def add_counts(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    for name, value in more.items():
        if isinstance(value, dict):
            add_counts(total.setdefault(name, {}), value)
        else:
            total[name] = total.get(name, 0) + value
    return total


def manifest_shards(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every committed shard, with how many of its samples later parts superseded (its
    ``samples`` stay what the tar holds; ``current`` is what readers see)."""
    gone: dict[str, int] = {}
    for part in parts:
        for shard, n in (part.get("superseded") or {}).get("shards", {}).items():
            gone[shard] = gone.get(shard, 0) + n
    shards = []
    for part in parts:
        for shard in part["shards"]:
            n = gone.get(shard["name"], 0)
            shards.append({**shard, "superseded": n, "current": shard["samples"] - n})
    return shards


def build_manifest(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """``splits`` and ``samples`` count the samples readers see: superseded ones are listed
    under ``superseded`` (their tombstone files), never counted twice."""
    from ray_jobs.shards import superseded

    shards = manifest_shards(parts)
    splits: dict[str, dict[str, int]] = {}
    for shard in shards:
        entry = splits.setdefault(shard["split"], {"shards": 0, "samples": 0})
        entry["shards"] += 1
        entry["samples"] += shard["current"]
    counts: dict[str, Any] = {}
    for part in parts:
        add_counts(counts, part["counts"])
    return {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": sorted({p["run_id"] for p in parts}),
        "samples": sum(s["current"] for s in shards),
        "shards": shards,
        "splits": splits,
        "superseded": {
            "samples": sum(s["superseded"] for s in shards),
            "files": superseded.files(parts),
        },
        "counts": counts,
        **fields,
    }


def license_counts(storage: Storage, parts: list[dict[str, Any]]) -> dict[str, int]:
    """The samples readers see, by license (``unknown``: none could be read), most first:
    each part's ``kept_by_license`` less the samples later parts retired. Parts written
    before those counts existed are counted from the index and its tombstones instead."""
    total: dict[str, int] | None = {}
    for part in parts:
        kept = part["counts"].get(KEPT)
        retired = (part.get("superseded") or {"licenses": {}}).get("licenses")
        if kept is None or retired is None or total is None:
            total = None
            break
        add_counts(total, kept)
        add_counts(total, {code: -n for code, n in retired.items()})
    if total is None:
        total = _index_license_counts(storage, parts)
    return dict(sorted(((c, n) for c, n in total.items() if n), key=lambda cn: (-cn[1], cn[0])))


def _index_license_counts(storage: Storage, parts: list[dict[str, Any]]) -> dict[str, int]:
    """Current index rows by license, one shard's index at a time."""
    import pyarrow.compute as pc

    from ray_jobs.pmc.licenses import UNKNOWN
    from ray_jobs.shards import superseded
    from ray_jobs.storage.parquet import read_parquet

    tombstones = superseded.read(storage, superseded.files(parts))
    total: dict[str, int] = {}
    for shard in manifest_shards(parts):
        index = read_parquet(storage, shard["index"], ["shard", "key", "license"])
        index = superseded.current(index, tombstones)
        counted = pc.value_counts(pc.fill_null(index["license"], UNKNOWN))
        values, counts = counted.field("values").to_pylist(), counted.field("counts").to_pylist()
        add_counts(total, dict(zip(values, counts, strict=True)))
    return total


def write_json(storage: Storage, key: str, data: dict[str, Any]) -> None:
    storage.write_bytes(key, json.dumps(data, indent=2, ensure_ascii=False).encode())


def read_manifest(storage: Storage) -> dict[str, Any] | None:
    return json.loads(storage.read_bytes(MANIFEST)) if storage.exists(MANIFEST) else None
