"""Plain text from JATS elements, sentence spans and figure-reference panel letters.

JATS mixes block elements (``p``, ``title``, ``list-item``) with inline markup (``italic``,
``xref``). Text is rebuilt with whitespace collapsed, a space at block boundaries and nothing
added at inline boundaries, so ``<bold>A</bold>, THL`` reads "A, THL" and two paragraphs never
glue into one word. Floats inside a paragraph (a ``fig`` placed within a ``p``) are left out of
that paragraph's text: they have their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lxml import etree

BLOCK_TAGS = frozenset(
    {
        "p",
        "title",
        "label",
        "list",
        "list-item",
        "sec",
        "caption",
        "def-item",
        "term",
        "def",
        "disp-quote",
        "disp-formula",
        "td",
        "th",
        "tr",
        "attrib",
    }
)
FLOAT_TAGS = frozenset(
    {
        "fig",
        "fig-group",
        "table-wrap",
        "table-wrap-group",
        "supplementary-material",
        "boxed-text",
        "graphic",
        "media",
        "alternatives",
        "object-id",
        "inline-graphic",
    }
)
_WS = re.compile(r"\s+")  # any run with a newline, tab or double space


class TextBuilder:
    """Appends text with whitespace collapsed, tracking the offset where the next char lands."""

    __slots__ = ("_len", "_parts", "_pending")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._len = 0
        self._pending = False

    def append(self, text: str | None) -> None:
        if not text:
            return
        if "  " in text or "\n" in text or "\t" in text or "\r" in text:
            text = _WS.sub(" ", text)
        if text[0] == " ":
            self._pending = True
            text = text[1:]
            if not text:
                return
        if self._pending and self._len:
            self._parts.append(" ")
            self._len += 1
        self._pending = text[-1] == " "
        if self._pending:
            text = text[:-1]
        self._parts.append(text)
        self._len += len(text)

    def space(self) -> None:
        self._pending = True

    def mark(self) -> int:
        """The offset of the next non-space character appended."""
        return self._len + (1 if self._pending and self._len else 0)

    def __len__(self) -> int:
        return self._len

    def text(self) -> str:
        return "".join(self._parts)


def _tag(el: etree._Element) -> str:
    tag = el.tag
    if not isinstance(tag, str):  # comments, PIs, entity references
        return ""
    return tag.rpartition("}")[2] if tag[0] == "{" else tag


XrefHook = Callable[[etree._Element, int, int], None]


_STRUCTURE = tuple(BLOCK_TAGS | FLOAT_TAGS)
_STRUCTURE_OR_XREF = (*_STRUCTURE, "xref")


def _walk(el: etree._Element, out: TextBuilder, on_xref: XrefHook | None) -> None:
    if not len(el):  # a leaf: its text is all there is
        out.append(el.text)
        return
    # Fast path: a subtree with no block, float (or, when asked for, xref) inside it is plain
    # inline text, which lxml's C serialiser renders exactly as the walk below would.
    if (
        next(el.iterdescendants(*(_STRUCTURE if on_xref is None else _STRUCTURE_OR_XREF)), None)
        is None
    ):
        out.append(etree.tostring(el, method="text", encoding="unicode", with_tail=False))
        return
    out.append(el.text)
    for child in el:
        tag = _tag(child)
        if not tag or tag in FLOAT_TAGS:
            out.append(child.tail)
            continue
        block = tag in BLOCK_TAGS
        if block:
            out.space()
        if on_xref is not None and tag == "xref":
            start = out.mark()
            _walk(child, out, on_xref)
            on_xref(child, start, len(out))
        else:
            _walk(child, out, on_xref)
        if block:
            out.space()
        out.append(child.tail)


def element_text(el: etree._Element | None, on_xref: XrefHook | None = None) -> str:
    """The element's text as a reader sees it (see the module docstring)."""
    if el is None:
        return ""
    out = TextBuilder()
    _walk(el, out, on_xref)
    return out.text()


# Private-use characters: valid XML text, and absent from real articles (checked below).
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKS = re.compile("[\ue000\ue001]")


