"""The shipped panel detector: on real figures, on held-out synthetic ones, through the CLI,
and the training command itself on a tiny dataset."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from modeldev.detector.evaluate import evaluate, load_coco, load_imageclef, load_yolo
from modeldev.detector.proposals import proposals
from modeldev.synth.generate import make_figure, write_dataset
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.boxes import iou_matrix
from ray_jobs.figures.panels import PanelDetector, resolve_weights

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = resolve_weights(DetectorSettings().weights)


@pytest.fixture(scope="module")
def detector() -> PanelDetector:
    return PanelDetector(DetectorSettings())


@pytest.fixture(scope="module")
def medicat(jats_dir: Path) -> list[Path]:
    figures = sorted((jats_dir.parent / "medicat_figures").glob("*.png"))
    assert len(figures) == 10
    return figures


def test_shipped_checkpoint_and_card() -> None:
    assert WEIGHTS.is_file() and WEIGHTS.stat().st_size < 20 * 2**20
    card = (WEIGHTS.parent / "MODEL_CARD.md").read_text()
    assert "pmcvl-dev synth" in card and "pmcvl-dev train-detector" in card and "mAP@0.5" in card


def test_real_figures_get_sane_panels(detector: PanelDetector, medicat: list[Path]) -> None:
    figures, failures = detector.detect([(p.name, p.read_bytes()) for p in medicat])
    assert failures == [] and len(figures) == len(medicat)
    for fig in figures:
        assert fig.panels, fig.figure_key
        assert [p.panel_index for p in fig.panels] == list(range(len(fig.panels)))
        boxes = np.array([p.bbox for p in fig.panels])
        assert (boxes[:, 0] >= 0).all() and (boxes[:, 1] >= 0).all()
        assert (boxes[:, 2] <= fig.width).all() and (boxes[:, 3] <= fig.height).all()
        assert (boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all()
        ious = iou_matrix(boxes, boxes)
        for i, j in combinations(range(len(boxes)), 2):
            assert ious[i, j] < 0.8, (fig.figure_key, "duplicate boxes")
        for p in fig.panels:
            assert p.detector == WEIGHTS.stem and len(p.detector_version) == 12
            crop = Image.open(io.BytesIO(p.crop))
            assert crop.size == (p.bbox[2] - p.bbox[0], p.bbox[3] - p.bbox[1])


def test_two_panel_real_figure_is_split(detector: PanelDetector, medicat: list[Path]) -> None:
    """57c9…Figure1 is an X-ray (A) beside an endoscopy image (B) above a caption line."""
    path = next(
        p for p in medicat if p.name == "57c9ad0f4aab133f96d40992c46926fabc901ffa_2-Figure1-1.png"
    )
    (fig,), _ = detector.detect([(path.name, path.read_bytes())])
    ok = [p for p in fig.panels if p.status == "ok"]
    assert len(ok) == 2
    left, right = ok
    assert left.bbox[2] <= right.bbox[0] + 10  # side by side, in reading order


def test_held_out_synthetic_figures(detector: PanelDetector, tmp_path: Path) -> None:
    write_dataset(tmp_path, 30, seed=777, workers=2)  # a seed training never saw
    items = load_yolo(tmp_path / "data.yaml", "all")
    scores = evaluate(detector, items)
    assert scores["images"] == 30 and scores["panels"] > 60
    assert scores["mAP50"] >= 0.85 and scores["F1@0.5"] >= 0.85
    coco_scores = evaluate(
        detector, load_coco(tmp_path / "annotations" / "train.json", tmp_path / "images" / "train")
    )
    assert coco_scores["images"] == 27


def test_imageclef_format(tmp_path: Path, detector: PanelDetector) -> None:
    write_dataset(tmp_path / "d", 3, seed=778, workers=1)
    meta = json.loads((tmp_path / "d" / "meta" / "synth-000001.json").read_text())
    objects = "".join(
        f"<object><point x='{x0}' y='{y0}'/><point x='{x1}' y='{y0}'/><point x='{x1}' y='{y1}'/>"
        f"<point x='{x0}' y='{y1}'/></object>"
        for x0, y0, x1, y1 in meta["panels"]
    )
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "synth-000001.xml").write_text(
        f"<annotation><filename>synth-000001.jpg</filename>{objects}</annotation>"
    )
    (item,) = load_imageclef(tmp_path / "gt", tmp_path / "d" / "images" / "train")
    assert item.panels.tolist() == [[float(v) for v in b] for b in meta["panels"]]
    assert evaluate(detector, [item])["panels"] == len(meta["panels"])


def test_a_bad_image_fails_alone(detector: PanelDetector, medicat: list[Path]) -> None:
    """The path the pipeline uses (``detect``): a broken and an empty image become failures
    with their reason, and the good figures beside them keep their exact panels."""
    named = {p.name.split("_", 1)[1]: p for p in medicat if p.name.startswith("57c9")}
    two, one = named["2-Figure1-1.png"], named["2-Figure3-1.png"]
    figures, failures = detector.detect(
        [
            ("two", two.read_bytes()),
            ("broken", b"\x89PNG\r\n\x1a\nbroken"),
            ("empty", b""),
            ("one", one.read_bytes()),
        ]
    )
    assert {f.source_key: (f.stage, f.error_type) for f in failures} == {
        "broken": ("image", "not_an_image"),
        "empty": ("image", "empty_image"),
    }
    by_key = {f.figure_key: f for f in figures}
    assert list(by_key) == ["two", "one"]
    # an X-ray beside an endoscopy image: two detected panels, left then right
    left, right = by_key["two"].panels
    assert (left.status, right.status) == ("ok", "ok")
    assert left.bbox[2] <= right.bbox[0] + 10
    # one endoscopy photograph over a caption line: one detected panel, not a fallback
    (only,) = by_key["one"].panels
    assert only.status == "ok" and only.score is not None


def png(width: int, height: int) -> bytes:
    pixels = np.random.default_rng(1).integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def test_strips_and_tiny_figures_pass_whole_with_a_reason(detector: PanelDetector) -> None:
    items = [("strip", png(2000, 100)), ("tiny", png(40, 30)), ("dot", png(1, 1))]
    figures, failures = detector.detect(items)
    assert failures == []
    found = {f.figure_key: [(p.status, p.reason, p.bbox) for p in f.panels] for f in figures}
    assert found == {
        "strip": [("fallback", "extreme_aspect", (0, 0, 2000, 100))],
        "tiny": [("fallback", "tiny_figure", (0, 0, 40, 30))],
        "dot": [("fallback", "tiny_figure", (0, 0, 1, 1))],
    }


def test_cli_detect_with_overlay(medicat: list[Path], tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ray_jobs.cli",
            "detect",
            str(medicat[1]),
            "--overlay",
            str(overlay),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["panels"] and result["detector"] == WEIGHTS.stem
    with Image.open(overlay) as img:
        assert img.size == (result["width"], result["height"])


def test_train_command_on_a_tiny_dataset(tmp_path: Path) -> None:
    """The real trainer, offline, end to end: one epoch on eight figures."""
    write_dataset(tmp_path / "data", 8, seed=9, workers=1, max_side=128)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "modeldev.cli",
            "train-detector",
            "--data",
            str(tmp_path / "data" / "data.yaml"),
            "--out",
            str(tmp_path / "out"),
            "--epochs",
            "1",
            "--imgsz",
            "64",
            "--batch",
            "4",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=600,
        env={**os.environ, "YOLO_CONFIG_DIR": str(tmp_path / "yolo")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    weights = Path(summary["weights"])
    assert weights.is_file() and weights.name == "yolo11n-panels.pt"
    assert json.loads((tmp_path / "out" / "yolo11n-panels.train.json").read_text())["epochs"] == 1
    assert not (tmp_path / "runs").exists()  # ultralytics wrote nothing beside the caller


def test_warm_start_keeps_the_checkpoint_it_starts_from(tmp_path: Path) -> None:
    """``pmcvl-dev train-detector --warm-start --fine-tune``, the model card's recipe: the run
    starts from the shipped weights, not from scratch (after one tiny epoch its first
    convolution is still the shipped one's, near enough), with the gentle schedule, the time
    budget and the thread count asked for (ultralytics alone would take one core less)."""
    import torch

    write_dataset(tmp_path / "data", 4, seed=12, workers=1, max_side=128, hard=1.0, nested=1.0)
    probe = (
        "import sys, torch\n"
        "from modeldev.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('threads', torch.get_num_threads())\n"
    )
    args = ["--data", str(tmp_path / "data" / "data.yaml"), "--out", str(tmp_path / "out")]
    args += ["--epochs", "1", "--imgsz", "64", "--batch", "4", "--workers", "0", "--device", "cpu"]
    args += [
        "--warm-start",
        str(WEIGHTS.resolve()),
        "--fine-tune",
        "--hours",
        "0.003",
        "--threads",
        "2",
    ]
    done = subprocess.run(
        [sys.executable, "-c", probe, "train-detector", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "threads 2" in done.stdout
    tuned_path = tmp_path / "out" / "yolo11n-panels.pt"

    def load(path: Path | str) -> dict:
        return torch.load(path, map_location="cpu", weights_only=False)

    def first_conv(ckpt: dict) -> torch.Tensor:
        return next(iter(ckpt["model"].float().state_dict().values())).flatten()

    tuned = load(tuned_path)
    assert (
        torch.nn.functional.cosine_similarity(first_conv(load(WEIGHTS)), first_conv(tuned), dim=0)
        > 0.9
    )
    train_args = tuned["train_args"]
    assert (train_args["optimizer"], train_args["lr0"], train_args["cos_lr"]) == (
        "AdamW",
        0.0004,
        True,
    )
    assert train_args["time"] == 0.003 and train_args["imgsz"] == 64
    assert not (tmp_path / "runs").exists()  # ultralytics wrote nothing beside the caller


def test_the_detector_loads_its_weights_without_unpickling_code(tmp_path) -> None:
    """In a fresh process (the way a Ray actor starts) the shipped checkpoint loads through
    ultralytics' restricted loader: torch's weights_only plus an allow-list of its classes."""
    script = (
        "from ray_jobs.config import DetectorSettings\n"
        "from ray_jobs.figures.panels import PanelDetector\n"
        "PanelDetector(DetectorSettings())\n"
        "import ultralytics.utils\n"
        "assert ultralytics.utils.SAFE_LOAD, 'ultralytics loads checkpoints unrestricted'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ULTRALYTICS_SAFE_LOAD"}
    env["YOLO_CONFIG_DIR"] = str(tmp_path / "yolo")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_checkpoints_average_weight_by_weight(tmp_path: Path) -> None:
    """Versions 2 to 6 of the shipped checkpoint were weight-space averages of two (the model
    card): the average is exact, loads through the product's own loader, and refuses two
    architectures."""
    import torch

    from modeldev.detector.train import average_checkpoints, build_model

    ckpt = torch.load(WEIGHTS, map_location="cpu", weights_only=False)
    shifted = {
        k: v + 1 if v.is_floating_point() else v for k, v in ckpt["model"].state_dict().items()
    }
    ckpt["model"].load_state_dict(shifted)
    torch.save(ckpt, tmp_path / "shifted.pt")
    from click.testing import CliRunner

    from modeldev.cli import main

    out = tmp_path / "avg.pt"
    args = [str(WEIGHTS), str(tmp_path / "shifted.pt"), "--out", str(out), "--base-share", "0.25"]
    done = CliRunner().invoke(main, ["average-detectors", *args])
    assert done.exit_code == 0 and done.output.strip() == str(out), done.output
    base = torch.load(WEIGHTS, map_location="cpu", weights_only=False)["model"].state_dict()
    mixed = torch.load(out, map_location="cpu", weights_only=False)
    assert mixed["train_args"]["average"]["base_share"] == 0.25
    for key, value in mixed["model"].state_dict().items():
        if value.is_floating_point():
            want = (base[key].float() + 0.75).to(value.dtype)
            assert torch.allclose(value.float(), want.float(), atol=2e-2), key
    detector = PanelDetector(DetectorSettings(weights=str(out)))
    found, failures = detector.detect([("fig", _two_panels())], with_crops=False)
    assert not failures and len(found) == 1
    build_model("yolo11s").save(str(tmp_path / "other.pt"))
    with pytest.raises(ValueError, match="one architecture"):
        average_checkpoints(WEIGHTS, tmp_path / "other.pt", tmp_path / "bad.pt")


def _two_panels() -> bytes:
    image = Image.new("RGB", (400, 200), (255, 255, 255))
    image.paste((40, 40, 40), (5, 5, 195, 195))
    image.paste((90, 20, 20), (205, 5, 395, 195))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_figures_with_small_panels_are_read_again_at_the_zoom_size(
    detector: PanelDetector, medicat: list[Path]
) -> None:
    """A figure whose smallest panel is tiny once letterboxed gets the panels the detector
    finds at ``zoom_imgsz``; every other figure keeps those found at ``imgsz``. Each figure's
    result is what the one size alone gives it, whatever else is in the batch."""
    items = [(f"nested-{i}", make_figure(4242, i, nested=1.0)[0]) for i in range(12)]
    items += [(p.name, p.read_bytes()) for p in medicat[:3]]
    settings = detector.settings
    assert settings.zoom_imgsz > settings.imgsz and settings.zoom_below_px > 0
    found, failures = detector.detect(items, with_crops=False)
    assert failures == []
    by_size = {
        size: PanelDetector(settings.model_copy(update={"imgsz": size, "zoom_below_px": 0}))
        for size in (settings.imgsz, settings.zoom_imgsz)
    }
    alone = {size: det.detect(items, with_crops=False)[0] for size, det in by_size.items()}
    sizes = [fig.imgsz for fig in found]
    assert set(sizes) == {settings.imgsz, settings.zoom_imgsz}, sizes
    for i, fig in enumerate(found):
        reference = alone[fig.imgsz][i]  # type: ignore[index]
        assert [p.bbox for p in fig.panels] == [p.bbox for p in reference.panels], fig.figure_key
        scale = settings.imgsz / max(fig.width, fig.height)
        smallest = min(min(b[2] - b[0], b[3] - b[1]) * scale for b in (p.bbox for p in fig.panels))
        if fig.imgsz == settings.imgsz and not any(d.reason == "split" for d in fig.dropped):
            assert smallest >= settings.zoom_below_px, fig.figure_key  # nothing small was kept
    unzoomed = by_size[settings.imgsz]
    assert all(fig.imgsz == settings.imgsz for fig in unzoomed.detect(items)[0])


def test_proposals_are_the_boxes_the_stage_chooses_from(
    detector: PanelDetector, medicat: list[Path]
) -> None:
    """``proposals`` returns every box over its floor at the size the stage reads each figure
    at: a lower floor keeps each box of a higher one, and each panel the stage keeps uncut is
    one of the proposals over the stage's own threshold, or the union of two that overlap."""
    items = [(p.name, p.read_bytes()) for p in medicat[:4]]
    items += [(f"nested-{i}", make_figure(4242, i, nested=1.0)[0]) for i in range(4)]
    items.append(("broken", b"not an image"))
    low, high = proposals(detector, items, 0.05), proposals(detector, items, 0.3)
    assert len(low) == len(high) == len(items) and low[-1] == high[-1] == []
    assert sum(len(r) for r in low) > sum(len(r) for r in high) > 0
    for lo, hi in zip(low, high, strict=True):
        assert all(r.score >= 0.3 for r in hi) and all(r.score >= 0.05 for r in lo)
        assert {(r.box, r.cls) for r in hi} <= {(r.box, r.cls) for r in lo}
    found, _ = detector.detect(items[:-1], with_crops=False)
    conf = detector.settings.conf
    for fig, raw in zip(found, proposals(detector, items[:-1], conf), strict=True):
        if any(d.reason == "split" for d in fig.dropped):
            continue
        proposed = [r.box for r in raw if r.cls == 0]
        kept = [p.bbox for p in fig.panels if p.score is not None]
        if kept:
            assert (iou_matrix(kept, proposed).max(axis=1) >= 0.5).all(), fig.figure_key
