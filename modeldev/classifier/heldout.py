"""A held-out family of labelled panels with captions, for the relevance decision only.

It exists to measure, never to train: no training or calibration command imports it. Its
painters share no code with the panel makers the classifier learns from
(``modeldev/synth/panels.py``, ``modeldev/synth/modality_panels.py``) and draw each class
another way: a chest CT with lungs and spine, a sagittal spine MRI, a chest radiograph, a
linear-probe ultrasound with a cyst, a whole-body bone scan, brown-on-blue IHC, membrane-stained
fluorescence, a fundus with its macula, a gastric endoscopy with folds and an on-screen frame,
a rash, matplotlib charts in another style, pathway diagrams, an agarose gel with its ladder,
a striped spreadsheet table. Each panel comes with a caption: most name the modality the way
papers do ("Axial T2-weighted MRI", "H&E", "Fundus photograph"), the rest name nothing
("Representative case at follow-up"). :func:`relevance_report` scores the shipped decision on
it, image alone and with the caption.
"""

from __future__ import annotations

import io
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from ray_jobs.config import ClassifierSettings


def _u8(arr: np.ndarray) -> Image.Image:
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return img.convert("RGB")


def _lowpass(rng: np.random.Generator, w: int, h: int, cells: int) -> np.ndarray:
    """Value noise: a coarse random grid upsampled bicubically, in [0, 1]."""
    grid = rng.random((max(2, cells * h // max(w, h) + 2), max(2, cells * w // max(w, h) + 2)))
    img = Image.fromarray((grid * 255).astype(np.uint8)).resize((w, h), Image.Resampling.BICUBIC)
    return np.asarray(img, np.float32) / 255.0


def _ellipse(xx: np.ndarray, yy: np.ndarray, cx: float, cy: float, rx: float, ry: float):  # type: ignore[no-untyped-def]
    return ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1


def chest_ct(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    arr = np.full((h, w), 5.0, np.float32)
    body = _ellipse(xx, yy, w / 2, h / 2, w * 0.45, h * 0.36)
    arr[body] = 95 + 20 * _lowpass(rng, w, h, 12)[body]
    for side in (-1, 1):
        lung = _ellipse(xx, yy, w / 2 + side * w * 0.2, h * 0.47, w * 0.15, h * 0.24)
        arr[lung] = 25 + 15 * _lowpass(rng, w, h, 30)[lung]
    arr[_ellipse(xx, yy, w / 2, h * 0.74, w * 0.05, h * 0.05)] = 240  # vertebra
    arr[_ellipse(xx, yy, w / 2 + w * 0.03, h * 0.5, w * 0.06, h * 0.09)] = 150  # heart, aorta
    ring = body & ~_ellipse(xx, yy, w / 2, h / 2, w * 0.43, h * 0.34)
    arr[ring] = 200
    return _u8(arr + rng.normal(0, 6, (h, w)))


def spine_mri(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    arr = 40 + 60 * _lowpass(rng, w, h, 6)
    column = w * rng.uniform(0.4, 0.55)
    n = int(rng.integers(5, 9))
    for k in range(n):
        y0 = h * (0.05 + 0.9 * k / n)
        body = (np.abs(xx - column) < w * 0.12) & (yy > y0) & (yy < y0 + 0.8 * h * 0.9 / n)
        arr[body] = 150 + 30 * rng.random()
    cord = np.abs(xx - (column + w * 0.18)) < w * 0.03
    arr[cord] = 200 if rng.random() < 0.5 else 90  # bright CSF on T2, dark on T1
    arr[np.abs(xx - (column + w * 0.18)) < w * 0.012] = 110
    return _u8(arr + rng.normal(0, 5, (h, w))).filter(ImageFilter.SMOOTH)


def chest_xray(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    arr = 200 - 40 * _lowpass(rng, w, h, 4)
    for side in (-1, 1):
        lung = _ellipse(xx, yy, w / 2 + side * w * 0.2, h * 0.5, w * 0.17, h * 0.34)
        arr[lung] = 50 + 40 * _lowpass(rng, w, h, 20)[lung]
    arr[np.abs(xx - w / 2) < w * 0.04] = 225  # spine and mediastinum
    arr[_ellipse(xx, yy, w / 2 + w * 0.06, h * 0.62, w * 0.12, h * 0.14)] = 190  # heart
    return _u8(arr).filter(ImageFilter.GaussianBlur(2))


def linear_ultrasound(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    speckle = rng.rayleigh(35, (h, w)).astype(np.float32)
    depth = 1.0 - 0.6 * yy / h
    arr = speckle * depth * (0.6 + 0.8 * _lowpass(rng, w, h, 8))
    cyst = _ellipse(xx, yy, w * rng.uniform(0.3, 0.7), h * rng.uniform(0.3, 0.7), w * 0.15, h * 0.1)
    arr[cyst] = 4
    img = _u8(arr)
    draw = ImageDraw.Draw(img)
    for k in range(1, 8):  # the depth scale dots along the side
        draw.ellipse((w - 6, h * k / 8 - 1, w - 3, h * k / 8 + 2), fill=(230, 230, 230))
    return img


def bone_scan(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    img = Image.new("L", (w, h), 255)
    draw = ImageDraw.Draw(img)
    for cx in (w * 0.27, w * 0.73):  # anterior and posterior views
        s = min(w / 2, h) * 0.9
        grey = int(rng.uniform(90, 150))
        draw.ellipse((cx - s * 0.08, h * 0.05, cx + s * 0.08, h * 0.05 + s * 0.17), fill=grey)
        draw.line((cx, h * 0.2, cx, h * 0.55), fill=grey, width=max(2, int(s * 0.04)))
        for k in range(6):  # ribs
            y = h * (0.24 + 0.04 * k)
            draw.arc((cx - s * 0.14, y, cx + s * 0.14, y + s * 0.08), 180, 360, fill=grey, width=2)
        for side in (-1, 1):
            draw.line((cx, h * 0.55, cx + side * s * 0.1, h * 0.95), fill=grey, width=3)
            draw.line((cx + side * s * 0.1, h * 0.22, cx + side * s * 0.2, h * 0.5), fill=grey)
        for _ in range(int(rng.integers(0, 5))):  # hot spots
            x, y = cx + rng.normal(0, s * 0.08), rng.uniform(0.2, 0.8) * h
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=10)
    return img.filter(ImageFilter.GaussianBlur(1.5)).convert("RGB")


def ihc(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    base = np.array([215, 220, 235], np.float32)  # pale haematoxylin background
    tex = _lowpass(rng, w, h, 25)[..., None]
    arr = base - 40 * tex * np.array([1.0, 0.9, 0.4])
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for _ in range(int(rng.integers(3, 9))):  # DAB-positive glands, brown rims
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(0.06, 0.16) * max(w, h)
        d = np.hypot(xx - cx, yy - cy) / r
        rim = (d > 0.6) & (d < 1.0)
        arr[rim] = np.array([140, 90, 45]) + 30 * tex[rim]
        arr[d <= 0.6] = (250, 248, 245)
    nuclei = rng.random((h, w)) < 0.01
    arr[
        np.asarray(Image.fromarray(nuclei.astype(np.uint8) * 255).filter(ImageFilter.MaxFilter(3)))
        > 0
    ] = (
        70,
        70,
        140,
    )
    return _u8(arr).filter(ImageFilter.GaussianBlur(0.7))


def membrane_fluorescence(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    img = Image.new("RGB", (w, h), (0, 0, 0))
    draw = ImageDraw.Draw(img)
    ring = tuple(int(v) for v in rng.permutation([0, 220, int(rng.uniform(0, 120))]))
    for _ in range(int(rng.integers(4, 15))):
        x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.06, 0.14) * max(w, h)
        draw.ellipse((x - r, y - r, x + r, y + r), outline=ring, width=2)
        draw.ellipse((x - r * 0.4, y - r * 0.4, x + r * 0.4, y + r * 0.4), fill=(20, 40, 210))
    return img.filter(ImageFilter.GaussianBlur(1.2))


def fundus_macula(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = min(w, h) * 0.48
    d = np.hypot(xx - w / 2, yy - h / 2) / r
    shade = np.clip(1.1 - 0.5 * d**2, 0, 1)[..., None]
    arr = np.array([200, 80, 40], np.float32) * shade
    mac = np.exp(-((np.hypot(xx - w * 0.58, yy - h / 2) / (r * 0.15)) ** 2))[..., None]
    arr = arr * (1 - 0.5 * mac)
    arr[d > 1] = 0
    img = _u8(arr)
    draw = ImageDraw.Draw(img)
    disc = (w * 0.32, h / 2)
    for sign in (-1, 1):  # the vascular arcades
        for k in range(3):
            box = (
                disc[0] - r * 0.1,
                disc[1] - sign * r * (0.1 + 0.2 * k) - r * 0.5,
                disc[0] + r * (0.9 + 0.2 * k),
                disc[1] - sign * r * (0.1 + 0.2 * k) + r * 0.5,
            )
            box = (box[0], min(box[1], box[3]), box[2], max(box[1], box[3]))
            start, end = (180, 300) if sign > 0 else (60, 180)
            draw.arc(box, start, end, fill=(120, 25, 15), width=2)
    draw.ellipse(
        (disc[0] - r * 0.1, disc[1] - r * 0.12, disc[0] + r * 0.1, disc[1] + r * 0.12),
        fill=(245, 210, 140),
    )
    return img.filter(ImageFilter.GaussianBlur(0.8))


def gastric_endoscopy(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    folds = 0.5 + 0.5 * np.sin(
        (xx * 0.7 + yy) / max(w, h) * rng.uniform(15, 30) + 4 * _lowpass(rng, w, h, 5)
    )
    arr = np.stack([200 + 40 * folds, 110 + 40 * folds, 100 + 30 * folds], -1)
    dark = np.exp(-((np.hypot(xx - w * 0.5, yy - h * 0.45) / (0.2 * max(w, h))) ** 2))[..., None]
    arr = arr * (1 - 0.8 * dark)
    img = _u8(arr)
    mask = Image.new("L", (w, h), 0)
    cut = min(w, h) * 0.12
    ImageDraw.Draw(mask).polygon(
        [
            (cut, 0),
            (w - cut, 0),
            (w, cut),
            (w, h - cut),
            (w - cut, h),
            (cut, h),
            (0, h - cut),
            (0, cut),
        ],
        fill=255,
    )
    img = Image.composite(img, Image.new("RGB", (w, h)), mask)
    ImageDraw.Draw(img).text((3, 2), "ID 0231", fill=(255, 255, 255))
    return img


def rash(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    skin = np.array([rng.uniform(170, 230), rng.uniform(120, 170), rng.uniform(100, 140)])
    arr = skin * (0.9 + 0.15 * _lowpass(rng, w, h, 6)[..., None])
    img = _u8(arr)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(15, 60))):
        x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1.5, 0.04 * max(w, h))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=(int(rng.uniform(150, 210)), 50, 50))
    return img.filter(ImageFilter.GaussianBlur(1.0))


def styled_chart(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    style = str(rng.choice(["ggplot", "bmh", "classic", "grayscale"]))
    with plt.style.context(style):
        fig = plt.figure(figsize=(w / 100, h / 100), dpi=100)
        ax = fig.add_subplot(111)
        kind = int(rng.integers(4))
        if kind == 0:  # Kaplan-Meier-like steps
            for _ in range(2):
                t = np.sort(rng.exponential(10, 30))
                ax.step(t, np.linspace(1, 0, 30), where="post")
        elif kind == 1:
            ax.hist(rng.normal(0, 1, 200), bins=int(rng.integers(8, 20)))
        elif kind == 2:
            ax.pie(rng.uniform(1, 5, int(rng.integers(3, 6))))
        else:
            x = np.arange(int(rng.integers(3, 7)))
            ax.errorbar(x, rng.uniform(1, 5, len(x)), yerr=rng.uniform(0.1, 1, len(x)), fmt="s-")
        ax.tick_params(labelsize=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout(pad=0.2)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB").resize((w, h))


def pathway(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    nodes = [
        (rng.uniform(0.15, 0.85) * w, rng.uniform(0.15, 0.85) * h)
        for _ in range(int(rng.integers(3, 7)))
    ]
    for (x0, y0), (x1, y1) in itertools.pairwise(nodes):
        draw.line((x0, y0, x1, y1), fill=(0, 0, 0), width=1)
        a = math.atan2(y1 - y0, x1 - x0)
        draw.polygon(
            [
                (x1, y1),
                (x1 - 8 * math.cos(a - 0.4), y1 - 8 * math.sin(a - 0.4)),
                (x1 - 8 * math.cos(a + 0.4), y1 - 8 * math.sin(a + 0.4)),
            ],
            fill=(0, 0, 0),
        )
    for x, y in nodes:
        r = 0.07 * min(w, h)
        draw.ellipse(
            (x - r, y - r * 0.7, x + r, y + r * 0.7),
            fill=tuple(int(v) for v in rng.integers(120, 255, 3)),
            outline=(0, 0, 0),
        )
        draw.text(
            (x - r * 0.6, y - 4),
            str(rng.choice(["p53", "AKT", "mTOR", "NF-kB", "IL6"])),
            fill=(0, 0, 0),
        )
    return img


def agarose_gel(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    arr = np.full((h, w), 25.0, np.float32) + 10 * _lowpass(rng, w, h, 4)
    lanes = int(rng.integers(4, 12))
    for lane in range(lanes):
        x0, x1 = int(w * (lane + 0.2) / lanes), int(w * (lane + 0.8) / lanes)
        ys = (
            np.linspace(0.1, 0.9, 8)
            if lane == 0
            else rng.uniform(0.15, 0.85, int(rng.integers(1, 4)))
        )
        for y in ys:
            y0 = int(y * h)
            arr[y0 : y0 + max(1, h // 60), x0:x1] = rng.uniform(150, 255)
    img = _u8(arr).filter(ImageFilter.GaussianBlur(1.2))
    return img if rng.random() < 0.6 else Image.eval(img, lambda v: 255 - v)


def spreadsheet(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    rows = int(rng.integers(5, 14))
    rh = h / rows
    for r in range(rows):
        if r % 2:
            draw.rectangle((0, r * rh, w, (r + 1) * rh), fill=(225, 232, 245))
        cells = (
            ["Variable", "n", "%", "OR"]
            if r == 0
            else [f"{rng.uniform(0, 99):.1f}" for _ in range(4)]
        )
        for c, cell in enumerate(cells):
            draw.text((4 + c * w / 4, r * rh + 1), cell, fill=(0, 0, 0))
    return img


@dataclass(frozen=True)
class HeldoutClass:
    l2: str
    painter: Any
    named: tuple[str, ...]  # caption sentences that name the modality


FAMILY: tuple[HeldoutClass, ...] = (
    HeldoutClass(
        "ct",
        chest_ct,
        (
            "Axial contrast-enhanced CT of the chest.",
            "Computed tomography shows a nodule in the right lower lobe.",
        ),
    ),
    HeldoutClass(
        "mri",
        spine_mri,
        (
            "Sagittal T2-weighted MRI of the cervical spine.",
            "Magnetic resonance imaging shows disc herniation at C5-C6.",
        ),
    ),
    HeldoutClass(
        "xray",
        chest_xray,
        (
            "Chest radiograph on admission.",
            "Posteroanterior chest X-ray showing bilateral opacities.",
        ),
    ),
    HeldoutClass(
        "ultrasound",
        linear_ultrasound,
        (
            "Ultrasound of the thyroid showing a cystic nodule.",
            "Transabdominal sonography of the liver.",
        ),
    ),
    HeldoutClass(
        "nuclear",
        bone_scan,
        (
            "Whole-body bone scintigraphy, anterior and posterior views.",
            "SPECT images with increased uptake.",
        ),
    ),
    HeldoutClass(
        "histopathology",
        ihc,
        ("Immunohistochemistry for Ki-67, x200.", "H&E staining of the resected tumour."),
    ),
    HeldoutClass(
        "fluorescence",
        membrane_fluorescence,
        (
            "Immunofluorescence of E-cadherin; nuclei with DAPI.",
            "Confocal images of transfected cells.",
        ),
    ),
    HeldoutClass(
        "fundus",
        fundus_macula,
        ("Fundus photograph of the right eye.", "Colour fundus photography at presentation."),
    ),
    HeldoutClass(
        "endoscopy",
        gastric_endoscopy,
        ("Gastroscopy showing an ulcer in the antrum.", "Endoscopic view of the gastric body."),
    ),
    HeldoutClass(
        "dermatology",
        rash,
        ("Erythema on the trunk at presentation.", "Cutaneous eruption on the forearm."),
    ),
    HeldoutClass(
        "chart",
        styled_chart,
        ("Kaplan-Meier survival curves by group.", "Bar graph of expression, mean ± SD."),
    ),
    HeldoutClass(
        "diagram",
        pathway,
        ("Schematic of the proposed signalling pathway.", "Diagram of the study design."),
    ),
    HeldoutClass(
        "gel_blot",
        agarose_gel,
        ("Agarose gel electrophoresis of PCR products.", "Western blot of lysates."),
    ),
    HeldoutClass(
        "table_text",
        spreadsheet,
        ("Table of baseline characteristics.", "Table of odds ratios by subgroup."),
    ),
)
GENERIC = (
    "Representative case at follow-up.",
    "Patient 3, six months after surgery (arrow).",
    "Findings at presentation.",
    "Results in the second cohort.",
    "Case 2: before and after treatment.",
)
NAMED_SHARE = 0.6  # papers name the modality in most captions; the rest name nothing


@dataclass
class HeldoutPanel:
    l2: str
    image: Image.Image
    caption: str
    named: bool  # the caption names this panel's class


def heldout_panels(per_class: int = 20, seed: int = 0) -> list[HeldoutPanel]:
    """``per_class`` panels of each family class with their captions, deterministic."""
    out = []
    for index, cls in enumerate(FAMILY):
        for i in range(per_class):
            rng = np.random.default_rng([seed, 7919, index, i])
            w, h = int(rng.integers(80, 220)), int(rng.integers(80, 220))
            named = bool(rng.random() < NAMED_SHARE)
            pool = cls.named if named else GENERIC
            out.append(HeldoutPanel(cls.l2, cls.painter(rng, w, h), str(rng.choice(pool)), named))
    return out


def relevance_report(
    settings: ClassifierSettings | None = None, *, per_class: int = 20, seed: int = 0
) -> dict[str, Any]:
    """The shipped decision on the held-out family: image alone (no text) and combined with
    the caption; accuracy, abstention, keep/drop, and drops against a caption naming a
    clinical modality."""
    from modeldev.classifier.evaluate import KeepDrop
    from ray_jobs.figures.classifier import ModalityClassifier
    from ray_jobs.figures.decision import UNKNOWN

    classifier = ModalityClassifier(settings or ClassifierSettings())
    tax = classifier.taxonomy
    panels = heldout_panels(per_class, seed)
    images = [p.image for p in panels]
    report: dict[str, Any] = {
        "family": "modality_heldout",
        "seed": seed,
        "panels": len(panels),
        "classes": [c.l2 for c in FAMILY],
        "named_captions": sum(p.named for p in panels),
        "classifier": classifier.name,
        "ood_score": classifier.settings.ood_score,
        "temperature": classifier.temperature,
        "drop_confidence": classifier.settings.drop_confidence or classifier.drop_default,
    }
    for mode in ("image_only", "combined"):
        captions = [p.caption if mode == "combined" else "" for p in panels]
        decisions = classifier.decide_images(images, [""] * len(panels), captions)
        kd, abstained, right, unknown = KeepDrop(), 0, 0, 0
        by: dict[str, int] = {}
        against_text = 0
        per_class: dict[str, dict[str, int]] = {}
        for p, d in zip(panels, decisions, strict=True):
            clinical = tax.classes[p.l2].keep
            kd.add(clinical, d.keep)
            abstained += d.image == UNKNOWN
            right += d.l2 == p.l2
            by[d.decided_by] = by.get(d.decided_by, 0) + 1
            if mode == "combined" and clinical and not d.keep and p.named:
                against_text += 1
            unknown += d.l2 == UNKNOWN
            row = per_class.setdefault(p.l2, {"n": 0, "right": 0, "unknown": 0, "kept": 0})
            row["n"] += 1
            row["right"] += d.l2 == p.l2
            row["unknown"] += d.l2 == UNKNOWN
            row["kept"] += d.keep
        report[mode] = {
            "accuracy": round(right / len(panels), 4),
            "abstention_rate": round(abstained / len(panels), 4),  # the image model's
            "unknown_rate": round(unknown / len(panels), 4),  # the decision's
            "keep_drop": kd.as_dict(),
            "decided_by": dict(sorted(by.items())),
            "per_class": per_class,
        }
        if mode == "combined":
            report[mode]["clinical_dropped_while_caption_names_it"] = against_text
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"relevance on the held-out modality family (seed {report['seed']}): "
        f"{report['panels']} panels, {len(report['classes'])} classes, "
        f"{report['named_captions']} captions name the modality; {report['classifier']}, "
        f"T={report['temperature']}, OOD score {report['ood_score']}, drop confidence "
        f"{report['drop_confidence']}",
        f"{'decision':<11} {'accuracy':>8} {'image abstains':>14} {'unknown':>8} "
        f"{'clin. dropped':>14} {'non-clin. kept':>15}  decided by",
    ]
    for mode in ("image_only", "combined"):
        r = report[mode]
        kd = r["keep_drop"]
        lines.append(
            f"{mode:<11} {r['accuracy']:>8.3f} {r['abstention_rate']:>14.3f} "
            f"{r['unknown_rate']:>8.3f} "
            f"{kd['clinical_dropped']:>4}/{kd['clinical']:<4}{kd['clinical_dropped_rate']:>6.1%} "
            f"{kd['nonclinical_kept']:>4}/{kd['nonclinical']:<4}{kd['nonclinical_kept_rate']:>6.1%}"
            f"  {r['decided_by']}"
        )
    lines.append(
        "clinical panels dropped while the caption names a clinical modality: "
        f"{report['combined']['clinical_dropped_while_caption_names_it']}"
    )
    lines.append(f"{'class':<16} image-only right/unknown/kept   combined right/unknown/kept")
    for cls in report["classes"]:
        a, b = report["image_only"]["per_class"][cls], report["combined"]["per_class"][cls]
        lines.append(
            f"{cls:<16} {a['right']:>3}/{a['unknown']:>3}/{a['kept']:>3} of {a['n']:<3}"
            f"              {b['right']:>3}/{b['unknown']:>3}/{b['kept']:>3}"
        )
    return "\n".join(lines)
