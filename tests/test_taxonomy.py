"""The modality taxonomy and the metadata rules, on real captions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ray_jobs.captions.split import split_caption
from ray_jobs.figures.taxonomy import load_taxonomy, metadata_prior, tokens


def test_taxonomy_levels() -> None:
    tax = load_taxonomy()
    assert {c.l1 for c in tax.classes.values()} == {
        "radiology",
        "microscopy",
        "visible_light",
        "other",
    }
    assert tax.l0_of("ct") == "medical" and tax.l0_of("chart") == "other"
    assert all(c.keep == (c.l0 == "medical") for c in tax.classes.values())
    assert {
        "ct",
        "mri",
        "xray",
        "ultrasound",
        "histopathology",
        "fluorescence",
        "fundus",
        "dermatology",
        "endoscopy",
        "chart",
        "diagram",
        "gel_blot",
    } <= set(tax.classes)


def test_tokens_survive_punctuation() -> None:
    assert tokens("(MRI), CT, and T2-weighted; H&E 200x") == [
        "mri",
        "ct",
        "and",
        "t2-weighted",
        "h&e",
        "200x",
    ]


def test_negation_and_evidence() -> None:
    prior = metadata_prior("No CT was performed; ultrasound showed a cyst.")
    assert prior.best == "ultrasound" and set(prior.scores) == {"ultrasound"}
    assert [(e.l2, e.phrase, e.source) for e in prior.evidence] == [
        ("ultrasound", "ultrasound", "own")
    ]
    assert metadata_prior("").scores == {}


@pytest.fixture(scope="module")
def medicat(jats_dir: Path) -> dict[str, dict]:
    rows = (jats_dir.parent / "medicat_figures" / "sample.jsonl").read_text().splitlines()
    return {f"{r['pdf_hash'][:6]}-{r['fig_key']}": r for r in map(json.loads, rows)}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("26491a-Figure4", "mri"),  # "Nuclear magnetic resonance scan"
        ("b362a1-Figure2", "ct"),
        ("e19039-Figure3", "ct"),  # "computed tomography (CT) angiogram": CT wins over angiography
        ("57c9ad-Figure3", "endoscopy"),
        ("5f2d2f-Figure2", "mri"),
    ],
)
def test_real_captions(medicat: dict[str, dict], key: str, expected: str) -> None:
    assert metadata_prior(shared_caption=medicat[key]["s2_caption"]).best == expected


def test_each_panel_reads_its_own_subcaption(medicat: dict[str, dict]) -> None:
    """'(A) Barium enema and (B) endoscopic image': A is a radiograph, B an endoscopy."""
    split = split_caption(medicat["57c9ad-Figure1"]["s2_caption"])
    shared = f"{split.preamble} {split.trailer}"
    by_label = {s.label: metadata_prior(s.text, shared).best for s in split.subcaptions}
    assert by_label == {"A": "xray", "B": "endoscopy"}


def test_gold_prostate_captions_are_mostly_histology(jats_dir: Path) -> None:
    gold = json.loads((jats_dir.parent / "subcaptions" / "prostate_gold.json").read_text())
    best = [metadata_prior(shared_caption=r["caption"]).best for r in gold.values()]
    assert best.count("histopathology") / len(best) > 0.6


def test_weak_keywords_are_marked() -> None:
    prior = metadata_prior("Biopsy stained with H&E; values plotted at T2.")
    found = {(e.phrase, e.l2, e.strong) for e in prior.evidence}
    assert ("h&e", "histopathology", True) in found
    assert ("biopsy", "histopathology", False) in found and ("t2", "mri", False) in found
    assert [str(e) for e in prior.evidence if e.phrase == "t2"] == ["own:t2->mri(weak)"]
    tax = load_taxonomy()
    for cls in tax.classes.values():  # a phrase is strong or weak, never both
        assert not set(cls.keywords) & set(cls.weak_keywords), cls.name


def test_a_cited_table_is_not_a_table() -> None:
    """'Table 1' in an article sentence cites the article's table; it says nothing about what
    a figure shows. An uncited table still is one."""
    assert metadata_prior(figure_caption="Sizes are in Table 1 and table S2.").evidence == []
    (e,) = metadata_prior(figure_caption="Table of the patients' characteristics.").evidence
    assert (e.l2, e.source) == ("table_text", "figure")
