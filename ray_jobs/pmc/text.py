"""Plain text from JATS elements, sentence spans and figure-reference panel letters.

JATS mixes block elements (``p``, ``title``, ``list-item``) with inline markup (``italic``,
``xref``). Text is rebuilt with whitespace collapsed, a space at block boundaries and nothing
added at inline boundaries, so ``<bold>A</bold>, THL`` reads "A, THL" and two paragraphs never
glue into one word. Floats inside a paragraph (a ``fig`` placed within a ``p``) are left out of
that paragraph's text: they have their own. Of an ``<alternatives>`` (an inline formula as
MathML, TeX and an image) one representation is kept, the MathML's text first, so a formula
stays in its sentence. No-break, thin, hair and other Unicode spaces read as a space, and
invisible characters (zero-width space, MathML's invisible operators, soft hyphens) are dropped.

Everything here is linear in the size of its input: the C serialiser renders each subtree that
holds no structure, each element is visited at most once, and sentence boundaries and reference
spans are merged in one pass.

The walks also exist in C (``_ctext.pyx``, built at install): there the element text, the
reference spans and the sentences are written in one pass over libxml2's nodes. The Python here
is their specification (``tests/test_ctext.py`` compares the two) and their fallback.
"""

from __future__ import annotations

import os
import re
import warnings
from bisect import bisect_right
from collections.abc import Collection, Sequence
from functools import lru_cache

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
        "object-id",
        "inline-graphic",
    }
)
# rendered as a space (an empty element between two words)
_SPACED_TAGS = BLOCK_TAGS | {"break"}
# <alternatives> keeps one child; <tex-math> is cleaned of its LaTeX preamble
_SPECIAL_TAGS = frozenset({"alternatives", "tex-math"})
# tags in whose presence lxml's text serialiser no longer gives the reader's text
_STRUCTURE = tuple(_SPACED_TAGS | FLOAT_TAGS | _SPECIAL_TAGS)
# blocks whose children are blocks (a caption's title and paragraphs): always walked. Their
# children, and the paragraph-like blocks, are walked only when they hold one of the rarer
# structures below (a float, a formula's alternatives, a list or quote inside a paragraph).
_CONTAINERS = BLOCK_TAGS - {"p", "title", "label", "term", "def", "attrib"}
NESTED_TAGS = tuple(
    FLOAT_TAGS
    | _SPECIAL_TAGS
    | {"break", "list", "disp-quote", "disp-formula", "def-item", "table"}
)
_MATHML_NS = "{http://www.w3.org/1998/Math/MathML}"
_GRAPHIC_TAGS = frozenset({"graphic", "inline-graphic", "media"})

# --- whitespace ------------------------------------------------------------------------------

# Unicode spaces other than U+0020 (no-break, en/em, thin, hair, narrow no-break, ideographic,
# line and paragraph separators) and invisible characters (zero-width space and joiner-like
# marks, MathML's function application and invisible times/separator/plus, BOM, soft hyphen).
_ODD_SPACES = (
    "\xa0",
    "\u2009",
    "\u200a",
    "\u202f",
    "\u2002",
    "\u2003",
    "\u2004",
    "\u2005",
    "\u2006",
    "\u2007",
    "\u2008",
    "\u2000",
    "\u2001",
    "\u205f",
    "\u3000",
    "\u1680",
    "\u2028",
    "\u2029",
    "\x85",
)
_INVISIBLE = ("\u200b", "\u2060", "\u2061", "\u2062", "\u2063", "\u2064", "\ufeff", "\xad")
_ASCII_SPACES = ("\n", "\t", "\r", "\x0b", "\x0c")


def normalise_space(text: str) -> str:
    """Every run of whitespace (any Unicode space) as one U+0020; invisible characters dropped.

    Leading and trailing spaces are kept (one at most). Built from ``str.replace`` passes, each
    a C scan, which is several times faster than a regular expression over the same text.
    """
    if not text.isascii():
        for c in _ODD_SPACES:
            if c in text:
                text = text.replace(c, " ")
        for c in _INVISIBLE:
            if c in text:
                text = text.replace(c, "")
    for c in _ASCII_SPACES:
        if c in text:
            text = text.replace(c, " ")
    while "  " in text:
        text = text.replace("  ", " ")
    return text


def clean_text(text: str) -> str:
    """:func:`normalise_space`, stripped. A short text is split and joined instead (one C call,
    Unicode spaces included), cheaper there than the scans, which win on long texts."""
    if len(text) > 300:
        return normalise_space(text).strip()
    text = " ".join(text.split())
    if not text.isascii():
        for c in _INVISIBLE:
            if c in text:
                text = text.replace(c, "")
        if "  " in text or text[:1] == " " or text[-1:] == " ":  # a space beside an invisible
            text = " ".join(text.split())
    return text