def text_with_spans(
    block: etree._Element, marked: list[etree._Element]
) -> tuple[str, list[tuple[int, int]]]:
    """The block's text and the span of each marked descendant, in document order.

    A block with no nested block or float is rendered by lxml's C serialiser with marker
    characters briefly placed around each marked element (then removed from the tree); only a
    block that holds structure, or already holds a marker character, goes through the walk.
    """
    raw = None
    if next(block.iterdescendants(*_STRUCTURE), None) is None:
        saved = [(el, el.text, el.tail) for el in marked]
        try:
            for el, text, tail in saved:
                el.text = _OPEN + (text or "")
                el.tail = _CLOSE + (tail or "")
            raw = etree.tostring(block, method="text", encoding="unicode", with_tail=False)
        finally:
            for el, text, tail in saved:
                el.text, el.tail = text, tail
    if raw is None or len(_MARKS.findall(raw)) != 2 * len(marked):
        wanted = {id(el): i for i, el in enumerate(marked)}
        found: list[tuple[int, int]] = [(0, 0)] * len(marked)

        def hook(el: etree._Element, start: int, end: int) -> None:
            if id(el) in wanted:
                found[wanted[id(el)]] = (start, end)

        return element_text(block, hook), found
    raw = _WS.sub(" ", raw)
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    length, last, opened, prev_space = 0, 0, 0, True
    for m in _MARKS.finditer(raw):
        piece = raw[last : m.start()]
        if prev_space and piece.startswith(" "):
            piece = piece[1:]
        if piece:
            pieces.append(piece)
            length += len(piece)
            prev_space = piece.endswith(" ")
        if m.group() == _OPEN:
            opened = length
        else:
            spans.append((opened, length))
        last = m.end()
    piece = raw[last:]
    pieces.append(piece[1:] if prev_space and piece.startswith(" ") else piece)
    return "".join(pieces).rstrip(), spans


# --- sentences -------------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    "fig figs figure eq eqs ref refs no nos vs al e.g i.e cf ca approx resp sp spp var dr mr ms "
    "prof st inc ltd co corp jr sr vol pp ed eds suppl tab est min max mol wt conc".split()
)
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)[.]?$")


def sentence_spans(text: str, protected: list[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Split into sentences; never inside brackets, an abbreviation or a protected span."""
    spans: list[tuple[int, int]] = []
    start = 0
    depth = 0
    scanned = 0
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        # bracket depth between the last scan point and this candidate (counted in C)
        segment = text[scanned : m.start()]
        depth = max(
            0,
            depth
            + segment.count("(")
            + segment.count("[")
            - segment.count(")")
            - segment.count("]"),
        )
        scanned = m.start()
        if depth:
            continue
        pos = m.start()
        if any(a <= pos < b for a, b in protected):
            continue
        word = _WORD_BEFORE.search(text, max(0, pos - 12), pos + 1)
        if word:
            token = word.group(1).lower().rstrip(".")
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                continue
        spans.append((start, end))
        start = end
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def sentence_at(text: str, spans: list[tuple[int, int]], offset: int) -> str:
    for a, b in spans:
        if a <= offset < b:
            return text[a:b].strip()
    return text.strip()


# --- panel letters in figure references -----------------------------------------------------

_FIG_WORD = re.compile(r"^\s*(?:supplementary\s+)?fig(?:ure)?s?\.?\s*", re.I)
_NUMBER_REST = re.compile(r"(S?\d+)(\D*)", re.I)
_TOKEN = re.compile(r"[A-Za-z]+|[-–—]|\S")
_SEPARATORS = frozenset({",", "&", "/", "and", "to", "(", ")", ";"})


def _letters_after_number(rest: str) -> list[str]:
    letters: list[str] = []
    range_from: str | None = None
    for token in _TOKEN.findall(rest):
        low = token.lower()
        if low in ("panel", "panels"):
            continue
        if token in "-–—" or low == "to":
            range_from = letters[-1] if letters else None
            continue
        if low in _SEPARATORS:
            continue
        if len(token) != 1 or not token.isalpha():
            break
        letter = token.upper()
        if range_from and ord(range_from) < ord(letter) <= ord(range_from) + 25:
            letters.extend(chr(c) for c in range(ord(range_from) + 1, ord(letter) + 1))
        else:
            letters.append(letter)
        range_from = None
    return list(dict.fromkeys(letters))


def panel_letters(ref_text: str, figure_number: str | None = None) -> list[str]:
    """Panel letters a figure reference names: "Fig. 1B" → [B]; "Figs. 1C–E" → [C, D, E].

    With several figures in one reference ("Figs. 1C and 2A"), only the letters after this
    figure's number are taken when the number is known.
    """
    text = _FIG_WORD.sub("", ref_text.strip())
    if figure_number and figure_number[-1].isalpha():
        # the figure's own label carries a letter (fig-group children: "Figure 1b"), so only
        # letters after that whole label name panels: "Fig. 1bC" → [C]
        m = re.search(r"(?<![0-9])" + re.escape(figure_number), text, re.I)
        return _letters_after_number(text[m.end() :]) if m else []
    groups = _NUMBER_REST.findall(text)
    if not groups:
        return _letters_after_number(text) if len(text.strip()) <= 8 else []
    if figure_number is not None and len(groups) > 1:
        groups = [g for g in groups if g[0].lower() == figure_number.lower()] or groups[:1]
    letters: list[str] = []
    for _, rest in groups:
        letters.extend(x for x in _letters_after_number(rest) if x not in letters)
    return letters


def figure_number(label: str | None) -> str | None:
    """The number in a figure label ("Figure 3" → 3, "Fig. S2." → S2, "Figure 1b" → 1b)."""
    if not label:
        return None
    m = re.search(r"(S?\d+[A-Za-z]?)(?![A-Za-z])", label, re.I)
    return m.group(1) if m else None
