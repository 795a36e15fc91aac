"""Split a compound-figure caption into a preamble, one text per panel label, and a trailer.

Deterministic. Candidate labels (``candidates.py``) are kept only where they continue the
caption's label sequence (A, B, C...; i, ii...; 1, 2...): the sequence is what separates a label
from a reference ("as in (C)"), a unit or a word. Letters win over another scheme inside a panel
("(a) cells treated with (1) DFO, (2) ..."); sub-labels ("E1 and E2", "C1 to C5") fold into
their panel when the figure is otherwise lettered plainly. A label that opens its text ("(A) ...",
"A. ...", "A Palp, ...") owns what follows up to the next label; a label inside a clause
("Strong (A) and weak (B) XIAP expression") shares the whole clause with the labels beside it.
Trailing sentences of shared notes (scale bars, statistics, abbreviations) form the trailer.
Each split carries a confidence: how sure the label sequence is (0 when nothing is split).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import pairwise

from ray_jobs.captions.candidates import Candidate, clause_start, find
from ray_jobs.captions.clauses import clause_start_before, clause_starts, notes_start
from ray_jobs.captions.labels import LabelKey

_GLUED_SENTENCE = re.compile(r"(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])")  # "organs.Immuno" → ". I"
# a text left open: empty, or ending on a conjunction that no list comma or semicolon precedes
_OPEN_END = re.compile(
    r"(?:^|(?<![,;])\s(?:and|or|as well as|versus|vs\.?|&)|^(?:and|or|&))$", re.I
)
_CONJUNCTION_END = re.compile(r"(?:^|\b(?:and|or|as well as|versus|vs\.?)|&)$", re.I)
_LISTED = re.compile(r"(?:[,;]|\band|\bor)\s*$")
# measured: on the prostate gold set similarity 0.847 keyword notes only, 0.858 with this rule
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
    run, folded = _best_run(text, bold, start)
    if not run:
        return SplitCaption(preamble=text)
    groups = _merge_open(text, _groups(text, run))
    preamble = text[: groups[0].cut].strip()
    last = _unique([label for c in groups[-1].cands for label in c.labels])
    named = re.compile(r"\((?:" + "|".join(map(re.escape, last)) + r")\b")  # "(D, middle graph)"
    tail = text[groups[-1].begin :]
    notes = groups[-1].begin + notes_start(tail, SHARE_LONG_ENDING, named)
    subcaptions: list[Subcaption] = []
    header = ""
    for group, nxt in zip(groups, [*groups[1:], None], strict=True):
        end = nxt.cut if nxt else notes
        segment, heads = _header(_clean(_unmark(text, group, end)))
        labels = _unique([label for c in group.cands for label in c.labels])
        fragments = None if group.lead else _fragments(text, group, end)
        if fragments:
            subs = fragments
        elif group.lead and len(group.cands) == 1:
            subs = _split_group(labels, segment, bold)
        else:
            subs = [Subcaption(label, segment) for label in labels]
        for sub in subs:
            sub.text = f"{header} {sub.text}".strip()
        subcaptions += subs
        header = heads or ("" if re.search(r"[.!?]$", segment) else header)
    order = "before" if groups[0].lead else "after"
    trailer = text[notes:].strip()
    return SplitCaption(preamble, subcaptions, trailer, order, _confidence(run, folded))


def _header(segment: str) -> tuple[str, str]:
    """A last sentence ending in ":" heads the labels that follow, not this one: "... the
    fracture. Results after 9 years: E and F, normal elbow; G and H, operated elbow." """
    if not segment.endswith(":"):
        return segment, ""
    last = clause_starts(segment, sentences_only=True)[-1]
    if last == 0:
        return segment, ""
    return segment[:last].strip(), segment[last:].strip()


def _unique(labels: list[str]) -> list[str]:
    return list(dict.fromkeys(labels))


def _best_run(text: str, bold: frozenset[str], start: str | None) -> tuple[list[Candidate], bool]:
    cands = find(text, bold, roman=False)
    run = _sequence(cands, start)
    roman_cands = find(text, bold, roman=True)
    roman_run = _sequence(roman_cands, start)
    if roman_run and roman_run[0].keys[0].scheme == "R" and _count(roman_run) >= _count(run):
        run, cands = roman_run, roman_cands
    folded = _fold_sublabels(cands, run)
    if folded is not None:
        refolded = _sequence(folded, start)
        if _count(refolded) >= 2:
            return refolded, True
    return run, False


def _count(run: list[Candidate]) -> int:
    return len({k for c in run for k in c.keys})