# --- rendering -------------------------------------------------------------------------------


def _local(tag: object) -> str:
    if type(tag) is not str:  # comments, PIs, entity references
        return ""
    return tag.rpartition("}")[2] if tag[0] == "{" else tag  # type: ignore[index]


def _tex(el: etree._Element) -> str:
    """The formula of a ``<tex-math>``: the document body, without ``$``/``\\[`` delimiters."""
    tex = etree.tostring(el, method="text", encoding="unicode", with_tail=False)
    begin = tex.find("\\begin{document}")
    if begin >= 0:
        end = tex.find("\\end{document}", begin)
        tex = tex[begin + len("\\begin{document}") : end if end >= 0 else len(tex)]
    tex = tex.strip()
    for opener, closer in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if tex.startswith(opener) and tex.endswith(closer) and len(tex) >= len(opener) * 2:
            tex = tex[len(opener) : len(tex) - len(closer)].strip()
            break
    return tex


def _chosen_alternative(el: etree._Element) -> etree._Element | None:
    """Of an ``<alternatives>``, the one child to read: MathML, else TeX, else any text."""
    tex = other = None
    for child in el:
        tag = child.tag
        if type(tag) is not str:
            continue
        if tag == _MATHML_NS + "math":
            return child
        local = _local(tag)
        if local == "tex-math":
            tex = tex if tex is not None else child
        elif other is None and local not in _GRAPHIC_TAGS and local not in FLOAT_TAGS:
            other = child
    return tex if tex is not None else other


def structure_index(root: etree._Element) -> set[etree._Element]:
    """The elements of ``root``'s tree that have a float, ``<alternatives>``, ``<tex-math>``
    or a block nested in a paragraph below them: only these (and the containers, see
    ``_CONTAINERS``) are walked in Python, every other subtree goes to lxml's C serialiser
    whole. One pass over the rarer structures of the tree; each element is added once."""
    needs: set[etree._Element] = set()
    add = needs.add
    for el in root.iter(*NESTED_TAGS):
        node = el.getparent()
        while node is not None and node not in needs:
            add(node)
            node = node.getparent()
    return needs


class _Renderer:
    """Raw text of one subtree, the reader's way; whitespace is normalised afterwards."""

    __slots__ = ("needs", "parts", "skip")

    def __init__(self, needs: Collection[etree._Element], skip: Collection[etree._Element]):
        self.parts: list[str] = []
        self.needs = needs
        self.skip = skip

    def content(self, el: etree._Element) -> None:
        """The element's own text and its children's (not its tail)."""
        parts = self.parts
        if el not in self.needs and _local(el.tag) not in _CONTAINERS:
            if len(el):
                parts.append(etree.tostring(el, method="text", encoding="unicode", with_tail=False))
            elif el.text:
                parts.append(el.text)
            return
        if el.text:
            parts.append(el.text)
        for child in el:
            tag = _local(child.tag)
            if not tag or tag in FLOAT_TAGS or child in self.skip:
                pass
            elif tag in _SPACED_TAGS:
                parts.append(" ")
                self.content(child)
                parts.append(" ")
            elif tag == "alternatives":
                chosen = _chosen_alternative(child)
                if chosen is not None:
                    self.item(chosen)
            elif tag == "tex-math":
                parts.append(_tex(child))
            else:
                self.content(child)
            if child.tail:
                parts.append(child.tail)

    def item(self, el: etree._Element) -> None:
        if _local(el.tag) == "tex-math":
            self.parts.append(_tex(el))
        else:
            self.content(el)


def raw_text(
    el: etree._Element,
    skip: Collection[etree._Element] = (),
    needs: Collection[etree._Element] | None = None,
) -> str:
    """The element's text before whitespace is normalised; elements in ``skip`` are left out.

    ``needs`` is :func:`structure_index` of the tree (computed for ``el`` alone when absent);
    elements in ``skip`` must be blocks, or have a block or float among their siblings.
    """
    if _local(el.tag) == "tex-math":
        return _tex(el)
    if needs is None:
        needs = structure_index(el)
        for node in skip:
            node = node.getparent()
            while node is not None and node not in needs:
                needs.add(node)
                node = node.getparent()
    if el not in needs and _local(el.tag) not in _CONTAINERS:
        if not len(el):
            return el.text or ""
        return etree.tostring(el, method="text", encoding="unicode", with_tail=False)
    renderer = _Renderer(needs, skip)
    renderer.content(el)
    return "".join(renderer.parts)


