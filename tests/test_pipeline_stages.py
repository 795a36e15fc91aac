"""The pipeline's stage functions without Ray: explode, panels + pairing, credit, dedup
verdicts, the part assembler's ledger outcomes, the shard writer's determinism and the
manifest's orphan rules."""

from __future__ import annotations

import io
import json
import random
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds
from PIL import Image

from ray_jobs.config import LongCapSettings, load_settings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.records import INDEX_SCHEMA, PanelRecord
from ray_jobs.contract.rows import (
    ARTICLE,
    CREDIT,
    FAILED,
    FIGURE,
    OK,
    decode,
    encode,
    expand,
    failure_row,
    make_row,
)
from ray_jobs.dedup import groups
from ray_jobs.dedup.hashes import phash, sha256
from ray_jobs.figures.panels import PanelDetector
from ray_jobs.pipeline.explode import explode_article, figure_rows, split_of
from ray_jobs.pipeline.panels_stage import panel_rows
from ray_jobs.pmc.jats import parse_package
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.pmc.sources import open_source
from ray_jobs.shards import manifest as mf
from ray_jobs.shards.part import PartAssembler, apply_verdicts
from ray_jobs.shards.writer import ShardWriter, ustar_header
from ray_jobs.storage.store import LocalStorage


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    corpus = tmp_path_factory.mktemp("corpus")
    write_corpus(corpus, 4, "folders", seed=3)
    return load_settings(source={"kind": "local", "path": str(corpus)}, environ={})


