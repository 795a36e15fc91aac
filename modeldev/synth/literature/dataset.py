"""Literature figures by ``(seed, index)`` and the dataset written from them.

One figure as JPEG bytes and its truth, downscaled with its boxes, a share of them drawn by the
flat generator, in :mod:`modeldev.synth.generate`'s layout (YOLO labels, meta JSON, COCO,
``data.yaml``), in one process or a pool of workers.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image

from modeldev.synth.generate import SynthFigure, write_index, yolo_lines
from modeldev.synth.literature.kinds import Box
from modeldev.synth.literature.layout import make_literature_figure


def make_figure(
    seed: int, index: int, *, max_side: int = 1024, val_every: int = 10
) -> tuple[bytes, SynthFigure]:
    """Figure ``index`` of ``seed`` as JPEG bytes and its truth, downscaled so its longest
    side is at most ``max_side`` (boxes scaled with it)."""
    for attempt in range(3):  # a drawing matplotlib refuses (a panel too small for its
        # furniture) is drawn again from the next stream, the same one for the same seed
        rng = np.random.default_rng([seed, index, 0x11E7, attempt])
        try:
            fig = make_literature_figure(rng)
            break
        except ValueError:
            if attempt == 2:
                raise
    canvas = fig.image
    scale = min(1.0, max_side / max(canvas.size))
    if scale < 1.0:
        canvas = canvas.resize(
            (round(canvas.width * scale), round(canvas.height * scale)), Image.Resampling.LANCZOS
        )

    def scaled(b: Box) -> Box:
        return (round(b[0] * scale), round(b[1] * scale), round(b[2] * scale), round(b[3] * scale))

    buffer = io.BytesIO()
    canvas.save(buffer, format="JPEG", quality=int(rng.integers(80, 96)))
    truth = SynthFigure(
        name=f"synth-{index:06d}",
        split="val" if index % val_every == 0 else "train",
        width=canvas.width,
        height=canvas.height,
        panels=[scaled(b) for b in fig.panels],
        labels=[scaled(b) if b else None for b in fig.labels],
        label_texts=fig.label_texts,
        params={"seed": seed, "index": index, "style": "literature", "scale": scale, **fig.params},
    )
    return buffer.getvalue(), truth


def _write_one(args: tuple[Path, int, int, int, float]) -> dict:
    out, seed, index, max_side, mix = args
    old = mix > 0 and np.random.default_rng([seed, index, 0x3A11]).random() < mix
    if old:
        from modeldev.synth.generate import make_figure as make_flat

        data, figure = make_flat(seed, index, max_side=max_side)
    else:
        data, figure = make_figure(seed, index, max_side=max_side)
    (out / "images" / figure.split / f"{figure.name}.jpg").write_bytes(data)
    (out / "labels" / figure.split / f"{figure.name}.txt").write_text(yolo_lines(figure))
    (out / "meta" / f"{figure.name}.json").write_text(json.dumps(asdict(figure), indent=1))
    return asdict(figure)


def write_literature_dataset(
    out: Path, n: int, seed: int, workers: int | None = None, max_side: int = 1024, mix: float = 0.0
) -> list[dict]:
    """Write ``n`` literature figures (a share ``mix`` of them by the flat generator,
    :func:`modeldev.synth.generate.make_figure`) in :func:`generate.write_dataset`'s layout."""
    for sub in ("images/train", "images/val", "labels/train", "labels/val", "meta", "annotations"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    jobs = [(out, seed, i, max_side, mix) for i in range(n)]
    workers = workers or os.cpu_count() or 1
    figures: list[dict]
    if workers == 1:
        figures = [_write_one(j) for j in jobs]
    else:
        with ProcessPoolExecutor(workers) as pool:
            results: Iterator[dict] = pool.map(_write_one, jobs, chunksize=4)
            figures = list(results)
    write_index(out, figures)
    return figures
