"""Choose which caption open_clip trains on, without a second set of shards.

open_clip 3.3's webdataset loader always reads the ``txt`` member (``wds.rename(text="txt")``)
and has no caption-key option for webdataset (``--csv-caption-key`` is CSV only). Every sample
of ours also carries its captions in the ``json`` member (``subcaption``, ``long_caption``,
``caption``), so this module swaps the loader's sample filter, the first stage that sees the raw
members, for one that copies the chosen JSON field into ``txt``. open_clip's files stay as
installed; the swap is made in the launcher's process before the trainer builds its pipeline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT = "txt"  # the member the shard writer fills; no swap needed
IMAGE_EXTS = ("png", "jpg", "jpeg", "webp")


@dataclass(frozen=True)
class JsonCaptionFilter:
    """open_clip's ``filter_no_caption_or_no_image``, taking the caption from ``json`` fields.

    ``fields`` are tried in order, the first non-empty one wins (``long_caption;subcaption``
    falls back to the sub-caption where no long caption was written); a sample with none of
    them, or no image, is dropped, as open_clip drops one without ``txt``. A class instance so
    spawned dataloader workers can unpickle it.
    """

    fields: tuple[str, ...]

    def __call__(self, sample: dict[str, Any]) -> bool:
        if not any(ext in sample for ext in IMAGE_EXTS):
            return False
        text = caption_from_json(sample.get("json"), self.fields)
        if text is None:
            return False
        sample["txt"] = text.encode("utf-8")
        return True


def parse_caption_key(caption_key: str) -> tuple[str, ...]:
    fields = tuple(f.strip() for f in caption_key.split(";") if f.strip())
    if not fields:
        raise ValueError(f"empty caption key {caption_key!r}")
    return fields


def caption_from_json(raw: bytes | str | None, fields: tuple[str, ...]) -> str | None:
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    for name in fields:
        value = record.get(name) if isinstance(record, dict) else None
        if isinstance(value, str) and value.strip():
            return value
    return None


def install_caption_key(caption_key: str = DEFAULT) -> None:
    """Make open_clip's webdataset loader (this process) train on ``caption_key``.

    ``txt`` keeps open_clip's behaviour; anything else names ``json`` fields, ``;``-separated.
    """
    from open_clip_train import data

    if not hasattr(data, "filter_no_caption_or_no_image"):
        raise RuntimeError(
            "open_clip_train.data has no filter_no_caption_or_no_image: this open_clip version "
            "is not the one the caption-key swap was written for (3.3)"
        )
    if caption_key == DEFAULT:
        return
    data.filter_no_caption_or_no_image = JsonCaptionFilter(parse_caption_key(caption_key))
