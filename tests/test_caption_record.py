"""The split's confidence travels into each panel record and the index schema."""

from __future__ import annotations

import io
from dataclasses import MISSING, fields

import pyarrow as pa
from PIL import Image

from ray_jobs.config import Settings
from ray_jobs.contract.records import INDEX_SCHEMA, RECORD_SCHEMA, PanelRecord
from ray_jobs.figures.panels import FigurePanels, Panel
from ray_jobs.pipeline.panels_stage import figure_panel_rows


def _png(width: int = 8) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, 8), (120, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _rows(caption: str, settings: Settings | None = None) -> list[dict]:
    record = {"caption": caption, "figure_key": "PMC1v1-f1", "article_key": "PMC1"}
    figure = {"record": record, "image": _png(20)}
    panels = [
        Panel("PMC1v1-f1", i, (i * 10, 0, i * 10 + 8, 8), 0.9, crop=_png(), crop_size=(8, 8))
        for i in range(2)
    ]
    found = FigurePanels("PMC1v1-f1", 20, 8, panels)
    return [row["record"] for row in figure_panel_rows(figure, found, settings or Settings())]


def test_split_confidence_in_the_record_and_schema() -> None:
    assert RECORD_SCHEMA.field("split_confidence").type == pa.float32()
    assert INDEX_SCHEMA.field("split_confidence").type == pa.float32()
    split = list(_rows("Lesion. (A) Axial CT. (B) Coronal CT."))
    assert [r["panel_label"] for r in split] == ["A", "B"]
    assert all(r["split_confidence"] >= 0.8 for r in split)
    caption = "Axial and coronal CT of the same lesion."
    (whole,) = _rows(caption)  # a caption naming no panels: the figure, whole
    assert (whole["alignment"], whole["split_confidence"]) == ("figure", 0.0)
    plain = _rows(caption, Settings(captions={"unlabelled_figures": "panels"}))
    assert {r["alignment"] for r in plain} == {"full_caption"}
    assert all(r["split_confidence"] == 0.0 for r in plain)
    required = {
        f.name: None
        for f in fields(PanelRecord)
        if f.default is MISSING and f.default_factory is MISSING
    }
    record = PanelRecord.from_dict({**required, "split_confidence": split[0]["split_confidence"]})
    assert record.to_json_dict()["split_confidence"] == split[0]["split_confidence"]
