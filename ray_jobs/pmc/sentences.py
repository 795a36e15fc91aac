"""Sentence spans of whitespace-normalised text, and the sentence that holds an offset.

A sentence ends at punctuation followed by a space and a capital, a digit or an opening quote;
abbreviations ("Fig. 2", "et al. (2005)", "e.g."), initials and numbers after "no."/"ca." are
not ends. Only the candidates around the offsets asked for are judged (:class:`PythonSentences`),
so a paragraph costs about what its referencing sentences do.

The C walks (``_ctext.pyx``) hold the same rules; this module is their specification and
fallback (``ray_jobs.pmc.text`` picks one, ``tests/test_ctext.py`` compares them).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

# "Fig. 2", "et al. (2005)", "e.g. The": never a sentence end
_ABBREVIATIONS = frozenset(
    "fig figs eq eqs ref refs al e.g i.e cf vs resp sp spp subsp var dr mr mrs prof st jr sr "
    "suppl".split()
)
# "no. 5", "ca. 3", "5 min. 10": an abbreviation before a number, a sentence end before a word
# ("for 5 min. The cells")
_BEFORE_NUMBER = frozenset(
    "no nos vol pp p ca approx min max ms mol wt conc tab est ed eds inc ltd co".split()
)
_NAME_LINKS = frozenset({"by", "and", "&"})
# a sentence end: punctuation, closing quotes or brackets, a space, then a capital, a digit or
# an opening quote or bracket (the text is whitespace-normalised: one space)
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]* (?=[\"'“‘(\[]?[A-Z0-9])")
_PERIOD_BOUNDARY = re.compile(r"\.[\"'”’)\]]* (?=[\"'“‘(\[]?[A-Z0-9])")
_OPENERS = "([{\"'“‘"
_CLOSERS = ")]}\"'”’"
_BRACKETING = _OPENERS + _CLOSERS


def _is_initial(text: str, start: int, token: str, next_char: str) -> bool:
    """ "J. Smith", "by J. Smith", "J. K. Rowling": a capital letter that is an initial.

    A letter after a number ("Figure 5B. A"), a lower-case letter ("2 h. The") or a letter in
    brackets is not one; an initial follows the start of the text, a name, another initial or
    a word that introduces a name ("by", "and"), and comes before a name (not a number).
    """
    if len(token) != 1 or not token.isupper() or not next_char.isalpha():
        return False
    before = text[max(0, start - 40) : start].rstrip()
    prev = before[before.rfind(" ") + 1 :]
    if not prev or prev in _NAME_LINKS:
        return True
    if prev.endswith("."):  # another initial ("J. K."), a title ("Dr. J.")
        core = prev[:-1]
        return (len(core) == 1 and core.isupper()) or core.lower() in _ABBREVIATIONS
    return len(prev) > 1 and prev[0].isupper() and prev.isalpha()  # "John F. Kennedy"


def _is_boundary(text: str, pos: int, end: int) -> bool:
    """Whether the punctuation at ``pos`` (the candidate's match ends at ``end``) ends a
    sentence, judged by the token before it and the character after it."""
    if text[pos] != ".":
        return True  # "?" and "!" always end one
    start = text.rfind(" ", max(0, pos - 40), pos) + 1
    token = text[start:pos]
    bare = token.strip(_BRACKETING)
    if not bare:
        return True
    low = bare.lower()
    if low in _ABBREVIATIONS:
        return False
    next_char = text[end : end + 1]
    if next_char and next_char in _OPENERS:
        next_char = text[end + 1 : end + 2]
    if low in _BEFORE_NUMBER:
        return not next_char.isdigit()
    if "." in bare and all(len(p) == 1 and p.isalpha() for p in bare.split(".")):
        return False  # "U.S", "a.m"
    if bare != token:  # "(A). Next", "2B). Next": bracketed, never an initial
        return True
    return not _is_initial(text, start, bare, next_char)


class _Boundaries:
    """Which sentence-end candidates of one text are accepted: not inside brackets or a
    protected span, not after an abbreviation or an initial.

    The bracket depth at a point is the openers less the closers before it (a stray closer,
    "1) first", cancels an unclosed opener: both are typos), counted in C from the last point
    asked for, so a pass over a paragraph's candidates counts each character about once.
    """

    __slots__ = ("_at", "_brackets", "_guard_reach", "_guard_starts", "_square", "pattern", "text")

    def __init__(self, text: str, protected: Sequence[tuple[int, int] | None]) -> None:
        self.text = text
        # a regular expression that starts with a literal scans several times faster than one
        # that starts with a class; most paragraphs hold no "?" or "!"
        self.pattern = _BOUNDARY if "?" in text or "!" in text else _PERIOD_BOUNDARY
        guarded = sorted(s for s in protected if s is not None and s[1] > s[0])
        self._guard_starts = [a for a, _ in guarded]
        reach, self._guard_reach = -1, []
        for _, b in guarded:
            reach = max(reach, b)
            self._guard_reach.append(reach)
        self._square = "[" in text or "]" in text
        self._brackets = "(" in text or self._square
        self._at = (0, 0)  # (offset, depth there)

    def _depth(self, pos: int) -> int:
        text, (at, depth) = self.text, self._at
        lo, hi, sign = (at, pos, 1) if pos >= at else (pos, at, -1)
        change = text.count("(", lo, hi) - text.count(")", lo, hi)
        if self._square:  # most paragraphs hold no square bracket: two scans saved
            change += text.count("[", lo, hi) - text.count("]", lo, hi)
        depth += sign * change
        self._at = (pos, depth)
        return depth

    def accepted(self, m: re.Match[str]) -> bool:
        pos = m.start()
        i = bisect_right(self._guard_starts, pos) - 1
        if i >= 0 and pos < self._guard_reach[i]:
            return False
        if not _is_boundary(self.text, pos, m.end()):
            return False
        return not self._brackets or self._depth(pos) <= 0


def sentence_spans(
    text: str, protected: Sequence[tuple[int, int] | None] = ()
) -> list[tuple[int, int]]:
    """Split into sentences; never inside brackets, an abbreviation or a protected span."""
    bounds = _Boundaries(text, protected)
    spans: list[tuple[int, int]] = []
    start = 0
    for m in bounds.pattern.finditer(text):
        if bounds.accepted(m):
            spans.append((start, m.end()))
            start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


class PythonSentences:
    """The sentences of one text that hold given offsets, each cut out once.

    The text's sentence-end candidates are found in one regular-expression pass; only those
    around the offsets asked for are judged, each once, so a paragraph costs about what its
    referencing sentences do. Offsets must come in increasing order (a reference's, in document
    order): the search back from one never passes the end of the sentence found for the one
    before, which keeps the whole linear in the text.
    """

    __slots__ = ("_bounds", "_ends", "_floor", "_last", "_matches", "_text", "_verdicts")

    def __init__(self, text: str, protected: Sequence[tuple[int, int] | None] = ()) -> None:
        self._text = text
        self._bounds = _Boundaries(text, protected)
        self._matches = list(self._bounds.pattern.finditer(text))
        self._ends = [m.end() for m in self._matches]
        self._verdicts: dict[int, bool] = {}
        self._floor = 0  # no sentence asked for later starts before this
        self._last: tuple[int, int, str] | None = None

    def _accepted(self, i: int) -> bool:
        verdict = self._verdicts.get(i)
        if verdict is None:
            verdict = self._verdicts[i] = self._bounds.accepted(self._matches[i])
        return verdict

    def _start_before(self, offset: int) -> int:
        """The end of the last accepted boundary at or before ``offset`` (or the floor)."""
        floor, matches = self._floor, self._matches
        i = bisect_right(self._ends, offset) - 1
        while i >= 0 and matches[i].start() >= floor:
            if self._accepted(i):
                return self._ends[i]
            i -= 1
        return floor

    def _end_after(self, offset: int) -> int:
        """The end of the first accepted boundary after ``offset`` (or the text's end)."""
        ends = self._ends
        for i in range(bisect_right(ends, offset), len(ends)):
            if self._matches[i].start() >= self._floor and self._accepted(i):
                return ends[i]
        return len(self._text)

    def at(self, offset: int) -> str:
        """The sentence holding ``offset``."""
        last = self._last
        if last is not None and last[0] <= offset < last[1]:
            return last[2]
        if last is not None and offset >= last[1]:
            self._floor = last[1]
        elif offset < self._floor:  # out of order after all: search from the start again
            self._floor = 0
        start = self._start_before(offset)
        end = self._end_after(offset)
        sentence = self._text[start:end].strip()
        self._last = (start, end, sentence)
        return sentence


def sentence_at(text: str, spans: Sequence[tuple[int, int]], offset: int) -> str:
    """The sentence of ``spans`` (as :func:`sentence_spans` gives them) holding ``offset``."""
    starts = [a for a, _ in spans]
    i = bisect_right(starts, offset) - 1
    if 0 <= i < len(spans) and offset < spans[i][1]:
        a, b = spans[i]
        return text[a:b].strip()
    return text.strip()
