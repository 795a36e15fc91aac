"""A content-addressed cache of successful LLM answers, stored with the run's output.

The key is a hash of the prompt version and the exact request body (model, messages with the
image, schema, sampling settings), so a rerun pays for nothing twice, while a new prompt,
model, image or setting is a new key. Only successes are written: a failed call leaves no entry
and is tried again on the next run. A corrupt entry is a miss, never an error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

PREFIX = "llm_cache"


@dataclass
class CachedAnswer:
    content: Any  # the parsed JSON answer, or the text for an unconstrained call
    prompt_tokens: int
    completion_tokens: int
    model: str


def cache_key(prompt_version: str, body: bytes) -> str:
    digest = hashlib.sha256(prompt_version.encode() + b"\0")
    digest.update(body)
    return digest.hexdigest()


def entry_path(key: str) -> str:
    return f"{PREFIX}/{key[:2]}/{key}.json"


class LLMCache:
    """Reads and writes entries in a thread, so a slow store (S3) never blocks the event loop."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def _get(self, key: str) -> CachedAnswer | None:
        try:
            data = json.loads(self.storage.read_bytes(entry_path(key)))
            return CachedAnswer(**{k: data[k] for k in CachedAnswer.__dataclass_fields__})
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a corrupt LLM cache entry %s: %s", key, exc)
            return None
        except Exception as exc:  # the store is unreachable: ask the server instead
            log.warning("could not read LLM cache entry %s: %s", key, exc)
            return None

    def _put(self, key: str, answer: CachedAnswer, meta: dict[str, Any]) -> None:
        blob = json.dumps({**meta, **asdict(answer)}, ensure_ascii=False, sort_keys=True)
        self.storage.write_bytes(entry_path(key), blob.encode())

    async def get(self, key: str) -> CachedAnswer | None:
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, answer: CachedAnswer, **meta: Any) -> None:
        """Best effort: an answer that cannot be stored is still returned to the caller."""
        try:
            await asyncio.to_thread(self._put, key, answer, {"key": key, **meta})
        except Exception as exc:  # the store is down: the caption is still good
            log.warning("could not write LLM cache entry %s: %s", key, exc)