def python_element_text(
    el: etree._Element | None,
    skip: Collection[etree._Element] = (),
    needs: Collection[etree._Element] | None = None,
) -> str:
    """The element's text as a reader sees it (see the module docstring), stripped."""
    if el is None:
        return ""
    return clean_text(raw_text(el, skip, needs))


# Private-use characters mark the references while a block is rendered.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKS = re.compile("([\ue000\ue001])")


def _rendered(el: etree._Element, block: etree._Element) -> bool:
    """Whether the element's text is part of the block's text (not inside a float or an
    unchosen alternative)."""
    child, node = el, el.getparent()
    while node is not None:
        tag = _local(child.tag)
        if child is not el and tag in FLOAT_TAGS:
            return False
        if _local(node.tag) == "alternatives" and _chosen_alternative(node) is not child:
            return False
        if node is block:
            return True
        child, node = node, node.getparent()
    return False


def _clear_marks(block: etree._Element) -> None:
    """Removes marker characters that the article itself holds (never in real articles)."""
    for el in block.iter():
        if el.text and (_OPEN in el.text or _CLOSE in el.text):
            el.text = el.text.replace(_OPEN, "").replace(_CLOSE, "")
        if el is not block and el.tail and (_OPEN in el.tail or _CLOSE in el.tail):
            el.tail = el.tail.replace(_OPEN, "").replace(_CLOSE, "")


def python_text_with_spans(
    block: etree._Element,
    marked: Sequence[etree._Element],
    needs: Collection[etree._Element] | None = None,
    *,
    _retried: bool = False,
) -> tuple[str, list[tuple[int, int] | None]]:
    """The block's text and the span of each marked descendant (in document order), or None
    for one whose text is not part of the block's (inside a float).

    Marker characters are placed around each marked element for the time of one rendering,
    then found in the normalised text: one pass over the text, whatever the number of marks.
    """
    saved = [(el, el.text, el.tail) for el in marked]
    try:
        for el, text, tail in saved:
            el.text = _OPEN + text if text else _OPEN
            el.tail = _CLOSE + tail if tail else _CLOSE
        raw = raw_text(block, (), needs)
    finally:
        for el, text, tail in saved:
            el.text, el.tail = text, tail
    opens, closes = raw.count(_OPEN), raw.count(_CLOSE)
    if (opens != closes or opens > len(marked)) and not _retried:
        _clear_marks(block)  # the article holds marker characters of its own
        return python_text_with_spans(block, marked, needs, _retried=True)
    order = list(range(len(marked)))
    if opens != len(marked) or opens != closes:
        order = [i for i, el in enumerate(marked) if _rendered(el, block)]
        if len(order) != opens or opens != closes:
            # cannot tell which is which: no spans, rather than wrong ones
            return normalise_space(_MARKS.sub("", raw)).strip(), [None] * len(marked)
    out: list[str] = []
    spans: list[tuple[int, int] | None] = [None] * len(marked)
    stack: list[tuple[int, int]] = []
    length, opened, space_before = 0, 0, True  # a leading space is dropped
    # str.split (C) rather than a regular expression over the text
    for i, chunk in enumerate(normalise_space(raw).split(_OPEN)):
        if i:
            stack.append((order[opened], length))
            opened += 1
        for j, piece in enumerate(chunk.split(_CLOSE) if _CLOSE in chunk else (chunk,)):
            if j and stack:
                index, start = stack.pop()
                spans[index] = (start, length)
            if space_before and piece[:1] == " ":
                piece = piece[1:]
            if piece:
                out.append(piece)
                length += len(piece)
                space_before = piece[-1] == " "
    text = "".join(out)
    if text.endswith(" "):
        text = text[:-1]
    return text, spans


# --- sentences -------------------------------------------------------------------------------

