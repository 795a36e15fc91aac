"""Acronym definitions: an article's glossary plus in-text "long form (SF)" definitions.

The in-text matcher follows Schwartz & Hearst (2003): a short form in parentheses, and the
shortest run of preceding words whose characters contain the short form's characters in order,
the first one starting a word. A long form whose words' initials spell the short form is
preferred. The reversed form "SF (long form)" is not read: it is rare in biomedical prose, and
most parentheses after a capitalised word are not definitions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# "long form (SF)" / "long form (SF; ...)". The pattern starts with a literal, which lets the
# regex engine skip ahead instead of trying every position of a long body.
_DEFINED = re.compile(r"\(([^\W_][\w\-/+.&]{1,9})(?:[;,][^()]{0,110})?\)")
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
    words = _CITATION_TAIL.sub("", text_before).split()
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
    return " ".join(found.split()) if found and _plausible(short, found) else None


def find_definitions(text: str) -> dict[str, str]:
    """In-text definitions in one passage, short form → long form.

    Only the first parenthesised use of a short form is tried: that is where authors define it,
    and later uses ("... in the WT (Table 2)") only add false matches and time.
    """
    found: dict[str, str] = {}
    tried: set[str] = set()
    for m in _DEFINED.finditer(text):
        short, start = m.group(1), m.start()
        # prose puts a space before the parenthesis; chemistry ("oxadiazol-2(3H)-one") does not
        if not start or not text[start - 1].isspace() or short in tried:
            continue
        tried.add(short)
        if not is_short_form(short):
            continue
        window = text[max(0, start - 200) : start]
        # S-H needs the short form's first character to start a word of the long form
        first = short[0].lower()
        if not any(w[0] == first for w in window.lower().replace("-", " ").split()):
            continue
        before = _candidate_words(window, short)
        long_form = long_form_for(short, before) if before else None
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
