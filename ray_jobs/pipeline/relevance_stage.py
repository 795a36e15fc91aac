"""Panel rows through the modality classifier: kept, dropped with the reason, or failed.

Each decided panel's record also carries ``modality_evidence`` (the deciding source first,
``decided_by:<image|text|image+text|keywords|size|none>``, then the image model's verdict and
every text match) and ``modality_decided_by``. An abstaining image model with no text gives
``modality`` ``unknown``, kept by default (``classifier.keep_unknown``).
"""

from __future__ import annotations

from ray_jobs.failures import FailureRecord
from ray_jobs.figures.classifier import STAGE, ModalityClassifier
from ray_jobs.pipeline.rows import DROPPED, Row, failure_row


def _failure(key: str, error: str | None) -> FailureRecord:
    head, _, message = (error or f"{STAGE}/unknown: no decision").partition(": ")
    stage, _, kind = head.partition("/")
    return FailureRecord(key, stage or STAGE, kind or "unknown", message)


def relevance_rows(panels: list[Row], classifier: ModalityClassifier) -> list[list[Row]]:
    result = classifier(
        {
            "key": [p["key"] for p in panels],
            "image": [p["image"] for p in panels],
            "subcaption": [p["record"]["subcaption"] for p in panels],
            "caption": [p["record"]["caption"] for p in panels],
        }
    )
    out: list[list[Row]] = []
    for i, panel in enumerate(panels):
        rec = panel["record"]
        if result["modality_l2"][i] is None:
            failure = _failure(panel["key"], result["error"][i])
            out.append([failure_row(failure, "panel", rec["article_key"])])
            continue
        rec["modality"] = result["modality_l2"][i]
        rec["modality_l1"] = result["modality_l1"][i]
        rec["modality_score"] = result["modality_score"][i]
        rec["modality_evidence"] = result["modality_evidence"][i]
        rec["modality_decided_by"] = result["modality_decided_by"][i]
        if not result["keep"][i]:
            rec["drop_reason"] = result["drop_reason"][i]
            panel = {**panel, "status": DROPPED, "image": None}
        out.append([panel])
    return out
