"""Amplification bounds of the dataset build: each cap turns the excess into a failure row with
its stage and reason, and the other articles and figures go on.

Inputs are constructed (many ``<fig>`` elements naming one image, folders of many files, S3
JSON naming many media, 16-bit figures, crowded figures); the stages are the real ones.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ray_jobs.config import ArchiveLimits, SourceSettings, load_settings
from ray_jobs.contract.failures import StageError
from ray_jobs.contract.rows import FAILED, FIGURE, OK, make_row
from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import PanelDetector
from ray_jobs.pipeline.explode import explode_article
from ray_jobs.pipeline.panels_stage import panel_rows
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.pmc.sources import PmcS3Source, open_source, package_from_path


def article_xml(pmcid: str, n_figures: int, href: str = "fig.png") -> bytes:
    """A JATS article whose ``n_figures`` figures all name the same image."""
    figures = "".join(
        f'<fig id="F{i}"><label>Figure {i}</label><caption><p>Panel {i}.</p></caption>'
        f'<graphic xlink:href="{href}"/></fig>'
        for i in range(1, n_figures + 1)
    )
    return (
        '<article xmlns:xlink="http://www.w3.org/1999/xlink"><front><article-meta>'
        f'<article-id pub-id-type="pmc">{pmcid[3:]}</article-id><title-group>'
        "<article-title>T</article-title></title-group></article-meta></front>"
        f"<body><p>x</p>{figures}</body></article>"
    ).encode()


def png(width: int, height: int, mode: str = "RGB") -> bytes:
    rng = np.random.default_rng(width * height)
    if mode == "I;16":
        img = Image.fromarray(rng.integers(0, 65535, (height, width), dtype=np.uint16))
    else:
        img = Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def write_article(root: Path, pmcid: str, n_figures: int, image: bytes, extra: int = 0) -> Path:
    folder = root / pmcid
    folder.mkdir(parents=True)
    (folder / f"{pmcid}.xml").write_bytes(article_xml(pmcid, n_figures))
    (folder / "fig.png").write_bytes(image)
    for i in range(extra):
        (folder / f"extra{i}.png").write_bytes(b"x")
    return folder


def explode_all(root: Path, **overrides) -> dict[str, list]:
    settings = load_settings(source={"kind": "local", "path": str(root)}, environ={}, **overrides)
    source = open_source(settings.source, settings.archive)
    return {ref.pmcid: explode_article(source, ref, settings)[0] for ref in source.refs()}


def failures(rows: list) -> list[dict]:
    return [r["record"] | r["record"]["failure"] for r in rows if r["status"] == FAILED]


def test_figures_past_the_cap_are_one_failure_row(tmp_path: Path) -> None:
    write_article(tmp_path, "PMC1", 10, png(40, 30))  # ten <fig> naming one image
    write_article(tmp_path, "PMC2", 2, png(40, 30))
    rows = explode_all(tmp_path, pipeline={"max_figures_per_article": 3})
    hostile, good = rows["PMC1"], rows["PMC2"]
    assert [r["record"]["figure_id"] for r in hostile if r["status"] == FIGURE] == [
        "F1",
        "F2",
        "F3",
    ]
    (failure,) = failures(hostile)
    assert (failure["stage"], failure["error_type"], failure["level"]) == (
        "explode",
        "too_many_figures",
        "figure",
    )
    assert failure["source_key"].endswith("F4") and "7 of 10 figures" in failure["message"]
    assert [r["status"] for r in good] == [FIGURE, FIGURE]


def test_decoded_bytes_per_article_are_bounded(tmp_path: Path) -> None:
    write_article(tmp_path, "PMC1", 6, png(100, 100))  # 40 000 decoded bytes per figure
    write_article(tmp_path, "PMC2", 1, png(100, 100))
    rows = explode_all(tmp_path, pipeline={"max_decoded_bytes_per_article": 100_000})
    hostile = rows["PMC1"]
    assert sum(r["status"] == FIGURE for r in hostile) == 2
    (failure,) = failures(hostile)
    assert (failure["stage"], failure["error_type"]) == ("explode", "too_many_decoded_bytes")
    assert [r["status"] for r in rows["PMC2"]] == [FIGURE]


def test_folder_package_with_too_many_files_fails_its_article(tmp_path: Path) -> None:
    write_article(tmp_path, "PMC1", 1, png(20, 20), extra=30)
    write_article(tmp_path, "PMC2", 1, png(20, 20))
    rows = explode_all(tmp_path, archive={"max_members": 10})
    (failure,) = failures(rows["PMC1"])
    assert (failure["stage"], failure["error_type"], failure["level"]) == (
        "fetch",
        "too_many_members",
        "article",
    )
    assert [r["status"] for r in rows["PMC2"]] == [FIGURE]


def test_folder_package_with_too_many_bytes_fails_its_article(tmp_path: Path) -> None:
    folder = write_article(tmp_path, "PMC1", 1, png(20, 20))
    for i in range(4):
        (folder / f"big{i}.bin").write_bytes(b"\0" * 4000)  # each under the member bound
    write_article(tmp_path, "PMC2", 1, png(20, 20))
    rows = explode_all(tmp_path, archive={"max_member_bytes": 5000, "max_total_bytes": 10_000})
    (failure,) = failures(rows["PMC1"])
    assert (failure["stage"], failure["error_type"]) == ("fetch", "archive_too_large")
    assert [r["status"] for r in rows["PMC2"]] == [FIGURE]


def test_an_xml_path_reads_a_bounded_folder_of_siblings(tmp_path: Path) -> None:
    folder = write_article(tmp_path, "PMC1", 1, png(20, 20), extra=30)
    with pytest.raises(StageError) as info:
        package_from_path(folder / "PMC1.xml", ArchiveLimits(max_members=10))
    assert (info.value.stage, info.value.error_type) == ("fetch", "too_many_members")
    for i in range(30):
        (folder / f"extra{i}.png").unlink()
    package = package_from_path(folder / "PMC1.xml", ArchiveLimits(max_members=10))
    assert set(package.media) == {"fig.png"}


def test_s3_article_naming_too_many_media_fails_before_fetching(
    moto_endpoint: str, s3_admin, tmp_path: Path
) -> None:
    bucket = "pmc-caps-media"
    s3_admin.create_bucket(Bucket=bucket)
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 2, "s3", seed=5)
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.name != "truth.jsonl":
            key = path.relative_to(corpus).as_posix()
            s3_admin.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    source = PmcS3Source(
        SourceSettings(
            kind="s3", bucket=bucket, s3={"endpoint_url": moto_endpoint, "anonymous": False}
        ),
        ArchiveLimits(max_members=10),
    )
    hostile, good = sorted(source.refs(), key=lambda r: r.key)
    stem = hostile.location.rstrip("/")
    metadata = json.loads((corpus / hostile.location / f"{stem}.json").read_text())
    metadata["media_urls"] = [f"https://x/{stem}/fig{i}.jpg" for i in range(50)]
    s3_admin.put_object(
        Bucket=bucket, Key=f"{hostile.location}{stem}.json", Body=json.dumps(metadata)
    )
    with pytest.raises(StageError) as info:
        source.fetch(hostile)
    assert (info.value.stage, info.value.error_type) == ("fetch", "too_many_members")
    assert source.fetch(good).media  # the other article is fetched whole


def test_a_package_claiming_another_pmcid_fails_without_keys_of_its_own(tmp_path: Path) -> None:
    """Keys come from an article's ids: a package listed as PMC1 whose XML says PMC2 would
    write into PMC2's key space, so it fails at stage ``identity`` and makes no figure row."""
    folder = write_article(tmp_path, "PMC1", 2, png(20, 20))
    (folder / "PMC1.xml").write_bytes(article_xml("PMC2", 2))
    write_article(tmp_path, "PMC2", 1, png(20, 20))
    rows = explode_all(tmp_path)
    (failure,) = failures(rows["PMC1"])
    assert (failure["stage"], failure["error_type"], failure["level"]) == (
        "identity",
        "identity_mismatch",
        "article",
    )
    assert "PMC2" in failure["message"] and "PMC1" in failure["message"]
    assert not [r for r in rows["PMC1"] if r["status"] == FIGURE]
    assert [r["record"]["pmcid"] for r in rows["PMC2"]] == ["PMC2"]


