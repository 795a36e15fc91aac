"""Copy ``s3://bucket/prefix`` into a local folder before the main container starts.

The init step of the chart's pods: detector and classifier weights for the Ray pods, the
vLLM model, training shards. Weights come from our own bucket, never from a model hub. A file
already present with the same size is skipped, so a restarted pod does not download again;
each file lands under a temporary name and is renamed, so a killed copy leaves no half file.

    python fetch_s3.py s3://bucket/models/ /opt/pmcvl/models [--anonymous]

boto3 reads the endpoint (``AWS_ENDPOINT_URL``), region and credentials from the environment.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path, PurePosixPath

import boto3
from botocore import UNSIGNED
from botocore.config import Config


def split_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, prefix


def local_path(dest: Path, prefix: str, key: str) -> Path:
    """Where ``key`` goes under ``dest``; a key that would escape ``dest`` is refused."""
    rel = PurePosixPath(key[len(prefix) :].lstrip("/"))
    if not rel.parts or ".." in rel.parts:
        raise ValueError(f"unsafe key {key!r}")
    return dest.joinpath(*rel.parts)


def fetch(uri: str, dest: Path, anonymous: bool = False) -> tuple[int, int]:
    """Copy every object under ``uri`` to ``dest``; returns (downloaded, skipped)."""
    bucket, prefix = split_uri(uri)
    if prefix and not prefix.endswith("/"):
        prefix += "/"  # a folder, so "models" does not also match "models-old/"
    config = Config(signature_version=UNSIGNED) if anonymous else None
    s3 = boto3.client("s3", config=config)
    downloaded = skipped = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            if obj["Key"].endswith("/"):
                continue  # folder markers some tools write
            target = local_path(dest, prefix, obj["Key"])
            if target.is_file() and target.stat().st_size == obj["Size"]:
                skipped += 1
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            s3.download_file(bucket, obj["Key"], str(partial))
            os.replace(partial, target)
            downloaded += 1
    if downloaded + skipped == 0:
        raise FileNotFoundError(f"nothing under {uri}")
    return downloaded, skipped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("uri", help="s3://bucket/prefix")
    p.add_argument("dest", type=Path)
    p.add_argument("--anonymous", action="store_true", help="unsigned requests (public bucket)")
    opts = p.parse_args(argv)
    downloaded, skipped = fetch(opts.uri, opts.dest, opts.anonymous)
    print(f"{opts.uri} -> {opts.dest}: {downloaded} downloaded, {skipped} already there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
