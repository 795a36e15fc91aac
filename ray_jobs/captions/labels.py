"""Panel labels as values: parse "B2", "(iv)", "a-1"; order them; expand "A–C" and "A, B"."""

from __future__ import annotations

import re
from dataclasses import dataclass

ROMAN = ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii")
POSITIONS = (
    "top left",
    "top right",
    "bottom left",
    "bottom right",
    "upper left",
    "upper right",
    "lower left",
    "lower right",
    "left",
    "right",
    "top",
    "bottom",
    "upper",
    "lower",
    "middle",
    "center",
    "centre",
)

# one label: a letter with an optional number ("B", "b2", "a-1") or primes ("A′": a view of
# panel A, read as A), a number, or a roman numeral
LABEL = (
    r"(?<![A-Za-z0-9])"
    r"(?:[A-Za-z](?:-?\d{1,2})?(?:['′’]{1,3}(?!\w))?(?![A-Za-z0-9])|\d{1,2}(?![\d.,]?\d)"
    r"|[ivxIVX]{2,4}(?![A-Za-z]))"
)
# several: "A–C", "A, B", "A and B", "A/B", "A-C and E", "B1-B3", "C, D, and E" (keeps E)
SPEC = rf"{LABEL}(?:\s*(?:,\s*(?:and|&)|,|and|&|/|[-–—]|to)\s*{LABEL})*"
_ITEM = re.compile(LABEL)
_JOIN = re.compile(r"\s*(,\s*(?:and|&)|,|and|&|/|[-–—]|to)\s*")


@dataclass(frozen=True, slots=True, order=True)
class LabelKey:
    """Where a label sits in its scheme's sequence: (scheme, major, minor)."""

    scheme: str  # U upper letters, L lower letters, D digits, R roman, P positions
    major: int
    minor: int  # the number in "B2" (0 when there is none)

    def follows(self, prev: LabelKey) -> bool:
        if self.scheme != prev.scheme:
            return False
        if self.scheme == "P":
            return True
        if self.major == prev.major:
            return self.minor == prev.minor + 1
        # letters may skip I or J, which read alike ("... H, I, K, L ...")
        skips = self.scheme in "UL" and self.major == prev.major + 2 and prev.major + 1 in (8, 9)
        return (self.major == prev.major + 1 or skips) and self.minor in (0, 1)

    @property
    def starts(self) -> bool:
        return self.scheme == "P" or (self.major == 0 and self.minor in (0, 1))


def key_of(label: str, roman_scheme: bool = False) -> LabelKey | None:
    text = unprime(label.strip())
    low = text.lower()
    if " ".join(low.split()) in POSITIONS:
        return LabelKey("P", POSITIONS.index(" ".join(low.split())), 0)
    if roman_scheme and low in ROMAN:
        return LabelKey("R", ROMAN.index(low), 0)
    if text.isdigit():
        return LabelKey("D", int(text) - 1, 0)
    m = re.fullmatch(r"([A-Za-z])-?(\d{1,2})?", text)
    if m:
        letter, number = m.group(1), m.group(2)
        scheme = "U" if letter.isupper() else "L"
        return LabelKey(scheme, ord(letter.lower()) - 97, int(number) if number else 0)
    if low in ROMAN:
        return LabelKey("R", ROMAN.index(low), 0)
    return None


def unprime(label: str) -> str:
    return label.rstrip("'′’")


def expand(spec: str, roman_scheme: bool = False) -> list[str]:
    """ "A–C" → [A, B, C]; "A, B and D" → [A, B, D]; "B1-B3" → [B1, B2, B3]."""
    items = _ITEM.findall(spec)
    joins = [m.group(1) for m in _JOIN.finditer(spec)]
    if len(items) == 1:
        return items
    out = [items[0]]
    for join, item in zip(joins, items[1:], strict=False):
        start, end = key_of(out[-1], roman_scheme), key_of(item, roman_scheme)
        if join in "-–—to" and start and end and start.scheme == end.scheme:
            if start.major == end.major and end.minor > start.minor:  # B1-B3
                letter = out[-1].rstrip("0123456789-")
                sep = "-" if "-" in out[-1] else ""
                out += [f"{letter}{sep}{n}" for n in range(start.minor + 1, end.minor + 1)]
                continue
            if start.minor == end.minor == 0 and 0 < end.major - start.major <= 25:
                out += [_label_at(start, k, out[-1]) for k in range(start.major + 1, end.major)]
        out.append(item)
    return out


def _label_at(key: LabelKey, major: int, like: str) -> str:
    if key.scheme == "U":
        return chr(65 + major)
    if key.scheme == "L":
        return chr(97 + major)
    if key.scheme == "D":
        return str(major + 1)
    if key.scheme == "R":
        numeral = ROMAN[major] if major < len(ROMAN) else str(major + 1)
        return numeral.upper() if like.isupper() else numeral
    return like


def normalise(label: str) -> str:
    """How labels are compared: case kept (A and a are different schemes), brackets dropped."""
    return label.strip().strip("().:,").strip()
