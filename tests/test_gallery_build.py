"""The gallery from a real build: the panel stage's workers write the sampled figures'
thumbnails on a local Ray cluster, the report picks and draws them, and the page loads in
headless Chromium with every image and no errors."""

from __future__ import annotations

import io
import json
import re

import pyarrow.parquet as pq
import pytest
from browser import file_url, find_chromium, open_page
from PIL import Image

from ray_jobs.config import load_settings
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.report import build_report
from ray_jobs.report.gallery_files import ENTRIES, GalleryEntry, file_key
from ray_jobs.storage.store import open_storage


@pytest.fixture(scope="module")
def built(ray_address, tmp_path_factory):
    """Six sample articles built to a local folder, every figure sampled, and its report."""
    corpus = tmp_path_factory.mktemp("gallery-corpus")
    write_corpus(corpus, 6, "folders", seed=3)
    out = tmp_path_factory.mktemp("gallery-build") / "dataset"
    settings = load_settings(
        environ={},
        source={"kind": "local", "path": str(corpus)},
        output={"uri": str(out), "articles_per_part": 3},
        pipeline={"samples_per_shard": 16},
        report={"gallery_rate": 1.0, "gallery_figures_per_group": 2},
    )
    run_build(settings)
    stats, _ = build_report(str(out), settings)
    return out, settings, stats


def _index(out) -> dict[str, dict]:
    manifest = json.loads((out / "manifest.json").read_text())
    rows = {}
    for shard in manifest["shards"]:
        for row in pq.read_table(out / shard["index"]).to_pylist():
            rows[row["key"]] = row
    return rows


def test_workers_write_the_sampled_figures(built) -> None:
    out, settings, _ = built
    storage = open_storage(str(out))
    entries = [
        GalleryEntry.from_json(storage.read_bytes(k))
        for k in storage.list(ENTRIES)
        if k.endswith(".json")
    ]
    index = _index(out)
    kept_figures = {r["figure_key"] for r in index.values()}
    assert kept_figures <= {e.figure_key for e in entries}  # rate 1: every figure
    for entry in entries:
        with Image.open(out / file_key(entry.part, entry.thumb)) as image:
            assert max(image.size) <= settings.report.gallery_figure_px
            assert list(image.size) == entry.thumb_size
        assert [p.panel_index for p in entry.panels] == list(range(len(entry.panels)))
        for panel in entry.panels:
            row = index.get(panel.key)
            if row is not None:  # the index holds what the gallery drew
                assert row["panel_bbox"] == panel.bbox
                assert row["subcaption"] == panel.subcaption
                assert row["alignment"] == panel.alignment
                assert row["shard"].split("-")[1] == entry.part


def test_the_report_shows_the_build_in_a_browser(built) -> None:
    out, settings, stats = built
    page = (out / "report/index.html").read_text()
    gallery = page[page.index("<h2>Gallery</h2>") : page.index("<h2>Modality")]
    cards = gallery.count('class="gfig"')
    groups = re.findall(r"<h3>((?:modality|alignment): [^<]+)</h3>", gallery)
    assert groups and cards <= settings.report.gallery_figures_per_group * len(groups)
    for l1 in stats.modality_l1:  # every modality of the kept panels has its figures
        assert f"<h3>modality: {l1}</h3>" in gallery
    for reason in stats.rejects:
        assert f"<h4>{reason} (" in gallery
    thumbs = set(re.findall(r'<img src="(gallery/[^"]+)"', page))
    weight = sum((out / "report" / t).stat().st_size for t in thumbs)
    assert thumbs and weight < 60_000 * len(thumbs)  # small JPEGs, not the figures themselves

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no chromium: run scripts/ensure_chromium.sh as root (make test does)")
    seen = open_page(file_url(out / "report/index.html"), chromium)
    assert seen.errors == []
    assert seen.broken_images == []
    assert {i["src"] for i in seen.images} >= thumbs
    with Image.open(io.BytesIO(seen.screenshot)) as shot:
        assert shot.height > 1000  # the whole page, not a blank viewport
