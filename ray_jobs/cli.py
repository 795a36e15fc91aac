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
from ray_jobs.contract.failures import FailureRecord
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
@_CONFIG
def run(config_path: str | None) -> None:
    """Build the dataset: the whole pipeline as a Ray job, new and changed articles only.

    Runs on the Ray cluster named by RAY_ADDRESS (or pipeline.ray_address), else on a local
    Ray instance. Prints the run's counts and where the manifest is.
    """
    from ray_jobs.jobs.build_dataset import main as build_main

    argv = ["--config", config_path] if config_path else []
    raise SystemExit(build_main(argv))


def _share_option(name: str, help: str):  # type: ignore[no-untyped-def]
    """A share of the generated figures, from 0 (none; earlier data sets unchanged) to 1."""
    return click.option(
        name, type=click.FloatRange(0, 1), default=0.0, show_default=True, help=help
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
@_share_option(
    "--hard",
    "Share of hard figures (gap-filled plots, tables, prose, heat maps, sketches, textures, "
    "gutterless and uneven grids, insets, titles and legends, scan noise); 0 writes the "
    "original mix byte for byte.",
)
@_share_option(
    "--nested",
    "Share of figures laid out by successive cuts (a tall panel beside a stack, rows of "
    "thumbnails; up to 16 panels, often gutterless); 0 leaves every figure as it was.",
)
@_share_option(
    "--localizers",
    "Share of dark-ground scans (CT, fundus) drawn with a small reference image "
    "floating beside them, unframed: one panel; 0 leaves every figure as it was.",
)
@_share_option(
    "--furniture",
    "Share of the other figures that also get a title and a colour legend outside every "
    "panel, as hard figures do; 0 leaves every figure as it was.",
)
@_share_option(
    "--label-faces",
    "Share of figures whose labels are set in one of the label reader's faces (sans, serif, "
    "narrow, bold, italic) instead of DejaVu Sans; 0 leaves every figure as it was.",
)
@_share_option(
    "--dense",
    "Share of plates of 8 to 36 small panels, touching or nearly, told apart by a thin grey "
    "frame; 0 leaves every figure as it was.",
)
def synth(
    out: str,
    count: int,
    seed: int,
    folders: tuple[str, ...],
    workers: int | None,
    max_side: int,
    hard: float,
    nested: float,
    localizers: float,
    furniture: float,
    label_faces: float,
    dense: float,
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
        hard=hard,
        nested=nested,
        furniture=furniture,
        localizers=localizers,
        label_faces=label_faces,
        dense=dense,
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
@click.option(
    "--warm-start",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Start from this checkpoint (e.g. the shipped one) instead of from scratch.",
)
@click.option("--fine-tune", is_flag=True, help="The gentle warm-start schedule (AdamW, low LR).")
@click.option("--hours", type=click.FloatRange(0.001), default=None, help="Time budget.")
@click.option("--workers", type=click.IntRange(0), default=2, show_default=True)
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads [cores - 1].")
@click.option("--resume", is_flag=True, help="Continue the interrupted run in --out.")
def train_detector_cmd(
    data: str,
    out: str,
    arch: str,
    epochs: int,
    imgsz: int,
    batch: int,
    seed: int,
    device: str | None,
    warm_start: str | None,
    fine_tune: bool,
    hours: float | None,
    workers: int,
    threads: int | None,
    resume: bool,
) -> None:
    """Train the panel detector (offline) and write its checkpoint and metrics."""
    from ray_jobs.figures.detector_train import train_detector

    setup_logging()
    result = train_detector(
        data,
        out,
        arch=arch,
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        seed=seed,
        device=device,
        warm_start=warm_start,
        fine_tune=fine_tune,
        hours=hours,
        workers=workers,
        threads=threads,
        resume=resume,
    )
    click.echo(
        json.dumps(
            {"weights": result.weights, "seconds": result.seconds, "metrics": result.metrics},
            indent=2,
        )
    )


@main.command("average-detectors")
@click.argument("base", type=click.Path(exists=True, dir_okay=False))
@click.argument("tuned", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), required=True)
@click.option("--base-share", type=click.FloatRange(0, 1), default=0.5, show_default=True)
def average_detectors(base: str, tuned: str, out: str, base_share: float) -> None:
    """Average a checkpoint and its fine-tune weight by weight (WiSE-FT)."""
    from ray_jobs.figures.detector_train import average_checkpoints

    click.echo(str(average_checkpoints(base, tuned, out, base_share)))


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
            "reason": p.reason,
            "label_bbox": list(p.label_bbox) if p.label_bbox else None,
            "label_score": p.label_score,
            "letter": p.letter,
            "letter_score": p.letter_score,
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
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--pretrained",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Local ImageNet state dict to start from [classifier.pretrained].",
)
@click.option("--augment/--no-augment", default=True, show_default=True)
@_CONFIG
def train_classifier_cmd(
    data: str,
    out: str,
    backbone: str | None,
    epochs: int,
    imgsz: int | None,
    batch: int,
    lr: float,
    seed: int,
    pretrained: str | None,
    augment: bool,
    config_path: str | None,
) -> None:
    """Train the modality classifier on an ImageFolder tree (train/<class>/, val/<class>/,
    class folders named as the taxonomy's L2 classes): fit, calibrate on val/, evaluate, and
    write the checkpoint, its report and MODEL_CARD.md into --out."""
    from ray_jobs.figures.classifier import train_classifier

    setup_logging()
    settings = load_settings(config_path).classifier
    try:
        result = train_classifier(
            Path(data),
            Path(out),
            backbone=backbone or settings.backbone,
            epochs=epochs,
            imgsz=imgsz or settings.imgsz,
            batch=batch,
            lr=lr,
            seed=seed,
            pretrained=pretrained or settings.pretrained,
            augmentation=augment,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        json.dumps(
            {
                "weights": result.weights,
                "card": result.card,
                "seconds": result.seconds,
                "val_accuracy": result.val_accuracy,
                "temperature": result.calibration.get("temperature"),
            },
            indent=2,
        )
    )


