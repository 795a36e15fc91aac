"""The caption as evidence: do the detector's boxes, the letters read on the image and the
caption's labels tell one story? Decided per figure, before any panel gets text.

On real compound figures the detector often cuts one labelled panel into pieces (a blot and
its ladder, a plot and its legend) or merges two. Pairing the pieces with the caption's labels
in reading order then gives a panel the text of its neighbour, silently: the worst output a
vision-language dataset can have. So the three sources are checked against each other:

``single``      one box, covering most of the figure (or the caption names at most one
                panel): the figure is one panel and takes the whole caption.
``unlabelled``  several boxes, and the caption names fewer than two panels: nothing to pair
                them with; the figure is published whole with its caption (on real
                figures such boxes are mostly pieces of one chart or table), or each box
                with the whole caption (``alignment: full_caption``), by config
                (``captions.unlabelled_figures``).
``letters``     as many boxes as labels, and the letters read name the caption's labels.
``count``       as many boxes as labels, letters unread or partly read (pairing goes by the
                letters read, then by position or reading order; an unread box whose place
                in reading order is not the one its left-over label needs is not paired,
                and goes to the rejects as ``unpaired_panel``).
``anchored``    more boxes than labels, but the labels anchor the layout: every caption label
                is read on a box, or the boxes carrying a detected label are exactly as many
                as the labels. A label opens its panel, which runs right and down from it;
                each unlabelled box is a piece of the nearest anchor left of it in its row,
                or above and left of it, and joins it. The joined panels must not overlap
                one another (else the pieces belong to no one label: ``disagree``).
``disagree``    anything else: fewer boxes than labels, or more with no anchoring. The panels
                are not published as paired panels; the figure is published whole with its
                whole caption, or rejected, by config (``captions.on_disagreement``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ray_jobs.captions.pairing import PanelBox, letters_named

Case = Literal["single", "unlabelled", "letters", "count", "anchored", "disagree"]
CASES: tuple[Case, ...] = ("single", "unlabelled", "letters", "count", "anchored", "disagree")
OVERLAP_TOLERANCE = 0.02  # joined panels may share this share of the smaller one's area
WHOLE_SHARE = 0.8  # one box this much of the figure's area is the figure


@dataclass(frozen=True)
class Layout:
    case: Case
    # reading-order indices of the boxes that make each published panel, first the anchor;
    # empty when the figure disagrees
    groups: tuple[tuple[int, ...], ...]
    reason: str | None = None  # why it disagrees, for the rejects table and the report


def union(boxes: Sequence[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection over the smaller box's area."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / max(smaller, 1)


def _anchors(panels: Sequence[PanelBox], labels: list[str]) -> list[int] | None:
    """Reading-order indices of the boxes that open the caption's panels, or None."""
    read = letters_named(panels, labels)
    if read is not None and len(read) == len(labels):
        return sorted(read)
    boxed = [p.index for p in panels if p.has_label_box]
    return boxed if len(boxed) == len(labels) else None


def _opener(boxes: dict[int, tuple[int, int, int, int]], anchors: list[int], piece: int) -> int:
    """The anchor whose panel a piece belongs to. A label opens its panel, which runs right
    and down from it: the nearest anchor left of the piece in the same row (their heights
    overlap by half), else the nearest whose box starts above and left of the piece's (a grid
    of small plots under one letter joins that letter, not the letters of the column beside
    it), else the anchor before it in reading order."""
    px0, py0, _, py1 = boxes[piece]

    def same_row(a: int) -> bool:
        ay0, ay1 = boxes[a][1], boxes[a][3]
        shared = min(py1, ay1) - max(py0, ay0)
        return shared >= 0.5 * min(py1 - py0, ay1 - ay0)

    def left(a: int) -> bool:
        return boxes[a][0] <= px0 + 0.1 * (boxes[a][2] - boxes[a][0])

    def distance(a: int) -> float:
        return (px0 - boxes[a][0]) ** 2 + (py0 - boxes[a][1]) ** 2

    row = [a for a in anchors if same_row(a) and left(a)]
    above_left = [
        a for a in anchors if left(a) and boxes[a][1] <= py0 + 0.1 * (boxes[a][3] - boxes[a][1])
    ]
    if row or above_left:
        return min(row or above_left, key=distance)
    before = [a for a in anchors if a < piece]
    return before[-1] if before else anchors[0]


def judge(
    panels: Sequence[PanelBox], labels: list[str], figure_size: tuple[int, int] | None = None
) -> Layout:
    """The figure's case and the groups of boxes it publishes (``panels`` in reading order).
    One box that is not most of the figure (``figure_size``) is a disagreement when the
    caption names several panels: the rest of the figure went missing."""
    indices = [p.index for p in panels]
    own = tuple((i,) for i in indices)
    found = f"the caption names {len(labels)} panels, the detector found {len(panels)}"
    if len(panels) <= 1:
        if len(labels) < 2 or figure_size is None or not panels:
            return Layout("single", own)
        x0, y0, x1, y1 = panels[0].bbox
        if (x1 - x0) * (y1 - y0) >= WHOLE_SHARE * figure_size[0] * figure_size[1]:
            return Layout("single", own)
        return Layout("disagree", (), f"{found}, covering part of the figure")
    if len(labels) < 2:
        return Layout("unlabelled", own)
    if len(panels) == len(labels):
        read = letters_named(panels, labels)
        return Layout("letters" if read and len(read) == len(labels) else "count", own)
    anchors = _anchors(panels, labels) if len(panels) > len(labels) else None
    if anchors is None:
        return Layout("disagree", (), f"{found}; the letters read do not anchor them")
    by_index = {p.index: p.bbox for p in panels}
    groups: dict[int, list[int]] = {a: [a] for a in anchors}
    for i in indices:
        if i not in groups:
            groups[_opener(by_index, anchors, i)].append(i)
    unions = [union([by_index[i] for i in g]) for g in groups.values()]
    for j, a in enumerate(unions):
        for b in unions[j + 1 :]:
            if _overlap(a, b) > OVERLAP_TOLERANCE:
                why = f"{found}; joined at their labels, the panels would overlap"
                return Layout("disagree", (), why)
    return Layout("anchored", tuple(tuple(g) for g in groups.values()))


def joined(panels: Sequence[PanelBox], layout: Layout) -> list[PanelBox]:
    """One box per group: the union of its pieces, with the anchor's label and letter."""
    by_index = {p.index: p for p in panels}
    out = []
    for n, group in enumerate(layout.groups):
        anchor = by_index[group[0]]
        box = union([by_index[i].bbox for i in group])
        out.append(PanelBox(n, box, anchor.has_label_box, anchor.letter))
    return out
