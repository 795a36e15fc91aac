"""Pair each detected panel with its own text, and say how sure the pairing is.

``alignment`` is ``letter`` when the letter a panel's label reads names a caption label (the
panel's own evidence, whatever the reading order), ``label`` when panels and caption labels
agree (same count in reading order, the panels that carry a detected label box, or positions
like "left"/"right"), ``single`` when
the figure is one panel (it gets the whole caption), and ``full_caption`` when the caption
names no panels: the panel keeps the whole caption and the record says so, so a user can
filter it out. Boxes and labels that disagree in number are settled before pairing
(``captions.layout``): joined at the labels that anchor them, or the figure is published whole
(``figure``); panels are never paired with a caption's labels by reading order alone when
their count differs from the caption's.
Article sentences that name a panel ("Fig. 1B") go to that panel; those that name the figure
only go to every panel.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ray_jobs.captions.labels import POSITIONS
from ray_jobs.captions.split import SplitCaption

Alignment = Literal["letter", "label", "single", "full_caption", "figure"]
LETTER_CONFIDENCE = 0.97  # the panel shows the letter the caption names
_LABEL_NOISE = re.compile(r"[\s().:,\-\[\]]")


@dataclass
class PanelBox:
    index: int  # reading order
    bbox: tuple[int, int, int, int]
    has_label_box: bool = False
    letter: str | None = None  # what the panel's label reads ("b", "ii"), when it was read


@dataclass
class MentionRef:
    sentence: str
    panels: list[str] = field(default_factory=list)  # letters the mention names, e.g. ["B"]


@dataclass
class PairedPanel:
    index: int
    label: str | None
    text: str
    alignment: Alignment
    confidence: float
    mentions: list[str] = field(default_factory=list)


def _by_position(panels: Sequence[PanelBox], labels: list[str]) -> dict[int, str] | None:
    """Map "left/right/top/bottom..." to panels by where they are."""
    if not all(label in POSITIONS for label in labels) or len(labels) != len(panels):
        return None

    def centre(p: PanelBox) -> tuple[float, float]:
        return (p.bbox[0] + p.bbox[2]) / 2, (p.bbox[1] + p.bbox[3]) / 2

    xs = sorted(panels, key=lambda p: centre(p)[0])
    ys = sorted(panels, key=lambda p: centre(p)[1])
    picks: dict[str, PanelBox] = {
        "left": xs[0],
        "right": xs[-1],
        "top": ys[0],
        "upper": ys[0],
        "bottom": ys[-1],
        "lower": ys[-1],
        "middle": xs[len(xs) // 2],
        "center": xs[len(xs) // 2],
        "centre": xs[len(xs) // 2],
    }
    for vertical in ("top", "upper", "bottom", "lower"):
        row = sorted(
            (
                p
                for p in panels
                if abs(centre(p)[1] - centre(picks[vertical])[1])
                < (picks[vertical].bbox[3] - picks[vertical].bbox[1]) / 2
            ),
            key=lambda p: centre(p)[0],
        )
        picks[f"{vertical} left"], picks[f"{vertical} right"] = row[0], row[-1]
    mapping = {picks[label].index: label for label in labels if label in picks}
    return mapping if len(mapping) == len(labels) else None


def _letter_key(label: str) -> str:
    """ "(B)", "B.", "b" → "b": how a label and a read letter are compared."""
    return _LABEL_NOISE.sub("", label).lower()


# Readings that one typeface's glyph makes of another's: a serif "i" reads "1" or "l", "ii"
# reads "11", "o" reads "0". A reading the caption does not name stands for the one of these it
# does name (a caption of roman numerals has no "1"); it is never taken over a label named.
_LOOK_ALIKE = {
    "1": ("i", "l"),
    "l": ("i", "1"),
    "i": ("1", "l"),
    "11": ("ii",),
    "ii": ("11",),
    "111": ("iii",),
    "iii": ("111",),
    "0": ("o",),
    "o": ("0",),
}


def _as_named(key: str, wanted: Collection[str]) -> str:
    """``key``, or the look-alike of it that the caption names when it names ``key`` not."""
    if key in wanted:
        return key
    return next((alt for alt in _LOOK_ALIKE.get(key, ()) if alt in wanted), key)


def letters_named(panels: Sequence[PanelBox], labels: list[str]) -> dict[int, str] | None:
    """Panels whose read letter names a caption label, when the reading is consistent: two or
    more panels read, no letter read twice, and every letter read is one the caption names
    (or a look-alike of exactly one it names: "1" for "i")."""
    wanted = {_letter_key(label): label for label in labels}
    if len(wanted) != len(labels):
        return None
    read = {p.index: _as_named(_letter_key(p.letter), wanted) for p in panels if p.letter}
    if len(read) < 2 or len(set(read.values())) != len(read):
        return None
    if not all(key in wanted for key in read.values()):
        return None
    return {index: wanted[key] for index, key in read.items()}


def pair_panels(
    panels: Sequence[PanelBox],
    split: SplitCaption,
    caption: str,
    mentions: Sequence[MentionRef] = (),
    *,
    join_preamble: bool = True,
    join_trailer: bool = True,
) -> list[PairedPanel]:
    labels = split.labels
    mapping: dict[int, str] = {}
    confidence = 0.0
    if len(panels) == 1:
        only = panels[0]
        # one panel shows everything the caption says, labelled or not
        confidence = 1.0 if len(labels) <= 1 else 0.6
        return [
            PairedPanel(
                only.index, None, caption, "single", confidence, [m.sentence for m in mentions]
            )
        ]
    by_letter = letters_named(panels, labels) if labels else None
    if by_letter:
        mapping = dict(by_letter)
        rest = [p for p in panels if p.index not in by_letter]
        left = [label for label in labels if label not in by_letter.values()]
        if rest and len(rest) == len(left):  # the panels not read take what is left, in order,
            # where that order agrees with the letters read around them
            fill = {p.index: label for p, label in zip(rest, left, strict=True)}
            mapping.update(_in_sequence(fill, by_letter, labels))
        confidence = 0.8
    elif labels and len(labels) == len(panels):
        mapping = _by_position(panels, labels) or {
            p.index: label for p, label in zip(panels, labels, strict=True)
        }
        boxed = sum(p.has_label_box for p in panels)
        confidence = 0.95 if boxed == len(panels) else 0.85 if boxed else 0.75
    out = []
    for panel in panels:
        label = mapping.get(panel.index)
        if label is None:
            out.append(PairedPanel(panel.index, None, caption, "full_caption", 0.0))
        else:
            text = split.text_for(label, preamble=join_preamble, trailer=join_trailer)
            if by_letter and panel.index in by_letter:
                out.append(PairedPanel(panel.index, label, text, "letter", LETTER_CONFIDENCE))
            else:
                out.append(PairedPanel(panel.index, label, text, "label", confidence))
        _attach(out[-1], label, mentions)
    return out


def _in_sequence(fill: dict[int, str], read: dict[int, str], labels: list[str]) -> dict[int, str]:
    """The fills whose label sits, in the caption's sequence, between the letters read on the
    panels before and after it in reading order: a panel read "g" before an unread one that
    would take "f" says the unread box is not F (it is a piece, or a box around nothing)."""
    rank = {label: n for n, label in enumerate(labels)}
    kept = {}
    for index, label in fill.items():
        before = [rank[lb] for i, lb in read.items() if i < index]
        after = [rank[lb] for i, lb in read.items() if i > index]
        if all(r < rank[label] for r in before) and all(r > rank[label] for r in after):
            kept[index] = label
    return kept


def _attach(panel: PairedPanel, label: str | None, mentions: Sequence[MentionRef]) -> PairedPanel:
    for mention in mentions:
        named = [p.upper() for p in mention.panels]
        if not named or (label is not None and label.upper() in named):
            panel.mentions.append(mention.sentence)
    return panel