def test_a_listing_without_a_pmcid_keeps_the_package_ids(tmp_path: Path) -> None:
    folder = tmp_path / "article-7"
    folder.mkdir()
    (folder / "a.xml").write_bytes(article_xml("PMC7", 1))
    (folder / "fig.png").write_bytes(png(20, 20))
    ((key, rows),) = explode_all(tmp_path).items()
    assert key == "article-7" and [r["record"]["pmcid"] for r in rows] == ["PMC7"]


def test_an_article_past_its_time_budget_is_a_failure_row(tmp_path: Path) -> None:
    write_article(tmp_path, "PMC1", 2, png(20, 20))
    rows = explode_all(tmp_path, pipeline={"max_seconds_per_article": 1e-9})
    (failure,) = failures(rows["PMC1"])
    assert (failure["stage"], failure["error_type"], failure["level"]) == (
        "parse",
        "time_budget",
        "article",
    )
    assert "max_seconds_per_article" in failure["message"]
    ok = explode_all(tmp_path)["PMC1"]
    assert [r["status"] for r in ok] == [FIGURE, FIGURE]
    assert all(0 < r["record"]["_budget_s"] <= 600 for r in ok)  # the rest rides on the rows


# -- the panel stage ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_settings(tmp_path_factory: pytest.TempPathFactory):
    corpus = tmp_path_factory.mktemp("corpus")
    write_corpus(corpus, 3, "folders", seed=3)
    return load_settings(source={"kind": "local", "path": str(corpus)}, environ={})