@pytest.fixture(scope="module")
def real_article(jats_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real PLOS ONE article (PMC3460867) with real figures from the literature as its
    images; one figure's image is left out."""
    folder = tmp_path_factory.mktemp("real") / "PMC3460867"
    folder.mkdir()
    shutil.copy(jats_dir / "pone.0046493.nxml", folder / "pone.0046493.nxml")
    figures = sorted((jats_dir.parent / "medicat_figures").glob("*.png"))
    for name, figure in zip(("g001", "g002", "g003"), figures, strict=False):
        shutil.copy(figure, folder / f"pone.0046493.{name}.png")
    return folder.parent


def test_explode_real_article_keeps_figures_and_fails_the_missing_image(
    real_article: Path,
) -> None:
    settings = load_settings(
        source={"kind": "local", "path": str(real_article)}, longcap={"enabled": True}, environ={}
    )
    source = open_source(settings.source, settings.archive)
    (ref,) = list(source.refs())
    rows, marker = explode_article(source, ref, settings)
    plain, plain_marker = explode_article(
        source, ref, settings.model_copy(update={"longcap": LongCapSettings()})
    )
    assert plain_marker["record"].get("abstract") is None  # no enrichment, no context
    assert marker["status"] == ARTICLE and marker["record"]["figures"] == 4
    assert marker["record"]["abstract"]  # enrichment's context: once, on the article's marker
    assert all("abstract" not in r["record"] for r in rows + plain)
    figures = [r for r in rows if r["status"] == FIGURE]
    failed = [r for r in rows if r["status"] == FAILED]
    assert [r["key"] for r in figures] == [f"PMC3460867-pone-0046493-g00{n}" for n in (1, 2, 3)]
    assert len(failed) == 1
    assert failed[0]["record"]["failure"]["error_type"] == "missing_image"
    assert failed[0]["record"]["level"] == "figure"
    for row in figures:
        assert "." not in row["key"]
        rec = row["record"]
        assert rec["pmcid"] == "PMC3460867" and rec["doi"] == "10.1371/journal.pone.0046493"
        assert rec["caption"]
        Image.open(io.BytesIO(row["image"])).verify()


def test_explode_turns_a_broken_article_into_one_failure_and_its_marker(tmp_path: Path) -> None:
    folder = tmp_path / "PMC1"
    folder.mkdir()
    (folder / "PMC1.xml").write_text("<article><front>")  # truncated XML
    settings = load_settings(source={"kind": "local", "path": str(tmp_path)}, environ={})
    source = open_source(settings.source, settings.archive)
    rows, marker = explode_article(source, next(iter(source.refs())), settings)
    assert [r["status"] for r in rows] == [FAILED]
    assert rows[0]["record"]["failure"]["stage"] == "parse"
    assert marker["key"] == "PMC1"


def test_split_is_stable_by_article() -> None:
    keys = [f"PMC{i}" for i in range(2000)]
    splits = [split_of(k, 0.1) for k in keys]
    assert splits == [split_of(k, 0.1) for k in keys]
    assert 0.07 < splits.count("val") / len(keys) < 0.13
    assert {split_of(k, 0.0) for k in keys} == {"train"}


def test_panel_rows_pair_generated_figures(settings) -> None:
    source = open_source(settings.source, settings.archive)
    figures = []
    for ref in sorted(source.refs(), key=lambda r: r.key)[:2]:
        rows, _ = explode_article(source, ref, settings)
        figures += [r for r in rows if r["status"] == FIGURE]
    corrupt = make_row(
        "PMC0v1-F9", FIGURE, {**figures[0]["record"], "figure_key": "PMC0v1-F9"}, b"not an image"
    )
    out = panel_rows([*figures, corrupt], PanelDetector(settings.detector), settings)
    assert len(out) == len(figures) + 1
    assert out[-1][0]["status"] == FAILED and out[-1][0]["record"]["level"] == "figure"
    panels = [row for rows in out[:-1] for row in rows]
    assert all(p["status"] == OK for p in panels)
    assert len(panels) > len(figures)  # compound figures became several panels
    labelled = [p for p in panels if p["record"]["alignment"] == "label"]
    assert labelled, "some panels must be paired with their own subcaption"
    for p in labelled:
        rec = p["record"]
        assert rec["subcaption"] != rec["caption"]
        assert rec["tokens_subcaption"] < rec["tokens_caption"]
    for p in panels:
        rec = p["record"]
        img = Image.open(io.BytesIO(p["image"]))
        assert (img.width, img.height) == (rec["width"], rec["height"])
        assert rec["sha256"] == sha256(p["image"]) and len(rec["phash"]) == 16
        assert p["key"] == f"{rec['figure_key']}-p{rec['panel_index']:02d}"
        PanelRecord.from_dict({**rec, "text": rec["subcaption"]})  # the contract holds


def test_expand_keeps_order_and_passes_other_rows_through() -> None:
    def row(i: int) -> dict:
        if i % 2:
            return make_row(str(i), FIGURE, {"figure_key": str(i), "mentions": []})
        failure = FailureRecord(str(i), "fetch", "missing", "gone", retryable=True, time="t")
        return failure_row(failure, "article", str(i))

    rows = [row(i) for i in range(6)]
    out = expand(rows, FIGURE, lambda todo: [[r, {**r, "key": r["key"] + "b"}] for r in todo])
    assert [r["key"] for r in out] == ["0", "1", "1b", "2", "3", "3b", "4", "5", "5b"]
    back = decode(encode(out))
    assert [(r["key"], r["status"]) for r in back] == [(r["key"], r["status"]) for r in out]
    for got, sent in zip(back, out, strict=True):  # every field sent comes back, typed
        assert {k: got["record"][k] for k in sent["record"]} == sent["record"]
        assert all(v is None for k, v in got["record"].items() if k not in sent["record"])
    assert back[0]["record"]["failure"]["retryable"] is True


def test_the_row_format_is_typed_and_refuses_a_field_it_does_not_name() -> None:
    """Records travel as typed Arrow structs, not JSON text: numbers keep their width, maps
    come back as dicts, and a field no schema names fails loudly instead of vanishing."""
    record = {
        "key": "PMC1v1-F1-p00",
        "alignment_confidence": 0.1 + 0.2,  # not representable in float32
        "panel_bbox": [0, 0, 2**40, 3],
        "detector_dropped": {"blank": 2, "colour_bar": 1},
        "feasibility": [{"feature": "f", "verdict": "FEASIBLE", "rationale": "r"}],
    }
    table = encode([make_row("PMC1v1-F1-p00", OK, record, b"crop")])
    assert "record" not in table.column_names
    assert pa.types.is_struct(table.schema.field("panel").type)
    got = decode(table)[0]["record"]
    assert {k: got[k] for k in record} == record
    with pytest.raises(ValueError, match="not_a_field"):
        encode([make_row("k", OK, {**record, "not_a_field": 1})])


def test_credit_is_split_exactly_and_never_lost() -> None:
    """A row's credit goes to what it became, in full; a row that became nothing leaves a
    credit row, so the writer can tell when every row of a part has arrived."""
    rows = [{**make_row(str(i), FIGURE, {}), "part": "p", "credit": 1000 + i} for i in range(4)]
    fanout = {"0": 3, "1": 0, "2": 1, "3": 7}
    out = expand(
        rows,
        FIGURE,
        lambda todo: [
            [make_row(f"{r['key']}.{j}", OK, {}) for j in range(fanout[r["key"]])] for r in todo
        ],
    )
    assert sum(r["credit"] for r in out) == sum(r["credit"] for r in rows)
    assert {r["part"] for r in out} == {"p"}
    assert [r["status"] for r in out if r["key"] == "1"] == [CREDIT]
    assert len([r for r in out if r["key"].startswith("3.")]) == 7


def _hash_table(rows: list[tuple[str, str | None, str, str, bool]]) -> pa.Table:
    names = ["key", "part", "sha256", "phash", "published"]
    return pa.Table.from_pylist(
        [dict(zip(names, r, strict=True)) for r in rows], groups.HASH_SCHEMA
    )


def _brute_verdicts(rows, bits: int) -> dict[str, tuple[str, str]]:
    """The rule, one panel at a time: rank published first then by key; a new panel with an
    earlier neighbour is dropped for the first one, followed to a panel that stays."""
    ranked = sorted(rows, key=lambda r: (not r[4], r[0]))
    published = {r[0] for r in rows if r[4]}
    edge: dict[str, tuple[str, str, bool]] = {}
    for i, (key, _, sha, ph, pub) in enumerate(ranked):
        if pub:
            continue
        if key in published:
            edge[key] = (groups.PRESENT, key, True)
            continue
        for other, _, osha, oph, opub in ranked[:i]:
            near = bits >= 0 and ph and oph and (int(ph, 16) ^ int(oph, 16)).bit_count() <= bits
            if sha == osha or near:
                edge[key] = (groups.EXACT if sha == osha else groups.NEAR, other, opub)
                break
    out = {}
    for key, (reason, dst, pub) in edge.items():
        while not pub and dst in edge:
            hop, dst, pub = edge[dst]
            reason = groups.EXACT if reason == hop == groups.EXACT else groups.NEAR
        out[key] = (reason, dst)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_dedup_verdicts_agree_with_the_rule_applied_one_panel_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(30)]
    rows, keys = [], rng.sample(range(10_000), 400)
    for i, k in enumerate(keys):
        h = rng.choice(base)
        for _ in range(rng.randrange(6)):
            h ^= 1 << rng.randrange(64)
        sha = f"{rng.randrange(60):064x}" if rng.random() < 0.3 else f"{rng.getrandbits(256):064x}"
        published = i < 80
        key = f"k{keys[rng.randrange(80)] if (not published and rng.random() < 0.05) else k:05d}"
        ph = f"{h:016x}" if rng.random() > 0.1 else ""
        rows.append((key, None if published else f"{i % 4:06d}", sha, ph, published))
    for bits in (3, -1):
        found = groups.verdicts_in_one(_hash_table(rows), bits)
        got = {r["src"]: (r["reason"], r["dst"]) for r in found.to_pylist()}
        assert got == _brute_verdicts(rows, bits)
        assert len(got) > 40  # the case is not trivial


