"""Split a compound-figure caption into a preamble, one text per panel label, and a trailer.

Deterministic. The label sequence comes from ``sequence.py`` (which candidates are labels);
this module gives each label its text. A label that opens its text ("(A) ...", "A. ...", "A
Palp, ...") owns what follows up to the next label; a label inside a clause ("Strong (A) and
weak (B) XIAP expression") shares the whole clause with the labels beside it, unless each
closes a whole phrase of its own ("... at 1 month (b), PIN at 3 months (c)."). A sentence
ending in ":" heads the labels after it. Trailing sentences of shared notes (scale bars,
statistics, abbreviations) form the trailer. Each split carries a confidence: how sure the
label sequence is (0 when nothing is split); where the caption names no labels nothing is
split, and pairing gives the panels the whole caption (``alignment: full_caption``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ray_jobs.captions.candidates import Candidate, clause_start
from ray_jobs.captions.clauses import clause_start_before, clause_starts, notes_start
from ray_jobs.captions.labels import SPEC, expand
from ray_jobs.captions.sequence import best_run, confidence, unique

_GLUED_SENTENCE = re.compile(r"(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])")  # "organs.Immuno" → ". I"
# a text left open: empty, or ending on a conjunction that no list comma or semicolon precedes
_OPEN_END = re.compile(
    r"(?:^|(?<![,;])\s(?:and|or|as well as|versus|vs\.?|&)|^(?:and|or|&))$", re.I
)
_CONJUNCTION_END = re.compile(r"(?:^|\b(?:and|or|as well as|versus|vs\.?)|&)$", re.I)
_NOTES_BLOCK = re.compile(r"\((?P<body>[^()]+)\)")
_NOTE_ITEM = re.compile(rf"(?P<spec>{SPEC})\s*:\s*(?P<note>[^:;]+)")
_LISTED = re.compile(r"(?:[,;]|\band|\bor)\s*$")
# a last panel's text of three sentences or more keeps only its first (see notes_start); on the
# prostate gold set similarity 0.847 with keyword notes only, 0.858 with this rule (measured
# with the first splitter); on the Zou dev halves it is a wash (+0.02 on one, -0.02 on the other)
SHARE_LONG_ENDING = True


@dataclass
class Subcaption:
    label: str
    text: str


@dataclass
class SplitCaption:
    preamble: str
    subcaptions: list[Subcaption] = field(default_factory=list)
    trailer: str = ""
    order: str = "none"  # "before": labels open their text; "after": they sit inside it
    confidence: float = 0.0  # how sure the label sequence is; 0 when nothing is split

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.subcaptions]

    def text_for(self, label: str, *, preamble: bool = True, trailer: bool = True) -> str:
        """One panel's training text: its own words, with the shared parts joined per config."""
        own = next((s.text for s in self.subcaptions if s.label == label), "")
        if own and own[-1].isalnum() and ((trailer and self.trailer) or self.order == "after"):
            own += "."  # a phrase becomes a sentence before the shared notes follow it
        parts = [self.preamble if preamble else "", own, self.trailer if trailer else ""]
        return " ".join(p for p in parts if p).strip()

    def to_dict(self) -> dict:
        return {
            "preamble": self.preamble,
            "subcaptions": [{"label": s.label, "text": s.text} for s in self.subcaptions],
            "trailer": self.trailer,
            "order": self.order,
            "confidence": self.confidence,
        }


@dataclass
class _Group:
    """Labels sharing one text: ``cut`` ends the text before it, ``begin`` starts its own."""

    cut: int
    begin: int
    cands: list[Candidate]
    lead: bool


def split_caption(text: str, bold: frozenset[str] | set[str] = frozenset()) -> SplitCaption:
    """Split ``text``; ``bold`` holds the caption's bold runs from JATS (labels are often bold)."""
    text = _GLUED_SENTENCE.sub(" ", " ".join(text.split()))
    return _split(text, frozenset(b.strip().strip("().:,") for b in bold))


