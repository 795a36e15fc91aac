"""Shards close by bytes as well as by count, stream through a temp file, and reach S3 as a
multipart upload when large (S3 refuses single PUTs over 5 GB)."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import numpy as np
import pytest
from test_pipeline_stages import _record

from ray_jobs.config import OutputS3Settings
from ray_jobs.shards.writer import ShardWriter
from ray_jobs.storage.store import LocalStorage, S3Storage


def noise(i: int, size: int) -> bytes:
    """Incompressible bytes standing for an image of ``size`` bytes."""
    return np.random.default_rng(i).integers(0, 256, size, dtype=np.uint8).tobytes()


def test_a_shard_closes_before_the_sample_that_would_pass_its_byte_bound(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    sizes = [30_000, 30_000, 30_000, 200_000, 10_000, 30_000]
    writer = ShardWriter(storage, "train", 100, "000000", "run", max_shard_bytes=2**16 + 2**14)
    for i, size in enumerate(sizes):
        writer.add(_record(i), noise(i, size))
    shards = writer.close()
    # two 30 kB samples fill a 80 kB shard; the 200 kB one is a shard of its own
    assert [s.samples for s in shards] == [2, 1, 1, 2]
    keys = []
    for shard in shards:
        path = tmp_path / shard.name
        data = path.read_bytes()
        assert len(data) == shard.bytes and hashlib.sha256(data).hexdigest() == shard.sha256
        assert shard.samples == 1 or shard.bytes <= writer.max_shard_bytes
        with tarfile.open(path) as tar:
            keys += [m.name.split(".")[0] for m in tar.getmembers() if m.name.endswith(".txt")]
    assert keys == [_record(i).key for i in range(len(sizes))]  # every sample, in order, once


def test_shard_bytes_do_not_depend_on_the_byte_bound_when_it_is_not_reached(
    tmp_path: Path,
) -> None:
    digests = []
    for name, bound in (("a", 2**30), ("b", 2**20)):
        writer = ShardWriter(LocalStorage(tmp_path / name), "train", 3, "000000", "r", bound)
        for i in range(5):
            writer.add(_record(i), noise(i, 1000))
        digests.append([s.sha256 for s in writer.close()])
    assert digests[0] == digests[1] and len(digests[0]) == 2


def test_large_shards_go_to_s3_as_multipart_uploads(
    moto_endpoint: str, s3_admin, tmp_path: Path
) -> None:
    s3_admin.create_bucket(Bucket="shards-multipart")
    settings = OutputS3Settings(
        endpoint_url=moto_endpoint,
        multipart_threshold_bytes=5 * 2**20,
        multipart_part_bytes=5 * 2**20,
    )
    storage = S3Storage("shards-multipart", "out", settings)
    writer = ShardWriter(storage, "train", 10, "000000", "run")
    for i in range(3):
        writer.add(_record(i), noise(i, 4 * 2**20))
    (shard,) = writer.close()
    head = s3_admin.head_object(Bucket="shards-multipart", Key=f"out/{shard.name}")
    assert head["ETag"].strip('"').endswith("-3")  # 12 MiB in three 5 MiB parts
    data = storage.read_bytes(shard.name)
    assert len(data) == shard.bytes and hashlib.sha256(data).hexdigest() == shard.sha256
    small = S3Storage("shards-multipart", "out", OutputS3Settings(endpoint_url=moto_endpoint))
    with (tmp_path / "small.bin").open("w+b") as handle:
        handle.write(b"x" * 1000)
        handle.seek(0)
        small.write_file("small.bin", handle)
    head = s3_admin.head_object(Bucket="shards-multipart", Key="out/small.bin")
    assert "-" not in head["ETag"] and small.read_bytes("small.bin") == b"x" * 1000


def test_a_multipart_threshold_under_s3s_part_size_is_refused() -> None:
    with pytest.raises(ValueError, match="multipart_part_bytes"):
        OutputS3Settings(multipart_part_bytes=2**20)
