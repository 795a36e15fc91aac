"""Panel rows through the modality classifier: kept, dropped with the reason, or failed.

Each decided panel's record also carries ``modality_evidence`` (the deciding source first,
``decided_by:<image|text|image+text|keywords|size|none>``, then the image model's verdict and
every text match) and ``modality_decided_by``. An abstaining image model with no text gives
``modality`` ``unknown``, kept by default (``classifier.keep_unknown``).
"""

from __future__ import annotations

from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.rows import DROPPED, Row, failure_row
from ray_jobs.figures.classifier import STAGE, ModalityClassifier

INPUTS = ("key", "image", "subcaption", "caption")


def _inputs(panel: Row) -> dict[str, object]:
    rec = panel["record"]
    return {
        "key": panel["key"],
        "image": panel["image"],
        "subcaption": rec["subcaption"],
        "caption": rec["caption"],
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
