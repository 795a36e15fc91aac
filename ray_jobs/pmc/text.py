"""Plain text from JATS elements, with the spans of the references in it.

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
and in ``sentences`` is their specification (``tests/test_ctext.py`` compares the two) and their
fallback; the public names at the end of this module are the C walks where they are built.
Figure-reference letters live in ``figure_refs``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Collection, Sequence

from lxml import etree

from ray_jobs.pmc.sentences import PythonSentences

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
