"""The modality classifier: data from the panel makers, the real trainer (calibration and model
card included), evaluation on any labelled folder, the path to a real ResNet-101 from local
weights, the stage's rows, and bad images."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from modeldev.classifier.data import MAKER_CLASS, MAKERS, write_dataset
from modeldev.classifier.train import train_classifier
from modeldev.synth.panels import PROCEDURAL
from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.classifier import ModalityClassifier, build_model
from ray_jobs.figures.taxonomy import load_taxonomy

SUBSET = ["chart", "ct", "fundus", "gel_blot", "histopathology", "mri"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modeldev.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small ResNet-18 the test trains itself on panel-maker images (seconds on a CPU)."""
    root = tmp_path_factory.mktemp("classifier")
    counts = write_dataset(root / "data", 10, seed=1, size=48, classes=SUBSET)
    assert sorted(counts) == SUBSET and set(counts.values()) == {10}
    result = train_classifier(
        root / "data", root / "out", backbone="resnet18", epochs=4, imgsz=48, batch=16, lr=3e-3
    )
    assert result.classes == SUBSET
    return root / "data", Path(result.weights)


def test_training_learns_the_classes(tiny: tuple[Path, Path]) -> None:
    data, weights = tiny
    report = json.loads(Path(str(weights).replace(".pt", ".train.json")).read_text())
    assert report["val_accuracy"] > 1 / len(SUBSET)  # better than chance after 4 epochs
    cal = report["calibration"]
    assert cal["n"] == 12 and 0.05 <= cal["temperature"] <= 20
    assert set(cal["ood_thresholds"]) == {"msp", "energy"}
    checkpoint = torch.load(weights, map_location="cpu", weights_only=False)
    assert checkpoint["calibration"] == cal and checkpoint["classes"] == SUBSET
    card = (weights.parent / "MODEL_CARD.md").read_text()
    assert "resnet18" in card and "from scratch" in card and "temperature" in card
    assert "pmcvl-dev train-classifier" in card and "| histopathology |" in card
    proc = _cli("eval-classifier", "--data", str(data), "--weights", str(weights))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("accuracy ")
    assert "abstention " in proc.stdout and "image-only keep/drop: clinical dropped" in proc.stdout
    assert "confusion (rows true" in proc.stdout and "histopathology" in proc.stdout


