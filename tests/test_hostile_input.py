"""Hostile and broken input: each becomes a failure record with stage and reason, never a crash,
and nothing is written outside the output folder."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ray_jobs.config import ArchiveLimits, load_settings
from ray_jobs.contract.failures import StageError
from ray_jobs.jobs.ingest import current_articles, read_table, run_ingest
from ray_jobs.pmc.archive import read_tar_gz
from ray_jobs.pmc.jats import parse_article
from ray_jobs.storage.store import LocalStorage

GOOD_XML = (
    b'<article xmlns:xlink="http://www.w3.org/1999/xlink"><front><article-meta>'
    b'<article-id pub-id-type="pmc">123</article-id><title-group><article-title>T'
    b"</article-title></title-group></article-meta></front><body><p>x</p></body></article>"
)


def tar_gz(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


HOSTILE_ARCHIVES = {
    "traversal": (
        tar_gz([("../../escape.txt", b"owned"), ("a/article.nxml", GOOD_XML)]),
        "unsafe_path",
    ),
    "absolute": (tar_gz([("/tmp/pmcvl-abs.txt", b"owned")]), "unsafe_path"),
    "symlink": (tar_gz([special("a/link.jpg", tarfile.SYMTYPE, "/etc/passwd")]), "link_member"),
    "hardlink": (tar_gz([special("a/hard.jpg", tarfile.LNKTYPE, "/etc/passwd")]), "link_member"),
    "device": (tar_gz([special("a/dev", tarfile.CHRTYPE)]), "special_member"),
    "fifo": (tar_gz([special("a/fifo", tarfile.FIFOTYPE)]), "special_member"),
    "too_many": (tar_gz([(f"a/f{i}.jpg", b"x") for i in range(30)]), "too_many_members"),
    "bomb": (tar_gz([("a/zeros.jpg", b"\0" * (40 * 2**20))]), "compression_ratio"),
    "truncated": (tar_gz([("a/article.nxml", GOOD_XML * 200)])[:-300], "corrupt_archive"),
    "not_gzip": (b"PK\x03\x04 this is a zip file", "corrupt_archive"),
    "garbage_gzip": (b"\x1f\x8b" + b"\xff" * 200, "corrupt_archive"),
    "empty_tar": (gzip.compress(b"\0" * 1024), "corrupt_archive"),
}
LIMITS = ArchiveLimits(max_members=20, ratio_grace_bytes=2**20, max_ratio=100)


@pytest.mark.parametrize("case", sorted(HOSTILE_ARCHIVES))
def test_hostile_archive_is_refused_with_a_reason(case: str) -> None:
    data, error_type = HOSTILE_ARCHIVES[case]
    with pytest.raises(StageError) as info:
        read_tar_gz(data, LIMITS)
    assert info.value.stage == "archive"
    assert info.value.error_type == error_type


def test_declared_member_size_is_checked_before_reading() -> None:
    data = tar_gz([("a/big.jpg", b"x" * 5000)])
    with pytest.raises(StageError) as info:
        read_tar_gz(data, ArchiveLimits(max_member_bytes=4096))
    assert info.value.error_type == "member_too_large"


def test_total_output_limit_stops_a_bomb_that_compresses_modestly() -> None:
    data = tar_gz([(f"a/{i}.jpg", bytes(range(256)) * 4096) for i in range(8)])
    with pytest.raises(StageError) as info:
        read_tar_gz(data, ArchiveLimits(max_total_bytes=3 * 2**20, max_ratio=1e9))
    assert info.value.error_type == "archive_too_large"


def test_good_archive_reads_in_memory() -> None:
    files = read_tar_gz(tar_gz([("PMC1/article.nxml", GOOD_XML), ("PMC1/f.jpg", b"jpg")]), LIMITS)
    assert files == {"PMC1/article.nxml": GOOD_XML, "PMC1/f.jpg": b"jpg"}


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE article [<!ENTITY a "aaaaaaaaaa">'
    b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">'
    b'<!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]><article><front><article-meta>'
    b"<title-group><article-title>&d;&d;&d;</article-title></title-group></article-meta>"
    b"</front></article>"
)


def xxe(target: Path) -> bytes:
    return (
        f'<?xml version="1.0"?><!DOCTYPE article [<!ENTITY x SYSTEM "file://{target}">]>'
        "<article><front><article-meta><title-group><article-title>&x;</article-title>"
        "</title-group></article-meta></front></article>"
    ).encode()


@pytest.mark.parametrize(
    ("xml", "error_type"),
    [
        (b"<article><front></article>", "xml_syntax"),
        (b"", "xml_empty"),
        (b"   \n", "xml_empty"),
        (b"\x00\x01binary", "xml_syntax"),
        (BILLION_LAUGHS, "xml_entities"),
        (b"<html><body>not jats</body></html>", "not_jats"),
        (b"<article>" + b"<p>x</p>" * 300 + b"</article>", "xml_too_large"),
    ],
)
def test_bad_xml_is_a_parse_failure(xml: bytes, error_type: str) -> None:
    with pytest.raises(StageError) as info:
        parse_article(xml, max_bytes=2000)
    assert (info.value.stage, info.value.error_type) == ("parse", error_type)


def test_xxe_never_reads_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    with pytest.raises(StageError) as info:
        parse_article(xxe(secret))
    assert info.value.error_type == "xml_entities"
    assert "TOP-SECRET-VALUE" not in str(info.value)


def test_external_dtd_is_never_fetched(tmp_path: Path) -> None:
    """A DOCTYPE that points at a DTD (as every PMC file does) parses without loading it."""
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY leak "LEAKED">')
    xml = (
        f'<!DOCTYPE article SYSTEM "file://{dtd}"><article><front><article-meta>'
        "<title-group><article-title>Fine</article-title></title-group></article-meta>"
        "</front></article>"
    ).encode()
    assert parse_article(xml).title == "Fine"


def test_cli_parse_prints_a_failure_record(tmp_path: Path) -> None:
    bad = tmp_path / "PMC5.nxml"
    bad.write_bytes(b"<article><unclosed></article>")
    proc = subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", "parse", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    failure = json.loads(proc.stdout)["failure"]
    assert failure["stage"] == "parse" and failure["error_type"] == "xml_syntax"
    assert failure["source_key"] == str(bad)


def test_ingest_records_hostile_bundles_and_keeps_going(tmp_path: Path) -> None:
    """A folder of packages, most of them hostile: the good ones land, the rest are failure
    rows, the job finishes, and nothing appears outside the output folder."""
    work = tmp_path / "work"
    source = work / "bundles"
    source.mkdir(parents=True)
    good_xml = (Path(__file__).parent / "data" / "minimal.nxml").read_bytes()
    (source / "PMC100.tar.gz").write_bytes(tar_gz([("PMC100/a.nxml", good_xml)]))
    for i, case in enumerate(sorted(HOSTILE_ARCHIVES)):
        (source / f"PMC{200 + i}.tar.gz").write_bytes(HOSTILE_ARCHIVES[case][0])
    (source / "PMC300.tar.gz").write_bytes(tar_gz([("PMC300/a.nxml", b"<article><oops")]))
    (source / "PMC301.tar.gz").write_bytes(tar_gz([("PMC301/readme.txt", b"no xml here")]))
    before = {p for p in tmp_path.rglob("*")}

    settings = load_settings(
        source={"kind": "bundles", "path": str(source)},
        output={"uri": str(work / "out")},
        archive=LIMITS.model_dump(),
        environ={},
    )
    report = run_ingest(settings, progress=False)

    assert report.listed == len(HOSTILE_ARCHIVES) + 3
    assert report.articles == 1
    assert report.failed == len(HOSTILE_ARCHIVES) + 2
    failures = read_table(LocalStorage(work / "out"), "failures").to_pylist()
    by_key = {f["source_key"]: f for f in failures}
    assert by_key["PMC300"]["stage"] == "parse" and by_key["PMC300"]["error_type"] == "xml_syntax"
    assert by_key["PMC301"]["error_type"] == "no_xml"
    assert {f["stage"] for f in failures} == {"archive", "parse", "fetch"}
    assert all(f["message"] for f in failures)
    assert current_articles(LocalStorage(work / "out"))["pmcid"].to_pylist() == ["PMC100"]
    new = {p for p in tmp_path.rglob("*")} - before
    assert all(p.is_relative_to(work / "out") for p in new), sorted(new)
    assert not Path("/tmp/pmcvl-abs.txt").exists()
    assert not (tmp_path / "escape.txt").exists()
