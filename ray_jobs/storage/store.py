"""Where a run's outputs live: a local folder or an S3 prefix, behind one small interface.

Keys are relative, ``/``-separated and checked: nothing can be written outside the root.
Writes are atomic (a temp file renamed into place locally; a single PUT, or a multipart upload
completed at once, on S3), so a reader never sees half an object. A local output holds no
links: one planted there is refused, never followed (``links``). ``create`` and ``replace``
are conditional writes (create only if absent, replace only if unchanged since read: S3's
``If-None-Match`` / ``If-Match``; locally a hard link and a file lock), what a lease on the
output needs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlparse

import boto3
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from ray_jobs.config import OutputS3Settings, S3Settings
from ray_jobs.storage import links

# a conditional PUT that lost: taken (If-None-Match), changed or gone (If-Match)
_CONDITION_FAILED = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey")


def s3_client(settings: S3Settings):  # type: ignore[no-untyped-def]
    """A boto3 S3 client; unsigned (anonymous) when the settings say so, as PMC's bucket allows."""
    config = Config(
        signature_version=UNSIGNED if settings.anonymous else None,
        max_pool_connections=settings.max_pool_connections,
        retries={"max_attempts": 5, "mode": "adaptive"},
    )
    return boto3.client(
        "s3", endpoint_url=settings.endpoint_url, region_name=settings.region, config=config
    )


def check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or "\\" in key or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"unsafe storage key {key!r}")
    return key


class Storage(Protocol):
    uri: str

    def read_bytes(self, key: str) -> bytes: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...
    # a file's content from its current position: large objects without a copy in memory
    def write_file(self, key: str, source: BinaryIO) -> None: ...
    def exists(self, key: str) -> bool: ...
    def list(self, prefix: str) -> Iterator[str]: ...
    def delete(self, key: str) -> None: ...
    # conditional writes return the new version, or None when the condition failed
    def create(self, key: str, data: bytes) -> str | None: ...
    def read_versioned(self, key: str) -> tuple[bytes, str]: ...
    def replace(self, key: str, data: bytes, version: str) -> str | None: ...


class LocalStorage:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        return links.check_path(self.root, self.root / check_key(key))

    def read_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def _staged(self, path: Path, data: bytes | BinaryIO) -> str:
        """``data`` in a synced temp file next to ``path``; the caller moves it into place."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                if isinstance(data, bytes):
                    handle.write(data)
                else:
                    shutil.copyfileobj(data, handle, 2**20)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return tmp

    def write_bytes(self, key: str, data: bytes) -> None:
        self._write(key, data)

    def write_file(self, key: str, source: BinaryIO) -> None:
        self._write(key, source)

    def _write(self, key: str, data: bytes | BinaryIO) -> None:
        path = self._path(key)
        tmp = self._staged(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def create(self, key: str, data: bytes) -> str | None:
        """Write ``key`` only if it does not exist (a hard link fails if the name is taken)."""
        path = self._path(key)
        tmp = self._staged(path, data)
        try:
            os.link(tmp, path)
            return hashlib.sha256(data).hexdigest()
        except FileExistsError:
            return None
        finally:
            Path(tmp).unlink(missing_ok=True)

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        data = self._path(key).read_bytes()
        return data, hashlib.sha256(data).hexdigest()

    def replace(self, key: str, data: bytes, version: str) -> str | None:
        """Overwrite ``key`` only if its content is still the one ``version`` was read from."""
        path = self._path(key)
        with open(path.with_name(f".{path.name}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # replacers on this machine take turns
            try:
                current = hashlib.sha256(path.read_bytes()).hexdigest()
            except FileNotFoundError:
                return None
            if current != version:
                return None
            self.write_bytes(key, data)
            return hashlib.sha256(data).hexdigest()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> Iterator[str]:
        base = links.check_path(self.root, self.root / prefix) if prefix else self.root
        if not base.is_dir():
            return
        found = (p.relative_to(self.root).as_posix() for p in links.files(base))
        yield from sorted(k for k in found if not k.rsplit("/", 1)[-1].startswith("."))

    def delete(self, key: str) -> None:
        """Remove ``key``, and folders it leaves empty (as on S3, where a prefix with no
        objects is gone): a part's staging folder does not outlive the part."""
        path = self._path(key)
        path.unlink(missing_ok=True)
        for folder in path.parents:
            if folder == self.root or self.root not in folder.parents:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or already gone): its parents are not empty either
                break


class S3Storage:
    def __init__(self, bucket: str, prefix: str, settings: S3Settings):
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.client = s3_client(settings)
        out = (
            settings
            if isinstance(settings, OutputS3Settings)
            else OutputS3Settings.model_validate(settings.model_dump())
        )
        self.transfer = TransferConfig(
            multipart_threshold=out.multipart_threshold_bytes,
            multipart_chunksize=out.multipart_part_bytes,
            max_concurrency=out.multipart_concurrency,
        )

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def read_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"{self.uri}/{key}") from None
            raise

    def write_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def write_file(self, key: str, source: BinaryIO) -> None:
        """A single PUT under the threshold, else a multipart upload streamed from ``source``;
        the object appears only when the upload completes (an aborted one leaves none)."""
        self.client.upload_fileobj(source, self.bucket, self._key(key), Config=self.transfer)

    def _conditional_put(self, key: str, data: bytes, **condition: str) -> str | None:
        try:
            put = self.client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, **condition
            )
            return put["ETag"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _CONDITION_FAILED or status in (404, 409, 412):
                return None
            raise

    def create(self, key: str, data: bytes) -> str | None:
        return self._conditional_put(key, data, IfNoneMatch="*")

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"{self.uri}/{key}") from None
            raise
        return got["Body"].read(), got["ETag"]

    def replace(self, key: str, data: bytes, version: str) -> str | None:
        return self._conditional_put(key, data, IfMatch=version)

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise

    def list(self, prefix: str) -> Iterator[str]:
        full = self._key(prefix.rstrip("/")) + "/" if prefix else (self.prefix + "/").lstrip("/")
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
            for obj in page.get("Contents", []):
                yield obj["Key"][strip:]

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))


def open_storage(uri: str, s3: S3Settings | None = None) -> Storage:
    """``s3://bucket/prefix`` → S3Storage; anything else is a local folder."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return S3Storage(parsed.netloc, parsed.path, s3 or OutputS3Settings())
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"unsupported output URI scheme {parsed.scheme!r} in {uri!r}")
    return LocalStorage(parsed.path if parsed.scheme == "file" else uri)
