"""The report's gallery: thumbnails written the way the panel stage writes them, then picked,
joined with the index and rejects, and drawn; locally, on S3, and in a real browser."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from browser import chromium, file_url, open_page  # noqa: F401 - chromium is a fixture
from PIL import Image, ImageDraw

from ray_jobs.config import ReportSettings, load_settings
from ray_jobs.contract.records import INDEX_SCHEMA, REJECT_SCHEMA, PanelRecord
from ray_jobs.figures.panels import Dropped, FigurePanels, Panel
from ray_jobs.report import build_report
from ray_jobs.report.gallery_files import GalleryWriter, entry_key, key_hash, sampled
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import Storage, open_storage

FK = "PMC7v1-f1"
ON = {"gallery_rate": 1.0}


def figure_png() -> bytes:
    """Two panels side by side, a label letter in the first."""
    image = Image.new("RGB", (600, 400), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 290, 400), fill=(40, 40, 40))
    draw.ellipse((60, 80, 230, 320), fill=(200, 200, 200))
    draw.rectangle((310, 0, 600, 400), fill=(240, 240, 255))
    draw.line((330, 380, 580, 40), fill=(0, 0, 200), width=6)
    draw.text((10, 10), "A", fill="white")
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def detected(fk: str) -> FigurePanels:
    return FigurePanels(
        fk,
        600,
        400,
        panels=[
            Panel(fk, 0, (0, 0, 290, 400), 0.93, label_bbox=(4, 4, 30, 30), letter="a"),
            Panel(fk, 1, (310, 0, 600, 400), 0.88, letter="b"),
        ],
        dropped=[Dropped(fk, (292, 0, 308, 40), 0.31, "too_small")],
    )


def record(fk: str, i: int, caption: str, **extra) -> PanelRecord:
    return PanelRecord(
        key=f"{fk}-p{i:02d}", figure_key=fk, pmcid="PMC7", pmc_version=1, pmid=None, doi=None,
        journal="J", year=2024, license="CC BY", license_url=None, figure_id="f1",
        figure_label="Figure 1", caption=caption, subcaption=f"panel {i} <b>text</b>",
        panel_index=i, n_panels=2, panel_label="ab"[i], alignment="letter",
        alignment_confidence=0.9 - i / 10, panel_status="ok", detector_score=0.9,
        detector_version="t", **{"panel_bbox": [0, 0, 9, 9], **extra},
    )  # fmt: skip


def write_part(storage: Storage, part: str, caption: str, limits: ReportSettings) -> dict:
    """One committed part holding one figure: panel 0 kept, panel 1 rejected; its gallery files
    written by the panel stage's writer. Returns the manifest's shard entry."""
    boxes = [p.bbox for p in detected(FK).panels]
    recs = [
        record(FK, 0, caption, panel_bbox=list(boxes[0]), label_bbox=[4, 4, 30, 30]),
        record(FK, 1, caption, panel_bbox=list(boxes[1])),
    ]
    row = {"key": FK, "part": part, "image": figure_png(), "record": recs[0].to_json_dict()}
    writer = GalleryWriter(storage, limits)
    assert writer(row, detected(FK), [r.to_json_dict() for r in recs]) is not None
    shard = f"shards/train-{part}-0000.tar"
    kept = record(FK, 0, caption, modality="ct", modality_l1="radiology", modality_score=0.97,
                  long_caption="A long caption <i>escaped</i>.", tokens_long_caption=9)  # fmt: skip
    index = pa.Table.from_pylist(
        [{**kept.to_json_dict(), "shard": shard, "member": f"{kept.key}.png"}], schema=INDEX_SCHEMA
    )
    write_parquet(storage, f"index/train-{part}-0000.parquet", index)
    reject = {"key": recs[1].key, "figure_key": FK, "reason": "non_clinical:chart",
              "modality": "chart", "modality_l1": "other", "modality_score": 0.81}  # fmt: skip
    write_parquet(storage, f"rejects/{part}.parquet", pa.Table.from_pylist([reject], REJECT_SCHEMA))
    storage.write_bytes(f"parts/{part}.json", b"{}")
    index_key = f"index/train-{part}-0000.parquet"
    return {"name": shard, "index": index_key, "part": part, "split": "train", "samples": 1,
            "bytes": 1, "sha256": "0" * 64, "run_id": "r"}  # fmt: skip


def write_manifest(storage: Storage, shards: list[dict], superseded: list[str] = ()) -> None:
    manifest = {
        "format": "pmcvl-dataset/1", "runs": ["r"], "shards": shards,
        "counts": {"detector_dropped": {"too_small": 1}},
        "superseded": {"files": list(superseded)},
    }  # fmt: skip
    storage.write_bytes("manifest.json", json.dumps(manifest).encode())


def make_output(storage: Storage, limits: ReportSettings) -> None:
    write_manifest(storage, [write_part(storage, "000000", "Old <script>x</script>", limits)])


def page_images(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def test_the_gallery_joins_thumbnails_with_index_and_rejects(tmp_path: Path) -> None:
    settings = load_settings(environ={}, report=ON)
    make_output(open_storage(str(tmp_path)), settings.report)
    build_report(str(tmp_path), settings)
    page = (tmp_path / "report/index.html").read_text()
    gallery = page[page.index("<h2>Gallery</h2>") : page.index("<h2>Modality")]
    # the figure, under its modality and its alignment group (shown once), boxes drawn
    assert "<h3>modality: radiology</h3>" in gallery and FK in gallery
    assert gallery.count('class="gfig"') == 1
    assert gallery.count("<rect") == 4  # two panels, one label box, one dropped box
    assert 'stroke-dasharray="6 4"' in gallery  # the detector's dropped box
    # the kept panel with its subcaption, long caption, alignment, modality and score
    assert "panel 0 &lt;b&gt;text&lt;/b&gt;" in gallery
    assert "A long caption &lt;i&gt;escaped&lt;/i&gt;." in gallery
    assert "ct<br><span class=small>0.97</span>" in gallery
    assert "letter<br><span class=small>0.90</span>" in gallery
    # the rejected panel in its figure and in the rejects by reason, the detector's drop too
    assert (
        "non_clinical:chart</span>" in gallery
        and "<h4>non_clinical:chart (1 in all)</h4>" in gallery
    )
    assert "<h4>detector:too_small (1 in all)</h4>" in gallery and "score 0.31" in gallery
    assert "<script>" not in page and "Old &lt;script&gt;x&lt;/script&gt;" in gallery
    # every image on the page is a file of the report folder, thumbnails within the limits
    linked = page_images(page)
    thumbs = [s for s in linked if s.startswith("gallery/")]
    assert {f"gallery/{p.name}" for p in (tmp_path / "report/gallery").iterdir()} == set(thumbs)
    assert len(set(thumbs)) == 4  # figure, two panels, the dropped box
    for name in thumbs:
        with Image.open(tmp_path / "report" / name) as image:
            assert image.format == "JPEG"
            assert max(image.size) <= settings.report.gallery_figure_px
            if name != f"gallery/{FK}.jpg":
                assert max(image.size) <= settings.report.gallery_panel_px


def test_sampling_is_by_key_hash_and_rate_zero_writes_nothing(tmp_path: Path) -> None:
    keys = [f"PMC{i}v1-f1" for i in range(2000)]
    share = sum(sampled(k, 0.1) for k in keys) / len(keys)
    assert 0.07 < share < 0.13  # uniform enough: a share of figures, not a count
    assert [sampled(k, 0.1) for k in keys] == [key_hash(k) < 0.1 for k in keys]
    storage = open_storage(str(tmp_path))
    row = {"key": FK, "part": "000000", "image": figure_png(), "record": {}}
    panels = [record(FK, i, "c").to_json_dict() for i in range(2)]
    below = ReportSettings(gallery_rate=key_hash(FK))  # the figure's hash is not below it
    assert GalleryWriter(storage, below)(row, detected(FK), panels) is None
    assert list(storage.list("gallery")) == []
    # a build with the gallery off: the page says so and shows no thumbnails
    with pytest.raises(AssertionError):  # write_part insists on a written entry
        make_output(storage, ReportSettings(gallery_rate=0))
    assert list(storage.list("gallery")) == []
    write_manifest(storage, [])
    build_report(str(tmp_path), load_settings(environ={}))
    page = (tmp_path / "report/index.html").read_text()
    assert "No sampled figure in this output" in page
    assert not any(s.startswith("gallery/") for s in page_images(page))


def test_a_rebuilt_article_is_shown_from_its_newest_part(tmp_path: Path) -> None:
    """The same article version rebuilt by a later part: the old part's samples are tombstoned,
    and the gallery shows the new build only; stale thumbnails of an earlier report go."""
    settings = load_settings(environ={}, report=ON)
    storage = open_storage(str(tmp_path))
    old = write_part(storage, "000000", "Old caption", settings.report)
    write_manifest(storage, [old])
    build_report(str(tmp_path), settings)
    (tmp_path / "report/gallery/stale.jpg").write_bytes(b"x")
    new = write_part(storage, "000001", "New caption", settings.report)
    tomb = [{"shard": old["name"], "key": f"{FK}-p00", "pmcid": "PMC7", "pmc_version": 1,
             "by_part": "000001"}]  # fmt: skip
    write_parquet(storage, "superseded/000001.parquet", pa.Table.from_pylist(tomb))
    write_manifest(storage, [old, new], ["superseded/000001.parquet"])
    build_report(str(tmp_path), settings)
    page = (tmp_path / "report/index.html").read_text()
    assert "New caption" in page and "Old caption" not in page
    assert page.count('class="gfig"') == 1 and page.count("non_clinical:chart (1 in all)") == 1
    assert not (tmp_path / "report/gallery/stale.jpg").exists()
    assert storage.exists(entry_key("000000", FK))  # the old part's files stay, unread


def test_gallery_on_s3(moto_endpoint: str, aws_credentials: None) -> None:
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="gallery-ds")
    settings = load_settings(
        environ={},
        report=ON,
        output={"s3": {"endpoint_url": moto_endpoint, "anonymous": False}},
    )
    storage = open_storage("s3://gallery-ds/run", settings.output.s3)
    make_output(storage, settings.report)
    _, uri = build_report("s3://gallery-ds/run", settings)
    assert uri == "s3://gallery-ds/run/report/index.html"
    page = storage.read_bytes("report/index.html").decode()
    thumbs = [s for s in page_images(page) if s.startswith("gallery/")]
    assert len(set(thumbs)) == 4
    for name in thumbs:
        Image.open(io.BytesIO(storage.read_bytes(f"report/{name}"))).verify()


def test_the_report_in_a_real_browser(tmp_path: Path, chromium: str) -> None:  # noqa: F811
    settings = load_settings(environ={}, report=ON)
    make_output(open_storage(str(tmp_path)), settings.report)
    build_report(str(tmp_path), settings)
    seen = open_page(file_url(tmp_path / "report/index.html"), chromium)
    assert seen.errors == []
    srcs = [i["src"] for i in seen.images]
    assert f"gallery/{FK}.jpg" in srcs and "funnel.png" in srcs
    assert seen.broken_images == []
    assert seen.title.startswith("pmcvl report")