def _split(text: str, bold: frozenset[str], start: str | None = None) -> SplitCaption:
    run, folded = best_run(text, bold, start)
    if not run:
        return SplitCaption(preamble=text)
    groups = _merge_open(text, _groups(text, run))
    preamble = text[: groups[0].cut].strip()
    last = unique([label for c in groups[-1].cands for label in c.labels])
    named = re.compile(r"\((?:" + "|".join(map(re.escape, last)) + r")\b")  # "(D, middle graph)"
    tail = text[groups[-1].begin :]
    notes = groups[-1].begin + notes_start(tail, SHARE_LONG_ENDING, named)
    subcaptions: list[Subcaption] = []
    header = ""
    for group, nxt in zip(groups, [*groups[1:], None], strict=True):
        end = nxt.cut if nxt else notes
        segment, heads = _header(_clean(_unmark(text, group, end)))
        labels = unique([label for c in group.cands for label in c.labels])
        fragments = None if group.lead else _fragments(text, group, end)
        if fragments:
            subs = fragments
        elif group.lead and len(group.cands) == 1:
            c = group.cands[0]
            inner = _clean(text[c.end : end]) if c.kind == "prose" else segment
            subs = _split_group(labels, segment, bold, inner)
        else:
            subs = [Subcaption(label, segment) for label in labels]
        for sub in subs:
            sub.text = f"{header} {sub.text}".strip()
        subcaptions += subs
        header = heads or ("" if re.search(r"[.!?]$", segment) else header)
    order = "before" if groups[0].lead else "after"
    trailer = text[notes:].strip()
    last = subcaptions[-1].text
    trailer, found = _label_notes(trailer, subcaptions)
    if not found:  # the notes may close the last panel's own text: "(B) Cancer. (A: ×100; ...)"
        rest, found = _label_notes(last, subcaptions)
        for sub in subcaptions:
            if found and sub.text.startswith(last):
                sub.text = rest + sub.text[len(last) :]
    return SplitCaption(preamble, subcaptions, trailer, order, confidence(run, folded))


def _label_notes(block: str, subcaptions: list[Subcaption]) -> tuple[str, bool]:
    """Notes for some labels only ("(A and C: ×100; B and D: ×400)") go to those labels, out of
    ``block`` (the shared trailer, or the last text); returns what is left and whether any."""
    by_label = {s.label: s for s in subcaptions}
    for m in _NOTES_BLOCK.finditer(block):
        items = [_NOTE_ITEM.fullmatch(part.strip()) for part in m.group("body").split(";")]
        if not all(items):
            continue
        named = [(expand(i.group("spec")), i.group("note")) for i in items if i]
        if not all(set(labels) <= set(by_label) for labels, _ in named):
            continue
        for labels, note in named:
            for label in labels:
                sub = by_label[label]
                sub.text = f"{sub.text.rstrip('.')}. {note.strip()}".strip(". ")
        rest = " ".join((block[: m.start()] + block[m.end() :]).split())
        rest = re.sub(r"([.;:,])(?:\s*[.;:,])+", r"\1", re.sub(r"\s+([.;:,])", r"\1", rest))
        return ("" if re.fullmatch(r"[\s.,;:]*", rest) else rest), True
    return block, False


def _header(segment: str) -> tuple[str, str]:
    """A last sentence ending in ":" heads the labels that follow, not this one: "... the
    fracture. Results after 9 years: E and F, normal elbow; G and H, operated elbow." """
    if not segment.endswith(":"):
        return segment, ""
    last = clause_starts(segment, sentences_only=True)[-1]
    if last == 0:
        return segment, ""
    return segment[:last].strip(), segment[last:].strip()


def _groups(text: str, run: list[Candidate]) -> list[_Group]:
    """A label opening its text starts a group; one inside a clause joins the group that
    began in the same clause, or starts one at the clause's start."""
    groups: list[_Group] = []
    for c in run:
        begin = clause_start_before(text, c.start)
        if c.kind == "prose":  # "Panel A shows ...": the label is the sentence's subject
            groups.append(_Group(c.start, c.start, [c], True))
        elif _opens(text, c, begin, groups):
            groups.append(_Group(c.start, c.end, [c], True))
        elif groups and begin <= groups[-1].cut:
            groups[-1].cands.append(c)
        else:
            groups.append(_Group(begin, begin, [c], False))
    return groups


def _opens(text: str, c: Candidate, begin: int, groups: list[_Group]) -> bool:
    """Whether ``c`` opens a text of its own rather than joining its clause's group."""
    if c.tail or c.kind in ("ref", "paren_note"):
        return False
    after = text[c.end : c.end + 3]
    glued = text[c.start - 1 : c.start].isalpha()  # "...tumorigenesis(a) H&E staining"
    return bool(
        c.kind != "paren"
        or clause_start(text, c.start)
        or _LISTED.search(text[max(0, c.start - 20) : c.start])
        or (groups and groups[-1].lead and begin <= groups[-1].cut)  # "(A) Liver (B) Lung"
        or re.match(r"\s*[A-Z][a-z]", after)  # "... 100 µm (b) High power"
        or (glued and re.match(r"\s*[A-Z]", after))
    )


