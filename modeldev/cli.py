"""The ``pmcvl-dev`` command: model development, apart from the product's ``pmcvl``.

Synthetic data, training, averaging and evaluation of the panel detector and the modality
classifier, and the held-out relevance report. None of it runs in a dataset build, and none of
it is in the runtime images (``modeldev`` is not in the image build context), so its commands
are not in the operator's ``pmcvl --help``. The ``--config``/``--weights`` options and the
detector settings they resolve to are the product's own, so ``pmcvl-dev eval-detector`` scores
the detector exactly as ``pmcvl detect`` configures it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ray_jobs import __version__
from ray_jobs.cli import _CONFIG, _WEIGHTS, _detector_settings
from ray_jobs.config import load_settings
from ray_jobs.logs import setup_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pmcvl-dev")
def main() -> None:
    """pmcvl-dev: synthetic data, training and evaluation of the models pmcvl runs."""


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
@click.option(
    "--style",
    type=click.Choice(["flat", "literature"]),
    default="flat",
    show_default=True,
    help="flat: the procedural generator (the options above); literature: matplotlib charts, "
    "blots, micrographs, tables and small multiples laid out as journal figures "
    "(modeldev.synth.literature; --max-side defaults to 1024 there).",
)
@_share_option(
    "--mix",
    "With --style literature: share of figures drawn by the flat generator instead.",
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
    style: str,
    mix: float,
) -> None:
    """Write synthetic compound figures as a YOLO dataset plus COCO JSON."""
    from modeldev.synth.generate import write_dataset

    setup_logging()
    if style == "literature":
        from modeldev.synth.literature import write_literature_dataset

        source = click.get_current_context().get_parameter_source("max_side")
        side = 1024 if source is click.core.ParameterSource.DEFAULT else max_side
        written = write_literature_dataset(Path(out), count, seed, workers, side, mix)
        panels = sum(len(f["panels"]) for f in written)
        click.echo(f"wrote {len(written)} figures ({panels} panels) to {out}")
        return
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
    from modeldev.detector.train import train_detector

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
    from modeldev.detector.train import average_checkpoints

    click.echo(str(average_checkpoints(base, tuned, out, base_share)))


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
    from modeldev.detector.evaluate import evaluate, load_coco, load_imageclef, load_yolo
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


@main.command("eval-real")
@_WEIGHTS
@_CONFIG
@click.option(
    "--article",
    "articles",
    multiple=True,
    help="Score only this article (repeatable) [all five].",
)
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write JSON."
)
@click.option(
    "--overlays",
    type=click.Path(file_okay=False),
    default=None,
    help="Write OVERLAYS/<article>/<image>.png, truth red and prediction green, for the "
    "tuning articles' figures (never the kept-out ones).",
)
@click.option("--worst", type=click.IntRange(0), default=10, show_default=True)
@click.option(
    "--medicat/--no-medicat",
    default=True,
    show_default=True,
    help="Also the exact-count rate on the ten medicat figures of the held-out protocol.",
)
def eval_real(
    weights: str | None,
    config_path: str | None,
    articles: tuple[str, ...],
    json_out: str | None,
    overlays: str | None,
    worst: int,
    medicat: bool,
) -> None:
    """The product's panel detector on the hand-made truth of real article figures.

    Panel F1@0.5, exact-count share, caption-count agreement and CPU seconds a figure, for the
    tuning articles and the kept-out ones apart, each also over compound figures only; then
    the worst tuning figures one by one (kept-out ones are never listed one by one)."""
    from modeldev.real_figures import evaluate as ev
    from modeldev.real_figures import truth
    from ray_jobs.figures.panels import PanelDetector

    setup_logging()
    loaded = truth.load_all()
    unknown = set(articles) - {a.article for a in loaded}
    if unknown:
        raise click.BadParameter(f"no truth for {sorted(unknown)}", param_hint="--article")
    if articles:
        loaded = [a for a in loaded if a.article in articles]
    figures = truth.figures(loaded)
    detector = PanelDetector(_detector_settings(config_path, weights))
    rows = ev.evaluate_detector(detector, figures)
    summary = ev.report(rows)
    name = f"{detector.name}@{detector.settings.imgsz}"
    click.echo(
        f"{len(figures)} real figures and tables, {len(loaded)} articles; kept out: "
        f"{', '.join(truth.KEPT_OUT)}"
    )
    click.echo(ev.format_table(summary, name))
    shown = ev.worst(rows, worst)
    if shown:
        click.echo(f"\nworst {len(shown)} tuning figures (F1, then count off)")
        click.echo(ev.format_worst(shown))
    held: dict | None = None
    if medicat:
        held = ev.medicat(detector)
        click.echo(
            f"\nmedicat (10, count from caption): exact count {held['exact_count']:.3f} "
            f"{list(held['exact_count_ci'])}, panels {held['panels']}"
        )
    if overlays:
        written = ev.write_overlays(figures, rows, Path(overlays))
        click.echo(f"\n{len(written)} overlays (truth red, prediction green) under {overlays}")
    if json_out:
        out = {
            "weights": detector.name,
            "version": detector.version,
            "imgsz": detector.settings.imgsz,
            "kept_out": list(truth.KEPT_OUT),
            "summary": summary,
            "figures": [r.row() for r in ev.figure_rows(rows)],
            "medicat": held,
        }
        Path(json_out).write_text(json.dumps(out, indent=2) + "\n")


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
    from modeldev.classifier.data import write_dataset

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
    from modeldev.classifier.train import train_classifier

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
    from modeldev.classifier.evaluate import evaluate_classifier

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
    from modeldev.classifier.heldout import format_report, relevance_report

    settings = load_settings(config_path).classifier
    if weights:
        settings = settings.model_copy(update={"weights": weights})
    report = relevance_report(settings, per_class=per_class, seed=seed)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))


@main.command("eval-published")
@click.argument("out", type=click.Path(exists=True, file_okay=False), required=False)
@_CONFIG
def eval_published(out: str | None, config_path: str | None) -> None:
    """What the pipeline publishes from ../shared/data/real_articles, against the hand truth:
    per compound figure, paired panels or whole, boxes matching true panels and labels right
    or wrong; tuning and kept-out articles apart. With OUT, a build's index; without, the
    panel stage run here (no Ray, no relevance filter)."""
    from modeldev.real_figures import published, truth

    setup_logging()
    root = truth.data_root()
    if out:
        rows = published.read_index(Path(out)).to_pylist()
    else:
        rows = published.stage_rows(root, load_settings(config_path))
    scores = published.published(truth.load_all(), root, rows)
    click.echo(json.dumps(published.by_split(scores), indent=2))


@main.command("pseudo-labels")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--config", "config_path", required=True, help="The build's config (its source).")
@click.option("--out", type=click.Path(file_okay=False), required=True, help="The YOLO set.")
def pseudo_labels_cmd(dataset: str, config_path: str, out: str) -> None:
    """A YOLO training set from a built DATASET: its figures whose every panel is paired by
    the letter read on it (caption, letters and boxes agree), fetched from the build's
    source; fine-tune with `train-detector --fine-tune` on it beside generated figures."""
    from modeldev.detector import pseudo_labels as pl

    setup_logging()
    settings = load_settings(config_path)
    chosen = pl.select(pl.read_panels(Path(dataset)))
    images = pl.figure_images(settings, [f.figure_key for f in chosen])
    written = pl.write_yolo(chosen, images, Path(out))
    panels = sum(len(f.panels) for f in chosen if f.figure_key in images)
    click.echo(f"{written} figures, {panels} panels agreeing; YOLO set in {out}/data.yaml")


@main.command("eval-sample-build")
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@click.argument("corpus", type=click.Path(exists=True, file_okay=False))
def eval_sample_build(out: str, corpus: str) -> None:
    """A build OUT of the sample corpus CORPUS against its truth.jsonl: clinical panels
    published, modality right, non-clinical panels published."""
    from modeldev.classifier.sample_truth import score

    click.echo(json.dumps(score(Path(out), Path(corpus)), indent=2))


if __name__ == "__main__":
    main()
