"""Reading a figure's labels together: one scheme, distinct labels, the first N of a sequence."""

from __future__ import annotations

import numpy as np

from modeldev.letters.evaluate import family_labels, letter_accuracy
from ray_jobs.figures.letters.classes import CLASSES, INDEX
from ray_jobs.figures.letters.model import LabelReader
from ray_jobs.figures.letters.schemes import each_alone, read_in_scheme, scheme_of


def probs(*rows: dict[str, float]) -> np.ndarray:
    """Probability rows over CLASSES: the named classes get their mass, the rest share 1%."""
    out = np.full((len(rows), len(CLASSES)), 0.01 / len(CLASSES))
    for r, row in enumerate(rows):
        for name, p in row.items():
            out[r, INDEX[name]] = p
    return out / out.sum(1, keepdims=True)


def texts(readings: list[tuple[str, float]]) -> list[str]:
    return [t for t, _ in readings]


def test_the_figures_scheme_decides_an_ambiguous_glyph() -> None:
    """ "ii" read as "11" on its own is "ii" beside "iii" and "iv"; "1" next to "2" stays "1"."""
    roman = probs({"11": 0.6, "ii": 0.35}, {"iii": 0.9}, {"iv": 0.8, "4": 0.1})
    assert texts(each_alone(roman, CLASSES)) == ["11", "iii", "iv"]
    assert scheme_of(roman, CLASSES) == "roman"
    assert texts(read_in_scheme(roman, CLASSES)) == ["ii", "iii", "iv"]
    numbers = probs({"1": 0.5, "i": 0.45}, {"2": 0.9}, {"3": 0.9})
    assert texts(read_in_scheme(numbers, CLASSES)) == ["1", "2", "3"]


def test_a_mixed_figure_and_a_single_label_keep_their_own_readings() -> None:
    """No scheme holds the majority's own readings: nothing is forced."""
    mixed = probs({"a": 0.9}, {"b": 0.9}, {"ii": 0.9}, {"iii": 0.9})
    assert scheme_of(mixed, CLASSES) is None
    assert texts(read_in_scheme(mixed, CLASSES)) == ["a", "b", "ii", "iii"]
    single = probs({"11": 0.6, "ii": 0.35})
    assert texts(read_in_scheme(single, CLASSES)) == ["11"]


def test_two_labels_never_read_the_same() -> None:
    """Both crops look most like "b": the less sure one takes its next best, "a"."""
    clash = probs({"b": 0.7, "a": 0.2}, {"b": 0.9}, {"c": 0.9})
    assert texts(read_in_scheme(clash, CLASSES)) == ["a", "b", "c"]


def test_readings_past_the_panel_count_are_believed_less() -> None:
    """A four-panel figure: "h" (unsure) gives way to "b"; a sure "e" (a continued figure)
    stands; probabilities stay in (0, 1]."""
    unsure = probs({"h": 0.5, "b": 0.3}, {"a": 0.9}, {"c": 0.9}, {"d": 0.9})
    assert texts(read_in_scheme(unsure, CLASSES)) == ["h", "a", "c", "d"]
    assert texts(read_in_scheme(unsure, CLASSES, panels=4)) == ["b", "a", "c", "d"]
    continued = probs({"e": 0.98}, {"f": 0.98}, {"g": 0.97})
    read = read_in_scheme(continued, CLASSES, panels=3)
    assert texts(read) == ["e", "f", "g"] and all(0 < p <= 1 for _, p in read)


def test_reading_together_beats_reading_alone_on_unseen_type() -> None:
    """The independent family's labels (fonts the reader never saw), dev seed 7: reading a
    figure's labels together is right more often than reading them one by one, and on nine
    of ten labels or more."""
    figures = family_labels(40, seed=7)
    reader = LabelReader()
    alone = letter_accuracy(reader, figures, together=False)
    together = letter_accuracy(reader, figures)
    assert together > alone and together >= 0.9