def test_eval_on_a_val_only_folder_with_some_of_the_classes(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """Any labelled folder: no train/, two of the model's six classes; a class the model does
    not have is a one-line error, not a traceback."""
    data, weights = tiny
    for name in ("ct", "chart"):
        shutil.copytree(data / "val" / name, tmp_path / "real" / "val" / name)
    proc = _cli(
        "eval-classifier", "--data", str(tmp_path / "real"), "--weights", str(weights), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["classes"] == ["chart", "ct"] and report["n"] == 4
    assert [row[-1] >= 0 for row in report["confusion"]] == [True, True]  # the (other) column
    assert len(report["confusion"][0]) == 3
    kd = report["keep_drop"]
    assert (kd["clinical"], kd["nonclinical"]) == (2, 2)
    assert 0 <= report["abstention_rate"] <= 1
    shutil.copytree(data / "val" / "ct", tmp_path / "real" / "val" / "oct")
    proc = _cli("eval-classifier", "--data", str(tmp_path / "real"), "--weights", str(weights))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "['oct']" in proc.stderr and "not among the model's" in proc.stderr
    proc = _cli(
        "eval-classifier",
        "--data",
        str(tmp_path / "real"),
        "--weights",
        str(weights),
        "--split",
        "test",
    )
    assert proc.returncode == 1 and "no test/ folder" in proc.stderr


def test_real_resnet101_from_local_weights_in_one_command(tmp_path: Path) -> None:
    """The production path, small: local 'ImageNet' weights for a ResNet-101 (made here, with
    weights=None; nothing is downloaded) named by classifier.pretrained, an ImageFolder tree of
    labelled panels, and one train-classifier command that trains, calibrates, evaluates and
    writes the model card. The backbone starts from those weights; the head is new."""
    torch.manual_seed(7)
    imagenet = build_model("resnet101", 1000)  # stands in for torchvision's ImageNet weights
    torch.save(imagenet.state_dict(), tmp_path / "resnet101-imagenet.pth")
    write_dataset(tmp_path / "panels", 5, seed=2, size=48, classes=["ct", "chart"])
    started = build_model("resnet101", 2, str(tmp_path / "resnet101-imagenet.pth"))
    assert torch.equal(started.conv1.weight, imagenet.conv1.weight)
    assert torch.equal(started.layer4[2].conv3.weight, imagenet.layer4[2].conv3.weight)
    assert started.fc.out_features == 2
    proc = _cli(
        "train-classifier",
        "--data",
        str(tmp_path / "panels"),
        "--out",
        str(tmp_path / "model"),
        "--epochs",
        "1",
        "--imgsz",
        "32",
        "--batch",
        "4",
        env={"PMCVL__CLASSIFIER__PRETRAINED": str(tmp_path / "resnet101-imagenet.pth")},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    weights = Path(out["weights"])
    assert weights.name == "resnet101-modality.pt" and Path(out["card"]).is_file()
    checkpoint = torch.load(weights, map_location="cpu", weights_only=False)
    assert checkpoint["backbone"] == "resnet101" and checkpoint["classes"] == ["chart", "ct"]
    assert checkpoint["pretrained"].endswith("resnet101-imagenet.pth")
    assert checkpoint["calibration"]["n"] == 2
    card = Path(out["card"]).read_text()
    assert "`resnet101`" in card and "resnet101-imagenet.pth" in card
    stage = ModalityClassifier(ClassifierSettings(weights=str(weights)))
    rows = stage({"key": ["x"], "image": [_png()], "caption": ["CT of the chest"]})
    assert rows["keep"] == [True] and rows["modality_l2"] == ["ct"]
    # weights of another backbone are refused, and so are class folders outside the taxonomy
    with pytest.raises(ValueError, match="do not fit resnet50"):
        build_model("resnet50", 2, str(tmp_path / "resnet101-imagenet.pth"))
    (tmp_path / "panels" / "train" / "cats").mkdir()
    proc = _cli(
        "train-classifier", "--data", str(tmp_path / "panels"), "--out", str(tmp_path / "m2")
    )
    assert proc.returncode == 1 and "not in the taxonomy: ['cats']" in proc.stderr


def test_makers_cover_every_taxonomy_class() -> None:
    """One maker per L2 class; the figure generator's own makers are untouched (same names,
    same order), so its output for a seed does not change."""
    assert set(MAKER_CLASS.values()) == set(load_taxonomy().classes)
    assert list(PROCEDURAL) == [
        "ct", "radiograph", "ultrasound", "histology", "fluorescence", "fundus",
        "dermoscopy", "endoscopy", "gel", "chart", "diagram",
    ]  # fmt: skip
    for maker in MAKER_CLASS:
        a = MAKERS[maker](np.random.default_rng(4), 90, 70)
        b = MAKERS[maker](np.random.default_rng(4), 90, 70)
        assert a.size == (90, 70) and a.mode == "RGB", maker
        assert np.array_equal(np.asarray(a), np.asarray(b)), maker
        assert np.asarray(a).std() > 5, maker  # something drawn


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 40, 40)).save(buf, format="PNG")
    return buf.getvalue()


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
    assert rows["drop_reason"][3] == "failed" and rows["failure"][3].stage == "image"
    assert rows["drop_reason"][4] == "too_small" and rows["keep"][4] is False
    tax = load_taxonomy()
    for i in range(3):
        assert rows["modality_l2"][i] in tax.classes
        assert rows["modality_l1"][i] == tax.l1_of(rows["modality_l2"][i])
        probs = json.loads(rows["modality_probs"][i])
        assert abs(sum(probs.values()) - 1) < 1e-3
    assert "own:ct->ct" in rows["modality_evidence"][0]
    assert rows["modality_decided_by"][0] in {"text", "image+text"}
    assert rows["modality_evidence"][0][0] == f"decided_by:{rows['modality_decided_by'][0]}"
    assert rows["modality_decided_by"][4] == "size" and rows["modality_decided_by"][3] is None


def test_shipped_demo_classifier_on_real_figures(jats_dir: Path) -> None:
    """The demonstration checkpoint, trained on panel-maker images only, on real figures with
    their captions: CT slices, an endoscopy image and the MR slices the old model dropped as
    gels; every one kept, the caption deciding or agreeing."""
    from ray_jobs.figures.panels import resolve_weights

    weights = resolve_weights(ClassifierSettings().weights)
    assert weights.is_file() and weights.stat().st_size < 8 * 2**20
    card = (weights.parent / "MODEL_CARD.md").read_text()
    assert "demonstration" in card and "pmcvl-dev train-classifier" in card
    assert "pmcvl-dev bench-relevance" in card
    stage = ModalityClassifier()
    assert sorted(stage.classes) == sorted(load_taxonomy().classes)
    assert stage.calibration["temperature"] > 0 and stage.calibration["ood_thresholds"]
    folder = jats_dir.parent / "medicat_figures"
    rows = [json.loads(line) for line in (folder / "sample.jsonl").read_text().splitlines()]
    wanted = {
        ("b362a1", "Figure2"): "ct",
        ("e19039", "Figure1"): "ct",
        ("e19039", "Figure3"): "ct",
        ("57c9ad", "Figure3"): "endoscopy",
        ("26491a", "Figure4"): "mri",
        ("5f2d2f", "Figure2"): "mri",
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
        assert out["modality_decided_by"][i] in {"text", "image+text"}
