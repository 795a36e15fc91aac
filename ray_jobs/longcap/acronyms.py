"""Deterministic acronym expansion with the article's own list.

The LLM is told to leave acronyms as written; here the first use of each one in the long
caption becomes "long form (SF)", the way an article defines it, so the text stays faithful to
the article and a text encoder sees both forms. Nothing is expanded twice, and a long form the
text already spells out is left alone.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=4096)
def _pattern(short: str) -> re.Pattern[str]:
    # a whole token: "IL-6" matches in "IL-6 levels", "MRI" does not in "MRI-guided" or "fMRI"
    return re.compile(rf"(?<![\w\-/]){re.escape(short)}(?![\w\-/])")


def find_short_form(short: str, text: str) -> int | None:
    m = _pattern(short).search(text)
    return m.start() if m else None


def usable(short: str, long_form: str) -> bool:
    """Entries worth expanding: unit-like two-letter forms ("mM", "Hb") are left out, since an
    article's list mixes them up with units too often to trust ("mM" read as an acronym)."""
    short, long_form = short.strip(), long_form.strip()
    if len(short) < 2 or len(long_form) <= len(short) or short.lower() == long_form.lower():
        return False
    return not (len(short) <= 2 and not short.isupper())


def expand_acronyms(text: str, acronyms: dict[str, str]) -> str:
    """Write "long form (SF)" at the first use of each short form of ``acronyms`` in ``text``."""
    lowered = text.lower()
    edits: list[tuple[int, int, str]] = []
    # longer short forms first, so "MALDI-TOF" claims its span before "TOF" could
    for short, long_form in sorted(acronyms.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        short, long_form = short.strip(), " ".join(long_form.split())
        if not usable(short, long_form) or long_form.lower() in lowered:
            continue
        start = find_short_form(short, text)
        if start is None:
            continue
        end = start + len(short)
        if any(start < e and s < end for s, e, _ in edits):
            continue
        edits.append((start, end, f"{long_form} ({short})"))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text
