"""Caption styles from across the literature (written for these tests, not taken from a gold
set): other label schemes inside a panel, bare labels, labels inside sentences and parentheses,
sub-labels, shared clauses, label case, captions that name no labels, and the confidence."""

from __future__ import annotations

import pytest

from modeldev.captions.baseline import regex_split
from modeldev.captions.gold import halves, score_gold, unmarked
from ray_jobs.captions.pairing import PanelBox, pair_panels
from ray_jobs.captions.split import split_caption


def labels(caption: str) -> list[str]:
    return split_caption(caption).labels


def texts(caption: str) -> dict[str, str]:
    return {s.label: s.text for s in split_caption(caption).subcaptions}


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        (
            "Iron chelation. (a) HeLa cells were given (1) 50 µM DFO, (2) 100 µM DFO or (3) "
            "vehicle. (b) Viability after 24 h.",
            ["a", "b"],
        ),
        ("Recordings. a (Top): raw traces. b (Bottom): fitted curves.", ["a", "b"]),
        (
            "Rows. a Top views, b side views, c pore water, and d gate detail. Columns (i), "
            "(ii), and (iii) are 0, 3 and 6 ns.",
            ["a", "b", "c", "d"],
        ),
    ],
)
def test_letters_beat_another_scheme_inside_a_panel(caption: str, expected: list[str]) -> None:
    assert labels(caption) == expected


def test_bare_labels_taxonomy_style() -> None:
    caption = (
        "Aranea exempli sp. n., male. A Palp, prolateral view B Palp, retrolateral view "
        "C Chelicera, frontal view D Habitus, dorsal view. Scale bars 0.5 mm."
    )
    got = texts(caption)
    assert list(got) == ["A", "B", "C", "D"]
    assert got["B"] == "Palp, retrolateral view"
    assert split_caption(caption).trailer == "Scale bars 0.5 mm."


def test_bare_numbers_with_ranges_split_again_inside() -> None:
    caption = (
        "1–2 Blatta exempla sp. n., male: 1 holotype, dorsal view 2 same, ventral view "
        "3–4 Blatta altera sp. n., nymph: 3 paratype, dorsal view 4 same, ventral view "
        "5–6 Blatta tertia sp. n., female: 5 dorsal view 6 ventral view."
    )
    split = split_caption(caption)
    assert split.labels == ["1", "2", "3", "4", "5", "6"]
    assert split.text_for("3").startswith("Blatta altera sp. n., nymph: paratype, dorsal view")


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("Relative expression for A, TARS, B, VEGF, C, SARS and D, YARS.", ["A", "B", "C", "D"]),
        ("Immunostaining of A. ALDH1A3; B. ALDH3A2; and C. ALDH7A1.", ["A", "B", "C"]),
        ("Sacrum. A, anterior; B, posterior; C, dorsal; and D, ventral views.", list("ABCD")),
    ],
)
def test_labels_inside_a_sentence(caption: str, expected: list[str]) -> None:
    assert labels(caption) == expected


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        (
            "RNA motif. (A) Stereo view. (B) Cycle basis: five cycles C1 to C5 cover the motif. "
            "(C) The basis of (B) without backbone contacts.",
            ["A", "B", "C"],
        ),
        (
            "Femur. (A) Overview. (B) Detail in dorsal (B1) and medial (B2) views. (C) Section.",
            ["A", "B", "C"],
        ),
        (
            "Invasion. (A) Slices. (B) PCR. (C) Blot. (D) Counts. (E1 and E2) Glial staining.",
            ["A", "B", "C", "D", "E"],
        ),
        ("Cases. (A) Overview; (B1) normal; (B2) BPH; (B3) cancer.", ["A", "B1", "B2", "B3"]),
    ],
)
def test_sub_labels_fold_into_their_panel(caption: str, expected: list[str]) -> None:
    assert labels(caption) == expected


def test_primed_views_and_dashed_labels() -> None:
    assert labels("Skin. (A, A′) Lesion and detail. (B, B′) Healed skin.") == ["A", "B"]
    shared = texts("Views (A and A'), (B and B'), and (C and C') of both knees.")
    assert set(shared.values()) == {"Views of both knees."}
    assert texts("Knee. A - Axial T1 image; B - coronal T2 image.") == {
        "A": "Axial T1 image;",
        "B": "coronal T2 image.",
    }


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("Western blot (A/B) and densitometry (C).", ["A", "B", "C"]),
        ("A—Axial CT. B—Coronal CT.", ["A", "B"]),
        ("Chest CT. (A.) Axial view. (B.) Coronal view.", ["A", "B"]),
        ("Cells given control (upper panels, A–C) or siRNA (lower panels, D–F).", list("ABCDEF")),
        ("(a) (b) Axial images. (c) Coronal image.", ["a", "b", "c"]),
        ("Stains for PSA (image A) and PAP (PAP; image B).", ["A", "B"]),
        (
            "Organs. A: brain; B: colon; C: liver; D: lung; E: duct; F: gland; G: gut; "
            "H: spleen; I: adrenal; K: kidney; L: skin.",  # J skipped: it reads like I
            list("ABCDEFGHIKL"),
        ),
    ],
)
def test_more_label_forms(caption: str, expected: list[str]) -> None:
    assert labels(caption) == expected


