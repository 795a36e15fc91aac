"""Pairing panels with their text; token counts and waste."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_jobs.captions.pairing import MentionRef, PanelBox, pair_panels
from ray_jobs.captions.split import split_caption
from ray_jobs.captions.tokens import clip_tokens, count, token_waste

CAPTION = "Prostate biopsy. (A) H&E staining. (B) Ki-67 staining. Scale bars, 50 µm."
MENTIONS = [
    MentionRef("Proliferation was high (Fig. 1B).", ["B"]),
    MentionRef("Biopsies are shown in Fig. 1.", []),
]


def grid(n: int, boxed: tuple[int, ...] = ()) -> list[PanelBox]:
    return [PanelBox(i, (i * 100, 0, i * 100 + 90, 90), i in boxed) for i in range(n)]


def test_labels_and_panels_agree() -> None:
    paired = pair_panels(grid(2, boxed=(0, 1)), split_caption(CAPTION), CAPTION, MENTIONS)
    assert [(p.label, p.alignment) for p in paired] == [("A", "label"), ("B", "label")]
    assert paired[0].text == "Prostate biopsy. H&E staining. Scale bars, 50 µm."
    assert paired[0].confidence == 0.95
    assert paired[0].mentions == ["Biopsies are shown in Fig. 1."]
    assert paired[1].mentions == [
        "Proliferation was high (Fig. 1B).",
        "Biopsies are shown in Fig. 1.",
    ]
    unboxed = pair_panels(grid(2), split_caption(CAPTION), CAPTION)
    assert unboxed[0].confidence < paired[0].confidence


def test_one_panel_gets_the_whole_caption() -> None:
    (only,) = pair_panels(grid(1), split_caption(CAPTION), CAPTION, MENTIONS)
    assert (only.alignment, only.text, only.label) == ("single", CAPTION, None)
    assert len(only.mentions) == 2 and only.confidence < 1.0
    plain = "Axial CT of the abdomen."
    assert pair_panels(grid(1), split_caption(plain), plain)[0].confidence == 1.0


def test_mismatch_is_flagged_never_silent() -> None:
    paired = pair_panels(grid(3), split_caption(CAPTION), CAPTION)
    assert {p.alignment for p in paired} == {"full_caption"}
    assert all(p.text == CAPTION and p.confidence == 0.0 for p in paired)


def test_positions_map_by_geometry() -> None:
    caption = "Knee MRI. Right: T2-weighted. Left: T1-weighted."
    paired = pair_panels(grid(2), split_caption(caption), caption)
    assert {p.index: p.label for p in paired} == {0: "left", 1: "right"}
    assert paired[0].text.startswith("Knee MRI. T1-weighted.")


def test_clip_token_counts_match_open_clip() -> None:
    import open_clip

    assert clip_tokens("") == 2  # start and end tokens
    for text in ("Axial CT of the abdomen.", "H&E staining, 200x; scale bar 50 µm."):
        ids = open_clip.tokenize([text], context_length=512)[0]
        assert clip_tokens(text) == int((ids != 0).sum())
    assert clip_tokens("word " * 100) == 102


def test_long_tokenizer_from_a_local_file(tmp_path: Path) -> None:
    """A tokenizer the test trains itself, saved and read back as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        ["axial ct of the abdomen", "coronal mri of the knee"],
        trainers.WordLevelTrainer(special_tokens=["[UNK]"]),
    )
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    counts = count("axial mri of the knee", path)
    assert counts.long == 5 and counts.clip == 7


def test_token_waste() -> None:
    waste = token_waste([50, 100, 300])
    assert waste[77] == pytest.approx((23 + 223) / 450)
    assert waste[512] == 0.0
    assert token_waste([]) == {77: 0.0, 154: 0.0, 256: 0.0, 512: 0.0}


def lettered(letters: list[str | None]) -> list[PanelBox]:
    return [
        PanelBox(i, (i * 100, 0, i * 100 + 90, 90), letter is not None, letter)
        for i, letter in enumerate(letters)
    ]


def test_read_letters_pair_panels_whatever_the_order() -> None:
    """A figure lettered against reading order: the letters read win, and say so."""
    paired = pair_panels(lettered(["b", "a"]), split_caption(CAPTION), CAPTION, MENTIONS)
    assert [(p.label, p.alignment, p.confidence) for p in paired] == [
        ("B", "letter", 0.97),
        ("A", "letter", 0.97),
    ]
    assert paired[0].text.startswith("Prostate biopsy. Ki-67 staining.")
    assert paired[0].mentions[0] == "Proliferation was high (Fig. 1B)."


def test_letters_match_labels_case_and_brackets_aside() -> None:
    caption = "Lesions. (a) Axial CT. (b) Coronal CT. (c) Biopsy."
    paired = pair_panels(lettered(["a", None, "c"]), split_caption(caption), caption)
    assert [(p.label, p.alignment) for p in paired] == [
        ("a", "letter"),
        ("b", "label"),  # not read: the one label left, by reading order
        ("c", "letter"),
    ]
    assert paired[1].confidence < paired[0].confidence


def test_look_alike_readings_stand_for_the_label_the_caption_names() -> None:
    """A serif "i" read as "1", "ii" as "11": in a caption of roman numerals they are i and ii,
    and in a caption of numbers an "i" read is 1."""
    caption = "Biopsy. (i) H&E. (ii) Ki-67. (iii) CD20."
    paired = pair_panels(lettered(["111", "1", "11"]), split_caption(caption), caption)
    assert [(p.label, p.alignment) for p in paired] == [
        ("iii", "letter"),
        ("i", "letter"),
        ("ii", "letter"),
    ]
    caption = "Biopsy. (1) Overview. (2) Detail."
    paired = pair_panels(lettered(["2", "i"]), split_caption(caption), caption)
    assert [(p.label, p.alignment) for p in paired] == [("2", "letter"), ("1", "letter")]
    caption = "Lesions. (a) Axial. (b) Coronal."
    paired = pair_panels(lettered(["a", "1"]), split_caption(caption), caption)
    assert [p.alignment for p in paired] == ["label", "label"]  # "1" is no look-alike of b


def test_inconsistent_letters_fall_back_to_reading_order() -> None:
    split = split_caption(CAPTION)
    for letters in (["a", "a"], ["a", "q"], ["b", None]):  # repeated, unknown, only one read
        paired = pair_panels(lettered(letters), split, CAPTION)
        assert [(p.label, p.alignment) for p in paired] == [("A", "label"), ("B", "label")]


def test_letters_rescue_an_over_split_figure() -> None:
    paired = pair_panels(lettered(["a", None, "b"]), split_caption(CAPTION), CAPTION)
    assert [(p.label, p.alignment) for p in paired] == [
        ("A", "letter"),
        (None, "full_caption"),
        ("B", "letter"),
    ]
