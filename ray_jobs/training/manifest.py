"""The training shard list and sample count for a split, read from a run's ``manifest.json``.

open_clip's webdataset loader needs ``--train-num-samples`` (it cannot count a tar stream) and
loops forever on a shard path that does not exist, so both come from the manifest and every
path is checked here, before the trainer starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class ShardSelection:
    urls: tuple[str, ...]  # absolute local paths, in manifest order
    num_samples: int
    excluded: tuple[str, ...] = ()  # manifest names left out

    def joined(self) -> str:
        """The ``::``-joined form open_clip's ``--train-data`` accepts."""
        return "::".join(self.urls)


def select_shards(
    manifest_path: Path | str, split: str = "train", exclude: Iterable[str] = ()
) -> ShardSelection:
    """Shards of ``split`` listed in the manifest, less those in ``exclude``.

    ``exclude`` holds shard names as the manifest writes them (``shards/train-000000.tar``) or
    their file names (``train-000000.tar``). Paths resolve against the manifest's folder.
    """
    manifest_path = Path(manifest_path)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    excluded_names = set(exclude)
    root = manifest_path.resolve().parent
    urls: list[str] = []
    left_out: list[str] = []
    total = 0
    for shard in manifest.get("shards", []):
        if shard.get("split") != split:
            continue
        name = shard["name"]
        if name in excluded_names or PurePosixPath(name).name in excluded_names:
            left_out.append(name)
            continue
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"manifest {manifest_path} lists {name}, not found at {path}")
        urls.append(str(path))
        total += int(shard.get("current", shard["samples"]))  # less superseded samples
    if not urls:
        raise ValueError(f"manifest {manifest_path}: no {split!r} shards left to train on")
    return ShardSelection(urls=tuple(urls), num_samples=total, excluded=tuple(left_out))
