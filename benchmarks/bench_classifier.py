"""Modality classifier: the relevance decision on the held-out family, then throughput.

First the shipped checkpoint's decision on the held-out modality family (``pmcvl
bench-relevance``: panels and captions no training run sees): accuracy, abstention and the
keep/drop confusion, image alone and with the caption. Then images/s of the inference stage per
backbone, same images.

Builds each backbone untrained (speed does not depend on the weights), wraps it in the real
stage (decode, letterbox, normalise, forward, rules, decision) and times it on the real
figures of ../shared/data/medicat_figures repeated to ``--images``. One run, a table with the
ratio to ResNet-101 (the seed's backbone). Run with ``make bench-classifier``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from modeldev.classifier.data import MAKER_CLASS
from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.classifier import ModalityClassifier, build_model

MEDICAT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "medicat_figures"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=224)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--backbones", nargs="+", default=["resnet101", "resnet50", "resnet18"])
    parser.add_argument("--heldout-n", type=int, default=20, help="held-out panels per class")
    args = parser.parse_args()
    from modeldev.classifier.heldout import format_report, relevance_report

    print(format_report(relevance_report(ClassifierSettings(), per_class=args.heldout_n)))
    print()
    figures = [p.read_bytes() for p in sorted(MEDICAT.glob("*.png"))]
    images = [figures[i % len(figures)] for i in range(args.images)]
    batch = {"key": [str(i) for i in range(len(images))], "image": images}
    classes = sorted(set(MAKER_CLASS.values()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backbone in args.backbones:
            path = Path(tmp) / f"{backbone}.pt"
            torch.save(
                {
                    "backbone": backbone,
                    "classes": classes,
                    "imgsz": args.imgsz,
                    "state_dict": build_model(backbone, len(classes)).state_dict(),
                },
                path,
            )
            stage = ModalityClassifier(ClassifierSettings(weights=str(path), batch_size=args.batch))
            stage({"key": batch["key"][:2], "image": batch["image"][:2]})  # warm-up
            start = time.perf_counter()
            stage(batch)
            rows.append((backbone, time.perf_counter() - start, stage.device))
    base = rows[0][1]
    print(
        f"modality stage on {len(images)} real figures, imgsz {args.imgsz}, batch {args.batch},"
        f" torch threads {torch.get_num_threads()}"
    )
    print(f"{'backbone':<12} {'device':<6} {'seconds':>8} {'images/s':>9} {'time vs first':>14}")
    for backbone, seconds, device in rows:
        print(
            f"{backbone:<12} {device:<6} {seconds:>8.2f} {len(images) / seconds:>9.2f} "
            f"{seconds / base:>14.2f}"
        )


if __name__ == "__main__":
    main()