@main.command("eval-classifier")
@click.option("--data", type=click.Path(exists=True, file_okay=False), required=True)
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--split", default="val", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_CONFIG
def eval_classifier(
    data: str, weights: str | None, split: str, as_json: bool, config_path: str | None
) -> None:
    """Per-class precision and recall, the confusion matrix, the abstention rate and the
    image-only keep/drop confusion on a labelled folder (<split>/<class>/; the classes may be
    a subset of the model's)."""
    from ray_jobs.figures.classifier import evaluate_classifier

    settings = load_settings(config_path).classifier
    try:
        report = evaluate_classifier(Path(weights or settings.weights), Path(data), split, settings)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    classes = report["classes"]
    click.echo(f"accuracy {report['accuracy']:.4f} on {report['n']} images")
    click.echo(
        f"abstention {report['abstention_rate']:.4f}; accuracy when answering "
        f"{report['accuracy_when_answering']:.4f}"
    )
    kd = report["keep_drop"]
    click.echo(
        f"image-only keep/drop: clinical dropped {kd['clinical_dropped']}/{kd['clinical']}"
        f" ({kd['clinical_dropped_rate']:.1%}), non-clinical kept "
        f"{kd['nonclinical_kept']}/{kd['nonclinical']} ({kd['nonclinical_kept_rate']:.1%})"
    )
    click.echo(f"{'class':<22} {'precision':>9} {'recall':>7} {'support':>7}")
    for name in classes:
        row = report["per_class"][name]
        click.echo(f"{name:<22} {row['precision']:>9.3f} {row['recall']:>7.3f} {row['support']:>7}")
    click.echo("confusion (rows true, columns predicted, in the order above, then (other)):")
    for name, row in zip(classes, report["confusion"], strict=True):
        click.echo(f"{name:<22} " + " ".join(f"{v:>4}" for v in row))


@main.command("bench-relevance")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--n", "per_class", type=click.IntRange(1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_CONFIG
def bench_relevance(
    weights: str | None, per_class: int, seed: int, as_json: bool, config_path: str | None
) -> None:
    """The relevance decision on the held-out modality family (panels and captions no training
    run sees): accuracy, abstention and keep/drop, image alone and with the caption."""
    from ray_jobs.figures.modality_heldout import format_report, relevance_report

    settings = load_settings(config_path).classifier
    if weights:
        settings = settings.model_copy(update={"weights": weights})
    report = relevance_report(settings, per_class=per_class, seed=seed)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))


