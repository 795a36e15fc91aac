"""Acronym definitions: an article's glossary plus in-text "long form (SF)" definitions.

The in-text matcher follows Schwartz & Hearst (2003): a short form in parentheses, and the
shortest run of preceding words whose characters contain the short form's characters in order,
the first one starting a word. The reversed form "SF (long form)" is tried too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PAREN = re.compile(r"(?<=\s)\(([^()]{1,120})\)")
_WORD = re.compile(r"\S+")
_SHORT_CHARS = re.compile(r"^[\w\-/+.&]+$")
_CITATION_TAIL = re.compile(r"\s*\[[\d,\s–\-]+\]\s*$")
_BRACKETS = frozenset("()[]{}")


def is_short_form(candidate: str) -> bool:
    sf = candidate.strip()
    if not 2 <= len(sf) <= 10 or not _SHORT_CHARS.match(sf):
        return False
    if not sf[0].isalnum() or not any(c.isalpha() for c in sf):
        return False
    # an acronym carries at least one capital ("mRNA", "IL-6"); plain words do not define one
    return any(c.isupper() for c in sf)


def best_long_form(short: str, candidate: str) -> str | None:
    """Schwartz–Hearst: match the short form's characters right to left inside the candidate."""
    s = len(short) - 1
    i = len(candidate) - 1
    while s >= 0:
        c = short[s].lower()
        if not c.isalnum():
            s -= 1
            continue
        while i >= 0 and (
            candidate[i].lower() != c or (s == 0 and i > 0 and candidate[i - 1].isalnum())
        ):
            i -= 1
        if i < 0:
            return None
        i -= 1
        s -= 1
    start = candidate.rfind(" ", 0, i + 1) + 1
    long_form = candidate[start:].strip()
    if len(long_form) <= len(short) or short.lower() in long_form.lower().split():
        return None
    return long_form


def _candidate_words(text_before: str, short: str) -> str:
    words = _WORD.findall(_CITATION_TAIL.sub("", text_before))
    limit = min(len(short) + 5, len(short) * 2)
    # a long form does not cross a sentence end, a clause break or a bracket
    kept: list[str] = []
    for word in reversed(words[-limit:]):
        if _BRACKETS.intersection(word) or (kept and word.endswith((".", ";", ":"))):
            break
        kept.append(word)
    return " ".join(reversed(kept)).rstrip(",;:")


def _initials_long_form(short: str, candidate: str) -> str | None:
    """The last words whose initials spell the short form ("Hormone-Sensitive Lipase" → HSL)."""
    letters = [c.lower() for c in short if c.isalpha()]
    words = candidate.split()
    for take in range(1, min(len(words), len(letters)) + 1):
        tail = words[-take:]
        parts = [p for w in tail for p in w.split("-") if p]
        initials = [p[0].lower() for p in parts if p[0].isalpha()]
        if initials == letters or [p[0].lower() for p in tail] == letters:
            return " ".join(tail)
    return None


def _plausible(short: str, long_form: str) -> bool:
    """Reject S-H matches that fold many capitals into a word or two ("inclusions" for ILI)."""
    capitals = sum(1 for c in short if c.isupper())
    tokens = len(re.split(r"[\s\-]+", long_form.strip()))
    # one long word may still spell a whole acronym: "Tetrahydrolipstatin (THL)"
    long_word = tokens == 1 and len(long_form) >= 3 * len(short)
    return (tokens >= capitals - 1 or long_word) and not _BRACKETS.intersection(long_form)


def long_form_for(short: str, candidate: str) -> str | None:
    found = _initials_long_form(short, candidate) or best_long_form(short, candidate)
    return found if found and _plausible(short, found) else None


def find_definitions(text: str) -> dict[str, str]:
    """In-text definitions in one passage, short form → long form (first definition wins)."""
    found: dict[str, str] = {}
    for m in _PAREN.finditer(text):
        inner = m.group(1).split(";")[0].split(",")[0].strip()
        if is_short_form(inner):
            before = _candidate_words(text[: m.start()], inner)
            long_form = long_form_for(inner, before) if before else None
            if long_form and inner not in found:
                found[inner] = long_form
            continue
        # reversed: "SF (long form)"
        words_before = _WORD.findall(text[max(0, m.start() - 20) : m.start()])
        if words_before and len(inner.split()) >= 2:
            short = words_before[-1].strip(",;:")
            if is_short_form(short) and short not in found:
                long_form = long_form_for(short, inner)
                if long_form:
                    found[short] = long_form
    return found


def merge_acronyms(*sources: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Earlier sources win (the glossary is authoritative, then the text in reading order)."""
    merged: dict[str, str] = {}
    for source in sources:
        for short, long_form in source:
            short, long_form = short.strip(), long_form.strip()
            if short and long_form and short not in merged:
                merged[short] = long_form
    return merged
