"""Figure numbers and the panel letters a figure reference names ("Fig. 2A and B", "6A-6D",
"2—figure supplement 3A"), the evidence that ties an inline mention to its panels.
"""

from __future__ import annotations

import re
from functools import lru_cache

_FIG_WORD = re.compile(r"^\s*(?:supplementary\s+|extended\s+data\s+)?fig(?:ure)?s?\.?\s*", re.I)
# a number (with the S of supplementary figures), a word, a dash, any other character
_REF_TOKEN = re.compile(r"([Ss]?\d+)|([^\W\d_]+)|([-–—‒−])|(\S)")
_SKIPPED_WORDS = frozenset({"panel", "panels", "and", "or"})
_SKIPPED_MARKS = frozenset(",&/();:′″'’.")
_LABEL_NUMBER = re.compile(r"(S?\d+[A-Za-z]?)(?![A-Za-z])", re.I)


def _reference_items(text: str) -> list[tuple[str | None, list[str]]]:
    """A reference's figure numbers, each with the panel letters that follow it.

    "2A and B" → [(2, [A, B])]; "1C and 2A" → [(1, [C]), (2, [A])]; "6A-6D" → [(6, [A-D])]
    (a range may repeat the number); "2—figure supplement 3A" → [(2, []), (3, [A])] (a word
    ends the letters of a number). Letters before any number go to an item numbered None.
    """
    items: list[tuple[str | None, list[str]]] = [(None, [])]
    letters = items[0][1]
    number: str | None = None
    last: str | None = None  # the last letter taken for the current number
    in_range = stopped = False
    same_number_range = False  # "6A-6" seen: the next letter ends the range
    for num, word, dash, other in _REF_TOKEN.findall(text):
        if num:
            if in_range and last is not None and number is not None and num == number:
                same_number_range = True
                continue
            number, letters, last = num, [], None
            in_range = stopped = same_number_range = False
            items.append((number, letters))
        elif dash or word.lower() == "to":
            in_range = last is not None and not stopped
        elif word:
            low = word.lower()
            if low in _SKIPPED_WORDS:
                continue
            if len(word) == 1 and not stopped:
                letter = word.upper()
                if (in_range or same_number_range) and last and last < letter <= "Z":
                    letters.extend(chr(c) for c in range(ord(last) + 1, ord(letter) + 1))
                elif letter not in letters:
                    letters.append(letter)
                last = letter
                in_range = same_number_range = False
            else:
                stopped, in_range, same_number_range = True, False, False
        elif other not in _SKIPPED_MARKS:
            stopped, in_range = True, False
    return items


def panel_letters(ref_text: str, figure_number: str | None = None) -> list[str]:
    """Panel letters a figure reference names (see :func:`_panel_letters`)."""
    return list(_panel_letters(ref_text, figure_number))


@lru_cache(maxsize=4096)
def _panel_letters(ref_text: str, figure_number: str | None) -> tuple[str, ...]:
    """Panel letters a figure reference names: "Fig. 1B" → [B]; "Figs. 1C–E" → [C, D, E];
    "Figure 6A-6D" → [A, B, C, D]; "Figure 2—figure supplement 3A" → [A].

    With several figures in one reference ("Figs. 1C and 2A"), only the letters after this
    figure's number are taken when the number is known.
    """
    text = _FIG_WORD.sub("", ref_text.strip())
    if figure_number and figure_number[-1].isalpha():
        # the figure's own label carries a letter (fig-group children: "Figure 1b"), so only
        # letters after that whole label name panels: "Fig. 1bC" → [C]
        m = re.search(r"(?<![0-9])" + re.escape(figure_number), text, re.I)
        return tuple(_reference_items(text[m.end() :])[0][1]) if m else ()
    items = _reference_items(text)
    numbered = items[1:]
    if not numbered:
        return tuple(items[0][1]) if len(text.strip()) <= 8 else ()
    if figure_number is not None and len(numbered) > 1:
        wanted = figure_number.lower()
        numbered = [it for it in numbered if it[0].lower() == wanted] or numbered[:1]
    if len(numbered) == 1:
        return tuple(numbered[0][1])
    letters: dict[str, None] = {}
    for _, found in numbered:
        letters.update(dict.fromkeys(found))
    return tuple(letters)


def figure_number(label: str | None) -> str | None:
    """The number in a figure label: "Figure 3" → 3, "Fig. S2." → S2, "Figure 1b" → 1b, and the
    last of several ("Figure 2—figure supplement 3" → 3, "Appendix 1—figure 2" → 2)."""
    if not label:
        return None
    found = _LABEL_NUMBER.findall(label)
    return found[-1] if found else None