@main.command("split-caption")
@click.argument("text")
@click.option("--bold", multiple=True, help="A bold run of the caption (JATS <bold>), repeatable.")
def split_caption_cmd(text: str, bold: tuple[str, ...]) -> None:
    """Split a compound-figure caption into preamble, per-panel texts and trailer."""
    from ray_jobs.captions.split import split_caption

    click.echo(
        json.dumps(split_caption(text, frozenset(bold)).to_dict(), indent=2, ensure_ascii=False)
    )


@main.command()
@click.argument("out")
@_CONFIG
def report(out: str, config_path: str | None) -> None:
    """Write OUT/report/index.html (plots, tables) and stats.json for a dataset output.

    OUT is a local folder or an s3:// prefix. The config gives the token windows, the
    long-context tokenizer and the S3 endpoint.
    """
    from ray_jobs.report import build_report

    if "://" not in out and not Path(out).is_dir():
        raise click.ClickException(f"{out}: no such folder")
    stats, page = build_report(out, load_settings(config_path))
    for warning in stats.warnings:
        click.echo(f"warning: {warning}", err=True)
    funnel = ", ".join(f"{k} {v:,}" for k, v in stats.funnel.items())
    click.echo(f"{funnel}; failures {stats.failures_total:,}")
    click.echo(f"report: {page}")


@main.command("llm-check")
@click.option("--base-url", help="Server root or .../v1 [longcap.base_url, $PMCVL_LLM_BASE_URL].")
@click.option("--model", help="Model that writes descriptions [longcap.model].")
@click.option("--vision-model", help="Model that sees the images [longcap.vision_model].")
@click.option("--timeout", "timeout_s", type=float, help="Seconds per request [longcap.timeout_s].")
@_CONFIG
def llm_check(
    base_url: str | None,
    model: str | None,
    vision_model: str | None,
    timeout_s: float | None,
    config_path: str | None,
) -> None:
    """Check an enrichment server: /health, the model list, one JSON-schema constrained call and
    one image call. Exits with status 1 when any check fails. The API key comes from
    longcap.api_key or $PMCVL_LLM_API_KEY."""
    import asyncio

    from ray_jobs.longcap.check import run_checks
    from ray_jobs.longcap.client import server_url

    settings = load_settings(config_path).longcap
    updates = {"model": model, "vision_model": vision_model, "timeout_s": timeout_s}
    settings = settings.model_copy(update={k: v for k, v in updates.items() if v is not None})
    try:
        click.echo(f"server {server_url(settings, override=base_url)}")
    except ValueError as exc:  # no server configured
        raise click.ClickException(str(exc)) from None
    checks = asyncio.run(run_checks(settings, base_url=base_url))
    for check in checks:
        mark = {True: "ok", False: "FAIL", None: "skip"}[check.ok]
        click.echo(f"{mark:<5} {check.name:<12} {check.seconds * 1000:>7.0f} ms  {check.detail}")
    if any(check.ok is False for check in checks):
        sys.exit(1)


