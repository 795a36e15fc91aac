"""``pmcvl eval-retrieval``: an open_clip checkpoint scored on a benchmark, offline.

The model is rebuilt from the config the training run wrote next to its checkpoints
(``{run}/model_configs``), so the context length and text tower are the ones trained; a packaged
template is rendered only when that folder is absent. Scores are written as JSON next to the
checkpoint (and to any extra destinations, such as Airflow's XCom file or S3).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from ray_jobs import __version__
from ray_jobs.benchmark.data import load_benchmark
from ray_jobs.benchmark.retrieval import KS, retrieval_metrics
from ray_jobs.benchmark.zeroshot import (
    DEFAULT_TEMPLATE,
    class_texts,
    load_labelled_set,
    zero_shot_metrics,
)
from ray_jobs.config import OutputS3Settings
from ray_jobs.training.model_config import (
    OFFLINE_ENV,
    prepare_model,
    register_model_configs,
    rendered_name,
    template_names,
)

FORMAT = "pmcvl-retrieval-eval/1"


def result_path(checkpoint: Path) -> Path:
    """``.../checkpoints/epoch_3.pt`` → ``.../checkpoints/epoch_3.retrieval.json``."""
    return checkpoint.with_name(f"{checkpoint.stem}.retrieval.json")


def resolve_model(
    checkpoint: Path,
    model: str,
    context_length: int | None,
    hf_text_path: str | None,
    scratch: Path,
) -> str:
    """Register the checkpoint's model config with open_clip; returns the name to build."""
    run_configs = checkpoint.resolve().parent.parent / "model_configs"
    templates = template_names()
    name = rendered_name(model, context_length) if model in templates else model
    found = sorted(run_configs.glob("*.json")) if run_configs.is_dir() else []
    if not (run_configs / f"{name}.json").is_file() and context_length is None:
        # one config from this template in the run: the context length it was trained at
        same = [p.stem for p in found if p.stem == model or p.stem.startswith(f"{model}-ctx")]
        name = same[0] if len(same) == 1 else name
    if (run_configs / f"{name}.json").is_file():
        register_model_configs(run_configs)
        return name
    if model not in templates:
        raise ValueError(f"model {model!r}: no {name}.json in {run_configs} and not a template")
    return prepare_model(model, scratch, context_length=context_length, hf_text_path=hf_text_path)


def _embed(encode, items: Sequence[Any], prepare, batch_size: int, device: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    import torch

    chunks = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            batch = prepare(items[start : start + batch_size]).to(device)
            chunks.append(encode(batch).float().cpu().numpy())
    return np.concatenate(chunks)


class Embedder:
    """An open_clip model with its eval transform and tokenizer, on one device."""

    def __init__(self, name: str, checkpoint: Path, device: str, batch_size: int = 64):
        import open_clip

        self.model, _, self.preprocess = open_clip.create_model_and_transforms(
            name, pretrained=str(checkpoint), device=device
        )
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(name)
        self.context_length = int(self.tokenizer.context_length)
        self.device, self.batch_size = device, batch_size

    def images(self, images: Sequence[bytes]) -> np.ndarray:
        import torch

        from ray_jobs.figures.images import decode_image

        def prepare(batch: Sequence[bytes]) -> torch.Tensor:
            return torch.stack([self.preprocess(decode_image(b)) for b in batch])

        return _embed(self.model.encode_image, images, prepare, self.batch_size, self.device)

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        return _embed(self.model.encode_text, texts, self.tokenizer, self.batch_size, self.device)

    def truncated(self, texts: Sequence[str]) -> int | None:
        """How many texts exceed the context (CLIP's BPE tokenizer only; None otherwise)."""
        encode = getattr(self.tokenizer, "encode", None)
        if encode is None or not hasattr(self.tokenizer, "sot_token_id"):
            return None
        return sum(len(encode(t)) + 2 > self.context_length for t in texts)


def write_json(destination: str, data: dict[str, Any]) -> None:
    """A local path, or ``s3://bucket/key`` (signed; endpoint from ``AWS_ENDPOINT_URL``)."""
    body = json.dumps(data, indent=2, ensure_ascii=False).encode()
    parsed = urlparse(destination)
    if parsed.scheme == "s3":
        from ray_jobs.storage.store import s3_client

        client = s3_client(OutputS3Settings())
        client.put_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"), Body=body)
        return
    path = Path(destination)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def evaluate_checkpoint(
    checkpoint: str | Path,
    model: str,
    benchmark: str | Path,
    *,
    context_length: int | None = None,
    hf_text_path: str | None = None,
    labels: str | Path | None = None,
    label_template: str = DEFAULT_TEMPLATE,
    device: str | None = None,
    batch_size: int = 64,
    out: str | Path | None = None,
    copies: Sequence[str] = (),
) -> dict[str, Any]:
    """Retrieval (and zero-shot, with ``labels``) scores; written to ``out`` (default: next
    to the checkpoint) and each of ``copies``."""
    os.environ.update(OFFLINE_ENV)  # before open_clip (and transformers) are imported
    import torch

    started = time.monotonic()
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(checkpoint)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    bench = load_benchmark(benchmark)
    with tempfile.TemporaryDirectory(prefix="pmcvl-eval-") as scratch:
        name = resolve_model(checkpoint, model, context_length, hf_text_path, Path(scratch))
        embedder = Embedder(name, checkpoint, device, batch_size)
    scores = retrieval_metrics(embedder.images(bench.image_list()), embedder.texts(bench.captions))
    result: dict[str, Any] = {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code_version": __version__,
        "checkpoint": str(checkpoint),
        "model": name,
        "context_length": embedder.context_length,
        "device": device,
        "benchmark": {
            "path": str(bench.path),
            "size": bench.meta["size"],
            "created": bench.meta.get("created"),
            "split": bench.meta.get("split"),
            "caption_sources": bench.meta.get("caption_sources"),
            "captions_truncated": embedder.truncated(bench.captions),
        },
        "ks": list(KS),
        "retrieval": scores,
    }
    if labels is not None:
        labelled = load_labelled_set(labels, bench.images)
        texts = class_texts(labelled.classes, label_template)
        result["zero_shot"] = {
            "labels": str(labels),
            "template": label_template,
            **zero_shot_metrics(
                embedder.images(labelled.images),
                embedder.texts(texts),
                labelled.labels,
                labelled.classes,
            ),
        }
    result["seconds"] = round(time.monotonic() - started, 2)
    for destination in [str(out or result_path(checkpoint)), *copies]:
        write_json(destination, result)
    return result