def test_dedup_exact_near_present_and_chains() -> None:
    rows = [
        ("old", None, "s1", "00000000000000ff", True),
        ("old", "p", "s1", "00000000000000ff", False),  # a retried article: already there
        ("a", "p", "s1", "ffff000000000000", False),
        ("b", "p", "s2", "00000000000000fe", False),
        ("c", "p", "s3", "0f0f0f0f00000000", False),
        ("d", "p", "s4", "0f0f0f0f00000007", False),  # 3 bits from c
        ("e", "p", "s5", "0f0f0f0f0000003f", False),  # 3 from d, 6 from c: follows d to c
    ]
    found = {
        r["src"]: (r["reason"], r["dst"])
        for r in groups.verdicts_in_one(_hash_table(rows), 3).to_pylist()
    }
    assert found == {
        "old": (groups.PRESENT, "old"),
        "a": (groups.EXACT, "old"),
        "b": (groups.NEAR, "old"),
        "d": (groups.NEAR, "c"),
        "e": (groups.NEAR, "c"),
    }
    off = groups.verdicts_in_one(_hash_table(rows), -1)
    assert {r["src"] for r in off.to_pylist()} == {"old", "a"}  # exact copies only


def test_a_duplicate_of_a_panel_that_failed_is_held_back_not_dropped() -> None:
    keep, dup, other = (
        {**make_row(k, OK, {"article_key": "A"}, b"img"), "part": "p", "credit": 1}
        for k in ("y", "x", "z")
    )
    verdicts = {
        "x": {"src": "x", "dst": "y", "reason": groups.EXACT},
        "z": {"src": "z", "dst": "w", "reason": groups.NEAR},
    }
    out = {r["key"]: r for r in apply_verdicts([keep, dup, other], verdicts, unpublished={"y"})}
    assert out["y"]["status"] == OK
    assert out["x"]["status"] == FAILED and out["x"]["record"]["failure"]["retryable"]
    assert out["z"]["status"] == "dropped" and out["z"]["record"]["duplicate_of"] == "w"


