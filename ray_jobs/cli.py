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


@main.command("show-config")
@_CONFIG
def show_config(config_path: str | None) -> None:
    """Print the effective configuration (file, then environment overrides)."""
    settings = load_settings(config_path)
    click.echo(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False))


if __name__ == "__main__":
    main()