@pytest.fixture(scope="module")
def corpus_figures(corpus_settings) -> list:
    source = open_source(corpus_settings.source, corpus_settings.archive)
    rows = [r for ref in source.refs() for r in explode_article(source, ref, corpus_settings)[0]]
    return [r for r in rows if r["status"] == FIGURE]


@pytest.fixture(scope="module")
def detector(corpus_settings) -> PanelDetector:
    return PanelDetector(corpus_settings.detector)


def test_decoded_bytes_per_image_close_the_gap_max_pixels_leaves(
    corpus_settings, corpus_figures, detector
) -> None:
    """A 16-bit figure of as many pixels as an RGB one takes twice its memory on the way to
    RGB: the pixel bound passes both, the decoded-bytes bound refuses the 16-bit one."""
    wide, deep = png(300, 200), png(300, 200, "I;16")
    for data in (wide, deep):
        decode_image(data, max_pixels=300 * 200)  # the pixel bound alone lets both through
    with pytest.raises(StageError) as info:
        decode_image(deep, max_pixels=300 * 200, max_bytes=300 * 200 * 4)
    assert (info.value.stage, info.value.error_type) == ("image", "image_too_large")
    settings = corpus_settings.model_copy(deep=True)
    settings.detector.max_decoded_bytes = 300 * 200 * 4  # RGB fits exactly; 16-bit does not
    template = corpus_figures[0]["record"]
    rows = [
        make_row(f"PMC9-F{i}", FIGURE, {**template, "figure_key": f"PMC9-F{i}"}, data)
        for i, data in enumerate((wide, deep))
    ]
    out = panel_rows(rows, detector, settings)
    assert out[0] and all(r["status"] == OK for r in out[0]), out[0]
    (failed,) = out[1]
    failure = failed["record"]["failure"]
    assert failed["status"] == FAILED and failed["record"]["level"] == "figure"
    assert (failure["stage"], failure["error_type"]) == ("image", "image_too_large")


def test_a_figure_with_too_many_panels_fails_whole(
    corpus_settings, corpus_figures, detector
) -> None:
    counts = [len(rows) for rows in panel_rows(corpus_figures, detector, corpus_settings)]
    cap = max(counts) - 1
    assert any(c <= cap for c in counts), "the corpus needs figures of different panel counts"
    settings = corpus_settings.model_copy(deep=True)
    settings.detector.max_panels = cap
    out = panel_rows(corpus_figures, detector, settings)
    for rows, count in zip(out, counts, strict=True):
        if count > cap:
            (failed,) = rows
            failure = failed["record"]["failure"]
            assert (failure["stage"], failure["error_type"]) == ("detect", "too_many_panels")
            assert failed["record"]["level"] == "figure"
        else:
            assert len(rows) == count and all(r["status"] == OK for r in rows)


def test_figures_past_their_article_budget_fail_and_the_budget_stays_out_of_records(
    corpus_settings, corpus_figures, detector
) -> None:
    """A figure whose article has no time left is not detected; one with time left gets its
    panels, and the budget field never reaches a panel record (the shard contract)."""
    spent = {**corpus_figures[0], "record": {**corpus_figures[0]["record"], "_budget_s": 0.0}}
    fresh = corpus_figures[1]
    out = panel_rows([spent, fresh], detector, corpus_settings)
    (failed,) = out[0]
    failure = failed["record"]["failure"]
    assert (failure["stage"], failure["error_type"]) == ("detect", "time_budget")
    assert out[1] and all(r["status"] == OK for r in out[1])
    assert not any("_budget_s" in r["record"] for r in out[1])


def test_a_figure_past_the_panel_cap_is_not_cropped(corpus_settings, corpus_figures) -> None:
    """It fails whole in the panel stage, so its crops and label readings would be waste."""
    limits = corpus_settings.detector.model_copy(update={"max_panels": 1})
    found, _ = PanelDetector(limits).detect([(f["key"], f["image"]) for f in corpus_figures])
    crowded = [f for f in found if len(f.panels) > 1]
    assert crowded and all(p.crop is None for f in crowded for p in f.panels)
    assert all(p.crop for f in found if len(f.panels) == 1 for p in f.panels)
