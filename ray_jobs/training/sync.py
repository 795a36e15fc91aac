"""Move a dataset or a run between S3 and the pod's disk: ``python -m ray_jobs.training.sync``.

The trainer reads local files (open_clip loops forever on a shard path it cannot open, so every
path is checked before it starts), while on a cluster the dataset and the runs live in S3.
``dataset`` pulls one split's shards and indexes, each tar checked against the manifest's
sha256, files already present and correct skipped, and the manifest written last, so a pull
cut short leaves no manifest to train on. ``copy`` copies a folder tree either way, streaming
(checkpoints are gigabytes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ray_jobs.config import OutputS3Settings, S3Settings
from ray_jobs.storage import links
from ray_jobs.storage.store import check_key, s3_client

MANIFEST = "manifest.json"


def _s3(uri: str) -> tuple[str, str] | None:
    parsed = urlparse(uri)
    return (parsed.netloc, parsed.path.strip("/")) if parsed.scheme == "s3" else None


def _local(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"unsupported URI {uri!r}: a local path or s3://bucket/prefix")
    return Path(parsed.path if parsed.scheme == "file" else uri)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(src_uri: str, key: str, root: Path, dest: Path, s3: S3Settings) -> None:
    """``{src_uri}/{key}`` → ``dest`` (under ``root``), through a temp file renamed into place;
    a link on either side is refused, never followed."""
    links.check_path(root, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    remote = _s3(src_uri)
    if remote:
        s3_client(s3).download_file(remote[0], _join(remote[1], check_key(key)), str(tmp))
    else:
        src = _local(src_uri)
        shutil.copyfile(links.check_path(src, src / check_key(key)), tmp)
    os.replace(tmp, dest)


def pull_dataset(
    manifest_uri: str, dest: str | Path, split: str = "train", s3: S3Settings | None = None
) -> dict[str, Any]:
    """One split of a dataset into ``dest``; returns counts. ``dest/manifest.json`` lists only
    the pulled shards."""
    s3 = s3 or OutputS3Settings()
    if not manifest_uri.rstrip("/").endswith(MANIFEST):
        raise ValueError(f"{manifest_uri!r} does not name a {MANIFEST}")
    root_uri = manifest_uri.rstrip("/")[: -len(MANIFEST)].rstrip("/")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)  # rewritten last, only once all is in place
    _fetch(root_uri, MANIFEST, dest, dest / f".{MANIFEST}.source", s3)
    manifest = json.loads((dest / f".{MANIFEST}.source").read_text(encoding="utf-8"))
    shards = [s for s in manifest.get("shards", []) if s.get("split") == split]
    if not shards:
        raise ValueError(f"{manifest_uri}: no {split!r} shards")
    pulled = skipped = 0
    wanted = [(s["name"], s.get("sha256")) for s in shards]
    wanted += [(s.get("index"), None) for s in shards]
    # tombstones of superseded samples: the trainer leaves those out
    wanted += [(name, None) for name in (manifest.get("superseded") or {}).get("files", [])]
    for key, sha in wanted:
        if not key:
            continue
        path = links.check_path(dest, dest / check_key(key))
        if path.is_file() and sha and sha256_file(path) == sha:
            skipped += 1
            continue
        _fetch(root_uri, key, dest, path, s3)
        if sha and sha256_file(path) != sha:
            raise ValueError(f"{root_uri}/{key}: sha256 differs from the manifest's")
        pulled += 1
    local = {**manifest, "shards": shards, "pulled_from": manifest_uri}
    (dest / f".{MANIFEST}.source").unlink()
    tmp = dest / f".{MANIFEST}.part"
    tmp.write_text(json.dumps(local, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, dest / MANIFEST)
    return {"shards": len(shards), "files_pulled": pulled, "files_present": skipped}


def copy_tree(src: str, dst: str, s3: S3Settings | None = None) -> int:
    """Copy every file under ``src`` to ``dst`` (local ↔ S3, or local → local); returns the
    number of files."""
    s3 = s3 or OutputS3Settings()
    src_s3, dst_s3 = _s3(src), _s3(dst)
    if src_s3 and dst_s3:
        raise ValueError("copy between two S3 locations is not supported; use the S3 console/CLI")
    if src_s3:
        client = s3_client(s3)
        bucket, prefix = src_s3
        count = 0
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""
        ):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix) :].lstrip("/")
                _fetch(src, rel, _local(dst), _local(dst) / check_key(rel), s3)
                count += 1
        if not count:
            raise FileNotFoundError(f"{src}: nothing there")
        return count
    root = _local(src)
    files = list(links.files(root))  # a link in the tree is refused, never uploaded
    if not files:
        raise FileNotFoundError(f"{src}: nothing there")
    client = s3_client(s3) if dst_s3 else None
    for path in files:
        rel = path.relative_to(root).as_posix()
        if dst_s3 and client is not None:
            client.upload_file(str(path), dst_s3[0], _join(dst_s3[1], rel))
        else:
            target = links.check_path(_local(dst), _local(dst) / rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return len(files)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ray_jobs.training.sync", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dataset", help="pull one split of a dataset (shards + index)")
    d.add_argument("manifest", help="s3://bucket/prefix/manifest.json or a local path")
    d.add_argument("dest", type=Path)
    d.add_argument("--split", default="train")
    c = sub.add_parser("copy", help="copy a folder tree between S3 and local disk")
    c.add_argument("src")
    c.add_argument("dst")
    for sp in (d, c):
        sp.add_argument("--endpoint-url", help="S3 API endpoint [AWS_ENDPOINT_URL, else AWS]")
        sp.add_argument("--region", default=OutputS3Settings().region)
    opts = p.parse_args(argv)
    s3 = OutputS3Settings(endpoint_url=opts.endpoint_url, region=opts.region)
    if opts.command == "dataset":
        result: Any = pull_dataset(opts.manifest, opts.dest, opts.split, s3)
    else:
        result = {"files": copy_tree(opts.src, opts.dst, s3)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
