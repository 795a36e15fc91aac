"""The benchmark builder, and the leakage test: no benchmark article reaches the trainer.

The dataset here is written by the production shard writer (``ShardWriter``, ``build_manifest``)
from real biomedical figures (``shared/data/medicat_figures``), without Ray: eight articles
whose panels straddle shards, one undated, one only in ``val``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import SHARED_DATA
from PIL import Image

from ray_jobs.benchmark.build import build_benchmark
from ray_jobs.benchmark.data import load_benchmark
from ray_jobs.benchmark.select import pick_caption, recency_order, select_pairs
from ray_jobs.contract.records import PanelRecord, figure_key, panel_key
from ray_jobs.shards.manifest import build_manifest, write_json
from ray_jobs.shards.writer import ShardWriter
from ray_jobs.storage.store import LocalStorage
from ray_jobs.training.exclusion import (
    ExcludeArticles,
    HasCaptionAndImage,
    article_id,
    count_kept,
    read_excluded,
)
from ray_jobs.training.manifest import select_shards

FIGURES = SHARED_DATA / "medicat_figures"
# pmcid → (year, panels, index of the panel given a long caption or None)
ARTICLES = {
    "PMC1001": (2018, 2, None),
    "PMC1002": (2019, 3, None),
    "PMC1003": (2021, 2, None),
    "PMC1004": (2021, 2, None),  # ties 1003 on year: the higher PMCID is newer
    "PMC1005": (2022, 3, 2),  # its long-captioned panel is the one picked
    "PMC1006": (2023, 2, None),
    "PMC1007": (None, 2, None),  # undated: last
}
VAL_ARTICLE = "PMC1008"  # the newest, but in val: not a train-split benchmark candidate


def _figures() -> list[tuple[bytes, str]]:
    rows = [json.loads(line) for line in (FIGURES / "sample.jsonl").read_text().splitlines()]
    out = []
    for row in rows:
        path = FIGURES / f"{row['pdf_hash']}_{row['fig_uri']}"
        if path.is_file():
            with Image.open(path) as img:
                img = img.convert("RGB")
                img.thumbnail((96, 96))
                buf = io.BytesIO()
                img.save(buf, format="JPEG", quality=90)
            out.append((buf.getvalue(), row["s2_caption"]))
    assert len(out) >= 10
    return out


def _record(pmcid: str, year: int | None, panel: int, caption: str, long: bool) -> PanelRecord:
    fig = figure_key(pmcid, 1, "F1", 0)
    number = pmcid.removeprefix("PMC")
    subcaption = f"article {number} panel {panel}. {caption}"
    long_caption = (
        f"article {number} panel {panel} described at length. {caption}" if long else None
    )
    return PanelRecord(
        key=panel_key(fig, panel), figure_key=fig, pmcid=pmcid, pmc_version=1, pmid=None,
        doi=None, journal="J", year=year, license="CC BY", license_url=None, figure_id="F1",
        figure_label="Figure 1", caption=caption, subcaption=subcaption, panel_index=panel,
        n_panels=3, panel_label=None, alignment="single", alignment_confidence=1.0,
        panel_bbox=[0, 0, 96, 96], panel_status="ok", detector_score=0.9, detector_version="t",
        modality="xray" if panel % 2 else "histopathology", long_caption=long_caption,
        text=long_caption or subcaption,
    )  # fmt: skip


def make_dataset(root: Path, samples_per_shard: int = 6) -> Path:
    """``root/manifest.json`` + shards + index, as the build job writes them; returns root."""
    figures = _figures()
    storage = LocalStorage(root)
    records = []
    for pmcid, (year, panels, long_panel) in ARTICLES.items():
        for p in range(panels):
            records.append(_record(pmcid, year, p, "", p == long_panel))
    # interleave articles so one article's panels land in different shards
    records.sort(key=lambda r: (r.panel_index, r.pmcid))
    writer = ShardWriter(storage, "train", samples_per_shard, "000000", "run-test")
    for i, rec in enumerate(records):
        image, caption = figures[i % len(figures)]
        rec.caption = caption
        rec.subcaption += caption
        rec.text += caption
        if rec.long_caption:
            rec.long_caption += caption
        rec.sha256 = hashlib.sha256(image).hexdigest()
        writer.add(rec, image)
    shards = [info.to_dict() for info in writer.close()]
    val = ShardWriter(storage, "val", samples_per_shard, "000000", "run-test")
    for p in range(2):
        image, caption = figures[p]
        rec = _record(VAL_ARTICLE, 2025, p, caption, False)
        rec.sha256 = hashlib.sha256(image).hexdigest()
        val.add(rec, image)
    shards += [info.to_dict() for info in val.close()]
    part = {"shards": shards, "counts": {"kept": len(records) + 2}, "run_id": "run-test"}
    write_json(storage, "manifest.json", build_manifest([part]))
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("dataset"))


@pytest.fixture(scope="module")
def bench(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "benchmark"
    build_benchmark(str(dataset), str(out), size=3, split="train")
    return out


# --- selection (pure) --------------------------------------------------------------------------


def test_selection_order_and_caption_choice() -> None:
    assert article_id(" pmc12 ") == "PMC12" and article_id(None) is None and article_id("") is None
    assert pick_caption({"long_caption": " ", "subcaption": "A: CT", "text": "t"}) == (
        "A: CT",
        "subcaption",
    )
    assert pick_caption({"long_caption": "L", "subcaption": "S"}) == ("L", "long_caption")
    assert pick_caption({"text": ""}) is None
    order = sorted(
        [("PMC9", 2020), ("PMC10", 2020), ("PMC1", 2024), ("PMC2", None)],
        key=lambda a: recency_order(*a),
    )
    assert order == [("PMC1", 2024), ("PMC10", 2020), ("PMC9", 2020), ("PMC2", None)]

    rows = [
        {"key": "b", "pmcid": "PMC5", "year": 2020, "subcaption": "s", "member": "b.jpg"},
        {"key": "a", "pmcid": "PMC5", "year": 2021, "subcaption": "s", "member": "a.jpg"},
        {"key": "c", "pmcid": "PMC5", "year": 2020, "long_caption": "L", "member": "c.jpg"},
        {"key": "d", "pmcid": None, "year": 2030, "subcaption": "s", "member": "d.jpg"},
        {"key": "e", "pmcid": "PMC6", "year": 2030, "subcaption": "", "member": "e.jpg"},
        {"key": "f", "pmcid": "PMC7", "year": 2019, "subcaption": "s", "member": None},
    ]
    pairs = select_pairs(rows, 10)
    assert [(p.article, p.key, p.caption_source, p.year) for p in pairs] == [
        ("PMC5", "c", "long_caption", 2021)  # an article's latest year; its best caption
    ]
    with pytest.raises(ValueError):
        select_pairs(rows, 0)


# --- the built benchmark ---------------------------------------------------------------------


def test_benchmark_contents(dataset: Path, bench: Path) -> None:
    meta = json.loads((bench / "benchmark.json").read_text())
    assert meta["format"] == "pmcvl-benchmark/1" and meta["size"] == 3
    assert meta["requested_size"] == 3 and meta["split"] == "train"
    assert meta["caption_sources"] == {"long_caption": 1, "subcaption": 2, "text": 0}
    assert meta["years"] == {"min": 2021, "max": 2023}
    assert meta["source"]["runs"] == ["run-test"]
    assert meta["exclusion"]["unit"] == "article" and meta["exclusion"]["articles"] == 3

    b = load_benchmark(bench)
    assert [p["article"] for p in b.pairs] == ["PMC1006", "PMC1005", "PMC1004"]
    pick = b.pairs[1]
    assert pick["caption_source"] == "long_caption" and pick["key"] == "PMC1005v1-F1-p02"
    assert pick["caption"].startswith("article 1005 panel 2 described at length")
    assert read_excluded(bench / "excluded_articles.txt") == {"PMC1006", "PMC1005", "PMC1004"}

    # images copied out byte for byte; the WebDataset members follow our contract
    index = pq.read_table(sorted((dataset / "index").glob("train-*.parquet"))).to_pylist()
    by_key = {r["key"]: r for r in index}
    for pair in b.pairs:
        assert pair["sha256"] == by_key[pair["key"]]["sha256"]
        with tarfile.open(dataset / pair["source_shard"]) as tar:
            assert tar.extractfile(pair["source_member"]).read() == b.images[pair["key"]]
    with tarfile.open(bench / b.meta["shards"][0]["name"]) as tar:
        names = tar.getnames()
        meta_json = json.loads(tar.extractfile(f"{pick['key']}.json").read())
        text = tar.extractfile(f"{pick['key']}.txt").read().decode()
    assert len(names) == 9 and all(
        re.fullmatch(r"PMC\d+v1-F1-p\d\d\.(jpg|json|txt)", n) for n in names
    )
    assert meta_json["caption_source"] == "long_caption" and text == pick["caption"]


def test_benchmark_refuses_to_overwrite_and_the_tampered(
    dataset: Path, bench: Path, tmp_path: Path
) -> None:
    with pytest.raises(FileExistsError):
        build_benchmark(str(dataset), str(bench), size=3)
    copy = tmp_path / "copy"
    build_benchmark(str(dataset), str(copy), size=50)  # more than exist: all 7 dated or not
    assert json.loads((copy / "benchmark.json").read_text())["size"] == 7
    shard = copy / "shards" / "bench-000000.tar"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        load_benchmark(copy)


# --- exclusion: the unit, the count, and open_clip's own loader --------------------------------


def test_exclusion_filter() -> None:
    keep = ExcludeArticles(frozenset({"PMC1"}), HasCaptionAndImage())
    sample = {"jpg": b".", "txt": b"t"}
    assert not keep({**sample, "json": json.dumps({"pmcid": "PMC1"}).encode()})
    assert not keep({**sample, "json": json.dumps({"pmcid": " pmc1"}).encode()})  # normalised
    assert keep({**sample, "json": json.dumps({"pmcid": "PMC2"}).encode()})
    assert keep({**sample, "json": json.dumps({"pmcid": None}).encode()})  # never benchmarked
    assert not keep({**sample, "json": b"{broken"})  # unknown article: dropped
    assert not keep(sample)  # no json at all: dropped
    assert not keep({"txt": b"t", "json": json.dumps({"pmcid": "PMC2"}).encode()})  # no image


def test_no_benchmark_article_reaches_the_trainer(
    dataset: Path, bench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample open_clip's training pipeline yields, under the launcher's filters, comes
    from a non-benchmark article; all such samples come; the count matches the index's."""
    import open_clip
    from open_clip_train import data
    from open_clip_train.params import parse_args

    from ray_jobs.training.argv import TrainArgs, build_train_argv
    from ray_jobs.training.caption_key import install_caption_key
    from ray_jobs.training.exclusion import install_exclusion

    monkeypatch.setattr(data, "filter_no_caption_or_no_image", data.filter_no_caption_or_no_image)
    excluded = read_excluded(bench / "excluded_articles.txt")
    install_caption_key("long_caption;subcaption")
    install_exclusion(excluded)  # both undone by monkeypatch at teardown

    gate = data.filter_no_caption_or_no_image
    passed: list[str] = []

    def recording(sample: dict) -> bool:
        ok = gate(sample)
        if ok:
            passed.append(json.loads(sample["json"])["pmcid"])
        return ok

    monkeypatch.setattr(data, "filter_no_caption_or_no_image", recording)

    sel = select_shards(dataset / "manifest.json", "train")
    kept, dropped = count_kept(dataset / "manifest.json", "train", sel.urls, excluded)
    index = pq.read_table(sorted((dataset / "index").glob("train-*.parquet"))).to_pylist()
    straddling = {r["pmcid"] for r in index if r["pmcid"] in excluded}
    assert len({r["shard"] for r in index if r["pmcid"] in straddling}) > 1  # shards mix
    assert dropped == sum(r["pmcid"] in excluded for r in index) == 7
    assert kept == len(index) - dropped == 9

    args = parse_args(
        build_train_argv(
            TrainArgs(sel.urls, kept, "x", "/nonexistent", "x", batch_size=1, workers=0)
        )
    )
    args.world_size = 1
    tokenizer = open_clip.SimpleTokenizer(context_length=77)
    preprocess = open_clip.image_transform(32, is_train=False)
    loader = data.get_wds_dataset(args, preprocess, True, tokenizer=tokenizer).dataloader
    texts = []
    special = {0, tokenizer.sot_token_id, tokenizer.eot_token_id}
    for _, tokens in loader:
        for t in tokens:
            texts.append(tokenizer.decode([i for i in t.tolist() if i not in special]))
    # the BPE decoder spaces out digits: "article 1 0 0 2 panel ..."
    numbers = {re.match(r"article ([\d ]+) panel", t).group(1).replace(" ", "") for t in texts}  # type: ignore[union-attr]
    assert len(texts) == kept
    assert not {f"PMC{n}" for n in numbers} & excluded
    assert {f"PMC{n}" for n in numbers} == {r["pmcid"] for r in index} - excluded
    assert sorted(set(passed)) == sorted({r["pmcid"] for r in index} - excluded)
