"""``python -m ray_jobs.training.train``: open_clip's own trainer over our shards, offline.

It does only what open_clip cannot: read our manifest for the shard list and sample count,
render and register our model config at the run's context length, pick the caption, leave out
held-out (benchmark) articles, forbid hub downloads, and push the run to S3 when asked.
Training itself is ``open_clip_train.main.main``, unchanged. Arguments after ``--`` go to
open_clip verbatim.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ray_jobs.training.argv import PRECISIONS, TrainArgs, build_train_argv
from ray_jobs.training.caption_key import DEFAULT as DEFAULT_CAPTION_KEY
from ray_jobs.training.caption_key import install_caption_key
from ray_jobs.training.exclusion import (
    count_kept,
    install_exclusion,
    read_excluded,
    read_superseded,
)
from ray_jobs.training.manifest import select_shards
from ray_jobs.training.model_config import OFFLINE_ENV, prepare_model, template_names
from ray_jobs.training.sync import copy_tree


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ray_jobs.training.train", description=__doc__)
    p.add_argument("--manifest", type=Path, required=True, help="a run's manifest.json")
    p.add_argument("--split", default="train")
    p.add_argument(
        "--exclude-shards", type=Path, help="file of shard names to leave out, one a line"
    )
    p.add_argument(
        "--exclude-articles",
        type=Path,
        help="file of PMCIDs (a benchmark's excluded_articles.txt): their samples are dropped",
    )
    p.add_argument("--model", default="pmcvl-tiny", choices=template_names())
    p.add_argument("--context-length", type=int, help="text tokens (77, 154, 256, 512)")
    p.add_argument("--hf-text-path", help="absolute local folder of an HF text tower")
    p.add_argument(
        "--caption-key",
        default=DEFAULT_CAPTION_KEY,
        help="'txt' (the member written) or json fields, ';'-separated: 'long_caption;subcaption'",
    )
    p.add_argument("--train-num-samples", type=int, help="default: the manifest's count")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--wd", type=float, default=0.2)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--precision", default="amp", choices=PRECISIONS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every-n-steps", type=int, default=100)
    p.add_argument("--device", help="default: cuda when present, else cpu")
    p.add_argument("--logs", type=Path, required=True, help="open_clip's logs root")
    p.add_argument("--name", required=True, help="run name: checkpoints go to LOGS/NAME/")
    p.add_argument("--upload-to", help="copy LOGS/NAME/ here when done (s3://... or a folder)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    opts = parser().parse_args(argv)
    os.environ.update(OFFLINE_ENV)  # before open_clip (and transformers) are imported

    exclude = []
    if opts.exclude_shards:
        exclude = opts.exclude_shards.read_text(encoding="utf-8").split()
    shards = select_shards(opts.manifest, opts.split, exclude)
    run_dir = opts.logs / opts.name
    if (run_dir / "out.log").exists():
        print(f"run {run_dir} exists; choose another --name", file=sys.stderr)
        return 1
    model = prepare_model(
        opts.model,
        run_dir / "model_configs",  # next to the checkpoints, to rebuild the model from them
        context_length=opts.context_length,
        hf_text_path=opts.hf_text_path,
    )
    install_caption_key(opts.caption_key)
    num_samples = shards.num_samples
    superseded = read_superseded(opts.manifest)
    if opts.exclude_articles or superseded:  # after the caption key: its filter runs second
        articles = read_excluded(opts.exclude_articles) if opts.exclude_articles else frozenset()
        num_samples, dropped = count_kept(
            opts.manifest, opts.split, shards.urls, articles, superseded
        )
        install_exclusion(articles, superseded)
        what = f"{len(articles)} articles"
        if superseded:
            what += f" and {len(superseded)} superseded samples"
        print(f"excluding {what}: {dropped} samples dropped, {num_samples} kept", file=sys.stderr)
        if num_samples < 1:
            print("no training sample is left after the exclusion", file=sys.stderr)
            return 1
    train_argv = build_train_argv(
        TrainArgs(
            train_data=shards.urls,
            train_num_samples=opts.train_num_samples or num_samples,
            model=model,
            logs_dir=str(opts.logs),
            name=opts.name,
            context_length=opts.context_length,
            batch_size=opts.batch_size,
            epochs=opts.epochs,
            lr=opts.lr,
            wd=opts.wd,
            warmup=opts.warmup,
            workers=opts.workers,
            precision=opts.precision,
            seed=opts.seed,
            log_every_n_steps=opts.log_every_n_steps,
            device=opts.device,
            extra=tuple(extra),
        )
    )
    print("open_clip_train.main " + shlex.join(train_argv), file=sys.stderr, flush=True)

    from open_clip_train.main import main as open_clip_main

    rc = open_clip_main(train_argv)
    # once (rank 0 under torchrun), and only a run that finished: a partial run is not a result
    if rc in (None, 0) and opts.upload_to and os.environ.get("RANK", "0") == "0":
        copy_tree(str(run_dir), opts.upload_to)
    return 0 if rc is None else int(rc != 0)


if __name__ == "__main__":
    sys.exit(main())
