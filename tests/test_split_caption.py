"""Subcaption splitting: one test per label form, the things that are not labels, and the gold
set of real captions in ../shared/data/subcaptions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from modeldev.captions.baseline import regex_split
from modeldev.captions.gold import halves, load, score_gold
from ray_jobs.captions.labels import expand
from ray_jobs.captions.split import split_caption


def texts(caption: str, **kw) -> dict[str, str]:
    return {s.label: s.text for s in split_caption(caption, **kw).subcaptions}


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("Lesion. (A) Axial CT. (B) Coronal MRI.", {"A": "Axial CT.", "B": "Coronal MRI."}),
        ("Lesion. A) Axial CT. B) Coronal MRI.", {"A": "Axial CT.", "B": "Coronal MRI."}),
        ("Lesion. A. Axial CT. B. Coronal MRI.", {"A": "Axial CT.", "B": "Coronal MRI."}),
        ("Lesion. A: Axial CT. B: Coronal MRI.", {"A": "Axial CT.", "B": "Coronal MRI."}),
        (
            "Tissues. A, prostate tumor; B, thyroid tumor.",
            {"A": "prostate tumor;", "B": "thyroid tumor."},
        ),
        ("Lesion. (a) Axial CT. (b) Coronal MRI.", {"a": "Axial CT.", "b": "Coronal MRI."}),
        ("Lesion: (1) Axial CT; (2) coronal MRI.", {"1": "Axial CT;", "2": "coronal MRI."}),
        (
            "Stains: (i) H&E; (ii) Ki-67; (iii) p63; (iv) AMACR.",
            {"i": "H&E;", "ii": "Ki-67;", "iii": "p63;", "iv": "AMACR."},
        ),
        (
            "(A1) Normal tissue; (A2) BPH; (B) cancer.",
            {"A1": "Normal tissue;", "A2": "BPH;", "B": "cancer."},
        ),
        (
            "Grid. a-1 Normal. a-2 Tumour. b-1 Metastasis.",
            {"a-1": "Normal.", "a-2": "Tumour.", "b-1": "Metastasis."},
        ),
        (
            "Springer style: a Gleason grade 2, b Gleason grade 3, c Gleason grade 4",
            {"a": "Gleason grade 2,", "b": "Gleason grade 3,", "c": "Gleason grade 4"},
        ),
    ],
)
def test_label_forms(caption: str, expected: dict[str, str]) -> None:
    assert texts(caption) == expected


def test_preamble_and_trailer_are_kept_apart_and_joined_on_request() -> None:
    split = split_caption(
        "Prostate biopsy. (A) H&E staining. (B) Ki-67 staining. Scale bars, 50 µm."
    )
    assert split.preamble == "Prostate biopsy."
    assert split.trailer == "Scale bars, 50 µm."
    assert split.labels == ["A", "B"]
    assert split.text_for("A") == "Prostate biopsy. H&E staining. Scale bars, 50 µm."
    assert split.text_for("B", preamble=False, trailer=False) == "Ki-67 staining."


@pytest.mark.parametrize(
    ("caption", "labels"),
    [
        ("Cells (A–C) stained with H&E. Tumour (D) at higher power.", ["A", "B", "C", "D"]),
        ("Views. A-C, H&E sections. D, Ki-67.", ["A", "B", "C", "D"]),
        ("Views. (A, B) H&E sections. (C) Ki-67.", ["A", "B", "C"]),
        ("Views. A and B: H&E sections. C and D, Ki-67 stains.", ["A", "B", "C", "D"]),
        ("Views. A and C: 100X. B and D: 300X magnification of A and C.", ["A", "C", "B", "D"]),
        ("Scans. (B1-B3) three cases; (C) control.", []),  # must start at the first label
        ("Scans. (A) overview. (B1-B3) three cases; (C) control.", ["A", "B1", "B2", "B3", "C"]),
    ],
)
def test_ranges_and_lists(caption: str, labels: list[str]) -> None:
    assert split_caption(caption).labels == labels


def test_range_split_again_inside() -> None:
    split = split_caption(
        "Origin. (a) Time course. (b-d) Staining showing hyperplasia at 1 month (b), PIN at 3 "
        "months (c), and cancer at 6 months (d)."
    )
    got = {s.label: s.text for s in split.subcaptions}
    assert got["b"] == "Staining showing hyperplasia at 1 month."
    assert got["c"] == "PIN at 3 months."
    assert got["d"] == "cancer at 6 months."


def test_labels_inside_a_shared_clause_share_it() -> None:
    """Labels that sit inside one clause name the whole clause, not the words between them."""
    split = split_caption(
        "Kaplan-Meier curves. Overall survival (A) and progression-free survival (B) by stage. "
        "*p < 0.05."
    )
    assert split.order == "after"
    assert split.preamble == "Kaplan-Meier curves."
    shared = "Overall survival and progression-free survival by stage."
    assert [(s.label, s.text) for s in split.subcaptions] == [("A", shared), ("B", shared)]
    assert split.trailer == "*p < 0.05."
    assert split.text_for("A") == f"Kaplan-Meier curves. {shared} *p < 0.05."


def test_panel_words_and_positions() -> None:
    assert split_caption("Scans. Panel A: axial CT. Panel B: coronal CT.").labels == ["A", "B"]
    assert texts("MRI of the knee. Left: T1-weighted. Right: T2-weighted.") == {
        "left": "T1-weighted.",
        "right": "T2-weighted.",
    }
    assert texts("Fundus photographs (left) before and (right) after treatment.") == {
        "left": "before and",
        "right": "after treatment.",
    }
    assert split_caption("Top panel: raw data. Bottom panel: fitted model.").labels == [
        "top",
        "bottom",
    ]


def test_bold_labels_from_a_real_jats_caption(jats_dir: Path) -> None:
    from ray_jobs.pmc.jats import parse_article

    figure = parse_article((jats_dir / "pone.0046493.nxml").read_bytes()).figures[0]
    assert figure.bold_labels == ["A", "B"]
    split = split_caption(figure.caption, bold=set(figure.bold_labels))
    assert [(s.label, s.text) for s in split.subcaptions] == [("A", "THL and"), ("B", "MmPPOX.")]
    assert split.preamble == "Chemical structure of inhibitors. Chemical structures of"
    # what follows the last panel applies to both structures
    assert split.trailer.startswith("The proposed mechanism of action")


def test_bold_labels_from_jats() -> None:
    caption = "Chemical structures of A, THL and B, MmPPOX."
    assert split_caption(caption).labels == []  # prose alone: not labels
    split = split_caption(caption, bold={"A", "B"})
    assert [(s.label, s.text) for s in split.subcaptions] == [("A", "THL and"), ("B", "MmPPOX.")]


@pytest.mark.parametrize(
    "caption",
    [
        "Tumour stained with haematoxylin and eosin (H&E), original magnification (x40).",
        "Mean volume in the treated group (n = 12) and controls (n = 10).",
        "Figure 2: Overview of the cohort. Figure 3: follow-up.",
        "Survival as reported previously (12). Data from (13).",
        "A total of 40 patients were scanned. A subset is shown.",
        "Same case as (C), deeper section.",
    ],
)
def test_things_that_are_not_labels(caption: str) -> None:
    assert split_caption(caption).subcaptions == []


def test_references_to_other_panels_stay_in_the_text() -> None:
    split = split_caption(
        "Tumour. (A) Overview. (B) Same case as (A) at higher power. (C) Detail, as in (B)."
    )
    assert split.labels == ["A", "B", "C"]
    assert split.subcaptions[1].text == "Same case as (A) at higher power."
    assert split.subcaptions[2].text == "Detail, as in (B)."


def test_expand_ranges() -> None:
    assert expand("A–C") == ["A", "B", "C"]
    assert expand("a, b and d") == ["a", "b", "d"]
    assert expand("B1-B3") == ["B1", "B2", "B3"]
    assert expand("ii-iv", roman_scheme=True) == ["ii", "iii", "iv"]


def test_cli_prints_the_split() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", "split-caption", "Cells. (A) H&E. (B) Ki-67."],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert result["preamble"] == "Cells."
    assert result["subcaptions"] == [
        {"label": "A", "text": "H&E."},
        {"label": "B", "text": "Ki-67."},
    ]


def test_cli_shows_the_confidence() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", "split-caption", "Cells. (A) H&E. (B) Ki-67."],
        capture_output=True,
        text=True,
        check=True,
    )
    assert 0.8 <= json.loads(proc.stdout)["confidence"] <= 1.0


def test_gold_subcaptions_meet_the_targets(jats_dir: Path) -> None:
    score = score_gold(jats_dir.parent / "subcaptions" / "prostate_gold.json")
    assert score.captions == 196
    assert score.f1 >= 0.98
    assert score.similarity >= 0.87


def test_zou_dev_across_the_literature(jats_dir: Path) -> None:
    """The Zou et al. dev half (224 figures from across PMC), labels compared ignoring case;
    both hash halves are held to the floor, so a rule tuned to one half shows on the other."""
    path = jats_dir.parent / "subcaptions" / "zou_dev.json"
    records = load(path)
    whole = score_gold(records, ignore_case=True)
    assert whole.captions == 224
    assert whole.f1 >= 0.95 and whole.similarity >= 0.745
    for half in halves(records):
        score = score_gold(records, ignore_case=True, names=half)
        assert score.f1 >= 0.93 and score.similarity >= 0.72
    baseline = score_gold(records, ignore_case=True, splitter=regex_split)
    assert baseline.f1 < whole.f1 - 0.1 and baseline.similarity < whole.similarity - 0.1
    assert whole.precision_at(0.0) == (whole.precision, len(whole.by_confidence))
