"""A hostile corpus through the dataset build (``run_build`` on the local Ray cluster), once
from legacy bundles to a local folder and once from PMC's S3 layout to S3 on moto.

Good articles are mixed with every attack the pipeline refuses: hostile archives, hostile or
broken XML, a package claiming another article's PMCID, amplification (many ``<fig>`` naming
one image, an S3 JSON naming many media), an image bomb, corrupt and missing images. The run
completes; every good article lands exactly as in a clean run of the good articles alone;
every hostile one is a failure row naming its stage and reason; nothing is written outside
the output; the LLM key given in the config is nowhere in the output or the logs; a link
planted in the output stops the next run before it writes through it.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import upload_tree
from fake_llm_server import fake_llm  # noqa: F401
from test_caps import article_xml, png
from test_hostile_input import BILLION_LAUGHS, HOSTILE_ARCHIVES, tar_gz, xxe

from ray_jobs.config import load_settings
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.storage.links import LinkRefused
from ray_jobs.storage.store import open_storage

GOOD = 4
ARCHIVE_LIMITS = {"max_members": 20, "ratio_grace_bytes": 2**20, "max_ratio": 100}
MAX_FIGURES = 6


def bomb_png(width: int = 40_000, height: int = 40_000) -> bytes:
    """A PNG whose header claims 1.6 G pixels over a few bytes of data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def package_attacks(outside: Path) -> dict[str, tuple[dict[str, bytes], tuple[str, str]]]:
    """Attacks any layout can carry: {pmcid: (files of the package, (stage, error_type))}."""
    return {
        "PMC9101": ({"a.xml": b"<article><front></article>"}, ("parse", "xml_syntax")),
        "PMC9102": ({"a.xml": BILLION_LAUGHS}, ("parse", "xml_entities")),
        "PMC9103": ({"a.xml": xxe(outside / "secret.txt")}, ("parse", "xml_entities")),
        "PMC9104": (  # claims another article's id: nothing under PMC9999's keys
            {"a.xml": article_xml("PMC9999", 1), "fig.png": png(50, 40)},
            ("identity", "identity_mismatch"),
        ),
        "PMC9105": (  # many <fig> naming one image: the first MAX_FIGURES go on
            {"a.xml": article_xml("PMC9105", 40), "fig.png": png(60, 40)},
            ("explode", "too_many_figures"),
        ),
        "PMC9106": (
            {"a.xml": article_xml("PMC9106", 1), "fig.png": bomb_png()},
            ("image", "decompression_bomb"),
        ),
        "PMC9107": (
            {"a.xml": article_xml("PMC9107", 1), "fig.png": b"\x89PNG\r\n\x1a\n" + b"\x13" * 400},
            ("image", "not_an_image"),
        ),
        "PMC9108": (
            {"a.xml": article_xml("PMC9108", 1, "gone.png"), "other.png": png(30, 30)},
            ("explode", "missing_image"),
        ),
    }


ARCHIVE_ERRORS = {case: ("archive", error) for case, (_, error) in HOSTILE_ARCHIVES.items()}
ARCHIVE_ERRORS["not_gzip"] = ARCHIVE_ERRORS["garbage_gzip"] = ("archive", "corrupt_archive")


def write_bundles(root: Path, outside: Path) -> dict[str, tuple[str, str]]:
    """Hostile .tar.gz bundles beside the good ones; the expected failure of each."""
    expected = {}
    for pmcid, (files, error) in package_attacks(outside).items():
        (root / f"{pmcid}.tar.gz").write_bytes(
            tar_gz([(f"{pmcid}/{n}", d) for n, d in files.items()])
        )
        expected[pmcid] = error
    for i, case in enumerate(sorted(HOSTILE_ARCHIVES)):
        pmcid = f"PMC92{i:02d}"
        (root / f"{pmcid}.tar.gz").write_bytes(HOSTILE_ARCHIVES[case][0])
        expected[pmcid] = ARCHIVE_ERRORS[case]
    return expected


