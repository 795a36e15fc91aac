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


_SCHEMES = {
    "A": lambda letter, i, row, col: letter.upper(),
    "a": lambda letter, i, row, col: letter,
    "1": lambda letter, i, row, col: str(i + 1),
    "i": lambda letter, i, row, col: roman(i + 1),
    "a1": lambda letter, i, row, col: f"{chr(ord('a') + row % 26)}{col + 1}",
    "a-1": lambda letter, i, row, col: f"{chr(ord('a') + row % 26)}-{col + 1}",
    "(a)": lambda letter, i, row, col: f"({letter})",
    "a)": lambda letter, i, row, col: f"{letter})",
    "(A)": lambda letter, i, row, col: f"({letter.upper()})",
    "A)": lambda letter, i, row, col: f"{letter.upper()})",
}


def label_text(scheme: str, index: int, row: int, col: int) -> str:
    """The label of the ``index``-th panel in reading order (``row``/``col`` for a1-style)."""
    if scheme not in _SCHEMES:
        raise ValueError(f"unknown label scheme {scheme!r}")
    return _SCHEMES[scheme](chr(ord("a") + index % 26), index, row, col)
