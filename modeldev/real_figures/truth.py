"""Hand-made panel truth for the figures of real articles, loaded and checked.

One JSON file per article in ``modeldev/real_figures/truth/<article>.json``::

    {"article", "source", "annotator",
     "figures": [{"image", "xml_id", "kind_of_object": "figure" | "table", "width", "height",
                  "caption_labels": [...],
                  "panels": [{"label", "box": [x0, y0, x1, y1], "label_box", "kind", "detail",
                              "mixed"}],
                  "notes"}]}

Boxes are in the image's own pixels, ``x1`` and ``y1`` exclusive. The images lie in
``../shared/data/real_articles/<article>/`` (``$PMCVL_SHARED_DATA/real_articles``).

Two articles are kept out (:data:`KEPT_OUT`): no threshold, rule or checkpoint is chosen on
them; they are scored apart from the tuning articles, once a change is decided.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
TRUTH_DIR = Path(__file__).resolve().parent / "truth"
KEPT_OUT = ("elife-30274-v1", "plosone-0178565")
KINDS_OF_OBJECT = ("figure", "table")
Split = Literal["tune", "kept_out"]
Box = tuple[int, int, int, int]


def data_root() -> Path:
    """Where the article folders are: ``$PMCVL_SHARED_DATA/real_articles``, else
    ``../shared/data/real_articles`` beside the repository."""
    shared = os.environ.get("PMCVL_SHARED_DATA")
    return (Path(shared) if shared else REPO.parent / "shared" / "data") / "real_articles"


def split_of(article: str) -> Split:
    """``kept_out`` for the two kept-out articles, ``tune`` for every other."""
    return "kept_out" if article in KEPT_OUT else "tune"


class TruthError(ValueError):
    """A truth file that does not hold together; the message lists every problem found."""


@dataclass(frozen=True)
class TruthPanel:
    label: str | None
    box: Box
    label_box: Box | None
    kind: str
    detail: str
    mixed: bool


@dataclass(frozen=True)
class TruthFigure:
    article: str
    image: str
    xml_id: str
    kind_of_object: str  # figure | table
    width: int
    height: int
    caption_labels: tuple[str, ...]
    panels: tuple[TruthPanel, ...]
    notes: str
    path: Path  # the image file

    @property
    def key(self) -> str:
        return f"{self.article}/{self.image}"

    @property
    def split(self) -> Split:
        return split_of(self.article)

    @property
    def boxes(self) -> np.ndarray:
        """The panels' boxes, an (N, 4) float array."""
        return np.array([p.box for p in self.panels], float).reshape(-1, 4)

    @property
    def is_compound(self) -> bool:
        """A figure (not a table) of two panels or more."""
        return self.kind_of_object == "figure" and len(self.panels) >= 2


@dataclass(frozen=True)
class TruthArticle:
    article: str
    source: str
    annotator: str
    figures: tuple[TruthFigure, ...]

    @property
    def split(self) -> Split:
        return split_of(self.article)