def _fold_sublabels(cands: list[Candidate], run: list[Candidate]) -> list[Candidate] | None:
    """Sub-labels as parts of a plainly lettered figure: dropped where their panel has a label
    of its own ("five cycles: C1 to C5 ... (C)"), else folded into it ("(E1 and E2)", "dorsal
    (B1), medial (B2)"). Kept where they open panels of their own ("(B1) normal; (B2) BPH",
    "(B1-B3) three cases") or where the figure's labels are mostly numbered. None: no change."""
    keys = {k for c in run for k in c.keys if k.scheme in "UL"}
    subs = {k for k in keys if k.minor > 0}
    if not subs or len(keys - subs) <= len({(k.scheme, k.major) for k in subs}):
        return None
    plain = {(k.scheme, k.major) for c in cands if c.kind != "ref" for k in c.keys if not k.minor}
    opened: dict[tuple[str, int], int] = {}
    for c in run:
        ranged = len(c.keys) > 1 and re.search(r"[-–—]|\bto\b", c.source)
        if not c.tail and c.keys[0].minor and (len(c.keys) == 1 or ranged):
            parent = (c.keys[0].scheme, c.keys[0].major)
            opened[parent] = opened.get(parent, 0) + len(c.keys)
    out, changed = [], False
    first: dict[tuple[LabelKey, ...], Candidate] = {}
    for c in cands:
        parents = {(k.scheme, k.major) for k in c.keys if k.minor}
        if not parents:
            out.append(c)
        elif parents <= plain:
            changed = True  # the panel has its own label: these are parts of it
        elif all(opened.get(p, 0) >= 2 for p in parents):
            out.append(c)
        else:
            changed = True
            labels = _unique([re.match(r"[A-Za-z]", lab).group(0) for lab in c.labels])  # type: ignore[union-attr]
            keys_ = list(dict.fromkeys(LabelKey(k.scheme, k.major, 0) for k in c.keys))
            prev = first.get(tuple(keys_))
            if prev is not None and prev.tail and not c.opens:  # "dorsal (B1), medial (B2)": one B
                out[out.index(prev)] = first[tuple(keys_)] = replace(
                    prev, also=(*prev.also, (c.start, c.end))
                )
                continue
            first[tuple(keys_)] = folded = replace(c, labels=labels, keys=keys_)
            out.append(folded)
    return out if changed else None


def _sequence(cands: list[Candidate], start: str | None = None) -> list[Candidate]:
    """The run of candidates that best continues a label sequence from its start.

    A label already seen is a reference; a list ("A and C: ... B and D: ...") may fill the
    gaps it left; a reference-like or weak mention is dropped when the same label comes again
    later; a run resting on one weak candidate is no split at all, and weak candidates count
    only in an unbroken run of three labels or more. ``start`` is the label a run must open
    with (a range's first member), instead of the first of its scheme.
    """
    best: list[Candidate] = []
    for i, first in enumerate(cands):
        if not (first.labels[0] == start if start else first.keys[0].starts):
            continue
        for use_weak in (True, False):
            if first.weak and not use_weak:
                break
            run = _grow(cands, i, use_weak)
            if _valid(run, start) and _rank(run) > _rank(best):
                best = run
                break
    return best or (_second_start(cands) if start is None else [])


def _second_start(cands: list[Candidate]) -> list[Candidate]:
    """ "Transabdominal US shows a mass. CT (B) ... MRI (C) ...": the first panel goes unnamed.
    A run may open at the second letter when the first appears nowhere and the run is made of
    punctuated labels only."""
    best: list[Candidate] = []
    for i, first in enumerate(cands):
        key = first.keys[0]
        if key.scheme not in "UL" or key.major != 1 or key.minor or first.weak or not first.strong:
            continue
        if any(k.scheme == key.scheme and k.major == 0 for c in cands for k in c.keys):
            return []
        run = _grow(cands, i, use_weak=False)
        if _count(run) >= 2 and all(c.strong for c in run) and _rank(run) > _rank(best):
            best = run
    return best


def _grow(cands: list[Candidate], i: int, use_weak: bool) -> list[Candidate]:
    run = [cands[i]]
    seen = set(cands[i].keys)
    for j, cand in enumerate(cands[i + 1 :], start=i + 1):
        if cand.weak and not use_weak:
            continue
        if (cand.kind == "pos") != (run[-1].kind == "pos") or seen.intersection(cand.keys):
            continue
        if (
            (cand.kind == "ref" or cand.weak)
            and any(
                set(later.keys) & set(cand.keys)
                and not later.weak
                and (later.opens or not cand.weak)  # a weak label gives way to one opening a clause
                for later in cands[j + 1 :]
            )
        ):
            continue
        top = max(seen)
        extends = cand.keys[0].follows(run[-1].keys[-1]) or cand.keys[0].follows(top)
        fills = cand.keys[0] < top and cand.keys[0].scheme == top.scheme and not cand.weak
        if extends or fills:
            run.append(cand)
            seen.update(cand.keys)
    return run


