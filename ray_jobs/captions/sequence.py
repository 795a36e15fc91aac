"""Which label candidates form the caption's label sequence, and how sure that is.

Patterns find candidates (``candidates.py``); the sequence decides which are labels: a run
opens at its scheme's first label (A, a, 1, i) and continues it (B, C...), so a reference ("as
in (C)"), a unit or a word drops out. Letters win over another scheme inside a panel ("(a) cells
treated with (1) DFO, (2) ..."); candidates read weakly (a lone letter inside a sentence) count
only in an unbroken run; sub-labels of a plainly lettered figure fold into their panel.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import pairwise

from ray_jobs.captions.candidates import Candidate, find
from ray_jobs.captions.labels import LabelKey

MAX_STARTS = 40  # runs tried per caption: bounds the work on hostile text ("a. b. a. b. ...")


def unique(labels: list[str]) -> list[str]:
    return list(dict.fromkeys(labels))


def best_run(text: str, bold: frozenset[str], start: str | None) -> tuple[list[Candidate], bool]:
    """The label sequence of ``text`` (letters/digits, then roman numerals where they name
    more), with sub-labels folded where that applies; the flag says whether they were."""
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
            labels = unique([re.match(r"[A-Za-z]", lab).group(0) for lab in c.labels])  # type: ignore[union-attr]
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
    later = _Later(cands)
    firsts = [
        i
        for i, first in enumerate(cands)
        if (first.labels[0] == start if start else first.keys[0].starts)
    ]
    for i in firsts[:MAX_STARTS]:
        for use_weak in (True, False):
            if cands[i].weak and not use_weak:
                break
            run = _grow(cands, i, use_weak, later)
            if _valid(run, start) and _rank(run) > _rank(best):
                best = run
                break
    return best or (_second_start(cands, later) if start is None else [])


class _Later:
    """Where each label is last named by a sure candidate, and by one opening a clause: whether
    the same label comes again later, asked in constant time."""

    def __init__(self, cands: list[Candidate]) -> None:
        self.sure: dict[LabelKey, int] = {}
        self.opening: dict[LabelKey, int] = {}
        self.named = {key for c in cands for key in c.keys}
        for j, c in enumerate(cands):
            if c.weak:
                continue
            for key in c.keys:
                self.sure[key] = j
                if c.opens:
                    self.opening[key] = j

    def named_after(self, cand: Candidate, j: int) -> bool:
        """A reference, or a weak mention, gives way to the same label named again later (a
        weak one only to a label that opens a clause)."""
        last = self.opening if cand.weak else self.sure
        return any(last.get(key, -1) > j for key in cand.keys)


def _second_start(cands: list[Candidate], later: _Later) -> list[Candidate]:
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
        run = _grow(cands, i, False, later)
        if _count(run) >= 2 and all(c.strong for c in run) and _rank(run) > _rank(best):
            best = run
    return best


def _grow(cands: list[Candidate], i: int, use_weak: bool, later: _Later) -> list[Candidate]:
    run = [cands[i]]
    seen = set(cands[i].keys)
    gapped = False
    for j, cand in enumerate(cands[i + 1 :], start=i + 1):
        if cand.weak and not use_weak:
            continue
        if (cand.kind == "pos") != (run[-1].kind == "pos") or seen.intersection(cand.keys):
            continue
        if (cand.kind == "ref" or cand.weak) and later.named_after(cand, j):
            continue
        top = max(seen)
        extends = cand.keys[0].follows(run[-1].keys[-1]) or cand.keys[0].follows(top)
        fills = cand.keys[0] < top and cand.keys[0].scheme == top.scheme and not cand.weak
        if not (extends or fills) and not gapped and _skips_unnamed(cand, top, later):
            extends = gapped = True  # "(A and A′) ..., (C and C′) ...": B is never named
        if extends or fills:
            run.append(cand)
            seen.update(cand.keys)
    return run


def _skips_unnamed(cand: Candidate, top: LabelKey, later: _Later) -> bool:
    """A sure label one letter past the run, where the letter between is named nowhere."""
    key = cand.keys[0]
    if cand.weak or not cand.strong or cand.kind == "ref" or key.scheme not in "UL" or key.minor:
        return False
    skipped = LabelKey(key.scheme, key.major - 1, 0)
    return key.scheme == top.scheme and key.major == top.major + 2 and skipped not in later.named


def _valid(run: list[Candidate], start: str | None) -> bool:
    labels = {k for c in run for k in c.keys}
    if len(labels) < 2 and not (run[0].strong and not run[0].weak):
        return False
    majors = sorted({k.major for k in labels if k.scheme in "UL"})
    if any(b - a == 2 for a, b in pairwise(majors)) and len(labels) < 4:
        return False  # a letter left out is believable only in a longer run
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


def _rank(run: list[Candidate]) -> tuple[int, ...]:
    """Letters over other schemes (numbered items or roman columns inside a panel); then more
    labels; on a tie, a run of sure labels only, then the earlier start (a range like "A and
    B) ..." that opens the account, split again inside by its members), then more sure ones."""
    if not run:
        return (0, 0, 0, 0, 0)
    letters = run[0].keys[0].scheme in "UL" and _count(run) >= 2
    strong = sum(c.strong for c in run)
    return letters, _count(run), strong == len(run), -run[0].start, strong


def confidence(run: list[Candidate], folded: bool) -> float:
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
