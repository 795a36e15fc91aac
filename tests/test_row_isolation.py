"""One bad row is one failure row: the relevance and enrichment stages go on with the rest of
their batch. Real models and a real (fake-vLLM) server; the bad input is constructed. And a
classifier checkpoint is only ever unpickled as tensors and plain values."""

from __future__ import annotations

import argparse
import io
import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_llm_server import FakeLLM, start_fake_llm
from PIL import Image

from modeldev.classifier.checkpoint import save_checkpoint
from ray_jobs.config import ClassifierSettings, LongCapSettings
from ray_jobs.contract.rows import DROPPED, FAILED, OK, Row, make_row
from ray_jobs.figures.classifier import ModalityClassifier
from ray_jobs.figures.panels import resolve_weights
from ray_jobs.longcap.enrich import Enricher
from ray_jobs.pipeline.enrich_stage import enrich_rows
from ray_jobs.pipeline.relevance_stage import relevance_rows


@pytest.fixture(scope="module")
def figures(jats_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((jats_dir.parent / "medicat_figures").glob("*.png"))[:3]]


@pytest.fixture(scope="module")
def classifier() -> ModalityClassifier:
    """The shipped demo classifier (models/modality-classifier)."""
    return ModalityClassifier(ClassifierSettings(), device="cpu")


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 40, 200)).save(out, format="PNG")
    return out.getvalue()


def panel(key: str, image: bytes, subcaption: object = "Axial CT of the abdomen.") -> Row:
    record = {"subcaption": subcaption, "caption": "Figure 1.", "article_key": "PMC1"}
    return make_row(key, OK, record, image)


def failure(rows: list[Row]) -> dict:
    (row,) = rows
    assert row["status"] == FAILED and row["record"]["level"] == "panel"
    return row["record"]["failure"]


def test_a_panel_that_breaks_the_classifier_batch_fails_alone(
    classifier: ModalityClassifier, figures: list[bytes]
) -> None:
    good = [panel(f"ok{i}", data) for i, data in enumerate(figures)]
    clean = [rows[0]["record"]["modality"] for rows in relevance_rows(good, classifier)]
    hostile = [
        panel("number", figures[0], subcaption=20200101),  # a record whose text is no text
        panel("truncated", figures[1][: len(figures[1]) // 2]),
        panel("empty", b""),
        panel("sliver", png(1, 3000)),  # an absurd aspect ratio
    ]
    hostile.append(panel("no-text", figures[2]))
    del hostile[-1]["record"]["subcaption"]  # a record without the classifier's inputs
    fresh = [panel(f"ok{i}", data) for i, data in enumerate(figures)]
    out = relevance_rows([hostile[0], *fresh[:2], *hostile[1:], fresh[2]], classifier)
    assert [rows[0]["key"] for rows in out] == [
        "number", "ok0", "ok1", "truncated", "empty", "sliver", "no-text", "ok2"
    ]  # fmt: skip
    by_key = {rows[0]["key"]: rows for rows in out}
    assert failure(by_key["number"])["stage"] == "classify"
    assert failure(by_key["number"])["error_type"] == "AttributeError"
    assert failure(by_key["truncated"])["error_type"] == "corrupt_image"
    assert failure(by_key["empty"])["error_type"] == "empty_image"
    assert failure(by_key["no-text"])["error_type"] == "KeyError"
    (sliver,) = by_key["sliver"]
    assert sliver["status"] == DROPPED and sliver["record"]["drop_reason"] == "too_small"
    decided = [by_key[f"ok{i}"][0] for i in range(3)]
    assert all(r["status"] in (OK, DROPPED) for r in decided)
    assert [r["record"]["modality"] for r in decided] == clean  # the batch went on unchanged


def test_keywords_that_are_no_text_fail_their_panel_only(
    classifier: ModalityClassifier, figures: list[bytes]
) -> None:
    """Article keywords come from the package's JSON: a number among them fails its panel."""
    rows = classifier(
        {
            "key": ["a", "b", "c"],
            "image": figures,
            "subcaption": ["", "", ""],
            "caption": ["", "", ""],
            "keywords": [["MRI"], [2020, "MRI"], []],
        }
    )
    assert rows["modality_l2"][0] and rows["modality_l2"][2]
    assert rows["modality_l2"][1] is None
    assert (rows["failure"][1].stage, rows["failure"][1].error_type) == ("classify", "TypeError")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with start_fake_llm() as fake:
        yield fake


def test_a_panel_whose_record_cannot_be_read_fails_alone_in_enrichment(
    llm: FakeLLM, figures: list[bytes]
) -> None:
    settings = LongCapSettings(
        base_url=llm.url, model="fake-vlm", timeout_s=5.0, max_retries=1, cache=False
    )
    enricher = Enricher(settings)
    try:
        panels = [panel(f"ok{i}", data) for i, data in enumerate(figures)]
        for p in panels:
            p["record"]["mentions"] = [{"sentence": "As Figure 1 shows.", "panels": []}]
        bad = panel("malformed", figures[0])
        bad["record"]["mentions"] = [{"sentence": "See Figure 1.", "panels": None}]
        out = enrich_rows([panels[0], bad, *panels[1:]], enricher)
    finally:
        enricher.close()
    assert failure(out[1])["stage"] == "enrich" and failure(out[1])["error_type"] == "TypeError"
    for rows in (out[0], out[2], out[3]):
        (row,) = rows
        assert row["status"] == OK and row["record"]["long_caption"]


def test_classifier_checkpoints_load_as_weights_only(tmp_path: Path) -> None:
    """numpy scalars in a calibration are stored as plain numbers, so the checkpoint loads
    with ``weights_only=True``; a checkpoint carrying any other object is refused, not run."""
    shipped = torch.load(
        resolve_weights(ClassifierSettings().weights), map_location="cpu", weights_only=True
    )
    calibration = {**shipped["calibration"], "temperature": np.float32(0.7), "n": np.int64(630)}
    safe = tmp_path / "safe.pt"
    save_checkpoint(
        safe,
        shipped["backbone"],
        shipped["classes"],
        shipped["imgsz"],
        shipped["state_dict"],
        calibration,
    )
    loaded = ModalityClassifier(ClassifierSettings(weights=str(safe)), device="cpu")
    assert loaded.temperature == pytest.approx(0.7) and loaded.calibration["n"] == 630
    hostile = tmp_path / "hostile.pt"
    torch.save({**shipped, "calibration": argparse.Namespace(temperature=1.0)}, hostile)
    with pytest.raises(pickle.UnpicklingError):
        ModalityClassifier(ClassifierSettings(weights=str(hostile)), device="cpu")