def test_phash_finds_reencoded_copies_and_separates_different_images(jats_dir: Path) -> None:
    figures = sorted((jats_dir.parent / "medicat_figures").glob("*.png"))
    images = [Image.open(p).convert("RGB") for p in figures]
    hashes = [int(phash(img), 16) for img in images]
    for img, h in zip(images, hashes, strict=True):
        buffer = io.BytesIO()
        img.resize((img.width * 3 // 4, img.height * 3 // 4)).save(buffer, "JPEG", quality=70)
        copy = int(phash(Image.open(buffer)), 16)
        assert (h ^ copy).bit_count() <= 3
    distances = [(a ^ b).bit_count() for i, a in enumerate(hashes) for b in hashes[i + 1 :]]
    assert min(distances) > 3


def _record(i: int, split: str = "train") -> PanelRecord:
    return PanelRecord(
        key=f"PMC{i}v1-F1-p00",
        figure_key=f"PMC{i}v1-F1",
        pmcid=f"PMC{i}",
        pmc_version=1,
        pmid=None,
        doi=None,
        journal="J",
        year=2020,
        license="CC BY",
        license_url=None,
        figure_id="F1",
        figure_label="Figure 1",
        caption="A caption.",
        subcaption="A caption.",
        panel_index=0,
        n_panels=1,
        panel_label=None,
        alignment="single",
        alignment_confidence=1.0,
        panel_bbox=[0, 0, 8, 8],
        panel_status="fallback",
        detector_score=None,
        detector_version="d",
        text=f"caption {i}",
        split=split,
    )


def _jpeg(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (i % 256, 0, 0)).save(buffer, "JPEG")
    return buffer.getvalue()


def test_shards_are_deterministic_and_readable(tmp_path: Path) -> None:
    infos = []
    for name in ("a", "b"):
        writer = ShardWriter(LocalStorage(tmp_path / name), "train", 3, "000000", "run")
        for n in range(7):
            writer.add(_record(n), _jpeg(n))
        infos.append(writer.close())
    assert [i.sha256 for i in infos[0]] == [i.sha256 for i in infos[1]]
    assert [i.samples for i in infos[0]] == [3, 3, 1]
    assert [i.name for i in infos[0]] == [f"shards/train-000000-{n:04d}.tar" for n in range(3)]
    samples = list(
        wds.WebDataset(str(tmp_path / "a" / "shards" / "train-000000-0000.tar"), shardshuffle=False)
    )
    assert [s["__key__"] for s in samples] == [f"PMC{n}v1-F1-p00" for n in range(3)]
    assert samples[1]["txt"] == b"caption 1"
    assert json.loads(samples[1]["json"])["pmcid"] == "PMC1"
    table = pq.read_table(tmp_path / "a" / "index" / "train-000000-0000.parquet")
    assert table.schema.equals(INDEX_SCHEMA)
    assert table["member"].to_pylist()[0] == "PMC0v1-F1-p00.jpg"
    with tarfile.open(tmp_path / "a" / "shards" / "train-000000-0000.tar") as tar:
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())


def _failure_row(key: str, article: str, level: str, kind: str, retryable: bool):
    failure = FailureRecord(key, "x", kind, "m", retryable)
    return make_row(
        key, FAILED, {"failure": failure.to_row(), "level": level, "article_key": article}
    )


def _marker(n: int):
    record = {
        "pmcid": f"PMC{n}",
        "version": 1,
        "etag": "e",
        "source": "local",
        "location": "/",
        "figures": 1,
    }
    return make_row(f"PMC{n}.1", ARTICLE, record)


def test_part_assembler_ledger_outcomes(tmp_path: Path) -> None:
    """Rows in any order: the markers close their articles after every other row is in."""
    storage = LocalStorage(tmp_path)
    part = PartAssembler("000000", "run")
    ok_panel = _record(1)
    rows = [
        make_row(ok_panel.key, OK, {**ok_panel.to_json_dict(), "article_key": "PMC1.1"}, _jpeg(1)),
        _marker(1),
        _failure_row("PMC2.1", "PMC2.1", "article", "xml_syntax", False),
        _marker(2),
        _failure_row("PMC3.1", "PMC3.1", "article", "retracted", False),
        _marker(3),
        _failure_row("PMC4v1-F1-p00", "PMC4.1", "panel", "http_500", True),
        _marker(4),
        _failure_row("PMC5v1-F1", "PMC5.1", "figure", "missing_image", False),
        _marker(5),
    ]
    random.Random(1).shuffle(rows)
    record = part.assemble(storage, rows, 10)
    Ledger.load(storage).commit("000000", part.entries)
    outcomes = {(e.pmcid, e.status, e.retryable) for e in Ledger.load(storage).entries.values()}
    assert outcomes == {
        ("PMC1", "ok", False),
        ("PMC2", "failed", False),
        ("PMC3", "skipped", False),
        ("PMC4", "failed", True),
        ("PMC5", "ok", False),
    }
    counts = record["counts"]
    assert (counts["articles"], counts["kept"], counts["failures"]) == (5, 1, 4)
    assert (counts["articles_failed"], counts["articles_skipped"]) == (1, 1)
    assert (counts["figures_failed"], counts["panels_failed"]) == (1, 1)


def test_orphans_of_an_uncommitted_part_are_removed(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    committed = {
        "shards": [
            {
                "name": "shards/train-000000.tar",
                "index": "index/train-000000.parquet",
                "stats": "stats/train-000000.json",
                "split": "train",
                "samples": 1,
            }
        ],
        "run_id": "r",
        "counts": {"kept": 1},
    }
    mf.write_json(storage, mf.part_key("p0"), committed)
    mf.write_json(storage, mf.part_key("p1"), {**committed, "shards": []})
    for key in (
        "shards/train-000000.tar",
        "index/train-000000.parquet",
        "stats/train-000000.json",
        "shards/train-000001.tar",
        "index/train-000001.parquet",
        "gallery/entries/p0/PMC1-F1.json",
        "gallery/thumbs/p0/PMC1-F1.jpg",
        "gallery/entries/p1/PMC2-F1.json",  # a killed run's part wrote its gallery files too
        "gallery/thumbs/p1/PMC2-F1-p00.jpg",
    ):
        storage.write_bytes(key, b"x")
    removed = mf.remove_orphans(storage, {"p0"})
    assert sorted(removed) == [
        "gallery/entries/p1/PMC2-F1.json",
        "gallery/thumbs/p1/PMC2-F1-p00.jpg",
        "index/train-000001.parquet",
        "parts/p1.json",
        "shards/train-000001.tar",
    ]
    assert storage.exists("gallery/thumbs/p0/PMC1-F1.jpg")
    parts = mf.load_parts(storage, {"p0"})
    manifest = mf.build_manifest(parts, code_version="v")
    assert manifest["splits"] == {"train": {"shards": 1, "samples": 1}}
    assert manifest["counts"] == {"kept": 1}


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("PMC1v1-F1-p00.jpg", 0),
        ("a" * 100, 12345),
        ("x.json", 8**11 - 1),
        ("é.txt", 3),
        ("b" * 101, 5),
    ],
)
def test_tar_headers_are_what_tarfile_writes(name: str, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    ustar = name.isascii() and len(name) <= 100
    expected = info.tobuf(tarfile.USTAR_FORMAT if ustar else tarfile.PAX_FORMAT, "utf-8", "strict")
    assert ustar_header(name, size) == expected


def test_figure_ids_that_sanitise_alike_get_distinct_keys(settings) -> None:
    source = open_source(settings.source, settings.archive)
    ref = sorted(source.refs(), key=lambda r: r.key)[0]
    package = source.fetch(ref)
    article = parse_package(package)
    first = article.figures[0]
    article.figures = [
        first,
        replace(first, id=first.id + ".a"),
        replace(first, id=first.id + "_a"),
    ]
    keys = [r["key"] for r in figure_rows(ref, article, package.media, "train")]
    assert len(set(keys)) == 3 and all("." not in k for k in keys), keys


def test_superseded_samples_are_not_read_as_published(tmp_path: Path) -> None:
    """Dedup reads a published index less the article versions this run replaces and the
    samples earlier tombstones name for that shard (another shard's tombstones do not count)."""
    from ray_jobs.config import OutputSettings
    from ray_jobs.dedup.shuffle import HashSource, read_hashes
    from ray_jobs.shards import superseded
    from ray_jobs.storage.parquet import write_parquet
    from ray_jobs.storage.store import LocalStorage

    storage = LocalStorage(tmp_path)
    rows = [("A", 1, "A1-p00"), ("A", 1, "A1-p01"), ("B", 2, "B2-p00"), ("C", None, "C-p00")]
    index = pa.table(
        {
            "key": [k for _, _, k in rows],
            "sha256": ["s"] * 4,
            "phash": ["0" * 16] * 4,
            "pmcid": [p for p, _, _ in rows],
            "pmc_version": pa.array([v for _, v, _ in rows], pa.int64()),
        }
    )
    write_parquet(storage, "index/x.parquet", index)
    tombstones = pa.table(
        {
            "shard": ["shards/x.tar", "shards/other.tar"],
            "key": ["B2-p00", "C-p00"],
            "pmcid": ["B", "C"],
            "pmc_version": pa.array([2, None], pa.int64()),
            "by_part": ["000003", "000003"],
        },
        schema=superseded.SCHEMA,
    )
    write_parquet(storage, superseded.file_of("000003"), tombstones)
    output = OutputSettings(uri=str(tmp_path))

    def keys(source: HashSource) -> list[str]:
        return read_hashes(output, source)["key"].to_pylist()

    assert keys(HashSource("index/x.parquet", True, 4)) == [k for _, _, k in rows]
    source = HashSource(
        "index/x.parquet",
        True,
        4,
        drop=(("A", 1), ("C", 1)),  # C is unversioned: (C, 1) is another article version
        shard="shards/x.tar",
        tombstones=(superseded.file_of("000003"),),
    )
    assert keys(source) == ["C-p00"]
    assert superseded.current(
        index.append_column("shard", pa.array(["shards/x.tar"] * 4)), tombstones
    )["key"].to_pylist() == ["A1-p00", "A1-p01", "C-p00"]
