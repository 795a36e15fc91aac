"""Read a benchmark written by :mod:`ray_jobs.benchmark.build` back: pairs, in order, with
their image bytes. Each shard is checked against the sha256 ``benchmark.json`` recorded, so
scores are only ever reported on the benchmark that was built."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ray_jobs.benchmark.build import FORMAT, META


@dataclass(frozen=True)
class Benchmark:
    path: Path
    meta: dict[str, Any]
    pairs: list[dict[str, Any]]  # pairs.parquet rows, benchmark order
    images: dict[str, bytes]  # by pair key

    @property
    def captions(self) -> list[str]:
        return [p["caption"] for p in self.pairs]

    def image_list(self) -> list[bytes]:
        return [self.images[p["key"]] for p in self.pairs]


def load_benchmark(path: str | Path) -> Benchmark:
    path = Path(path)
    meta = json.loads((path / META).read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    pairs = pq.read_table(path / meta["pairs"]).to_pylist()
    wanted = {p["member"]: p["key"] for p in pairs}
    images: dict[str, bytes] = {}
    for shard in meta["shards"]:
        data = (path / shard["name"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != shard["sha256"]:
            raise ValueError(f"{path / shard['name']}: sha256 differs from {META}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if member.name in wanted:
                    images[wanted[member.name]] = tar.extractfile(member).read()  # type: ignore[union-attr]
    missing = [p["key"] for p in pairs if p["key"] not in images]
    if missing:
        raise ValueError(f"{path}: {len(missing)} pair images missing, e.g. {missing[0]}")
    return Benchmark(path, meta, pairs, images)
