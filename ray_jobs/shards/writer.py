"""WebDataset shards with their Parquet index and stats, written atomically one shard at a time.

A shard is assembled in memory (a fixed number of samples, so its size is bounded) with fixed
tar metadata (mtime, owner, mode), so the same samples always give byte-identical shards and
the same sha256. Each shard then gets ``index/<name>.parquet`` (its rows without image bytes,
plus shard and member names) and ``stats/<name>.json``; nothing lists the shard until the
part that holds it is committed (see ``ray_jobs.jobs.build_dataset``).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections import Counter
from dataclasses import asdict, dataclass

import pyarrow as pa

from ray_jobs.pmc.ledger import write_parquet
from ray_jobs.shards.records import INDEX_SCHEMA, PanelRecord
from ray_jobs.shards.storage import Storage

SHARDS, INDEX, STATS = "shards", "index", "stats"


def image_extension(data: bytes) -> str:
    return "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "jpg"


def sample_members(record: PanelRecord, image: bytes) -> list[tuple[str, bytes]]:
    """``{key}.jpg``, ``{key}.json``, ``{key}.txt``: the member names WebDataset groups by key."""
    meta = json.dumps(record.to_json_dict(), ensure_ascii=False, sort_keys=True).encode()
    return [
        (f"{record.key}.{image_extension(image)}", image),
        (f"{record.key}.json", meta),
        (f"{record.key}.txt", record.text.encode()),
    ]


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


@dataclass
class ShardInfo:
    name: str  # shards/train-000000.tar
    index: str
    stats: str
    split: str
    samples: int
    bytes: int
    sha256: str
    run_id: str
    part: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def shard_stats(records: list[PanelRecord]) -> dict[str, object]:
    def tally(values: list[object]) -> dict[str, int]:
        return dict(sorted(Counter(str(v) for v in values).items()))

    return {
        "samples": len(records),
        "articles": len({r.pmcid for r in records}),
        "figures": len({r.figure_key for r in records}),
        "enriched": sum(r.long_caption is not None for r in records),
        "modality_l1": tally([r.modality_l1 for r in records]),
        "modality": tally([r.modality for r in records]),
        "alignment": tally([r.alignment for r in records]),
        "license": tally([r.license for r in records]),
        "tokens_text_mean": round(
            sum(r.tokens_long_caption or r.tokens_subcaption for r in records)
            / max(1, len(records)),
            2,
        ),
    }


class ShardWriter:
    """Numbered shards of one split: ``add`` samples, ``flush`` the open shard."""

    def __init__(
        self, storage: Storage, split: str, samples_per_shard: int, next_index: int, run_id: str
    ):
        self.storage = storage
        self.split = split
        self.samples_per_shard = samples_per_shard
        self.next_index = next_index
        self.run_id = run_id
        self.part = ""
        self._records: list[PanelRecord] = []
        self._images: list[str] = []  # each sample's image member name
        self._buffer = io.BytesIO()
        self._tar: tarfile.TarFile | None = None

    def add(self, record: PanelRecord, image: bytes) -> ShardInfo | None:
        """Add one sample; returns the shard it completed, if it completed one."""
        if self._tar is None:
            self._buffer = io.BytesIO()
            self._tar = tarfile.open(  # noqa: SIM115 (closed by flush, once the shard is full)
                fileobj=self._buffer, mode="w", format=tarfile.PAX_FORMAT
            )
        members = sample_members(record, image)
        for name, data in members:
            add_member(self._tar, name, data)
        self._records.append(record)
        self._images.append(members[0][0])
        return self.flush() if len(self._records) >= self.samples_per_shard else None

    def flush(self) -> ShardInfo | None:
        if self._tar is None or not self._records:
            return None
        self._tar.close()
        data = self._buffer.getvalue()
        stem = f"{self.split}-{self.next_index:06d}"
        info = ShardInfo(
            name=f"{SHARDS}/{stem}.tar",
            index=f"{INDEX}/{stem}.parquet",
            stats=f"{STATS}/{stem}.json",
            split=self.split,
            samples=len(self._records),
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            run_id=self.run_id,
            part=self.part,
        )
        self.storage.write_bytes(info.name, data)
        rows = [
            {**r.to_json_dict(), "shard": info.name, "member": member}
            for r, member in zip(self._records, self._images, strict=True)
        ]
        write_parquet(self.storage, info.index, pa.Table.from_pylist(rows, schema=INDEX_SCHEMA))
        stats = {**shard_stats(self._records), "shard": info.name, "sha256": info.sha256}
        self.storage.write_bytes(info.stats, json.dumps(stats, indent=2).encode())
        self.next_index += 1
        self._records, self._images, self._tar = [], [], None
        return info
