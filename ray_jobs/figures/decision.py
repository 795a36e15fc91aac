"""The keep decision: the image model's calibrated probabilities weighed against the panel's
words.

It knows what the image model does not know: the model abstains (``unknown``) on images unlike
its training data or below the confidence threshold; a clinical modality named in the
subcaption or caption keeps the panel whatever the image says; a panel is dropped as
non-clinical only on confident evidence. Each decision names the evidence that decided it
(``decided_by`` and the first entry of ``evidence``). Kept apart from the model so that the
rules can be read, tested and evaluated without loading a network.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.taxonomy import WEIGHTS, RulePrior, Taxonomy

UNKNOWN = "unknown"
TEXT_SOURCES = ("subcaption", "caption")  # strong text evidence; article keywords are weaker
DEFAULT_DROP_CONFIDENCE = 0.9  # for checkpoints without a calibrated one


@dataclass
class ImageVerdict:
    """What the image model says about one panel: its class, or ``unknown``."""

    l2: str  # a class, or unknown when it abstains
    score: float  # calibrated top probability
    nonclinical: float  # calibrated probability mass on classes the taxonomy drops
    familiar: bool  # the OOD score is above the checkpoint's threshold
    top: str  # the top class even when abstaining

    @property
    def abstains(self) -> bool:
        return self.l2 == UNKNOWN


def image_verdict(
    probs: np.ndarray,
    classes: list[str],
    familiar: bool,
    settings: ClassifierSettings,
    taxonomy: Taxonomy,
) -> ImageVerdict:
    top = int(np.argmax(probs))
    score = float(probs[top])
    nonclinical = float(
        sum(p for c, p in zip(classes, probs, strict=True) if not taxonomy.classes[c].keep)
    )
    confident = familiar and score >= settings.min_confidence
    return ImageVerdict(
        classes[top] if confident else UNKNOWN,
        round(score, 4),
        round(nonclinical, 4),
        familiar,
        classes[top],
    )


@dataclass
class Decision:
    l2: str
    l2_score: float
    l1: str
    l0: str
    keep: bool
    drop_reason: str | None
    probabilities: dict[str, float]
    evidence: list[str]
    decided_by: str  # image | text | image+text | keywords | size | none
    image: str = UNKNOWN  # the image model's own verdict: a class, or unknown when it abstains


def _text_classes(
    prior: RulePrior, sources: tuple[str, ...], *, strong: bool = True
) -> dict[str, float]:
    """Evidence weight per class from the given sources (only strong keywords, or all)."""
    out: dict[str, float] = {}
    for e in prior.evidence:
        if e.source in sources and (e.strong or not strong):
            out[e.l2] = out.get(e.l2, 0.0) + WEIGHTS[e.source]
    return out


def decide(
    probs: np.ndarray,
    classes: list[str],
    prior: RulePrior,
    size: tuple[int, int],
    settings: ClassifierSettings,
    taxonomy: Taxonomy,
    *,
    familiar: bool = True,
    drop_default: float = DEFAULT_DROP_CONFIDENCE,
    stable_nonclinical: float | None = None,
) -> Decision:
    """The keep decision from the image model's calibrated probabilities and the text.

    In order, the first rule that applies decides:

    1. too small → drop (``size``);
    2. a clinical modality named in the subcaption or caption (a strong keyword) → keep, as
       that modality (``text``), or as the image's class where the image confidently names one
       of the text's classes (``image+text``), whatever else the image says;
    3. a confident, familiar image of a clinical class → keep (``image``);
    4. a confident, familiar image of a non-clinical class → drop, when its non-clinical
       probability reaches ``drop_confidence`` (``image``; unset in the settings: the
       checkpoint's calibrated ``drop_default``), in every view of the image where the stage
       gives ``stable_nonclinical``, or the text names its class (``image+text``);
    5. a non-clinical class named by a strong keyword → drop (``text``);
    6. a clinical class named only weakly ("t2", "stained") → keep (``text``);
    7. a clinical class in the article keywords → keep (``keywords``);
    8. nothing: ``unknown``, kept (``keep_unknown``) or dropped as ``low_confidence`` (``none``).
    """
    image = image_verdict(probs, classes, familiar, settings, taxonomy)
    strong = _text_classes(prior, TEXT_SOURCES)
    every = _text_classes(prior, TEXT_SOURCES, strong=False)
    clinical_text = {c: v for c, v in strong.items() if taxonomy.classes[c].keep}
    other_text = {c: v for c, v in strong.items() if not taxonomy.classes[c].keep}
    weak_clinical = {c: v for c, v in every.items() if taxonomy.classes[c].keep}
    clinical_keywords = {
        c: v for c, v in _text_classes(prior, ("keywords",)).items() if taxonomy.classes[c].keep
    }
    share = {c: v / sum(every.values()) for c, v in every.items()} if every else {}

    def best(scores: dict[str, float]) -> str:
        return max(scores, key=lambda c: (scores[c], c))

    confident = not image.abstains
    stable = image.nonclinical if stable_nonclinical is None else stable_nonclinical
    drop_at = settings.drop_confidence if settings.drop_confidence is not None else drop_default
    if min(size) < settings.min_side_px:
        l2, score, keep, reason, by = image.l2, image.score, False, "too_small", "size"
    elif clinical_text:
        if confident and image.l2 in clinical_text:
            l2, score, by = image.l2, max(image.score, share[image.l2]), "image+text"
        else:
            l2 = best(clinical_text)
            score, by = share[l2], "text"
        keep, reason = True, None
    elif confident and taxonomy.classes[image.l2].keep:
        l2, score, keep, reason = image.l2, image.score, True, None
        by = "image+text" if image.l2 in every else "image"
    elif confident and (min(image.nonclinical, stable) >= drop_at or image.l2 in every):
        l2, score, keep = image.l2, image.score, False
        reason, by = f"non_clinical:{l2}", "image+text" if image.l2 in every else "image"
    elif other_text:
        l2 = best(other_text)
        score, keep, reason, by = share[l2], False, f"non_clinical:{l2}", "text"
    elif weak_clinical:
        l2 = best(weak_clinical)
        score, keep, reason, by = share[l2], True, None, "text"
    elif clinical_keywords:
        l2 = best(clinical_keywords)
        score, keep, reason, by = image.score, True, None, "keywords"
    else:
        l2, score, by = UNKNOWN, image.score, "none"
        keep = settings.keep_unknown
        reason = None if keep else "low_confidence"
    combined = {c: float(p) for c, p in zip(classes, probs, strict=True)}
    if prior.scores:
        w = settings.rules_weight
        combined = {c: (1 - w) * p + w * prior.scores.get(c, 0.0) for c, p in combined.items()}
    image_note = (
        f"image:{image.l2}@{image.score:.2f}"
        if not image.abstains
        else f"image:unknown@{image.score:.2f}({'unfamiliar' if not image.familiar else 'unsure'},"
        f"top={image.top})"
    )
    evidence = [f"decided_by:{by}", image_note] + [str(e) for e in prior.evidence]
    return Decision(
        l2,
        round(float(score), 4),
        taxonomy.l1_of(l2) if l2 in taxonomy.classes else UNKNOWN,
        taxonomy.l0_of(l2) if l2 in taxonomy.classes else UNKNOWN,
        keep,
        reason,
        {c: round(v, 4) for c, v in combined.items()},
        evidence,
        by,
        image.l2,
    )
