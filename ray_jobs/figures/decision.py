"""The keep decision: the image model's calibrated probabilities weighed against the panel's
words, each read in its scope.

It knows what the image model does not know: the model abstains (``unknown``) on images unlike
its training data or below the confidence threshold. Words count by where they were read
(:data:`ray_jobs.figures.taxonomy.SCOPES`): a clinical modality named in the panel's own text
or the caption's shared parts keeps the panel whatever the image says; one named only in text
about the whole figure (a caption nobody split, which may describe a sibling panel: "(A) axial
CT ... (B) tumour volume") keeps it with a lower score and loses to a confident non-clinical
image; a panel with no clinical evidence at all is not published (``no_clinical_evidence``)
unless ``classifier.keep_without_evidence`` says so, because most of PMC is charts, diagrams and
tables the image model has not learnt to name. Each decision names the evidence that decided it
(``decided_by``, its ``scope`` and the deciding ``span``, the first entries of ``evidence``).
Kept apart from the model so that the rules can be read, tested and evaluated without loading a
network.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.taxonomy import WEIGHTS, Evidence, RulePrior, Taxonomy

UNKNOWN = "unknown"
NO_EVIDENCE = "no_clinical_evidence"  # the rejects reason of a panel nothing says is clinical
PANEL_SCOPES = ("own", "shared")  # text about this panel: it decides
# a label read only from text about the whole figure, or the article, may belong to another
# panel: its score is the text's share times this
DISCOUNT = {"figure": 0.5, "article": 0.25}
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
    scope: str = "none"  # what decided: own | shared | figure | article (words), image, or none


def _text_classes(
    prior: RulePrior, scopes: tuple[str, ...], *, strong: bool = True
) -> dict[str, float]:
    """Evidence weight per class from the given scopes (only strong keywords, or all)."""
    out: dict[str, float] = {}
    for e in prior.evidence:
        if e.source in scopes and (e.strong or not strong):
            out[e.l2] = out.get(e.l2, 0.0) + WEIGHTS[e.source]
    return out


def _share(scores: dict[str, float]) -> dict[str, float]:
    total = sum(scores.values())
    return {c: v / total for c, v in scores.items()} if total else {}


def _span(prior: RulePrior, l2: str, scopes: tuple[str, ...]) -> Evidence | None:
    """The phrase that decided ``l2``: its nearest, strongest mention in ``scopes``."""
    found = [e for e in prior.evidence if e.l2 == l2 and e.source in scopes]
    return min(found, key=lambda e: (not e.strong, -WEIGHTS[e.source]), default=None)


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
    """The keep decision from the image model's calibrated probabilities and the scoped text.

    "Panel text" is the ``own`` and ``shared`` scopes; "figure text" the ``figure`` scope. In
    order, the first rule that applies decides:

    1. too small → drop (``size``);
    2. a clinical modality named in the panel text (a strong keyword) → keep, as that
       modality (``text``), or as the image's class where the image confidently names one of
       the text's classes (``image+text``), whatever else the image says;
    3. a confident, familiar image of a clinical class → keep (``image``), unless the panel's
       own text names a non-clinical class (a strong keyword: rule 5 drops it);
    4. a confident, familiar image of a non-clinical class → drop (``image``), when its
       non-clinical probability reaches ``drop_confidence`` (unset in the settings: the
       checkpoint's calibrated ``drop_default``) in every view of the image where the stage
       gives ``stable_nonclinical``, or the text names its class (``image+text``), or the only
       clinical words are figure or article text: they may be about another panel;
    5. a non-clinical class named by a strong keyword in the panel text → drop (``text``);
    6. a clinical class named only weakly ("t2", "stained") in the panel text → keep (``text``);
    7. a clinical class named in the figure text → keep, its score discounted (``text``);
    8. a non-clinical class named in the figure text → drop (``text``);
    9. a clinical class in the article keywords → keep, discounted (``keywords``);
    10. no clinical evidence: ``unknown``, dropped as ``no_clinical_evidence``, or kept where
        ``keep_without_evidence`` is set (``none``).
    """
    image = image_verdict(probs, classes, familiar, settings, taxonomy)

    def clinical(scores: dict[str, float], keep: bool = True) -> dict[str, float]:
        return {c: v for c, v in scores.items() if taxonomy.classes[c].keep == keep}

    def best(scores: dict[str, float]) -> str:
        return max(scores, key=lambda c: (scores[c], c))

    panel = _text_classes(prior, PANEL_SCOPES)
    panel_all = _text_classes(prior, PANEL_SCOPES, strong=False)
    figure = _text_classes(prior, ("figure",))
    figure_all = _text_classes(prior, ("figure",), strong=False)
    article = _text_classes(prior, ("article",))
    named = _text_classes(prior, (*PANEL_SCOPES, "figure"), strong=False)
    outside_only = not clinical(panel_all) and bool(clinical(figure) or clinical(article))
    # the panel's own words name what it is, and it is not clinical ("(B) Bar graph of ..."):
    # the author's word for this panel outweighs the image model's
    own_other = clinical(_text_classes(prior, ("own",)), keep=False)

    confident = not image.abstains
    stable = image.nonclinical if stable_nonclinical is None else stable_nonclinical
    drop_at = settings.drop_confidence if settings.drop_confidence is not None else drop_default
    scopes: tuple[str, ...] = ()  # where the deciding words were read
    if min(size) < settings.min_side_px:
        l2, score, keep, reason, by = image.l2, image.score, False, "too_small", "size"
    elif clinical(panel):
        text, scopes = clinical(panel), PANEL_SCOPES
        if confident and image.l2 in text:
            l2, by = image.l2, "image+text"
            score = max(image.score, _share(panel_all)[l2])
        else:
            l2 = best(text)
            score, by = _share(panel_all)[l2], "text"
        keep, reason = True, None
    elif confident and taxonomy.classes[image.l2].keep and not own_other:
        l2, score, keep, reason = image.l2, image.score, True, None
        by = "image+text" if image.l2 in named else "image"
    elif confident and (
        min(image.nonclinical, stable) >= drop_at or image.l2 in named or outside_only
    ):
        l2, score, keep = image.l2, image.score, False
        reason, by = f"non_clinical:{l2}", "image+text" if image.l2 in named else "image"
    elif clinical(panel, keep=False):
        l2, scopes = best(clinical(panel, keep=False)), PANEL_SCOPES
        score, keep, reason, by = _share(panel_all)[l2], False, f"non_clinical:{l2}", "text"
    elif clinical(panel_all):
        l2, scopes = best(clinical(panel_all)), PANEL_SCOPES
        score, keep, reason, by = _share(panel_all)[l2], True, None, "text"
    elif clinical(figure):
        l2, scopes = best(clinical(figure)), ("figure",)
        score = _share(figure_all)[l2] * DISCOUNT["figure"]
        keep, reason, by = True, None, "text"
    elif clinical(figure, keep=False):
        l2, scopes = best(clinical(figure, keep=False)), ("figure",)
        score, keep, reason, by = _share(figure_all)[l2], False, f"non_clinical:{l2}", "text"
    elif clinical(article):
        l2, scopes = best(clinical(article)), ("article",)
        score = _share(article)[l2] * DISCOUNT["article"]
        keep, reason, by = True, None, "keywords"
    else:
        l2, score, by = UNKNOWN, image.score, "none"
        keep = settings.keep_without_evidence
        reason = None if keep else NO_EVIDENCE
    span = _span(prior, l2, scopes) if scopes else None
    scope = span.source if span else ("image" if by.startswith("image") else "none")
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
    evidence = [f"decided_by:{by}", image_note, f"scope:{scope}"]
    evidence += [f"span:{span}"] if span else []
    evidence += [str(e) for e in prior.evidence]
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
        scope,
    )