def _box(value: Any) -> Box | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 4:
        raise TypeError(f"a box is 4 numbers, not {value!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError(f"a box is 4 whole pixel numbers, not {value!r}")
    return (value[0], value[1], value[2], value[3])


def _figure(article: str, raw: dict[str, Any], folder: Path) -> TruthFigure:
    panels = tuple(
        TruthPanel(
            label=p.get("label"),
            box=_box(p["box"]),  # type: ignore[arg-type]
            label_box=_box(p.get("label_box")),
            kind=str(p.get("kind", "")),
            detail=str(p.get("detail", "")),
            mixed=bool(p.get("mixed", False)),
        )
        for p in raw["panels"]
    )
    return TruthFigure(
        article=article,
        image=raw["image"],
        xml_id=raw["xml_id"],
        kind_of_object=raw["kind_of_object"],
        width=int(raw["width"]),
        height=int(raw["height"]),
        caption_labels=tuple(raw.get("caption_labels", [])),
        panels=panels,
        notes=str(raw.get("notes", "")),
        path=folder / raw["image"],
    )


def parse(raw: dict[str, Any], folder: Path) -> TruthArticle:
    """The dataclasses for one truth file's JSON (no checks beyond the shape: see
    :func:`problems`). ``folder``: the article's image folder."""
    article = raw["article"]
    return TruthArticle(
        article=article,
        source=str(raw.get("source", "")),
        annotator=str(raw.get("annotator", "")),
        figures=tuple(_figure(article, fig, folder) for fig in raw["figures"]),
    )


def _box_problems(where: str, box: Box, width: int, height: int) -> list[str]:
    x0, y0, x1, y1 = box
    found = []
    if not (x0 < x1 and y0 < y1):
        found.append(f"{where}: {list(box)} is empty or reversed (x0<x1, y0<y1)")
    if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        found.append(f"{where}: {list(box)} leaves the {width}x{height} image")
    return found


def problems(article: TruthArticle, check_images: bool = True) -> list[str]:
    """Every way ``article`` does not hold together; empty when it does. With
    ``check_images``, each image must exist and be the size the truth says."""
    found: list[str] = []
    images = [f.image for f in article.figures]
    found += [
        f"{article.article}: image {i} listed twice" for i in set(images) if images.count(i) > 1
    ]
    for fig in article.figures:
        where = f"{fig.key}"
        if fig.kind_of_object not in KINDS_OF_OBJECT:
            found.append(f"{where}: kind_of_object {fig.kind_of_object!r}")
        if not fig.panels:
            found.append(f"{where}: no panels (a figure of one panel has one box)")
        labels = [p.label for p in fig.panels if p.label is not None]
        found += [f"{where}: label {x!r} twice" for x in sorted(set(labels)) if labels.count(x) > 1]
        for i, panel in enumerate(fig.panels):
            name = f"{where} panel {i} ({panel.label})"
            found += _box_problems(f"{name} box", panel.box, fig.width, fig.height)
            if panel.label_box is not None:
                found += _box_problems(f"{name} label_box", panel.label_box, fig.width, fig.height)
        if check_images:
            if not fig.path.is_file():
                found.append(f"{where}: no image at {fig.path}")
                continue
            with Image.open(fig.path) as img:
                size = img.size
            if size != (fig.width, fig.height):
                found.append(f"{where}: truth says {fig.width}x{fig.height}, the file is {size}")
    return found


def truth_files(truth_dir: Path = TRUTH_DIR) -> list[Path]:
    return sorted(truth_dir.glob("*.json"))


def load_article(path: Path, root: Path | None = None, check_images: bool = True) -> TruthArticle:
    """One truth file, checked (:class:`TruthError` lists every problem)."""
    raw = json.loads(Path(path).read_text())
    try:
        article = parse(raw, (root or data_root()) / raw["article"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TruthError(f"{path}: malformed truth: {exc!r}") from exc
    found = problems(article, check_images)
    if article.article != Path(path).stem:
        found.insert(0, f"{path}: names article {article.article!r}, not its file's stem")
    if found:
        raise TruthError(f"{path}:\n  " + "\n  ".join(found))
    return article


def load_all(
    root: Path | None = None, truth_dir: Path = TRUTH_DIR, check_images: bool = True
) -> list[TruthArticle]:
    """Every truth file, checked, in article order."""
    return [load_article(p, root, check_images) for p in truth_files(truth_dir)]


def figures(articles: list[TruthArticle], split: Split | None = None) -> list[TruthFigure]:
    """Every figure and table of ``articles`` (of one split if given), in file order."""
    return [f for a in articles if split is None or a.split == split for f in a.figures]


def compound_figures(articles: list[TruthArticle]) -> list[TruthFigure]:
    """The figures (not tables) whose truth has two panels or more."""
    return [f for f in figures(articles) if f.is_compound]
