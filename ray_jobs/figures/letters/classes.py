"""What a label can say, as one class each: its text without brackets or dots, case-folded.

"(B)", "B)", "b." and "B" are all ``b``; "a-1" and "a1" are ``a1``; numbers and roman numerals
keep their value ("ii", "12"). Single-letter roman numerals (i, v, x) are letters here: which
one a caption means is the caption's business.
"""

from __future__ import annotations

import re

LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
NUMBERS = [str(n) for n in range(1, 21)]
ROMANS = ["ii", "iii", "iv", "vi", "vii", "viii", "ix", "xi", "xii"]
GRID = [f"{r}{c}" for r in "abcdef" for c in range(1, 7)]
CLASSES: tuple[str, ...] = tuple(LETTERS + NUMBERS + ROMANS + GRID)
INDEX = {name: i for i, name in enumerate(CLASSES)}
_STRIP = re.compile(r"[\s().:,\-\[\]]")


def canonical(text: str) -> str:
    """The class a label's text belongs to ("(B)" → "b"); may be outside ``CLASSES``."""
    return _STRIP.sub("", text).lower()