def _fragments(text: str, group: _Group, end: int) -> list[Subcaption] | None:
    """Labels closing whole phrases of one clause ("... at 1 month (b), PIN at 3 months (c),
    and cancer at 6 months (d).") name a phrase each. Where the clause goes on after its last
    label ("in rostral (A), dorsal (B) and medial (C) views", "Strong (A) and weak (B) XIAP
    expression"), the phrases lean on it: every label shares the whole clause."""
    cands = group.cands
    if len(cands) < 2 or not cands[-1].tail:
        return None
    rest = text[cands[-1].end : end]
    if not re.match(r"\s*(?:[.;]|$)", rest):
        return None
    bounds = [group.begin, *(c.end for c in cands[:-1])]
    phrases = [_clean_joined(text[a : c.start]) for a, c in zip(bounds, cands, strict=True)]
    if min(len(p.split()) for p in phrases) < 3 or not all(
        re.match(r"\s*(?:[,;]|and\b|or\b|[A-Za-z])", text[c.end : c.end + 5]) for c in cands[:-1]
    ):
        return None
    tail = _clean_joined(rest)
    if tail:
        phrases[-1] = f"{phrases[-1]} {tail}"
    return [Subcaption(label, p) for c, p in zip(cands, phrases, strict=True) for label in c.labels]


def _unmark(text: str, group: _Group, end: int) -> str:
    """The group's text without the markers of labels that sit inside it ("(b)" in "... the
    prostate (a) and the penile specimen (b)."): each panel's text reads as plain prose.
    Markers side by side ("(A and A′), (B and B′), and (C)") go as one."""
    out, pos, removed = [], group.begin, False
    spans = sorted(
        span for c in group.cands if c.kind != "prose" for span in ((c.start, c.end), *c.also)
    )
    for start, stop in spans:
        if group.begin <= start and stop <= end:
            gap = text[pos:start]
            if not (removed and re.fullmatch(r"[\s,;]*(?:and|or|&)?\s*", gap)):
                out.append(gap.rstrip())
            pos, removed = stop, True
    out.append(text[pos:end])
    joined = "".join(out)
    if not removed:
        return joined
    return re.sub(r"\s+([,.;:])", r"\1", re.sub(r"[,;:]\s*\)", ")", joined))


def _clean_joined(segment: str) -> str:
    return re.sub(r"^(?:[,;:.]\s*)?(?:and|or|but|while|whereas)?\s*", "", segment.strip()).strip()


def _merge_open(text: str, groups: list[_Group]) -> list[_Group]:
    """ "(a) Sagittal and (b) oblique T2 images show ...": a text left open ("... and")
    continues into the next label's, and both share it. "(D) Gastric cancer and (E) Pancreatic
    cells" stays apart: the next text opens anew."""
    out: list[_Group] = []
    for group in groups:
        prev = out[-1] if out else None
        if prev and prev.cands[-1].kind != "pos" and group.cands[0].kind != "pos":
            continues = re.match(r"\s*[a-z(]", text[group.begin : group.begin + 3])
            before = _clean(text[prev.begin : group.cut])
            # a label that opened its text ends its list item at "; and"; a clause does not
            left_open = (_OPEN_END if prev.lead else _CONJUNCTION_END).search(before)
            # "(a) Sagittal and (b) oblique T2 images", "(c) T1- and (d) T2-weighted": a lone
            # modifier; "(A) Barium enema and (B) endoscopic image" names two things
            modifier = len(before.split()) <= 2 or before.split()[-2].endswith("-")
            if not before or (left_open and (not prev.lead or (continues and modifier))):
                prev.cands += group.cands
                continue
        out.append(_Group(group.cut, group.begin, list(group.cands), group.lead))
    return out


def _split_group(
    labels: list[str], segment: str, bold: frozenset[str], after: str
) -> list[Subcaption]:
    """A range's shared text, split again when it labels its members inside (in ``after``, the
    text after the range's own marker): "(f-h) Marker analysis. (f) pAkt ... (g, h) Ki67 ..."
    or "1–2 Species, male: 1 holotype, dorsal view 2 same, ventral view".
    """
    if len(labels) > 1:
        inner = _split(after, bold, start=labels[0])
        if set(inner.labels) == set(labels):
            return [Subcaption(label, inner.text_for(label)) for label in labels]
    return [Subcaption(label, segment) for label in labels]


def _clean(segment: str) -> str:
    return re.sub(r"^[,;:.)]\s*", "", segment.strip()).strip()
