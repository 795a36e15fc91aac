"""Panel rows through the modality classifier: kept, dropped with the reason, or failed.

The classifier reads each panel's words by scope, so that one panel's "axial CT" never makes
its chart sibling a CT: ``own`` is the panel's segment of the caption (the splitter's, for the
label pairing gave it) and the article sentences that cite its letter alone; ``shared`` the
caption's preamble and trailer and sentences citing it with other letters; ``figure`` a caption
that was not split, or a panel that was not paired. The caption is split again here
(deterministic, the same splitter as pairing) because the record's ``subcaption`` already has
the shared parts joined (``captions.join_*``).

Each decided panel's record also carries ``modality_evidence`` (``decided_by:<image|text|
image+text|keywords|size|none>``, the image model's verdict, ``scope:<own|shared|figure|
article|image|none>``, ``span:<scope>:<phrase>-><class>`` where words decided, then every text
match) and ``modality_decided_by``. A panel with no clinical evidence is dropped as
``no_clinical_evidence`` unless ``classifier.keep_without_evidence``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ray_jobs.captions.split import SplitCaption, split_caption
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.rows import DROPPED, Row, failure_row
from ray_jobs.figures.classifier import STAGE, ModalityClassifier

INPUTS = ("key", "image", "subcaption", "caption", "figure_caption")
PAIRED = ("letter", "label")  # alignments whose panel has a label of its own


def _flat(text: str) -> str:
    return " ".join(text.split())


@lru_cache(maxsize=64)
def _split(caption: str) -> SplitCaption:
    """Split once per figure, not once per panel (a batch holds a figure's panels together)."""
    return split_caption(caption)


def scoped_text(rec: Mapping[str, Any]) -> tuple[Any, str, str]:
    """The panel's (own, shared, figure) text. A record without ``alignment`` (made outside
    the pipeline) gives its subcaption as own and its caption as figure text."""
    subcaption, caption = rec["subcaption"], rec["caption"] or ""
    alignment, label = rec.get("alignment"), rec.get("panel_label")
    if alignment is None:
        return subcaption, "", caption
    split = _split(caption)
    own: list[str] = []
    shared: list[str] = []
    figure: list[str] = []
    if alignment in PAIRED and label:
        segment = next((s.text for s in split.subcaptions if s.label == label), None)
        if segment is None or _flat(segment) not in _flat(subcaption):
            # the splitter here (without the caption's bold runs) disagrees with pairing's:
            # the pairing's text is the panel's, shared parts and all
            own = [subcaption]
        else:
            own, shared = [segment], [split.preamble, split.trailer]
    elif alignment == "full_caption" and split.subcaptions:  # split, but this panel not paired
        shared = [split.preamble, split.trailer]
        figure = [s.text for s in split.subcaptions]
    elif alignment == "single" and len(split.subcaptions) <= 1:
        own = [caption]  # a one-panel figure: its whole caption is about this panel
    else:  # one box for several labels, the whole figure, or a caption nobody split
        figure = [caption]
    # article sentences that cite the panel's letter: its own when they cite it alone; text
    # about the figure when they cite it among others ("CT and survival (Fig. 2A-C)" does not
    # say which of A, B and C is the CT); those citing the figure only are not read: on real
    # articles they are mostly data-availability notes ("table statistics for Figures 3-7"),
    # which named a class for every panel of the figure
    mine = (label or "").upper() if alignment in PAIRED else ""
    for mention in (rec.get("mentions") or []) if mine else []:
        cited = {p.upper() for p in mention.get("panels") or []}
        if cited == {mine}:
            own.append(mention["sentence"])
        elif mine in cited:
            figure.append(mention["sentence"])
    join = " ".join
    return join(own), join(p for p in shared if p), join(p for p in figure if p)


def _inputs(panel: Row) -> dict[str, object]:
    own, shared, figure = scoped_text(panel["record"])
    return {
        "key": panel["key"],
        "image": panel["image"],
        "subcaption": own,
        "caption": shared,
        "figure_caption": figure,
    }


def _classify(rows: list[dict[str, object]], classifier: ModalityClassifier) -> dict[str, list]:
    """The classifier's columns for ``rows`` (it isolates each panel's decision itself)."""
    return classifier({name: [r[name] for r in rows] for name in INPUTS})


def relevance_rows(panels: list[Row], classifier: ModalityClassifier) -> list[list[Row]]:
    """One list of rows per panel: kept, dropped with its reason, or its failure row. A panel
    whose record lacks the classifier's inputs fails alone; the batch goes on."""
    inputs: dict[int, dict[str, object]] = {}
    out: list[list[Row]] = [[] for _ in panels]
    for i, panel in enumerate(panels):
        try:
            inputs[i] = _inputs(panel)
        except Exception as exc:  # a malformed record is this panel's failure
            failure = FailureRecord.from_exception(panel["key"], STAGE, exc)
            out[i] = [failure_row(failure, "panel", panel["record"].get("article_key", ""))]
    order = sorted(inputs)
    result = _classify([inputs[i] for i in order], classifier) if order else {}
    for j, i in enumerate(order):
        panel = panels[i]
        rec = panel["record"]
        if result["modality_l2"][j] is None:
            failure = result["failure"][j] or FailureRecord(
                panel["key"], STAGE, "unknown", "no decision"
            )
            out[i] = [failure_row(failure, "panel", rec["article_key"])]
            continue
        rec["modality"] = result["modality_l2"][j]
        rec["modality_l1"] = result["modality_l1"][j]
        rec["modality_score"] = result["modality_score"][j]
        rec["modality_evidence"] = result["modality_evidence"][j]
        rec["modality_decided_by"] = result["modality_decided_by"][j]
        if not result["keep"][j]:
            rec["drop_reason"] = result["drop_reason"][j]
            panel = {**panel, "status": DROPPED, "image": None}
        out[i] = [panel]
    return out
