"""Pseudo-labels from a built dataset (``modeldev.detector.pseudo_labels``): only figures whose
every panel is paired by the letter read on it are selected, rejected panels count as evidence
of the layout, and the YOLO set holds exactly their boxes."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest
from PIL import Image

from modeldev.detector import pseudo_labels as pl
from ray_jobs.config import load_settings
from ray_jobs.contract.records import INDEX_SCHEMA, REJECT_SCHEMA
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import LocalStorage


def _panels(figure: str, n: int, case: str = "letters", alignment: str = "letter") -> list[dict]:
    return [
        {
            "figure_key": figure,
            "caption_agreement": case,
            "alignment": alignment,
            "panel_bbox": [i * 100, 0, i * 100 + 90, 90],
            "label_bbox": [i * 100, 0, i * 100 + 12, 14],
        }
        for i in range(n)
    ]


def _write(out: Path, index: list[dict], rejects: list[dict]) -> None:
    storage = LocalStorage(out)
    schema = pa.schema([INDEX_SCHEMA.field(c) for c in pl.COLUMNS])
    write_parquet(storage, "index/train-000000-0000.parquet", pa.Table.from_pylist(index, schema))
    full = [
        {**r, "key": f"{r['figure_key']}-{i}", "reason": "non_clinical:chart"}
        for i, r in enumerate(rejects)
    ]
    write_parquet(storage, "rejects/000000.parquet", pa.Table.from_pylist(full, REJECT_SCHEMA))


def test_only_figures_paired_by_their_letters_are_selected(tmp_path: Path) -> None:
    a = _panels("F-a", 3)  # letters read on all three: chosen
    b = _panels("F-b", 2)
    b[1]["alignment"] = "label"  # one paired by reading order: not chosen
    c = _panels("F-c", 2, case="count")  # same count, paired by position: not chosen
    d = _panels("F-d", 1)  # one panel: nothing to learn about layout
    e = _panels("F-e", 3, case="anchored")
    e_rejected = [e.pop()]  # a chart the relevance filter dropped: still a panel of F-e
    f = _panels("F-f", 2)
    f_rejected = [{**f.pop(), "alignment": None}]  # an unpaired box: F-f is not chosen
    _write(tmp_path, a + b + c + d + e + f, e_rejected + f_rejected)
    chosen = {p.figure_key: p for p in pl.select(pl.read_panels(tmp_path))}
    assert sorted(chosen) == ["F-a", "F-e"]
    assert len(chosen["F-e"].panels) == 3 and len(chosen["F-e"].labels) == 3


def test_the_yolo_set_holds_the_boxes_normalised(tmp_path: Path) -> None:
    fig = pl.PseudoFigure("F-a", ((0, 0, 100, 50), (100, 0, 200, 50)), ((0, 0, 10, 10),))
    png = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(png, format="PNG")
    assert pl.write_yolo([fig], {"F-a": png.getvalue()}, tmp_path) == 1
    (labels,) = (tmp_path / "labels" / "train").glob("*.txt")
    lines = labels.read_text().split("\n")[:3]
    assert lines == [
        "0 0.250000 0.250000 0.500000 0.500000",
        "0 0.750000 0.250000 0.500000 0.500000",
        "1 0.025000 0.050000 0.050000 0.100000",
    ]
    assert (tmp_path / "images" / "train" / f"{labels.stem}.png").exists()
    assert "names:\n  0: panel\n  1: label" in (tmp_path / "data.yaml").read_text()


@pytest.mark.parametrize("figure", ["elife-46793-v1-fig10"])
def test_figures_are_fetched_from_the_builds_source(jats_dir: Path, figure: str) -> None:
    root = jats_dir.parent / "real_articles"
    settings = load_settings(environ={}, source={"kind": "local", "path": str(root)})
    images = pl.figure_images(settings, [figure])
    truth = root / "elife-46793-v1" / "fig10.jpg"
    with Image.open(truth) as want, Image.open(io.BytesIO(images[figure])) as got:
        assert got.size == want.size
