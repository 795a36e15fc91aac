"""Writes the dataset card and the Croissant file beside the manifest, through the storage.

Both are rendered from the manifest about to be written and the run's facts. Index and
tombstone files are immutable once committed, so their checksums are taken once: a file the
previous ``croissant.json`` lists keeps the digest found there, and only new files are read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from ray_jobs.shards import card, croissant
from ray_jobs.shards.facts import DatasetFacts
from ray_jobs.storage.store import Storage


def known_digests(storage: Storage) -> dict[str, tuple[int, str]]:
    """File name → (bytes, sha256) from the Croissant file already published, if any."""
    if not storage.exists(croissant.CROISSANT):
        return {}
    try:
        doc = json.loads(storage.read_bytes(croissant.CROISSANT))
    except ValueError:
        return {}
    out = {}
    for node in doc.get("distribution", []):
        if node.get("@type") == "cr:FileObject" and "sha256" in node:
            size = int(str(node.get("contentSize", "0")).split()[0])
            out[node["contentUrl"]] = (size, node["sha256"])
    return out


def digests(storage: Storage, names: Iterable[str]) -> dict[str, tuple[int, str]]:
    known = known_digests(storage)
    out = {}
    for name in names:
        if name not in known:
            data = storage.read_bytes(name)
            known[name] = (len(data), hashlib.sha256(data).hexdigest())
        out[name] = known[name]
    return out


def license_samples(storage: Storage, manifest: dict[str, Any]) -> dict[str, int]:
    """Samples per license: the manifest's ``licenses`` when the build counted them, else the
    shards' stats (these count superseded samples too: the files' view)."""
    if manifest.get("licenses") is not None:
        return card.license_counts(manifest["licenses"])
    tally: dict[str, int] = {}
    for shard in manifest["shards"]:
        stats = json.loads(storage.read_bytes(shard["stats"]))
        for code, n in stats.get("license", {}).items():
            code = "unknown" if code in ("None", "") else code
            tally[code] = tally.get(code, 0) + n
    return card.license_counts(tally)


def write_card_files(storage: Storage, manifest: dict[str, Any], facts: DatasetFacts) -> None:
    """``README.md`` and ``croissant.json`` for ``manifest``."""
    names = [s["index"] for s in manifest["shards"]]
    names += list((manifest.get("superseded") or {}).get("files", []))
    licenses = license_samples(storage, manifest)
    doc = croissant.render(manifest, facts, list(licenses), digests(storage, names))
    storage.write_bytes(croissant.CROISSANT, json.dumps(doc, indent=2, ensure_ascii=False).encode())
    storage.write_bytes(card.CARD, card.render(manifest, facts, licenses).encode())
