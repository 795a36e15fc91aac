"""Train the panel detector with ultralytics on a synthetic (or any YOLO-format) dataset.

Offline by construction: the model is built from its YAML, or warm-started from a checkpoint
of our own (``warm_start``, e.g. the shipped one), never from downloaded weights; AMP's
self-check (which downloads a model on CUDA) is off, and ultralytics is imported through
:func:`ultralytics_offline`. The device is whatever the machine running this has.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ray_jobs.figures.yolo_env import ultralytics_offline

log = logging.getLogger(__name__)
ARCHS = ("yolo11n", "yolo11s", "yolo11m", "rtdetr-l")
# a gentle schedule for a warm start: a low AdamW rate, a short warm-up, a cosine decay
FINE_TUNE: dict[str, Any] = {
    "optimizer": "AdamW",
    "lr0": 0.0004,
    "lrf": 0.05,
    "cos_lr": True,
    "warmup_epochs": 0.3,
    "warmup_bias_lr": 0.0,
    "momentum": 0.9,
}


@dataclass
class TrainResult:
    weights: str
    arch: str
    epochs: int
    imgsz: int
    device: str
    seconds: float
    metrics: dict[str, float]


def _device() -> str:
    import torch

    return "0" if torch.cuda.is_available() else "cpu"


def build_model(arch: str):  # type: ignore[no-untyped-def]
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}; choose from {ARCHS}")
    ultralytics_offline()
    from ultralytics import RTDETR, YOLO

    return RTDETR(f"{arch}.yaml") if arch.startswith("rtdetr") else YOLO(f"{arch}.yaml")


def train_detector(
    data_yaml: str | Path,
    out_dir: str | Path,
    *,
    arch: str = "yolo11n",
    epochs: int = 30,
    imgsz: int = 320,
    batch: int = 16,
    workers: int = 2,
    seed: int = 0,
    patience: int = 50,
    device: str | None = None,
    warm_start: str | Path | None = None,
    resume: bool = False,
    fraction: float = 1.0,
    hours: float | None = None,
    fine_tune: bool = False,
    threads: int | None = None,
) -> TrainResult:
    """Train (from scratch, or from ``warm_start``'s weights); copies the best checkpoint to
    ``out_dir/<arch>-panels.pt``. ``resume`` continues an interrupted run in ``out_dir`` from
    its last epoch, with the arguments it was started with.

    ``hours`` is ultralytics' time budget: it re-plans the epochs after each one to end in
    time (the learning-rate decay follows the new plan). ``fine_tune`` uses :data:`FINE_TUNE`
    instead of ultralytics' schedule. ``threads`` sets the CPU threads: ultralytics
    otherwise trains on one core less than the machine has, half of a 2-core machine.
    """
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = device or _device()
    if threads:
        _use_threads(threads)
    started = time.perf_counter()
    last = out / "run" / "weights" / "last.pt"
    if resume and last.is_file():
        ultralytics_offline()
        from ultralytics import YOLO

        model = YOLO(str(last))
        model.train(resume=True)
        return _finish(model, out, arch, epochs, imgsz, device, started)
    if warm_start:
        ultralytics_offline()
        from ultralytics import YOLO

        model = YOLO(str(warm_start))
    else:
        model = build_model(arch)
    model.train(
        data=str(Path(data_yaml).resolve()),
        epochs=epochs,
        imgsz=imgsz,
        batch=batch,
        workers=workers,
        device=device,
        project=str(out),
        name="run",
        exist_ok=True,
        pretrained=bool(warm_start),  # False would drop the warm start's weights
        fraction=fraction,
        amp=False,  # its check downloads a model; a from-scratch CPU/GPU run does not need it
        seed=seed,
        deterministic=True,
        plots=False,
        patience=patience,
        mosaic=0.0,  # a mosaic of four figures is not a figure: panel layout is the signal
        fliplr=0.5,
        verbose=False,
        **({"time": hours} if hours else {}),
        **(FINE_TUNE if fine_tune else {}),
    )
    return _finish(model, out, arch, epochs, imgsz, device, started)


def _use_threads(threads: int) -> None:
    """ultralytics sets torch's threads to its ``NUM_THREADS`` (cores - 1) when it picks a CPU
    device; this is the value it reads."""
    import torch

    ultralytics_offline()
    import ultralytics.utils.torch_utils as torch_utils

    torch_utils.NUM_THREADS = threads
    torch.set_num_threads(threads)


def _finish(
    model: Any, out: Path, arch: str, epochs: int, imgsz: int, device: str, started: float
) -> TrainResult:
    seconds = time.perf_counter() - started
    run = out / "run"
    best = run / "weights" / "best.pt"
    target = out / f"{arch}-panels.pt"
    shutil.copyfile(best, target)
    metrics = (
        {k: float(v) for k, v in (model.metrics.results_dict or {}).items()}
        if getattr(model, "metrics", None)
        else {}
    )
    result = TrainResult(str(target), arch, epochs, imgsz, device, round(seconds, 1), metrics)
    (out / f"{arch}-panels.train.json").write_text(json.dumps(asdict(result), indent=2))
    log.info("trained %s in %.0f s: %s", arch, seconds, metrics)
    return result


def average_checkpoints(
    base: str | Path, tuned: str | Path, out: str | Path, base_share: float = 0.5
) -> Path:
    """``base_share`` × ``base`` + (1 − ``base_share``) × ``tuned``, weight by weight (WiSE-FT):
    a fine-tune that gained on unseen figures but lost a little on its parent's own world gets
    most of the gain back without the loss. Both must be checkpoints of one architecture, the
    tuned one warm-started from the base; the tuned one's file is the template."""
    import torch

    if not 0.0 <= base_share <= 1.0:
        raise ValueError(f"base_share {base_share} is not in [0, 1]")
    ultralytics_offline()
    first = torch.load(str(base), map_location="cpu", weights_only=False)
    second = torch.load(str(tuned), map_location="cpu", weights_only=False)
    a, b = first["model"].state_dict(), second["model"].state_dict()
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        raise ValueError(f"{base} and {tuned} are not checkpoints of one architecture")
    mixed = {
        k: (base_share * a[k].float() + (1 - base_share) * v.float()).to(v.dtype)
        if v.is_floating_point()
        else v
        for k, v in b.items()
    }
    second["model"].load_state_dict(mixed)
    second["ema"] = None
    second["train_args"] = {
        **(second.get("train_args") or {}),
        "average": {"base": str(base), "tuned": str(tuned), "base_share": base_share},
    }
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(second, target)
    return target
