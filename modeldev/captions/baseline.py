"""A plain-regex splitter, the yardstick the real one is measured against.

It cuts at "(A)" anywhere and at "A." / "A)" / "A:" after a sentence or clause end, in the order
they appear, with no sequence check, and gives each label the text up to the next cut; the
shared notes are not separated. What it scores on a gold set is what the patterns alone buy.
"""

from __future__ import annotations

import re

from ray_jobs.captions.split import SplitCaption, Subcaption

_LABEL = re.compile(r"\(([A-Za-z])\)|(?:(?<=^)|(?<=[.;:]\s))([A-Za-z])[.):]\s")


def regex_split(text: str) -> SplitCaption:
    text = " ".join(text.split())
    marks = [(m.start(), m.end(), m.group(1) or m.group(2)) for m in _LABEL.finditer(text)]
    seen: set[str] = set()
    marks = [m for m in marks if not (m[2] in seen or seen.add(m[2]))]  # type: ignore[func-returns-value]
    if len(marks) < 2:
        return SplitCaption(preamble=text)
    subs = [
        Subcaption(label, text[end : nxt[0] if nxt else len(text)].strip())
        for (_, end, label), nxt in zip(marks, [*marks[1:], None], strict=True)
    ]
    return SplitCaption(text[: marks[0][0]].strip(), subs, "", "before", 1.0)
