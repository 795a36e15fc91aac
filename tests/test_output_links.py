"""Links planted in a local output (or a tree being copied) are refused, never followed: a
write, read, listing or upload through one would reach files outside the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_jobs.storage.links import LinkRefused
from ray_jobs.storage.store import LocalStorage
from ray_jobs.training.sync import copy_tree


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("not yours")
    return folder


def test_storage_refuses_a_linked_folder_and_a_linked_file(tmp_path: Path, outside: Path) -> None:
    out = tmp_path / "out"
    storage = LocalStorage(out)
    storage.write_bytes("shards/a.tar", b"a")
    (out / "index").symlink_to(outside, target_is_directory=True)
    (out / "shards" / "b.tar").symlink_to(outside / "secret.txt")

    with pytest.raises(LinkRefused, match="index"):
        storage.write_bytes("index/x.parquet", b"x")
    with pytest.raises(LinkRefused, match=r"b\.tar"):
        storage.read_bytes("shards/b.tar")
    with pytest.raises(LinkRefused):
        storage.exists("shards/b.tar")
    with pytest.raises(LinkRefused):
        list(storage.list("shards"))
    with pytest.raises(LinkRefused):
        list(storage.list(""))
    with pytest.raises(LinkRefused):
        storage.delete("index/secret.txt")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "not yours"


def test_storage_without_links_lists_and_writes_as_before(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "out")
    for key in ("b/2.txt", "a/1.txt", "a-c/3.txt", "a/.hidden"):
        storage.write_bytes(key, key.encode())
    assert list(storage.list("")) == ["a-c/3.txt", "a/1.txt", "b/2.txt"]  # S3's key order
    assert list(storage.list("a")) == ["a/1.txt"]
    assert storage.read_bytes("b/2.txt") == b"b/2.txt"


def test_copy_tree_refuses_links_on_either_side(tmp_path: Path, outside: Path) -> None:
    src = tmp_path / "run"
    (src / "ckpt").mkdir(parents=True)
    (src / "ckpt" / "epoch_1.pt").write_bytes(b"weights")
    (src / "ckpt" / "leak.pt").symlink_to(outside / "secret.txt")
    with pytest.raises(LinkRefused, match=r"leak\.pt"):
        copy_tree(str(src), str(tmp_path / "copy"))
    (src / "ckpt" / "leak.pt").unlink()

    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "ckpt").symlink_to(outside, target_is_directory=True)
    with pytest.raises(LinkRefused, match="ckpt"):
        copy_tree(str(src), str(dst))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert copy_tree(str(src), str(tmp_path / "copy")) == 1
