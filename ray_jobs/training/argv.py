"""Typed inputs to open_clip's trainer, turned into its command line.

A pure function, so the Kubernetes Job spec, the Airflow DAG and the local launcher all build
the same ``open_clip_train.main`` arguments and a test can check them without running anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PRECISIONS = ("fp32", "amp", "amp_bf16", "amp_bfloat16", "bf16", "fp16", "pure_bf16", "pure_fp16")


@dataclass(frozen=True)
class TrainArgs:
    train_data: Sequence[str]  # shard paths or URLs; a single brace pattern also works
    train_num_samples: int
    model: str  # a registered open_clip config name (see model_config.prepare_model)
    logs_dir: str
    name: str
    context_length: int | None = None  # also written into the rendered config; recorded here
    batch_size: int = 256
    epochs: int = 1
    lr: float = 5e-4
    wd: float = 0.2
    warmup: int = 2000
    workers: int = 4
    precision: str = "amp"
    seed: int = 0
    save_frequency: int = 1
    log_every_n_steps: int = 100
    device: str | None = None  # open_clip picks cuda when present, else cpu
    extra: tuple[str, ...] = field(default_factory=tuple)  # passed through verbatim, last


def build_train_argv(args: TrainArgs) -> list[str]:
    """``open_clip_train.main`` arguments: webdataset input, no ``--pretrained``, no reporting.

    Shards are joined with ``::``, the list separator open_clip's ``expand_urls`` splits on.
    """
    if not args.train_data:
        raise ValueError("train_data is empty")
    if args.train_num_samples < 1 or args.batch_size < 1:
        raise ValueError("train_num_samples and batch_size must be positive")
    if args.precision not in PRECISIONS:
        raise ValueError(f"precision {args.precision!r} not in {PRECISIONS}")
    argv = [
        "--dataset-type", "webdataset",
        "--train-data", "::".join(args.train_data),
        "--train-num-samples", str(args.train_num_samples),
        "--model", args.model,
        "--batch-size", str(args.batch_size),
        "--epochs", str(args.epochs),
        "--lr", repr(args.lr),
        "--wd", repr(args.wd),
        "--warmup", str(args.warmup),
        "--workers", str(args.workers),
        "--precision", args.precision,
        "--seed", str(args.seed),
        "--save-frequency", str(args.save_frequency),
        "--log-every-n-steps", str(args.log_every_n_steps),
        "--logs", args.logs_dir,
        "--name", args.name,
        "--report-to", "",
    ]  # fmt: skip
    if args.context_length is not None:
        argv += ["--force-context-length", str(args.context_length)]
    if args.device:
        argv += ["--device", args.device]
    return argv + list(args.extra)
