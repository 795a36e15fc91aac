"""Pairing accuracy with and without the letters read: does each detected panel get the
subcaption of the panel it really is?

For held-out figures lettered with letters (A, a, (a), A)...), a caption is written from the
figure's own labels ("Overview. (A) finding one. (B) finding two."), the product's path finds
panels and reads their letters, and ``pair_panels`` pairs them once with the letters and once
without. A gold panel counts as right when the detected panel matching it (IoU ≥ 0.5) gets
its label; a gold panel no detected panel matches counts as wrong either way.
"""

from __future__ import annotations

import numpy as np

from ray_jobs.captions.pairing import PanelBox, pair_panels
from ray_jobs.captions.split import split_caption
from ray_jobs.figures.boxes import iou_matrix
from ray_jobs.figures.letters.classes import canonical

LETTER_SCHEMES = frozenset({"A", "a", "(a)", "(A)", "a)", "A)", "A."})


def caption_for(texts: list[str]) -> str:
    """A caption naming each label in the case it is drawn: "(B) finding 2."."""
    parts = [f"({t.strip('().')}) finding {k + 1}." for k, t in enumerate(texts)]
    return "Overview of the case. " + " ".join(parts)


def pairing_accuracy(
    detector, figures: list[tuple[str, bytes, list, list[str | None], str | None]]
) -> dict:  # type: ignore[no-untyped-def]
    """``figures``: (key, bytes, gold panel boxes, gold label texts, scheme)."""
    chosen = [f for f in figures if f[4] in LETTER_SCHEMES and all(f[3]) and len(f[2]) > 1]
    found, _ = detector.detect([(k, data) for k, data, *_ in chosen], with_crops=False)
    right = {"letters": 0, "order": 0}
    total = used = 0
    for (_, _, gold, texts, _), fig in zip(chosen, found, strict=True):
        caption = caption_for(texts)  # type: ignore[arg-type]
        split = split_caption(caption)
        boxes = [
            PanelBox(p.panel_index, p.bbox, p.label_bbox is not None, p.letter) for p in fig.panels
        ]
        plain = [PanelBox(b.index, b.bbox, b.has_label_box) for b in boxes]
        ious = iou_matrix(np.array(gold, float), np.array([p.bbox for p in fig.panels], float))
        for name, panels in (("letters", boxes), ("order", plain)):
            paired = {p.index: p for p in pair_panels(panels, split, caption)}
            used += name == "letters" and any(p.alignment == "letter" for p in paired.values())
            for g, text in enumerate(texts):
                j = int(np.argmax(ious[g])) if ious.shape[1] else -1
                if j >= 0 and ious[g, j] >= 0.5 and paired[fig.panels[j].panel_index].label:
                    right[name] += canonical(paired[fig.panels[j].panel_index].label) == canonical(
                        text
                    )  # type: ignore[arg-type]
        total += len(texts)
    return {
        "figures": len(chosen),
        "panels": total,
        "with_letters": round(right["letters"] / max(1, total), 4),
        "reading_order_only": round(right["order"] / max(1, total), 4),
        "figures_paired_by_letter": used,
    }