def test_notes_around_labels_stay_in_the_text() -> None:
    got = texts("Cells given control (upper panels, A–C) or siRNA (lower panels, D–F).")
    assert got["A"] == "Cells given control (upper panels) or siRNA (lower panels)."
    assert texts("Case 2. Panel (A) shows the lesion; panel (B) shows the follow-up.") == {
        "A": "shows the lesion;",
        "B": "shows the follow-up.",
    }


def test_sub_labels_in_one_clause_fold_into_one_text() -> None:
    got = texts("(A) Skull. Braincase in dorsal (B1), medial (B2), lateral (B3) views. (C) Jaw.")
    assert got == {"A": "Skull.", "B": "Braincase in dorsal, medial, lateral views.", "C": "Jaw."}


def test_the_issue_femur_example_shares_the_sentence() -> None:
    split = split_caption(
        "Femur in anterior (A), lateral (B–C), posterior (D) and medial (E) views. Scale bar 1 cm."
    )
    assert split.labels == ["A", "B", "C", "D", "E"]
    assert {s.text for s in split.subcaptions} == {
        "Femur in anterior, lateral, posterior and medial views."
    }
    assert split.trailer == "Scale bar 1 cm."


def test_panel_words_in_prose() -> None:
    got = texts(
        "Egg morphology. Panel A shows an intact egg. Panel B shows a cracked egg. "
        "Panels C and D show eggs of a second species."
    )
    assert list(got) == ["A", "B", "C", "D"]
    assert got["A"] == "Panel A shows an intact egg."  # the label is the sentence's subject
    assert got["C"] == got["D"] == "Panels C and D show eggs of a second species."


def test_labels_inside_parentheses() -> None:
    got = texts("Brain MRI (a T2-weighted axial view, b T2-weighted coronal view, c FLAIR image).")
    assert list(got) == ["a", "b", "c"]


def test_comma_and_lists_keep_their_last_member() -> None:
    assert labels("Stains. (A) Overview. (B) Detail. (C, D, and E) Serial sections.") == list(
        "ABCDE"
    )


@pytest.mark.parametrize(
    "caption",
    [
        "Strong (A) and weak (B) marker expression in tumour cells at ×10.",
        "Skull in rostral (A), dorsal (B), and lateral (C) views.",
    ],
)
def test_labels_in_one_clause_share_the_whole_clause(caption: str) -> None:
    split = split_caption(caption)
    own = {s.text for s in split.subcaptions}
    assert len(own) == 1 and len(split.subcaptions) >= 2
    (shared,) = own
    assert shared.startswith(caption.split(" (")[0])  # never just "Strong"
    assert "(A)" not in shared and "(B)" not in shared


def test_labels_closing_whole_phrases_get_their_phrase() -> None:
    got = texts(
        "Prostate. Normal glands with flat epithelium (a), hyperplastic glands with papillary "
        "folds (b), and invasive carcinoma with single cells (c)."
    )
    assert got == {
        "a": "Normal glands with flat epithelium",
        "b": "hyperplastic glands with papillary folds",
        "c": "invasive carcinoma with single cells",
    }


def test_clauses_after_a_label_in_its_sentence() -> None:
    split = split_caption(
        "Lung inflammation. The treatment lowered counts of (A) neutrophils and (B) monocytes "
        "in lavage fluid. (C) Macrophage infiltration in tissue."
    )
    got = {s.label: s.text for s in split.subcaptions}
    assert split.preamble == "Lung inflammation."
    assert got["A"] == got["B"]
    assert got["A"].startswith("The treatment lowered counts of neutrophils and")
    assert got["C"] == "Macrophage infiltration in tissue."


def test_list_items_and_headers() -> None:
    got = texts("Vertebra. A, anterior; B, posterior; C, dorsal; and D, ventral views.")
    assert got["C"] == "dorsal; and" and got["D"] == "ventral views."
    got = texts(
        "Elbow. A and B, fracture at age 6. C and D, after reduction. Result after 9 years: "
        "E and F, normal elbow; G and H, operated elbow."
    )
    assert got["C"] == "after reduction."
    assert got["E"] == "Result after 9 years: normal elbow;"
    assert got["H"] == "Result after 9 years: operated elbow."


def test_a_lone_modifier_shares_the_next_text_two_things_do_not() -> None:
    got = texts("Dermoid. (a) Sagittal and (b) oblique T2-weighted images show the mass.")
    assert got["a"] == got["b"] == "Sagittal and oblique T2-weighted images show the mass."
    got = texts("Colon. (A) Contrast enema and (B) endoscopic view of the stricture.")
    assert got == {"A": "Contrast enema and", "B": "endoscopic view of the stricture."}


