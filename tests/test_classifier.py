"""The modality classifier: data from the panel makers, the real trainer, evaluation, the
stage's decisions (rules and classifier combined), and bad images."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.classifier import (
    MAKER_CLASS,
    ModalityClassifier,
    decide,
    train_classifier,
    write_dataset,
)
from ray_jobs.figures.taxonomy import RulePrior, load_taxonomy


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small ResNet-18 the test trains itself on panel-maker images (seconds on a CPU)."""
    root = tmp_path_factory.mktemp("classifier")
    counts = write_dataset(root / "data", 10, seed=1, size=48)
    assert set(counts) == set(MAKER_CLASS.values()) and set(counts.values()) == {10}
    result = train_classifier(
        root / "data", root / "out", backbone="resnet18", epochs=3, imgsz=48, batch=16, lr=3e-3
    )
    assert result.classes == sorted(MAKER_CLASS.values())
    return root / "data", Path(result.weights)


def test_training_learns_the_classes(tiny: tuple[Path, Path]) -> None:
    data, weights = tiny
    report = json.loads(Path(str(weights).replace(".pt", ".train.json")).read_text())
    assert report["val_accuracy"] > 1 / len(MAKER_CLASS)  # better than chance after 3 epochs
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ray_jobs.cli",
            "eval-classifier",
            "--data",
            str(data),
            "--weights",
            str(weights),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.startswith("accuracy ")
    assert "confusion (rows true" in proc.stdout and "histopathology" in proc.stdout


def test_stage_rows_and_failures(tiny: tuple[Path, Path], jats_dir: Path) -> None:
    _, weights = tiny
    stage = ModalityClassifier(ClassifierSettings(weights=str(weights), min_confidence=0.0))
    real = sorted((jats_dir.parent / "medicat_figures").glob("*.png"))[:3]
    tiny_png = io.BytesIO()
    Image.new("RGB", (10, 10)).save(tiny_png, format="PNG")
    batch = {
        "key": ["a", "b", "c", "broken", "small"],
        "image": [p.read_bytes() for p in real] + [b"not an image", tiny_png.getvalue()],
        "subcaption": ["Axial CT of the abdomen.", "", "", "", ""],
        "caption": ["", "", "", "", ""],
    }
    rows = stage(batch)
    assert rows["key"] == batch["key"]
    assert rows["drop_reason"][3] == "failed" and rows["error"][3].startswith("image/")
    assert rows["drop_reason"][4] == "too_small" and rows["keep"][4] is False
    tax = load_taxonomy()
    for i in range(3):
        assert rows["modality_l2"][i] in tax.classes
        assert rows["modality_l1"][i] == tax.l1_of(rows["modality_l2"][i])
        probs = json.loads(rows["modality_probs"][i])
        assert abs(sum(probs.values()) - 1) < 1e-3
    assert rows["modality_evidence"][0] == ["subcaption:ct->ct"]


def test_decision_rules() -> None:
    tax = load_taxonomy()
    classes = ["chart", "ct", "histopathology"]
    settings = ClassifierSettings(min_confidence=0.5, rules_weight=0.3)
    probs = np.array([0.2, 0.7, 0.1])
    keep = decide(probs, classes, RulePrior(), (200, 200), settings, tax)
    assert (keep.l2, keep.l1, keep.l0, keep.keep, keep.drop_reason) == (
        "ct",
        "radiology",
        "medical",
        True,
        None,
    )
    chart = decide(np.array([0.9, 0.05, 0.05]), classes, RulePrior(), (200, 200), settings, tax)
    assert chart.drop_reason == "non_clinical:chart" and not chart.keep
    unsure = decide(np.array([0.34, 0.33, 0.33]), classes, RulePrior(), (200, 200), settings, tax)
    assert unsure.drop_reason == "low_confidence"
    # the metadata prior moves a close call: the caption says H&E
    swayed = decide(
        np.array([0.1, 0.48, 0.42]),
        classes,
        RulePrior({"histopathology": 1.0}),
        (200, 200),
        settings,
        tax,
    )
    assert swayed.l2 == "histopathology" and swayed.keep
    assert decide(probs, classes, RulePrior(), (20, 300), settings, tax).drop_reason == "too_small"


def test_shipped_demo_classifier_on_real_figures(jats_dir: Path) -> None:
    """The demonstration checkpoint, trained on panel-maker images only, on real figures it
    can be right about: single CT slices and a single endoscopy image."""
    from ray_jobs.figures.panels import resolve_weights

    weights = resolve_weights(ClassifierSettings().weights)
    assert weights.is_file() and weights.stat().st_size < 25 * 2**20
    card = (weights.parent / "MODEL_CARD.md").read_text()
    assert "demonstration" in card and "pmcvl train-classifier" in card
    stage = ModalityClassifier()
    folder = jats_dir.parent / "medicat_figures"
    rows = [json.loads(line) for line in (folder / "sample.jsonl").read_text().splitlines()]
    wanted = {
        ("b362a1", "Figure2"): "ct",
        ("e19039", "Figure1"): "ct",
        ("e19039", "Figure3"): "ct",
        ("57c9ad", "Figure3"): "endoscopy",
    }
    chosen = [r for r in rows if (r["pdf_hash"][:6], r["fig_key"]) in wanted]
    out = stage(
        {
            "key": [f"{r['pdf_hash'][:6]}/{r['fig_key']}" for r in chosen],
            "image": [(folder / f"{r['pdf_hash']}_{r['fig_uri']}").read_bytes() for r in chosen],
            "subcaption": [""] * len(chosen),
            "caption": [r["s2_caption"] for r in chosen],
        }
    )
    for i, r in enumerate(chosen):
        expected = wanted[(r["pdf_hash"][:6], r["fig_key"])]
        assert out["modality_l2"][i] == expected, out["key"][i]
        assert out["keep"][i] and out["drop_reason"][i] is None
        assert out["modality_l0"][i] == "medical"