@main.command("build-benchmark")
@click.option("--dataset", required=True, help="A dataset output (folder or s3://bucket/prefix).")
@click.option("--out", required=True, help="Where the benchmark goes (folder or s3://...).")
@click.option("--size", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--split", default="train", show_default=True, help="The split pairs come from.")
@click.option("--overwrite", is_flag=True, help="Replace a benchmark already at --out.")
@_CONFIG
def build_benchmark_cmd(
    dataset: str, out: str, size: int, split: str, overwrite: bool, config_path: str | None
) -> None:
    """A long-caption retrieval benchmark: one image-caption pair per article from the SIZE
    most recent articles, and excluded_articles.txt, the articles training must leave out.

    The caption is the long caption where the build wrote one, else the subcaption, else the
    training text; benchmark.json counts each. S3 settings come from output.s3.
    """
    from ray_jobs.benchmark.build import build_benchmark

    meta = build_benchmark(
        dataset,
        out,
        size=size,
        split=split,
        s3=load_settings(config_path).output.s3,
        overwrite=overwrite,
    )
    if meta["size"] < size:
        click.echo(f"warning: only {meta['size']} articles qualify (asked for {size})", err=True)
    summary = {k: meta[k] for k in ("size", "split", "caption_sources", "years")}
    click.echo(json.dumps({"benchmark": out, **summary, "exclusion": meta["exclusion"]}, indent=2))


@main.command("eval-retrieval")
@click.option("--checkpoint", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option(
    "--model", required=True, help="The model template (pmcvl-tiny, ...) or its rendered name."
)
@click.option("--benchmark", type=click.Path(exists=True, file_okay=False), required=True)
@click.option(
    "--context-length",
    type=click.IntRange(2),
    default=None,
    help="Text tokens the model was trained with [the run's config].",
)
@click.option("--hf-text-path", default=None, help="An HF text tower's local folder.")
@click.option(
    "--labels",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help='Zero-shot set, JSON lines: {"image": PATH or "key": BENCHMARK_KEY, "label": TEXT}.',
)
@click.option("--label-template", default="a {} image", show_default=True)
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... [cuda when present]")
@click.option("--batch-size", type=click.IntRange(1), default=64, show_default=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="The JSON's path [next to the checkpoint: epoch_N.retrieval.json].",
)
@click.option(
    "--copy-json",
    "copies",
    multiple=True,
    help="Also write the JSON here (a path or s3://...); repeatable.",
)
def eval_retrieval_cmd(
    checkpoint: str,
    model: str,
    benchmark: str,
    context_length: int | None,
    hf_text_path: str | None,
    labels: str | None,
    label_template: str,
    device: str | None,
    batch_size: int,
    out: str | None,
    copies: tuple[str, ...],
) -> None:
    """Recall@1/5/10/100 image→text and text→image of a CLIP checkpoint on a benchmark
    (cosine similarity of L2-normalised embeddings), and zero-shot accuracy with --labels."""
    from ray_jobs.benchmark.evaluate import evaluate_checkpoint, result_path

    result = evaluate_checkpoint(
        checkpoint,
        model,
        benchmark,
        context_length=context_length,
        hf_text_path=hf_text_path,
        labels=labels,
        label_template=label_template,
        device=device,
        batch_size=batch_size,
        out=out,
        copies=copies,
    )
    click.echo(json.dumps(result, indent=2))
    click.echo(f"written: {out or result_path(Path(checkpoint))}", err=True)


@main.command("render-training-job")
@_CONFIG
@click.option(
    "--manifest",
    required=True,
    help="The dataset's manifest.json: s3://... or a path on the work volume.",
)
@click.option("--run", "run_name", default=None, help="Run name [clip-<UTC time>].")
@click.option(
    "--job",
    type=click.Choice(["train", "eval"]),
    default="train",
    show_default=True,
    help="Which Job: eval scores the run's last checkpoint once training is done.",
)
@click.option(
    "--validate",
    "k8s_version",
    default=None,
    help="Check against this Kubernetes version's schema first (offline), e.g. 1.30.",
)
def render_training_job_cmd(
    config_path: str | None, manifest: str, run_name: str | None, job: str, k8s_version: str | None
) -> None:
    """Print a CLIP training (or evaluation) Kubernetes Job as YAML, from the training section
    of the config: `pmcvl render-training-job --config C --manifest URI | kubectl apply -f -`."""
    from ray_jobs.training import k8s_job

    settings = load_settings(config_path).training
    run = run_name or k8s_job.default_run_name()
    try:
        if job == "train":
            spec = k8s_job.render_training_job(settings, manifest, run)
        else:
            spec = k8s_job.render_eval_job(settings, run, xcom=False)
        if k8s_version:
            k8s_job.validate(spec, k8s_version)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(k8s_job.to_yaml(spec), nl=False)


@main.command("show-config")
@_CONFIG
def show_config(config_path: str | None) -> None:
    """Print the effective configuration (file, then environment overrides)."""
    settings = load_settings(config_path)
    click.echo(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False))


if __name__ == "__main__":
    main()