def test_notes_for_some_labels_go_to_those_labels() -> None:
    split = split_caption("Tissue. (A) Benign. (B) Cancer. (A: ×100; B: ×400).")
    assert [(s.label, s.text) for s in split.subcaptions] == [
        ("A", "Benign. ×100"),
        ("B", "Cancer. ×400"),
    ]
    assert split.trailer == ""


def test_a_letter_never_named_may_be_skipped_in_a_long_run() -> None:
    caption = (
        "Receptor staining in tissues: muscle (A and A'), smooth muscle (C and C'), fat "
        "(D and D'), cartilage (E and E'), and synovium (F and F')."
    )
    assert labels(caption) == ["A", "C", "D", "E", "F"]
    assert labels("Scans. (A) CT. (C) MRI.") == []  # too short to believe the gap
    assert labels("Scans. (A) CT. (B) MRI. (D) PET. (E) US.") == ["A", "B", "D", "E"]
    assert labels("Scans. (A) CT. (B) MRI. (D) PET, unlike (C). (E) US.") == ["A", "B", "C"]


def test_first_panel_unnamed() -> None:
    caption = (
        "A woman with a pelvic mass. Ultrasound shows the mass. CT (B) shows fat. "
        "T1-weighted MRI (C) shows high signal."
    )
    split = split_caption(caption)
    assert split.labels == ["B", "C"]
    assert 0 < split.confidence < split_caption("Mass. (A) US. (B) CT. (C) MRI.").confidence


def test_label_case_is_kept_and_scored_ignoring_case() -> None:
    caption = "Panels. (a) Axial CT. (b) Coronal CT. (c) MRI."
    assert labels(caption) == ["a", "b", "c"]
    gold = {
        "fig1": {
            "caption": caption,
            "gt_subfigures": [
                {"label": {"text": "A"}, "caption": "Panels. Axial CT."},
                {"label": {"text": "B"}, "caption": "Panels. Coronal CT."},
                {"label": {"text": "c"}, "caption": "Panels. MRI."},
                {"caption": "a subfigure without a label is left out"},
            ],
        }
    }
    assert score_gold(gold).matched == 1  # only "c" agrees when case counts
    folded = score_gold(gold, ignore_case=True)
    assert (folded.gold_labels, folded.matched, folded.f1) == (3, 3, 1.0)
    assert folded.similarity > 0.95


@pytest.mark.parametrize(
    "caption",
    [
        "Ultrasound features used by the tumour model of the study.",
        "A total of 40 patients were scanned. A subset is shown at day 6 and day 7.",
        "T cells and B cells in the spleen of C57 mice.",
        "Tumour volume in mice (n = 6) after 2, 4 and 6 weeks of treatment.",
        "Tumour growth as shown in Figure 2 (B) and (C) of the earlier study.",
    ],
)
def test_captions_that_name_no_labels_are_not_split(caption: str) -> None:
    split = split_caption(caption)
    assert split.subcaptions == [] and split.confidence == 0.0
    panels = [PanelBox(i, (i * 100, 0, i * 100 + 90, 90)) for i in range(3)]
    paired = pair_panels(panels, split, caption)
    assert {p.alignment for p in paired} == {"full_caption"}
    assert all(p.text == caption for p in paired)


def test_confidence_orders_how_sure_the_sequence_is() -> None:
    clear = split_caption("Lesion. (A) Axial CT. (B) Coronal CT. (C) Sagittal CT.")
    bare = split_caption("Spider. A Palp, dorsal view B Palp, ventral view C Leg, lateral view")
    assert clear.confidence >= 0.9
    assert 0 < bare.confidence < clear.confidence
    assert clear.to_dict()["confidence"] == clear.confidence


def test_regex_baseline_cuts_at_plain_labels_only() -> None:
    assert regex_split("Scan. (A) CT. (B) MRI.").labels == ["A", "B"]
    assert regex_split("Spider. A Palp, dorsal view B Palp, ventral view").labels == []


def test_markers_can_be_taken_out_of_both_texts() -> None:
    text = "Title. (A) Axial CT, (C, D) MRI. B) Coronal CT. A. Note: a mass."
    assert " ".join(unmarked(text, ["A", "B", "C", "D"]).split()) == (
        "Title. Axial CT, MRI. Coronal CT. Note: a mass."
    )


def test_halves_are_stable_and_disjoint() -> None:
    names = [f"PMC{i}_fig{i % 7}.jpg" for i in range(41)]
    first, second = halves(names)
    assert (len(first), len(second)) == (21, 20)
    assert not set(first) & set(second) and set(first) | set(second) == set(names)
    assert halves(reversed(names)) == (first, second)


def test_hostile_text_is_bounded_work() -> None:
    """Candidates are capped, so a caption of repeated labels costs a bounded number of runs."""
    from ray_jobs.captions.candidates import MAX_CANDIDATES, find

    assert len(find("A. " * 20000, frozenset(), roman=False)) == MAX_CANDIDATES
    assert split_caption("(A) x. " * 20000).labels == ["A"]
    assert split_caption("x " * 30000).subcaptions == []
    deep = split_caption("(" * 3000 + "A) x " * 1000)
    assert deep.confidence <= 1.0