# "Fig. 2", "et al. (2005)", "e.g. The": never a sentence end
_ABBREVIATIONS = frozenset(
    "fig figs eq eqs ref refs al e.g i.e cf vs resp sp spp subsp var dr mr mrs prof st jr sr "
    "suppl".split()
)
# "no. 5", "ca. 3", "5 min. 10": an abbreviation before a number, a sentence end before a word
# ("for 5 min. The cells")
_BEFORE_NUMBER = frozenset(
    "no nos vol pp p ca approx min max ms mol wt conc tab est ed eds inc ltd co".split()
)
_NAME_LINKS = frozenset({"by", "and", "&"})
# a sentence end: punctuation, closing quotes or brackets, a space, then a capital, a digit or
# an opening quote or bracket (the text is whitespace-normalised: one space)
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]* (?=[\"'“‘(\[]?[A-Z0-9])")
_PERIOD_BOUNDARY = re.compile(r"\.[\"'”’)\]]* (?=[\"'“‘(\[]?[A-Z0-9])")
_OPENERS = "([{\"'“‘"
_CLOSERS = ")]}\"'”’"
_BRACKETING = _OPENERS + _CLOSERS


def _is_initial(text: str, start: int, token: str, next_char: str) -> bool:
    """ "J. Smith", "by J. Smith", "J. K. Rowling": a capital letter that is an initial.

    A letter after a number ("Figure 5B. A"), a lower-case letter ("2 h. The") or a letter in
    brackets is not one; an initial follows the start of the text, a name, another initial or
    a word that introduces a name ("by", "and"), and comes before a name (not a number).
    """
    if len(token) != 1 or not token.isupper() or not next_char.isalpha():
        return False
    before = text[max(0, start - 40) : start].rstrip()
    prev = before[before.rfind(" ") + 1 :]
    if not prev or prev in _NAME_LINKS:
        return True
    if prev.endswith("."):  # another initial ("J. K."), a title ("Dr. J.")
        core = prev[:-1]
        return (len(core) == 1 and core.isupper()) or core.lower() in _ABBREVIATIONS
    return len(prev) > 1 and prev[0].isupper() and prev.isalpha()  # "John F. Kennedy"


def _is_boundary(text: str, pos: int, end: int) -> bool:
    """Whether the punctuation at ``pos`` (the candidate's match ends at ``end``) ends a
    sentence, judged by the token before it and the character after it."""
    if text[pos] != ".":
        return True  # "?" and "!" always end one
    start = text.rfind(" ", max(0, pos - 40), pos) + 1
    token = text[start:pos]
    bare = token.strip(_BRACKETING)
    if not bare:
        return True
    low = bare.lower()
    if low in _ABBREVIATIONS:
        return False
    next_char = text[end : end + 1]
    if next_char and next_char in _OPENERS:
        next_char = text[end + 1 : end + 2]
    if low in _BEFORE_NUMBER:
        return not next_char.isdigit()
    if "." in bare and all(len(p) == 1 and p.isalpha() for p in bare.split(".")):
        return False  # "U.S", "a.m"
    if bare != token:  # "(A). Next", "2B). Next": bracketed, never an initial
        return True
    return not _is_initial(text, start, bare, next_char)


class _Boundaries:
    """Which sentence-end candidates of one text are accepted: not inside brackets or a
    protected span, not after an abbreviation or an initial.

    The bracket depth at a point is the openers less the closers before it (a stray closer,
    "1) first", cancels an unclosed opener: both are typos), counted in C from the last point
    asked for, so a pass over a paragraph's candidates counts each character about once.
    """

    __slots__ = ("_at", "_brackets", "_guard_reach", "_guard_starts", "_square", "pattern", "text")

    def __init__(self, text: str, protected: Sequence[tuple[int, int] | None]) -> None:
        self.text = text
        # a regular expression that starts with a literal scans several times faster than one
        # that starts with a class; most paragraphs hold no "?" or "!"
        self.pattern = _BOUNDARY if "?" in text or "!" in text else _PERIOD_BOUNDARY
        guarded = sorted(s for s in protected if s is not None and s[1] > s[0])
        self._guard_starts = [a for a, _ in guarded]
        reach, self._guard_reach = -1, []
        for _, b in guarded:
            reach = max(reach, b)
            self._guard_reach.append(reach)
        self._square = "[" in text or "]" in text
        self._brackets = "(" in text or self._square
        self._at = (0, 0)  # (offset, depth there)

    def _depth(self, pos: int) -> int:
        text, (at, depth) = self.text, self._at
        lo, hi, sign = (at, pos, 1) if pos >= at else (pos, at, -1)
        change = text.count("(", lo, hi) - text.count(")", lo, hi)
        if self._square:  # most paragraphs hold no square bracket: two scans saved
            change += text.count("[", lo, hi) - text.count("]", lo, hi)
        depth += sign * change
        self._at = (pos, depth)
        return depth

    def accepted(self, m: re.Match[str]) -> bool:
        pos = m.start()
        i = bisect_right(self._guard_starts, pos) - 1
        if i >= 0 and pos < self._guard_reach[i]:
            return False
        if not _is_boundary(self.text, pos, m.end()):
            return False
        return not self._brackets or self._depth(pos) <= 0


def sentence_spans(
    text: str, protected: Sequence[tuple[int, int] | None] = ()
) -> list[tuple[int, int]]:
    """Split into sentences; never inside brackets, an abbreviation or a protected span."""
    bounds = _Boundaries(text, protected)
    spans: list[tuple[int, int]] = []
    start = 0
    for m in bounds.pattern.finditer(text):
        if bounds.accepted(m):
            spans.append((start, m.end()))
            start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


class PythonSentences:
    """The sentences of one text that hold given offsets, each cut out once.

    The text's sentence-end candidates are found in one regular-expression pass; only those
    around the offsets asked for are judged, each once, so a paragraph costs about what its
    referencing sentences do. Offsets must come in increasing order (a reference's, in document
    order): the search back from one never passes the end of the sentence found for the one
    before, which keeps the whole linear in the text.
    """

    __slots__ = ("_bounds", "_ends", "_floor", "_last", "_matches", "_text", "_verdicts")

    def __init__(self, text: str, protected: Sequence[tuple[int, int] | None] = ()) -> None:
        self._text = text
        self._bounds = _Boundaries(text, protected)
        self._matches = list(self._bounds.pattern.finditer(text))
        self._ends = [m.end() for m in self._matches]
        self._verdicts: dict[int, bool] = {}
        self._floor = 0  # no sentence asked for later starts before this
        self._last: tuple[int, int, str] | None = None

    def _accepted(self, i: int) -> bool:
        verdict = self._verdicts.get(i)
        if verdict is None:
            verdict = self._verdicts[i] = self._bounds.accepted(self._matches[i])
        return verdict

    def _start_before(self, offset: int) -> int:
        """The end of the last accepted boundary at or before ``offset`` (or the floor)."""
        floor, matches = self._floor, self._matches
        i = bisect_right(self._ends, offset) - 1
        while i >= 0 and matches[i].start() >= floor:
            if self._accepted(i):
                return self._ends[i]
            i -= 1
        return floor

    def _end_after(self, offset: int) -> int:
        """The end of the first accepted boundary after ``offset`` (or the text's end)."""
        ends = self._ends
        for i in range(bisect_right(ends, offset), len(ends)):
            if self._matches[i].start() >= self._floor and self._accepted(i):
                return ends[i]
        return len(self._text)

    def at(self, offset: int) -> str:
        """The sentence holding ``offset``."""
        last = self._last
        if last is not None and last[0] <= offset < last[1]:
            return last[2]
        if last is not None and offset >= last[1]:
            self._floor = last[1]
        elif offset < self._floor:  # out of order after all: search from the start again
            self._floor = 0
        start = self._start_before(offset)
        end = self._end_after(offset)
        sentence = self._text[start:end].strip()
        self._last = (start, end, sentence)
        return sentence


def sentence_at(text: str, spans: Sequence[tuple[int, int]], offset: int) -> str:
    """The sentence of ``spans`` (as :func:`sentence_spans` gives them) holding ``offset``."""
    starts = [a for a, _ in spans]
    i = bisect_right(starts, offset) - 1
    if 0 <= i < len(spans) and offset < spans[i][1]:
        a, b = spans[i]
        return text[a:b].strip()
    return text.strip()


# --- panel letters in figure references -----------------------------------------------------

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


# --- the C walks -----------------------------------------------------------------------------


def _c_walks():
    """``ray_jobs/pmc/_ctext`` (built from ``_ctext.pyx`` at install), or None where it is not
    built, was built against another lxml (it reads lxml's C structures) or
    ``PMCVL_PURE_PYTHON`` asks for the Python walks (the tests compare the two)."""
    if os.environ.get("PMCVL_PURE_PYTHON"):
        return None
    try:
        from ray_jobs.pmc import _ctext
    except ImportError:
        warnings.warn(
            "ray_jobs.pmc._ctext is not built (pip install the package): parsing runs the"
            " slower Python walks",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    if etree.__version__ != _ctext.COMPILED_LXML:
        warnings.warn(
            f"ray_jobs.pmc._ctext was built against lxml {_ctext.COMPILED_LXML}, not the"
            f" running {etree.__version__}: parsing runs the slower Python walks",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _ctext


# The Python walks above are the specification of the C ones (the tests compare them) and their
# fallback; the public names are the C walks where they are built.
C_WALKS = _c_walks()
if C_WALKS is None:
    element_text = python_element_text
    text_with_spans = python_text_with_spans
    Sentences = PythonSentences
else:
    _c_element_text = C_WALKS.element_text
    text_with_spans = C_WALKS.text_with_spans
    Sentences = C_WALKS.Sentences

    def element_text(
        el: etree._Element | None,
        skip: Collection[etree._Element] = (),
        needs: Collection[etree._Element] | None = None,
    ) -> str:
        """:func:`python_element_text` in C."""
        return "" if el is None else _c_element_text(el, skip, needs)
