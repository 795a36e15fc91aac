"""Read legacy PMC ``.tar.gz`` packages in memory, refusing anything hostile.

Nothing is extracted to disk. The gzip stream is decompressed through a counting reader, so a
bomb is stopped by its output size or compression ratio before it is read whole, whatever its
headers claim. Any refusal is a StageError (stage ``archive``): the caller records it and moves on.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import tarfile
import zlib

from ray_jobs.config import ArchiveLimits
from ray_jobs.contract.failures import StageError

STAGE = "archive"


class _BoundedStream(io.RawIOBase):
    """Decompressed bytes, counted; raises once the output or the ratio passes its limit."""

    def __init__(self, inner: gzip.GzipFile, compressed_size: int, limits: ArchiveLimits):
        self._inner = inner
        self._compressed = max(compressed_size, 1)
        self._limits = limits
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        try:
            chunk = self._inner.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:
            raise StageError(STAGE, "corrupt_archive", f"gzip stream is broken: {exc}") from None
        n = len(chunk)
        buffer[:n] = chunk
        self.produced += n
        limits = self._limits
        if self.produced > limits.max_total_bytes:
            raise StageError(
                STAGE,
                "archive_too_large",
                f"more than {limits.max_total_bytes} bytes after decompression",
            )
        if (
            self.produced > limits.ratio_grace_bytes
            and self.produced / self._compressed > limits.max_ratio
        ):
            raise StageError(
                STAGE,
                "compression_ratio",
                f"compression ratio above {limits.max_ratio:g} "
                f"({self.produced} bytes out of {self._compressed})",
            )
        return n


def _check_member(member: tarfile.TarInfo, limits: ArchiveLimits) -> None:
    name = member.name
    if member.issym() or member.islnk():
        raise StageError(STAGE, "link_member", f"member {name!r} is a link to {member.linkname!r}")
    if not (member.isfile() or member.isdir()):
        raise StageError(STAGE, "special_member", f"member {name!r} is a device, fifo or other")
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts:
        raise StageError(STAGE, "unsafe_path", f"member path {name!r} escapes the package")
    if member.size > limits.max_member_bytes:
        raise StageError(
            STAGE,
            "member_too_large",
            f"member {name!r} declares {member.size} bytes (limit {limits.max_member_bytes})",
        )


def read_tar_gz(data: bytes, limits: ArchiveLimits) -> dict[str, bytes]:
    """Return ``{member path: bytes}`` for the regular files of a gzip-compressed tar.

    Paths keep their folders (``PMC123/fig1.jpg``); callers index them by base name.
    """
    if data[:2] != b"\x1f\x8b":
        raise StageError(STAGE, "corrupt_archive", "not a gzip file (bad magic number)")
    gz = gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")
    stream = io.BufferedReader(_BoundedStream(gz, len(data), limits), buffer_size=1 << 16)
    files: dict[str, bytes] = {}
    count = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                count += 1
                if count > limits.max_members:
                    raise StageError(
                        STAGE, "too_many_members", f"more than {limits.max_members} members"
                    )
                _check_member(member, limits)
                if member.isdir():
                    continue
                handle = tar.extractfile(member)
                content = handle.read() if handle is not None else b""
                if len(content) != member.size:
                    raise StageError(STAGE, "corrupt_archive", f"member {member.name!r} truncated")
                name = posixpath.normpath(member.name)
                files[name] = content
    except StageError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise StageError(STAGE, "corrupt_archive", f"{type(exc).__name__}: {exc}") from None
    if count == 0:
        raise StageError(STAGE, "corrupt_archive", "the archive holds no members")
    return files
