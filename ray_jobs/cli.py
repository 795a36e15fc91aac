"""The ``pmcvl`` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import cast

import click
import yaml

from ray_jobs import __version__
from ray_jobs.config import ArchiveLimits, load_settings
from ray_jobs.failures import FailureRecord
from ray_jobs.logs import setup_logging

_CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML config; PMCVL__SECTION__KEY environment variables override it.",
)


_WEIGHTS = click.option(
    "--weights",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Detector checkpoint [detector.weights from the config].",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pmcvl")
def main() -> None:
    """pmcvl: PubMed Central Open Access articles to vision-language training data."""


@main.command()
@click.argument("path", type=click.Path(exists=True))
@click.option("--max-xml-bytes", type=int, default=ArchiveLimits().max_xml_bytes, show_default=True)
def parse(path: str, max_xml_bytes: int) -> None:
    """Parse one article (.xml/.nxml, article folder or .tar.gz) and print it as JSON.

    A file that cannot be used prints a failure record and exits with status 1.
    """
    from ray_jobs.pmc.article_table import article_json
    from ray_jobs.pmc.jats import parse_package
    from ray_jobs.pmc.sources import package_from_path

    limits = ArchiveLimits(max_xml_bytes=max_xml_bytes)
    stage = "fetch"
    try:
        package = package_from_path(path, limits)
        stage = "parse"
        article = parse_package(package, limits.max_xml_bytes)
    except Exception as exc:
        failure = FailureRecord.from_exception(str(path), stage, exc)
        click.echo(json.dumps({"failure": failure.to_row()}, indent=2))
        sys.exit(1)
    click.echo(article_json(article))


@main.command("sample-corpus")
@click.option("--out", type=click.Path(file_okay=False), required=True)
@click.option("--n", "count", type=click.IntRange(1), default=20, show_default=True)
@click.option(
    "--layout",
    type=click.Choice(["s3", "bundles", "folders"]),
    default="folders",
    show_default=True,
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--image-width", type=click.IntRange(32), default=320, show_default=True)
def sample_corpus(out: str, count: int, layout: str, seed: int, image_width: int) -> None:
    """Write a generated PMC-like corpus (with truth.jsonl) in one of the source layouts."""
    from ray_jobs.pmc.sample_corpus import Layout, write_corpus

    setup_logging()
    written = write_corpus(
        Path(out), count, cast(Layout, layout), seed, image_width, progress=sys.stderr.isatty()
    )
    click.echo(f"wrote {written} article versions ({layout} layout) to {out}")


@main.command()
@_CONFIG
@click.option("--progress/--no-progress", default=True, help="Show progress bars.")
def ingest(config_path: str | None, progress: bool) -> None:
    """List the source, skip what the ledger has, parse the rest into the articles table."""
    from ray_jobs.jobs.ingest import run_ingest

    settings = load_settings(config_path)
    setup_logging(settings.log_level)
    report = run_ingest(settings, progress=progress and sys.stderr.isatty())
    click.echo(
        json.dumps(
            {
                "run_id": report.run_id,
                "output": report.output,
                "listed": report.listed,
                "unchanged": report.unchanged,
                "articles": report.articles,
                "figures": report.figures,
                "failed": report.failed,
                "skipped": report.skipped,
                "failures_by_type": report.failures_by_type,
            },
            indent=2,
        )
    )


@main.command()
@click.option("--out", type=click.Path(file_okay=False), required=True)
@click.option("--n", "count", type=click.IntRange(1), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--panels",
    "folders",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Folders of real single-panel images to sample from (repeatable).",
)
@click.option("--workers", type=click.IntRange(1), default=None, help="Processes [all cores].")
@click.option("--max-side", type=click.IntRange(64), default=768, show_default=True)
def synth(
    out: str, count: int, seed: int, folders: tuple[str, ...], workers: int | None, max_side: int
) -> None:
    """Write synthetic compound figures as a YOLO dataset plus COCO JSON."""
    from ray_jobs.figures.synth.generate import write_dataset

    setup_logging()
    figures = write_dataset(
        Path(out),
        count,
        seed,
        folders=list(folders) or None,
        workers=workers,
        max_side=max_side,
        progress=sys.stderr.isatty(),
    )
    panels = sum(len(f["panels"]) for f in figures)
    click.echo(f"wrote {len(figures)} figures ({panels} panels) to {out}")


@main.command("train-detector")
@click.option("--data", type=click.Path(exists=True), required=True, help="YOLO data.yaml.")
@click.option("--out", type=click.Path(file_okay=False), required=True)
@click.option(
    "--arch",
    type=click.Choice(["yolo11n", "yolo11s", "yolo11m", "rtdetr-l"]),
    default="yolo11n",
    show_default=True,
)
@click.option("--epochs", type=click.IntRange(1), default=30, show_default=True)
@click.option("--imgsz", type=click.IntRange(32), default=320, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=16, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None, help="cpu, 0, 0,1 ... [a GPU when there is one]")
def train_detector_cmd(
    data: str,
    out: str,
    arch: str,
    epochs: int,
    imgsz: int,
    batch: int,
    seed: int,
    device: str | None,
) -> None:
    """Train the panel detector from scratch (offline) and write its checkpoint and metrics."""
    from ray_jobs.figures.detector_train import train_detector

    setup_logging()
    result = train_detector(
        data, out, arch=arch, epochs=epochs, imgsz=imgsz, batch=batch, seed=seed, device=device
    )
    click.echo(
        json.dumps(
            {"weights": result.weights, "seconds": result.seconds, "metrics": result.metrics},
            indent=2,
        )
    )


def _detector_settings(config_path: str | None, weights: str | None, **overrides):  # type: ignore[no-untyped-def]
    settings = load_settings(config_path).detector
    update = {k: v for k, v in overrides.items() if v is not None}
    if weights:
        update["weights"] = weights
    return settings.model_copy(update=update)


@main.command("eval-detector")
@_WEIGHTS
@click.option(
    "--data",
    type=click.Path(exists=True),
    required=True,
    help="YOLO data.yaml or folder, COCO JSON, or a folder of ImageCLEF 2016 XML.",
)
@click.option(
    "--images",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Image folder for COCO / ImageCLEF annotations [beside them].",
)
@click.option("--split", default="val", show_default=True, help="train, val, or all.")
@_CONFIG
def eval_detector(
    weights: str | None, data: str, images: str | None, split: str, config_path: str | None
) -> None:
    """mAP@0.5, mAP@0.5:0.95 and F1@0.5 for panels on annotated figures."""
    from ray_jobs.figures.evaluate import evaluate, load_coco, load_imageclef, load_yolo
    from ray_jobs.figures.panels import PanelDetector

    setup_logging()
    path = Path(data)
    image_dir = Path(images) if images else None
    if path.suffix == ".json":
        items = load_coco(path, image_dir)
    elif path.is_dir() and any(path.glob("*.xml")):
        items = load_imageclef(path, image_dir)
    else:
        items = load_yolo(path, split)
    detector = PanelDetector(_detector_settings(config_path, weights))
    click.echo(
        json.dumps(
            {
                "weights": detector.name,
                "version": detector.version,
                "data": data,
                **evaluate(detector, items),
            },
            indent=2,
        )
    )


@main.command()
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@_WEIGHTS
@click.option(
    "--overlay",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the image with the boxes drawn on it (PNG).",
)
@click.option("--conf", type=float, default=None, help="Panel confidence threshold.")
@_CONFIG
def detect(
    image: str,
    weights: str | None,
    overlay: str | None,
    conf: float | None,
    config_path: str | None,
) -> None:
    """Print the panels found in one figure as JSON."""
    from ray_jobs.figures.images import decode_image
    from ray_jobs.figures.overlay import draw_boxes
    from ray_jobs.figures.panels import PanelDetector

    detector = PanelDetector(_detector_settings(config_path, weights, conf=conf))
    figures, failures = detector.detect([(image, Path(image).read_bytes())], with_crops=False)
    if failures:
        click.echo(json.dumps({"failure": failures[0].to_row()}, indent=2))
        sys.exit(1)
    fig = figures[0]
    panels = [
        {
            "index": p.panel_index,
            "bbox": list(p.bbox),
            "score": p.score,
            "status": p.status,
            "label_bbox": list(p.label_bbox) if p.label_bbox else None,
            "label_score": p.label_score,
        }
        for p in fig.panels
    ]
    dropped = [
        {"bbox": list(d.bbox), "score": round(d.score, 4), "reason": d.reason} for d in fig.dropped
    ]
    click.echo(
        json.dumps(
            {
                "image": image,
                "width": fig.width,
                "height": fig.height,
                "detector": detector.name,
                "detector_version": detector.version,
                "panels": panels,
                "dropped": dropped,
            },
            indent=2,
        )
    )
    if overlay:
        boxes = [p.bbox for p in fig.panels] + [p.label_bbox for p in fig.panels if p.label_bbox]
        kinds = ["panel"] * len(fig.panels) + ["label"] * sum(1 for p in fig.panels if p.label_bbox)
        captions = [str(p.panel_index) for p in fig.panels] + [""] * (len(boxes) - len(fig.panels))
        img = decode_image(Path(image).read_bytes())
        draw_boxes(img, boxes, kinds, captions).save(overlay, format="PNG")


@main.command("classifier-data")
@click.option("--out", type=click.Path(file_okay=False), required=True)
@click.option(
    "--n",
    "per_class",
    type=click.IntRange(2),
    default=100,
    show_default=True,
    help="Images per class (a fifth go to val/).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--size", type=click.IntRange(32), default=160, show_default=True)
def classifier_data(out: str, per_class: int, seed: int, size: int) -> None:
    """Write an ImageFolder tree of taxonomy classes drawn by the synthetic panel makers."""
    from ray_jobs.figures.classifier import write_dataset

    counts = write_dataset(Path(out), per_class, seed, size)
    click.echo(json.dumps(counts, indent=2))


@main.command("train-classifier")
@click.option("--data", type=click.Path(exists=True, file_okay=False), required=True)
@click.option("--out", type=click.Path(file_okay=False), required=True)
@click.option("--backbone", default=None, help="torchvision ResNet name [classifier.backbone].")
@click.option("--epochs", type=click.IntRange(1), default=5, show_default=True)
@click.option("--imgsz", type=click.IntRange(32), default=None)
@click.option("--batch", type=click.IntRange(1), default=16, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@_CONFIG
def train_classifier_cmd(
    data: str,
    out: str,
    backbone: str | None,
    epochs: int,
    imgsz: int | None,
    batch: int,
    seed: int,
    config_path: str | None,
) -> None:
    """Fine-tune (or train from scratch) the modality classifier on an ImageFolder tree."""
    from ray_jobs.figures.classifier import train_classifier

    setup_logging()
    settings = load_settings(config_path).classifier
    result = train_classifier(
        Path(data),
        Path(out),
        backbone=backbone or settings.backbone,
        epochs=epochs,
        imgsz=imgsz or settings.imgsz,
        batch=batch,
        seed=seed,
        pretrained=settings.pretrained,
    )
    click.echo(
        json.dumps(
            {
                "weights": result.weights,
                "seconds": result.seconds,
                "val_accuracy": result.val_accuracy,
            },
            indent=2,
        )
    )


@main.command("eval-classifier")
@click.option("--data", type=click.Path(exists=True, file_okay=False), required=True)
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--split", default="val", show_default=True)
@_CONFIG
def eval_classifier(data: str, weights: str | None, split: str, config_path: str | None) -> None:
    """Per-class precision and recall and the confusion matrix on a held-out split."""
    from ray_jobs.figures.classifier import evaluate_classifier

    report = evaluate_classifier(
        Path(weights or load_settings(config_path).classifier.weights), Path(data), split
    )
    classes = report["classes"]
    click.echo(f"accuracy {report['accuracy']:.4f}")
    click.echo(f"{'class':<22} {'precision':>9} {'recall':>7} {'support':>7}")
    for name in classes:
        row = report["per_class"][name]
        click.echo(f"{name:<22} {row['precision']:>9.3f} {row['recall']:>7.3f} {row['support']:>7}")
    click.echo("confusion (rows true, columns predicted, in the order above):")
    for name, row in zip(classes, report["confusion"], strict=True):
        click.echo(f"{name:<22} " + " ".join(f"{v:>4}" for v in row))


@main.command("split-caption")
@click.argument("text")
@click.option("--bold", multiple=True, help="A bold run of the caption (JATS <bold>), repeatable.")
def split_caption_cmd(text: str, bold: tuple[str, ...]) -> None:
    """Split a compound-figure caption into preamble, per-panel texts and trailer."""
    from ray_jobs.captions.split import split_caption

    click.echo(
        json.dumps(split_caption(text, frozenset(bold)).to_dict(), indent=2, ensure_ascii=False)
    )


@main.command("show-config")
@_CONFIG
def show_config(config_path: str | None) -> None:
    """Print the effective configuration (file, then environment overrides)."""
    settings = load_settings(config_path)
    click.echo(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False))


if __name__ == "__main__":
    main()