def _valid(run: list[Candidate], start: str | None) -> bool:
    labels = {k for c in run for k in c.keys}
    if len(labels) < 2 and not (run[0].strong and not run[0].weak):
        return False
    if any(c.weak and not _styled_like(c, run[0]) for c in run):
        unbroken = all(b.keys[0].follows(a.keys[-1]) for a, b in pairwise(run))
        digits = run[0].keys[0].scheme == "D"
        need = 2 if start else 4 if digits and not any(c.strong for c in run) else 3
        return unbroken and len(labels) >= need and (bool(start) or len(run) >= 3)
    return True


def _styled_like(c: Candidate, first: Candidate) -> bool:
    """A weak label written like the sure one that opened the run ("A, text ... cells, B, text"
    after "A, " opened a sentence) is as good as it."""
    if first.weak or not first.strong or c.kind != "punct" or first.kind != "punct":
        return False
    return c.source[-1:] == first.source[-1:] and not c.source.lower().startswith("panel")


def _rank(run: list[Candidate]) -> tuple[int, int, int, int]:
    """Letters over other schemes (numbered items or roman columns inside a panel); then more
    labels; on a tie, stronger (clause-opening) labels, then the earlier start (a range like
    "(A-D)" that opens the account, split again inside by its members)."""
    if not run:
        return (0, 0, 0, 0)
    letters = run[0].keys[0].scheme in "UL" and _count(run) >= 2
    return letters, _count(run), sum(c.strong for c in run), -run[0].start


def _groups(text: str, run: list[Candidate]) -> list[_Group]:
    """A label opening its text starts a group; one inside a clause joins the group that
    began in the same clause, or starts one at the clause's start."""
    groups: list[_Group] = []
    for c in run:
        begin = clause_start_before(text, c.start)
        if _opens(text, c, begin, groups):
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
    return bool(
        c.kind != "paren"
        or clause_start(text, c.start)
        or _LISTED.search(text[: c.start])
        or (groups and groups[-1].lead and begin <= groups[-1].cut)  # "(A) Liver (B) Lung"
        or re.match(r"\s*[A-Z][a-z]", text[c.end : c.end + 3])  # "... 100 µm (b) High power"
        or (text[c.start - 1 : c.start].isalpha() and re.match(r"\s*[A-Z]", text[c.end :]))
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
    spans = sorted(span for c in group.cands for span in ((c.start, c.end), *c.also))
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
            if not before or (left_open and (continues or not prev.lead)):
                prev.cands += group.cands
                continue
        out.append(_Group(group.cut, group.begin, list(group.cands), group.lead))
    return out


def _split_group(labels: list[str], segment: str, bold: frozenset[str]) -> list[Subcaption]:
    """A range's shared text, split again when it labels its members inside:
    "(f-h) Marker analysis. (f) pAkt ... (g, h) Ki67 ..." or "1–2 Species, male: 1 holotype,
    dorsal view 2 same, ventral view".
    """
    if len(labels) > 1:
        inner = _split(segment, bold, start=labels[0])
        if set(inner.labels) == set(labels):
            return [Subcaption(label, inner.text_for(label)) for label in labels]
    return [Subcaption(label, segment) for label in labels]


def _clean(segment: str) -> str:
    return re.sub(r"^[,;:.)]\s*", "", segment.strip()).strip()


def _confidence(run: list[Candidate], folded: bool) -> float:
    """How sure the label sequence is: clause-opening, punctuated labels in an unbroken run
    score high; bare letters inside sentences, gaps and folded sub-labels lower it."""
    n = len(run)
    strong = sum(c.strong and not c.weak for c in run) / n
    weak = sum(c.weak for c in run) / n
    unbroken = all(b.keys[0].follows(a.keys[-1]) for a, b in pairwise(run))
    score = 0.45 + 0.3 * strong + 0.1 * unbroken + 0.15 * min(1.0, (_count(run) - 1) / 3)
    score *= 1 - 0.35 * weak
    if folded:
        score *= 0.9
    if not run[0].keys[0].starts:
        score *= 0.8  # the first panel goes unnamed
    return round(min(score, 1.0), 2)
