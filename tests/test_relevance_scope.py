"""Evidence scoped to the panel (issue 40): a panel's own subcaption and the sentences citing its
letter decide, the caption's shared parts apply to every panel, a sibling's subcaption never
does; text about the whole figure only suggests; no clinical evidence is not published.

The decision is called directly on the texts the relevance stage scopes from a panel record
(the real splitter, the real taxonomy rules), with image probabilities as the model gives them:
no classifier stub."""

from __future__ import annotations

import numpy as np

from ray_jobs.captions.split import split_caption
from ray_jobs.config import ClassifierSettings
from ray_jobs.figures.decision import NO_EVIDENCE, UNKNOWN, Decision, decide
from ray_jobs.figures.taxonomy import load_taxonomy, metadata_prior
from ray_jobs.pipeline.relevance_stage import scoped_text

TAX = load_taxonomy()
CLASSES = ["chart", "ct", "gel_blot", "histopathology", "mri", "table_text"]
SETTINGS = ClassifierSettings(min_confidence=0.5, drop_confidence=0.9)
CAPTION = (
    "Findings in two patients. (A) Axial CT of the chest. (B) Bar graph of tumour volume, "
    "mean ± SD. Scale bar, 1 cm."
)


def probs(name: str, p: float) -> np.ndarray:
    rest = (1 - p) / (len(CLASSES) - 1)
    return np.array([p if c == name else rest for c in CLASSES])


ABSTAINS = probs("ct", 0.3)  # below min_confidence: the image model says nothing


def record(label: str | None, alignment: str, caption: str = CAPTION, **extra: object) -> dict:
    """A panel record as pairing writes it: the subcaption with the shared parts joined."""
    split = split_caption(caption)
    sub = split.text_for(label) if label else caption
    return {
        "subcaption": sub,
        "caption": caption,
        "panel_label": label,
        "alignment": alignment,
        **extra,
    }


def decide_record(
    rec: dict, image: np.ndarray = ABSTAINS, settings: ClassifierSettings = SETTINGS
) -> Decision:
    own, shared, figure = scoped_text(rec)
    prior = metadata_prior(own, shared, (), figure_caption=figure)
    return decide(image, CLASSES, prior, (200, 200), settings, TAX)


def test_the_scopes_of_a_paired_panel() -> None:
    own, shared, figure = scoped_text(record("B", "letter"))
    assert own == "Bar graph of tumour volume, mean ± SD."
    assert shared == "Findings in two patients. Scale bar, 1 cm."
    assert figure == ""
    # not paired: the labelled segments are about some panel, maybe this one
    own, shared, figure = scoped_text(record(None, "full_caption"))
    assert own == "" and shared == "Findings in two patients. Scale bar, 1 cm."
    assert figure == "Axial CT of the chest. Bar graph of tumour volume, mean ± SD."
    # one box for a caption naming two panels, or a caption with no labels: scope figure
    assert scoped_text(record(None, "single")) == ("", "", CAPTION)
    plain = "Axial CT of the chest and a bar graph."
    assert scoped_text(record(None, "full_caption", plain)) == ("", "", plain)
    assert scoped_text(record(None, "figure")) == ("", "", CAPTION)
    # a one-panel figure: its caption is about it alone, labelled "(A)" or not
    for one in ("(A) Bar chart of expression levels.", "Bar chart of expression levels."):
        assert scoped_text(record(None, "single", one)) == (one, "", "")
        decision = decide_record(record(None, "single", one), probs("ct", 0.96))
        assert (decision.keep, decision.scope) == (False, "own")


def test_a_sibling_subcaption_never_decides() -> None:
    """The issue's case: "(A) axial CT ... (B) bar graph": A is a CT, B is not."""
    a = decide_record(record("A", "letter"))
    assert (a.keep, a.l2, a.decided_by, a.scope) == (True, "ct", "text", "own")
    assert a.evidence[2:4] == ["scope:own", "span:own:ct->ct"]
    b = decide_record(record("B", "letter"))
    assert (b.keep, b.drop_reason, b.scope) == (False, "non_clinical:chart", "own")
    assert not [e for e in b.evidence if "->ct" in e]


def test_shared_text_applies_to_every_panel() -> None:
    caption = "Contrast-enhanced CT at follow-up. (A) Before treatment. (B) After treatment."
    d = decide_record(record("B", "label", caption))
    assert (d.keep, d.l2, d.scope) == (True, "ct", "shared")
    # a confident image of another class does not overrule the panel's text
    d = decide_record(record("B", "label", caption), probs("chart", 0.97))
    assert (d.keep, d.l2, d.decided_by) == (True, "ct", "text")


def test_mentions_citing_the_letter_are_the_panels_own() -> None:
    mentions = [
        {"sentence": "Fig 1A shows the MRI of patient 2.", "panels": ["A"]},
        {"sentence": "Hyperintense lesions (Fig 1B) were counted.", "panels": ["B"]},
        {"sentence": "Histology is in Figure 1 and Table 2.", "panels": []},
    ]
    caption = "Two patients. (A) Before. (B) After."
    a = decide_record(record("A", "letter", caption, mentions=mentions))
    assert (a.keep, a.l2, a.scope) == (True, "mri", "own")
    # B: its own mention names nothing; the figure-only sentence is not read
    b = decide_record(record("B", "letter", caption, mentions=mentions))
    assert (b.keep, b.drop_reason, b.scope) == (False, NO_EVIDENCE, "none")


def test_figure_text_suggests_and_loses_to_a_confident_non_clinical_image() -> None:
    unpaired = record(None, "full_caption", "Axial CT and volumetry in two patients.")
    d = decide_record(unpaired)
    assert (d.keep, d.l2, d.decided_by, d.scope) == (True, "ct", "text", "figure")
    assert d.l2_score == 0.5  # the text's share, discounted: the words may be a sibling's
    # a confident chart, below the image-only drop confidence, outweighs figure text
    d = decide_record(unpaired, probs("chart", 0.7))
    assert (d.keep, d.drop_reason, d.decided_by) == (False, "non_clinical:chart", "image")
    # but not the panel's own words
    own = record("A", "letter", "(A) Axial CT of the chest. (B) Volumetry.")
    d = decide_record(own, probs("chart", 0.7))
    assert (d.keep, d.l2, d.scope) == (True, "ct", "own")


def test_no_clinical_evidence_is_not_published_unless_the_config_says_so() -> None:
    caption = "Results in the second cohort. (A) Day 1. (B) Day 7."
    d = decide_record(record("A", "letter", caption))
    assert (d.keep, d.l2, d.drop_reason, d.decided_by) == (False, UNKNOWN, NO_EVIDENCE, "none")
    keep = SETTINGS.model_copy(update={"keep_without_evidence": True})
    d = decide_record(record("A", "letter", caption), settings=keep)
    assert (d.keep, d.l2, d.drop_reason) == (True, UNKNOWN, None)
    # a confident clinical image is evidence enough
    d = decide_record(record("A", "letter", caption), probs("histopathology", 0.95))
    assert (d.keep, d.l2, d.decided_by, d.scope) == (True, "histopathology", "image", "image")


def test_a_record_whose_resplit_disagrees_keeps_pairings_text() -> None:
    """Pairing split with the caption's bold runs; a re-split without them that does not find
    the same segment falls back to the subcaption pairing gave (never to a sibling's)."""
    rec = record("B", "letter") | {"subcaption": "Western blot of lysates."}
    assert scoped_text(rec) == ("Western blot of lysates.", "", "")
