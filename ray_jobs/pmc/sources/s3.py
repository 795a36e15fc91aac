"""The PMC Cloud Service layout on S3 (current since 2026-04).

One prefix per article version, ``PMC123.1/``, holding ``PMC123.1.xml``, ``PMC123.1.json`` and
the media; ``metadata/PMC123.1.json`` copies the JSON. Articles are listed from ``metadata/``
(one small object per version, whose ETag says when it changed) or from the daily S3 inventory,
which avoids listing millions of keys. Reads are anonymous by default; the endpoint is
configurable, so the same code reads a mirror or a test server.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import posixpath
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlparse

from botocore.exceptions import BotoCoreError, ClientError

from ray_jobs.config import ArchiveLimits, SourceSettings
from ray_jobs.contract.failures import StageError
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.records import ArticlePackage
from ray_jobs.pmc.sources.base import FETCH, check_retracted, split_pmc_name
from ray_jobs.storage.store import s3_client

METADATA_PREFIX = "metadata/"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".tif", ".tiff", ".webp", ".bmp")


def _etag(raw: str | None) -> str:
    return (raw or "").strip().strip('"')


class PmcS3Source:
    name = "s3"

    def __init__(self, settings: SourceSettings, limits: ArchiveLimits):
        self.settings = settings
        self.limits = limits
        self.bucket = settings.bucket
        self.client = s3_client(settings.s3)

    # --- listing ---------------------------------------------------------------------------

    def refs(self) -> Iterator[ArticleRef]:
        listing = self._from_inventory() if self.settings.listing == "inventory" else self._listed()
        for count, ref in enumerate(listing, start=1):
            yield ref
            if self.settings.limit and count >= self.settings.limit:
                return

    def _ref(self, key: str, etag: str) -> ArticleRef | None:
        name = posixpath.basename(key)
        if not name.endswith(".json"):
            return None
        stem = name[: -len(".json")]
        if self.settings.prefix and not stem.startswith(self.settings.prefix):
            return None
        pmcid, version = split_pmc_name(stem)
        if pmcid is None:
            return None
        return ArticleRef(
            pmcid=pmcid, version=version, etag=_etag(etag), source=self.name, location=stem + "/"
        )

    def _listed(self) -> Iterator[ArticleRef]:
        paginator = self.client.get_paginator("list_objects_v2")
        prefix = METADATA_PREFIX + self.settings.prefix
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                ref = self._ref(obj["Key"], obj.get("ETag", ""))
                if ref is not None:
                    yield ref

    def latest_inventory_manifest(self) -> str:
        bucket = self.settings.inventory_bucket or self.bucket
        paginator = self.client.get_paginator("list_objects_v2")
        manifests = [
            obj["Key"]
            for page in paginator.paginate(Bucket=bucket, Prefix=self.settings.inventory_prefix)
            for obj in page.get("Contents", [])
            if obj["Key"].endswith("/manifest.json")
        ]
        if not manifests:
            raise FileNotFoundError(
                f"no inventory manifest under s3://{bucket}/{self.settings.inventory_prefix}"
            )
        return max(manifests)  # inventory folders are named by date, so the last sorts last

    def _from_inventory(self) -> Iterator[ArticleRef]:
        """Rows of the newest inventory: the CSV columns are named by the manifest's fileSchema."""
        bucket = self.settings.inventory_bucket or self.bucket
        manifest_key = self.latest_inventory_manifest()
        manifest = json.loads(self._get(bucket, manifest_key))
        columns = [c.strip() for c in manifest.get("fileSchema", "").split(",")]
        if "Key" not in columns:
            raise ValueError(f"{manifest_key}: fileSchema {columns} has no Key column")
        key_col = columns.index("Key")
        etag_col = columns.index("ETag") if "ETag" in columns else None
        for entry in manifest.get("files", []):
            data = self._get(bucket, entry["key"])
            expected = entry.get("MD5checksum")
            if expected and hashlib.md5(data, usedforsecurity=False).hexdigest() != expected:
                raise ValueError(f"inventory file {entry['key']} fails its MD5 checksum")
            with gzip.open(io.BytesIO(data), "rt", encoding="utf-8", newline="") as rows:
                for row in csv.reader(rows):
                    if len(row) <= key_col:
                        continue
                    key = unquote(row[key_col])
                    if not key.startswith(METADATA_PREFIX):
                        continue
                    ref = self._ref(key, row[etag_col] if etag_col is not None else "")
                    if ref is not None:
                        yield ref

    # --- fetching --------------------------------------------------------------------------

    def _get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def _fetch_object(self, key: str, *, limit: int) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            body = response["Body"]
            if response.get("ContentLength", 0) > limit:  # refuse before reading the body
                body.close()
                raise StageError(FETCH, "member_too_large", f"{key}: {response['ContentLength']} B")
            return body.read()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise StageError(FETCH, "missing_object", f"s3://{self.bucket}/{key}") from None
            raise StageError(FETCH, "s3_error", f"{key}: {exc}", retryable=True) from None
        except BotoCoreError as exc:
            raise StageError(FETCH, "s3_error", f"{key}: {exc}", retryable=True) from None

    def _too_many(self, prefix: str, found: list) -> None:
        """An article names at most ``max_members`` media, as an archive holds at most that
        many members: refused before a single one is fetched."""
        if len(found) > self.limits.max_members:
            raise StageError(
                FETCH,
                "too_many_members",
                f"{prefix}: more than {self.limits.max_members} media",
            )

    def _media_keys(self, prefix: str, metadata: dict) -> list[tuple[str, str | None]]:
        """(key, md5 or None) of each image the JSON names; a listing when it names none."""
        found: list[tuple[str, str | None]] = []
        urls = metadata.get("media_urls") or []
        self._too_many(prefix, urls if isinstance(urls, list) else [])
        for url in urls:
            parsed = urlparse(url)
            name = posixpath.basename(unquote(parsed.path))
            md5 = (parse_qs(parsed.query).get("md5") or [None])[0]
            found.append((prefix + name, md5))
        if not found and "media_urls" not in metadata:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for obj in page.get("Contents", []):
                    found.append((obj["Key"], None))
                self._too_many(prefix, found)
        # a JSON naming one file many times costs one fetch of it
        return list(dict.fromkeys((k, m) for k, m in found if k.lower().endswith(IMAGE_SUFFIXES)))

    def fetch(self, ref: ArticleRef) -> ArticlePackage:
        prefix = ref.location
        stem = prefix.rstrip("/")
        try:
            metadata = json.loads(self._fetch_object(f"{prefix}{stem}.json", limit=2**20))
        except ValueError as exc:
            raise StageError(FETCH, "bad_metadata", f"{stem}.json: {exc}") from None
        check_retracted(ref, metadata)
        xml = self._fetch_object(f"{prefix}{stem}.xml", limit=self.limits.max_xml_bytes)
        media: dict[str, bytes] = {}
        total = 0
        for key, md5 in self._media_keys(prefix, metadata):
            data = self._fetch_object(key, limit=self.limits.max_member_bytes)
            if md5 and self.settings.verify_md5:
                actual = hashlib.md5(data, usedforsecurity=False).hexdigest()
                if actual != md5:
                    raise StageError(
                        FETCH, "md5_mismatch", f"{key}: md5 {actual} != {md5}", retryable=True
                    )
            total += len(data)
            if total > self.limits.max_total_bytes:
                raise StageError(FETCH, "archive_too_large", f"{stem}: media exceed the limit")
            media[posixpath.basename(key)] = data
        return ArticlePackage(
            ref=ref, xml=xml, xml_name=f"{stem}.xml", media=media, metadata=metadata
        )
