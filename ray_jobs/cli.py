"""The ``pmcvl`` command: building the dataset, inspecting its inputs, and downstream training.

Model development (synthetic figures, training and evaluating the detector and the classifier)
is ``pmcvl-dev`` (``modeldev.cli``): it is not in the runtime images, and not in this help.
"""

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


# ``pmcvl --help`` lists commands by who runs them; the names themselves never change (the
# DAGs, the helm chart and the tests call them)
SECTIONS = {
    "Build": ("run", "ingest", "validate", "report", "sample-corpus"),
    "Inspect": ("parse", "detect", "split-caption", "show-config", "llm-check"),
    "Downstream training": ("build-benchmark", "eval-retrieval", "render-training-job"),
}


class SectionedGroup(click.Group):
    """A group whose help lists its commands in the :data:`SECTIONS` they belong to; a command
    no section names is listed under "Other", never hidden."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = {
            name: cmd
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        }
        if not commands:
            return
        limit = formatter.width - 6 - max(map(len, commands))
        listed = {name for names in SECTIONS.values() for name in names}
        other = tuple(name for name in commands if name not in listed)
        for title, names in [*SECTIONS.items(), ("Other", other)]:
            rows = [(n, commands[n].get_short_help_str(limit)) for n in names if n in commands]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=SectionedGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


def _detector_settings(config_path: str | None, weights: str | None, **overrides):  # type: ignore[no-untyped-def]
    settings = load_settings(config_path).detector
    update = {k: v for k, v in overrides.items() if v is not None}
    if weights:
        update["weights"] = weights
    return settings.model_copy(update=update)


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


@main.command()
@click.argument("out")
@_CONFIG
@click.option("--run-id", default=None, help="Check this run's new shards only [every shard].")
@click.option("--sample-rows", type=click.IntRange(1), default=32, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def validate(
    out: str, config_path: str | None, run_id: str | None, sample_rows: int, as_json: bool
) -> None:
    """Check the dataset at OUT (a folder or s3://bucket/prefix), as the pmc_dataset DAG does.

    The manifest's totals, then each shard's size, sha256, index and stats, and a sample of
    index rows against the tar. S3 through the config's output.s3 (credentials: boto3's
    chain). Prints each problem and exits with status 1 when there is any.
    """
    from ray_jobs.shards.validate import validate_dataset

    s3 = load_settings(config_path).output.s3
    report = validate_dataset(out, run_id, s3, "new" if run_id else "all", sample_rows)
    for problem in report.problems:
        click.echo(f"invalid: {problem}", err=True)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.describe())
    sys.exit(0 if report.ok else 1)


@main.command("show-config")
@_CONFIG
def show_config(config_path: str | None) -> None:
    """Print the effective configuration (file, then environment overrides)."""
    settings = load_settings(config_path)
    click.echo(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False))


if __name__ == "__main__":
    main()
