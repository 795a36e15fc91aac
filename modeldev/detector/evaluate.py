"""Score a panel detector on annotated figures: synthetic (YOLO), COCO JSON or ImageCLEF 2016.

mAP@0.5 and mAP@0.5:0.95 are computed on the model's raw panel boxes (every box down to a
confidence of 0.001, as detection benchmarks do); precision, recall and F1 at IoU 0.5 are
computed on what the extraction stage finally keeps at its operating threshold, so the
numbers say both how good the model is and what the pipeline delivers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from lxml import etree

from modeldev.detector.metrics import Detections, summarize
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.panels import PANEL, PanelDetector, build_panels

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".gif", ".bmp", ".webp")


@dataclass
class Annotated:
    path: Path
    panels: np.ndarray  # (N, 4) x0, y0, x1, y1 in pixels


def load_yolo(data: Path, split: str = "val") -> list[Annotated]:
    """A YOLO dataset (its data.yaml or folder): class-0 boxes of the split (or ``all``
    splits, for a held-out set that training never saw), in pixels."""
    from PIL import Image

    if split == "all":
        return load_yolo(data, "train") + load_yolo(data, "val")
    root = data.parent if data.suffix in (".yaml", ".yml") else data
    if data.suffix in (".yaml", ".yml"):
        spec = yaml.safe_load(data.read_text())
        root = Path(spec.get("path") or root)
        images = root / spec[split]
    else:
        images = root / "images" / split
    items = []
    for image in sorted(p for p in images.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
        label = Path(str(image.parent).replace("images", "labels", 1)) / f"{image.stem}.txt"
        with Image.open(image) as img:
            w, h = img.size
        boxes = []
        for line in label.read_text().splitlines() if label.exists() else []:
            cls, cx, cy, bw, bh = line.split()
            if int(cls) == PANEL:
                cx, cy, bw, bh = float(cx) * w, float(cy) * h, float(bw) * w, float(bh) * h
                boxes.append((cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2))
        items.append(Annotated(image, np.array(boxes).reshape(-1, 4)))
    return items


def load_coco(annotations: Path, images: Path | None = None) -> list[Annotated]:
    """COCO JSON; panels are the category named "panel", or every box when none is."""
    spec = json.loads(annotations.read_text())
    folder = images or annotations.parent
    names = {c["id"]: c.get("name", "") for c in spec.get("categories", [])}
    panel_ids = {i for i, n in names.items() if n == "panel"} or set(names) or None
    by_image: dict[int, list] = {}
    for ann in spec["annotations"]:
        if panel_ids is None or ann["category_id"] in panel_ids:
            x, y, w, h = ann["bbox"]
            by_image.setdefault(ann["image_id"], []).append((x, y, x + w, y + h))
    return [
        Annotated(folder / img["file_name"], np.array(by_image.get(img["id"], [])).reshape(-1, 4))
        for img in spec["images"]
    ]


def load_imageclef(folder: Path, images: Path | None = None) -> list[Annotated]:
    """ImageCLEF 2016 compound figure separation: one XML per figure, each ``<object>`` a panel
    given by its corner ``<point x= y=/>`` elements."""
    items = []
    for xml in sorted(folder.glob("*.xml")):
        root = etree.parse(str(xml), etree.XMLParser(resolve_entities=False, no_network=True))
        name = root.findtext(".//filename") or f"{xml.stem}.jpg"
        boxes = []
        for obj in root.iter("object"):
            xs = [float(p.get("x")) for p in obj.iter("point")]
            ys = [float(p.get("y")) for p in obj.iter("point")]
            if xs and ys:
                boxes.append((min(xs), min(ys), max(xs), max(ys)))
        items.append(Annotated((images or folder) / name, np.array(boxes).reshape(-1, 4)))
    return items


def evaluate(detector: PanelDetector, items: list[Annotated]) -> dict[str, float]:
    from ray_jobs.figures.images import decode_image

    operating = detector.settings
    raw_settings: DetectorSettings = operating.model_copy(
        update={"conf": 0.001, "label_conf": 0.001}
    )
    detector.settings = raw_settings
    raw_preds, final_preds, gts = [], [], []
    try:
        for start in range(0, len(items), operating.batch_size):
            chunk = items[start : start + operating.batch_size]
            images = [decode_image(item.path.read_bytes()) for item in chunk]
            for item, img, raw in zip(chunk, images, detector.predict(images), strict=True):
                panels = [r for r in raw if r.cls == PANEL]
                raw_preds.append(
                    Detections(
                        np.array([r.box for r in panels]).reshape(-1, 4),
                        np.array([r.score for r in panels]),
                    )
                )
                kept = build_panels(
                    item.path.name, img, raw, operating, "", "", with_crops=False
                ).panels
                final_preds.append(
                    Detections(
                        np.array([p.bbox for p in kept]).reshape(-1, 4),
                        np.array([1.0 if p.score is None else p.score for p in kept]),
                    )
                )
                gts.append(item.panels)
    finally:
        detector.settings = operating
    model = summarize(raw_preds, gts, operating.conf)
    stage = summarize(final_preds, gts, 0.0)
    return {
        "images": model["images"],
        "panels": model["instances"],
        "mAP50": model["mAP50"],
        "mAP50_95": model["mAP50_95"],
        "precision": stage["precision@conf"],
        "recall": stage["recall@conf"],
        "F1@0.5": stage["F1@0.5"],
        "conf": operating.conf,
    }
