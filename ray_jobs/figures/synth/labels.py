"""Panel label text in the schemes journals use, and where it is drawn."""

from __future__ import annotations

SCHEMES = ("A", "a", "1", "i", "a1", "a-1", "(a)", "a)", "(A)", "A)")
_ROMAN = [(10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]


def roman(n: int) -> str:
    out = ""
    for value, numeral in _ROMAN:
        while n >= value:
            out += numeral
            n -= value
    return out


def label_text(scheme: str, index: int, row: int, col: int) -> str:
    """The label of the ``index``-th panel in reading order (``row``/``col`` for a1-style)."""
    letter = chr(ord("a") + index % 26)
    if scheme == "A":
        return letter.upper()
    if scheme == "a":
        return letter
    if scheme == "1":
        return str(index + 1)
    if scheme == "i":
        return roman(index + 1)
    if scheme == "a1":
        return f"{chr(ord('a') + row % 26)}{col + 1}"
    if scheme == "a-1":
        return f"{chr(ord('a') + row % 26)}-{col + 1}"
    if scheme == "(a)":
        return f"({letter})"
    if scheme == "a)":
        return f"{letter})"
    if scheme == "(A)":
        return f"({letter.upper()})"
    if scheme == "A)":
        return f"{letter.upper()})"
    raise ValueError(f"unknown label scheme {scheme!r}")
