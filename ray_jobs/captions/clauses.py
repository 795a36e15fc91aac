"""Clause and sentence boundaries of a caption, and which trailing sentences are shared notes.

A label inside a sentence ("Strong (A) and weak (B) staining") names its panel's text only
through the whole clause around it, so the splitter needs clause starts that do not fall on an
abbreviation ("P. berghei", "sp. n.", "Fig. 2") or inside a parenthesis.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

_ABBREV = re.compile(
    r"(?:(?-i:\b[A-Z])|\b(?:fig|figs|sp|spp|nov|gen|n|no|nos|vs|ca|approx|cf|al|e\.g|i\.e|ref|refs|"
    r"st|dr|mr|mrs|var|subsp|ssp|resp|max|min|vol|eq|ed|incl|exp|tab))\.$",
    re.I,
)
_GENE_START = re.compile(r"[a-z]{1,4}[A-Z0-9][\w-]*\b")
_BREAK = re.compile(r"(?<=[.!?;])\s+")
NOTE = re.compile(
    r"scale\s*bars?|\bbars?\s*(?:=|:|,|represent|indicate)|magnification|magnified|"
    r"[*#†]+\s*[pP]\s*[<≤=]|\b[pP]\s*[<≤]\s*0?\.\d|error\s+bars|\bdata\s+(?:are|were|represent)|"
    r"\bvalues\s+(?:are|were)|mean\s*±|\bs\.?e\.?m\.?\b|\bn\s*=\s*\d|^abbreviations|^notes?\s*:|"
    r"\barrows?(?:heads?)?\s+(?:indicate|show|point|mark|denote)|\ball\s+(?:images|panels)|"
    r"\[colou?r figure",
    re.I,
)
# "bo, basioccipital; bs, basisphenoid; ..." or "RA = right atrium; TV = ..."
_ABBREVIATION_LIST = re.compile(r"(?:\b[\w.'′+-]{1,10}\s*(?:,|=|:)\s*[^;,=]{2,60}[;.]\s*){3,}")


@lru_cache(maxsize=8)
def depths(text: str) -> list[int]:
    """Parenthesis depth before each offset of ``text`` (one pass, shared by every lookup)."""
    out, depth = [0], 0
    for char in text:
        depth += (char == "(") - (char == ")")
        out.append(depth)
    return out


@lru_cache(maxsize=16)
def _starts(text: str, sentences_only: bool) -> tuple[int, ...]:
    starts = [0]
    depth = depths(text)
    for m in _BREAK.finditer(text):
        mark = text[m.start() - 1]
        if mark == ";" and sentences_only:
            continue
        if depth[m.start()] > 0:
            continue
        if mark == "." and _ABBREV.search(text[max(0, m.start() - 8) : m.start()]):
            continue
        nxt = text[m.end() : m.end() + 1]
        gene = _GENE_START.match(text, m.end())  # "mRNA levels ...", "p53 staining ..."
        if mark != ";" and not (nxt.isupper() or nxt in "([*#†" or nxt.isdigit() or gene):
            continue
        starts.append(m.end())
    return tuple(starts)


def clause_starts(text: str, sentences_only: bool = False) -> list[int]:
    """Offsets where a sentence (or, unless ``sentences_only``, a ";" clause) begins."""
    return list(_starts(text, sentences_only))


def clause_start_before(text: str, pos: int) -> int:
    """Where the ";"/sentence clause holding ``pos`` begins."""
    starts = _starts(text, False)
    return starts[bisect_right(starts, pos) - 1]


def is_note(sentence: str) -> bool:
    """A sentence that applies to the whole figure: scale bars, statistics, abbreviations."""
    return bool(NOTE.search(sentence) or _ABBREVIATION_LIST.search(sentence))


def notes_start(text: str, share_long: bool = True, names: re.Pattern[str] | None = None) -> int:
    """Where the shared notes at the end of ``text`` (the last panel's text) begin.

    Notes are the trailing sentences that read like notes (scale bars, magnification,
    statistics, arrows, abbreviation lists, also one glued on without a capital: "...
    basiocranium. bo, basioccipital; bs, ..."). Failing that, with ``share_long``, when the
    text runs to three sentences or more, everything after its first sentence is taken as
    shared: captions end with what applies to the whole figure more often than with a long
    account of the last panel, unless a later sentence names a panel again (``names``:
    "... (D, middle graph).").
    """
    end = len(text)
    glued = re.search(r"(?<=[.!?])\s+(?=[a-z][\w.]{0,7}\s*[,=]\s)", text)
    if glued and _ABBREVIATION_LIST.search(text[glued.end() :]):
        end = glued.end()
    bounds = [b for b in clause_starts(text[:end], sentences_only=True) if b < end]
    if not bounds:
        return end
    parts = list(zip(bounds, [*bounds[1:], end], strict=True))
    cut = len(parts)
    while cut > 1 and is_note(text[parts[cut - 1][0] : parts[cut - 1][1]]):
        cut -= 1
    if share_long and cut == len(parts) and len(parts) >= 3:
        named = names is not None and any(names.search(text[a:b]) for a, b in parts[1:])
        cut = len(parts) if named else 1
    return parts[cut][0] if cut < len(parts) else end
