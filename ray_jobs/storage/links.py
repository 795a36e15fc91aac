"""No links in a local output: a symlink planted in it must not send a write, a read or an
upload to a file outside.

Storage keys are checked for ``..`` already; a link is the other way out of a folder. Every
path the local storage touches is checked component by component from its root (an ``lstat``
each), and tree walks refuse a link wherever they meet one, instead of skipping it silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


class LinkRefused(ValueError):
    """A symlink inside a folder that pmcvl reads or writes as data."""

    def __init__(self, path: Path, root: Path):
        super().__init__(
            f"{path} is a symbolic link inside {root}: refused (an output folder holds plain "
            "files only, so nothing is read or written through a link)"
        )


def check_path(root: Path, path: Path) -> Path:
    """``path`` (under ``root``) when no existing component of it below ``root`` is a link."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            raise LinkRefused(current, root)
        if not current.exists():
            break  # what does not exist yet cannot be a link; the write creates plain folders
    return path


def files(root: Path) -> Iterator[Path]:
    """Regular files under ``root``, sorted, not following anything; a link found is an error."""
    for folder, dirs, names in os.walk(root):
        base = Path(folder)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                raise LinkRefused(base / name, root)
        dirs.sort()
        for name in sorted(names):
            path = base / name
            if path.is_symlink():
                raise LinkRefused(path, root)
            if path.is_file():
                yield path