def put_s3_packages(client, bucket: str, outside: Path) -> dict[str, tuple[str, str]]:
    """Hostile articles in PMC's S3 layout (``PMCn.1/PMCn.1.xml`` + ``.json`` + media)."""
    expected = {}
    attacks = package_attacks(outside)
    attacks["PMC9110"] = (  # a JSON naming more media than a package may hold
        {"a.xml": article_xml("PMC9110", 1), "fig.png": png(20, 20)},
        ("fetch", "too_many_members"),
    )
    attacks["PMC9111"] = ({"a.xml": article_xml("PMC9111", 1)}, ("fetch", "bad_metadata"))
    for pmcid, (files, error) in attacks.items():
        stem = f"{pmcid}.1"
        claimed = "PMC9999" if pmcid == "PMC9104" else pmcid  # the JSON lies as the XML does
        meta: dict = {"pmcid": claimed, "version": 1, "license_code": "CC BY"}
        if pmcid == "PMC9110":
            meta["media_urls"] = [f"https://x/{stem}/fig{i}.png" for i in range(50)]
        body = b"{not json" if pmcid == "PMC9111" else json.dumps(meta).encode()
        for key in (f"{stem}/{stem}.json", f"metadata/{stem}.json"):  # the listing reads the latter
            client.put_object(Bucket=bucket, Key=key, Body=body)
        for name, data in files.items():
            key = f"{stem}/{stem}.xml" if name == "a.xml" else f"{stem}/{name}"
            client.put_object(Bucket=bucket, Key=key, Body=data)
        expected[pmcid] = error
    return expected


def failure_rows(storage) -> list[dict]:
    keys = [k for k in storage.list("failures") if k.endswith(".parquet")]
    return [r for k in keys for r in pq.read_table(io.BytesIO(storage.read_bytes(k))).to_pylist()]


def index_rows(storage) -> list[dict]:
    keys = [k for k in storage.list("index") if k.endswith(".parquet")]
    return [r for k in keys for r in pq.read_table(io.BytesIO(storage.read_bytes(k))).to_pylist()]


FIELDS = ("caption", "subcaption", "sha256", "panel_bbox", "license", "modality", "alignment")


def by_panel(rows: list[dict], *extra: str) -> dict[tuple, tuple]:
    """Samples by (article, figure, panel): keys name versions, which layouts spell apart."""
    return {
        (r["pmcid"], r["figure_id"], r["panel_index"]): tuple(r[f] for f in (*FIELDS, *extra))
        for r in rows
    }


def check_failures(storage, expected: dict[str, tuple[str, str]]) -> dict[str, tuple]:
    """Every hostile article has its failure row; returns the outcome table for the note."""
    rows = failure_rows(storage)
    got: dict[str, set] = {pmcid: set() for pmcid in expected}
    for r in rows:
        pmcid = re.match(r"PMC\d+", r["source_key"]).group(0)  # PMC9105v1-F7, PMC9101.1
        if pmcid in got:
            assert r["message"], r
            got[pmcid].add((r["stage"], r["error_type"]))
    missing = {p: (e, got[p]) for p, e in expected.items() if e not in got[p]}
    assert not missing, missing
    return dict(expected)


