"""The label reader: its classes, its training data, the shipped checkpoint, and letters on
the panels the detection stage returns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from modeldev.letters.data import sample
from modeldev.letters.evaluate import generator_labels, letter_accuracy
from modeldev.letters.train import train
from modeldev.synth.generate import make_figure
from modeldev.synth.labels import SCHEMES, label_text
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.letters.classes import CLASSES, INDEX, canonical
from ray_jobs.figures.letters.crops import H, W
from ray_jobs.figures.letters.model import DEFAULT_WEIGHTS, LabelReader
from ray_jobs.figures.panels import LABEL, PANEL, RawBox, build_panels


def test_every_generator_label_is_a_class() -> None:
    assert canonical("(B)") == "b" and canonical("a-1") == "a1" and canonical("IV.") == "iv"
    for scheme in SCHEMES:
        for index in range(12):
            assert canonical(label_text(scheme, index, index // 4, index % 4)) in INDEX
    assert len(set(CLASSES)) == len(CLASSES)


def test_samples_are_reproducible_crops() -> None:
    x, y, text = sample(5, 3)
    again, y2, text2 = sample(5, 3)
    assert x.shape == (H, W) and np.array_equal(x, again) and (y, text) == (y2, text2)
    assert CLASSES[y] == canonical(text)
    assert abs(float(x.mean())) < 1e-3  # standardised


def test_shipped_reader_reads_held_out_labels() -> None:
    """Gold label crops of whole figures from the generator's held-out seed."""
    assert DEFAULT_WEIGHTS.is_file() and DEFAULT_WEIGHTS.stat().st_size < 2**20
    assert "label-reader.train.json" in (DEFAULT_WEIGHTS.parent / "MODEL_CARD.md").read_text()
    figures = generator_labels(25, seed=99)
    assert sum(len(f.items) for f in figures) > 60
    assert letter_accuracy(LabelReader(), figures, together=False) >= 0.9
    assert letter_accuracy(LabelReader(), figures) >= 0.9


def test_panels_carry_the_letter_their_label_shows() -> None:
    reader = LabelReader()
    read = right = 0
    for index in range(12):
        data, fig = make_figure(99, index)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        raw = [RawBox(tuple(map(float, b)), 0.9, PANEL) for b in fig.panels]
        raw += [RawBox(tuple(map(float, b)), 0.9, LABEL) for b in fig.labels if b]
        found = build_panels(fig.name, image, raw, DetectorSettings(), "d", "v", False, reader)
        want = {tuple(p): t for p, t in zip(fig.panels, fig.label_texts, strict=True)}
        for panel in found.panels:
            text = want.get(panel.bbox)
            if panel.label_bbox is None or text is None:
                assert panel.letter is None or text is None
                continue
            read += 1
            right += panel.letter == canonical(text)
            assert panel.letter_score is not None and 0 < panel.letter_score <= 1
    assert read > 20 and right >= 0.85 * read


def test_training_command_writes_a_loadable_reader(tmp_path: Path) -> None:
    summary = train(tmp_path, n=256, seed=3, val_seed=4, n_val=64, epochs=1, threads=1)
    assert summary["train"] == {"seed": 3, "n": 256, "epochs": 1}
    assert json.loads((tmp_path / "label-reader.train.json").read_text())["val"]["n"] == 64
    reader = LabelReader(tmp_path / "label-reader.pt")
    ((letter, score),) = reader.read([Image.new("RGB", (30, 20), (255, 255, 255))])
    assert letter in CLASSES and 0 < score <= 1
