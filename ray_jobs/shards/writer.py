"""WebDataset shards with their Parquet index and stats, written atomically one shard at a time.

A shard closes at ``samples_per_shard`` samples or before the sample that would take it past
``max_shard_bytes``, and is streamed into a temp file (hashed on the way), then handed to the
storage as a file (a multipart upload on S3 when large), so a writer's memory does not grow
with the shard. Tar metadata is fixed (mtime, owner, mode), so the same samples always give
byte-identical shards and the same sha256. Each shard then gets ``index/<name>.parquet``
(its rows without image bytes, plus shard and member names) and ``stats/<name>.json``;
nothing lists the shard until the part that holds it is committed (see
``ray_jobs.shards.part``).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from typing import IO, Any

import pyarrow as pa

from ray_jobs.contract.records import INDEX_SCHEMA, PanelRecord
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import Storage

SHARDS, INDEX, STATS = "shards", "index", "stats"


def image_extension(data: bytes) -> str:
    return "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "jpg"


def sample_members(
    record: PanelRecord, image: bytes, data: dict[str, Any] | None = None
) -> list[tuple[str, bytes]]:
    """``{key}.jpg``, ``{key}.json``, ``{key}.txt``: the member names WebDataset groups by key.
    ``data`` is the record as a dict, when the caller has it already."""
    meta = json.dumps(data or record.to_json_dict(), ensure_ascii=False).encode()  # field order
    return [
        (f"{record.key}.{image_extension(image)}", image),
        (f"{record.key}.json", meta),
        (f"{record.key}.txt", record.text.encode()),
    ]


def _ustar_template() -> bytes:
    info = tarfile.TarInfo("")
    info.mtime, info.mode = 0, 0o644
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


_USTAR = _ustar_template()  # every member's header but its name, size and checksum


def ustar_header(name: str, size: int) -> bytes:
    """The ustar header ``tarfile`` would write for a member with our fixed metadata; the
    constant fields come from ``tarfile`` itself, once. Names ustar cannot hold (over 100
    bytes, not ASCII) get ``tarfile``'s pax header instead."""
    raw = name.encode("ascii", "replace")
    if len(raw) > 100 or raw != name.encode("utf-8", "replace"):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, 0, 0o644
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    header = bytearray(_USTAR)
    header[0:100] = raw.ljust(100, b"\0")
    header[124:136] = b"%011o\0" % size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def member_bytes(name: str, size: int) -> int:
    """What a member takes in the tar: its header (a pax one for a long name) and padded data."""
    return len(ustar_header(name, size)) + size + (-size % tarfile.BLOCKSIZE)


# the end-of-archive blocks and the padding to a whole record, at most
END_BYTES = 2 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE - tarfile.BLOCKSIZE


class TarBuilder:
    """A tar archive streamed into a temp file, with fixed member metadata (mtime 0, root,
    0644), its sha256 and size kept on the way.

    Headers are built from a template (see :func:`ustar_header`): ``TarFile.addfile`` spends
    more on copying and re-deriving each header than on the bytes of a small member.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="pmcvl-shard-")  # noqa: SIM115 (closed by _flush)
        self.digest = hashlib.sha256()
        self.size = 0

    def _write(self, data: bytes) -> None:
        self.file.write(data)
        self.digest.update(data)
        self.size += len(data)

    def add(self, name: str, data: bytes) -> None:
        self._write(ustar_header(name, len(data)))
        self._write(data)
        if pad := -len(data) % tarfile.BLOCKSIZE:
            self._write(tarfile.NUL * pad)

    def close(self) -> IO[bytes]:
        """The end-of-archive blocks, padded to a whole record as ``tarfile`` does; the file,
        rewound for reading (the caller closes it, which deletes it)."""
        self._write(tarfile.NUL * (2 * tarfile.BLOCKSIZE))
        if pad := -self.size % tarfile.RECORDSIZE:
            self._write(tarfile.NUL * pad)
        self.file.flush()
        self.file.seek(0)
        return self.file


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
    """The shards of one split of one part: ``add`` samples (in key order), then ``close``.

    Shards are named after the part (``shards/train-000012-0003.tar``): no counter is shared
    between writers, so any number of them write at once and a name never depends on timing.
    """

    def __init__(
        self,
        storage: Storage,
        split: str,
        samples_per_shard: int,
        part: str,
        run_id: str,
        max_shard_bytes: int = 2**30,
    ):
        self.storage = storage
        self.split = split
        self.samples_per_shard = samples_per_shard
        self.max_shard_bytes = max_shard_bytes
        self.part = part
        self.run_id = run_id
        self.written: list[ShardInfo] = []
        self._records: list[PanelRecord] = []
        self._rows: list[dict[str, Any]] = []  # index rows, without the shard name yet
        self._tar: TarBuilder | None = None

    def add(self, record: PanelRecord, image: bytes) -> None:
        data = record.to_json_dict()
        members = sample_members(record, image, data)
        size = sum(member_bytes(name, len(content)) for name, content in members)
        if self._tar is not None and self._tar.size + size + END_BYTES > self.max_shard_bytes:
            self._flush()
        if self._tar is None:
            self._tar = TarBuilder()
        for name, content in members:
            self._tar.add(name, content)
        self._records.append(record)
        self._rows.append({**data, "member": members[0][0]})
        if len(self._records) >= self.samples_per_shard:
            self._flush()

    def _flush(self) -> None:
        if self._tar is None or not self._records:
            return
        tar = self._tar
        stem = f"{self.split}-{self.part}-{len(self.written):04d}"
        with tar.close() as file:
            info = ShardInfo(
                name=f"{SHARDS}/{stem}.tar",
                index=f"{INDEX}/{stem}.parquet",
                stats=f"{STATS}/{stem}.json",
                split=self.split,
                samples=len(self._records),
                bytes=tar.size,
                sha256=tar.digest.hexdigest(),
                run_id=self.run_id,
                part=self.part,
            )
            self.storage.write_file(info.name, file)
        for row in self._rows:
            row["shard"] = info.name
        write_parquet(
            self.storage, info.index, pa.Table.from_pylist(self._rows, schema=INDEX_SCHEMA)
        )
        stats = {**shard_stats(self._records), "shard": info.name, "sha256": info.sha256}
        self.storage.write_bytes(info.stats, json.dumps(stats, indent=2).encode())
        self.written.append(info)
        self._records, self._rows, self._tar = [], [], None

    def close(self) -> list[ShardInfo]:
        """Flush the open shard; the shards this writer wrote, in order."""
        self._flush()
        return self.written