def settings_for(source: dict, uri: str, moto_endpoint: str, **more):  # type: ignore[no-untyped-def]
    return load_settings(
        environ={},
        source=source,
        output={
            "uri": uri,
            "articles_per_part": 6,
            "s3": {"endpoint_url": moto_endpoint, "anonymous": False},
        },
        archive=ARCHIVE_LIMITS,
        pipeline={"samples_per_shard": 16, "max_figures_per_article": MAX_FIGURES},
        **more,
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret")
    return folder


def test_hostile_bundles_build_to_a_local_folder(
    ray_address,
    moto_endpoint,
    fake_llm,  # noqa: F811
    tmp_path,
    outside,
    caplog,
) -> None:
    caplog.set_level("INFO")
    canary = "sk-canary-hostile-" + tmp_path.name[-6:]
    fake_llm.api_key = canary
    longcap = {
        "enabled": True,
        "api_key": canary,
        "base_url": fake_llm.url,
        "model": "fake-vlm",
        "max_retries": 0,
    }
    good, mixed = tmp_path / "good", tmp_path / "mixed"
    write_corpus(good, GOOD, "bundles", seed=11)
    write_corpus(mixed, GOOD, "bundles", seed=11)
    for folder in (good, mixed):
        (folder / "oa_file_list.csv").unlink()  # the folder is listed, hostile names and all
    expected = write_bundles(mixed, outside)
    before = {p for p in tmp_path.rglob("*") if "out-" not in p.as_posix()}

    clean = settings_for(
        {"kind": "bundles", "path": str(good)},
        str(tmp_path / "out-clean"),
        moto_endpoint,
        longcap=longcap,
    )
    run_build(clean)
    hostile = settings_for(
        {"kind": "bundles", "path": str(mixed)},
        str(tmp_path / "out-hostile"),
        moto_endpoint,
        longcap=longcap,
    )
    report = run_build(hostile)

    storage = open_storage(hostile.output.uri)
    assert report.listed == GOOD + len(expected)
    table = check_failures(storage, expected)
    rows = index_rows(storage)
    good_ids = {r["pmcid"] for r in index_rows(open_storage(clean.output.uri))}
    assert len(good_ids) == GOOD
    clean_rows = index_rows(open_storage(clean.output.uri))
    mine = [r for r in rows if r["pmcid"] in good_ids]
    assert by_panel(mine, "long_caption") == by_panel(clean_rows, "long_caption")
    assert all(r["long_caption"] for r in mine)
    # the only hostile samples are the figures of PMC9105 within the cap
    assert {r["pmcid"] for r in rows} - good_ids <= {"PMC9105"}
    assert {r["figure_id"] for r in rows if r["pmcid"] == "PMC9105"} <= {
        f"F{i}" for i in range(1, MAX_FIGURES + 1)
    }
    assert not [r for r in rows if r["pmcid"] == "PMC9999"]

    new = {p for p in tmp_path.rglob("*") if "out-" not in p.as_posix()} - before
    assert not new, sorted(new)
    assert not Path("/tmp/pmcvl-abs.txt").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert "top secret" not in json.dumps(rows)  # the XXE read nothing
    written = [p for p in (tmp_path / "out-hostile").rglob("*") if p.is_file()]
    assert written and not [p for p in written if canary.encode() in p.read_bytes()]
    assert caplog.text and canary not in caplog.text

    # a link planted in the output: the next run refuses it before writing through it
    (tmp_path / "out-hostile" / "shards" / "planted.tar").symlink_to(outside / "secret.txt")
    with pytest.raises(LinkRefused, match=r"planted\.tar"):
        run_build(hostile)
    assert (outside / "secret.txt").read_text() == "top secret"
    print("\nattack outcomes (bundles → local):")
    for pmcid, (stage, error) in sorted(table.items()):
        print(f"  {pmcid}  {stage:9s} {error}")


def test_hostile_s3_articles_build_to_s3(
    ray_address, moto_endpoint, s3_admin, tmp_path, outside
) -> None:
    src, out = "pmc-hostile-src", "pmc-hostile-out"
    s3_admin.create_bucket(Bucket=src)
    s3_admin.create_bucket(Bucket=out)
    corpus = tmp_path / "corpus"
    write_corpus(corpus, GOOD, "s3", seed=11)
    upload_tree(s3_admin, src, corpus)
    source = {
        "kind": "s3",
        "bucket": src,
        "s3": {"endpoint_url": moto_endpoint, "anonymous": False},
    }
    clean = settings_for(source, f"s3://{out}/clean", moto_endpoint)
    run_build(clean)
    expected = put_s3_packages(s3_admin, src, outside)
    before = {p for p in tmp_path.rglob("*")}
    hostile = settings_for(source, f"s3://{out}/hostile", moto_endpoint)
    report = run_build(hostile)

    storage = open_storage(hostile.output.uri, hostile.output.s3)
    assert report.listed >= GOOD + len(expected)
    table = check_failures(storage, expected)
    rows = index_rows(storage)
    clean_rows = index_rows(open_storage(clean.output.uri, clean.output.s3))
    good_ids = {r["pmcid"] for r in clean_rows}
    assert len(good_ids) == GOOD
    assert by_panel([r for r in rows if r["pmcid"] in good_ids]) == by_panel(clean_rows)
    assert {r["pmcid"] for r in rows} - good_ids <= {"PMC9105"}
    assert not [r for r in rows if r["pmcid"] == "PMC9999"]
    assert {p for p in tmp_path.rglob("*")} == before  # an S3 build writes nothing locally
    listed = s3_admin.list_objects_v2(Bucket=out)["Contents"]
    assert all(o["Key"].startswith(("clean/", "hostile/")) for o in listed)
    print("\nattack outcomes (S3 layout → S3):")
    for pmcid, (stage, error) in sorted(table.items()):
        print(f"  {pmcid}  {stage:9s} {error}")
