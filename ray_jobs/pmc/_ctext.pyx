# cython: language_level=3
"""The tree walks of :mod:`ray_jobs.pmc.text`, :mod:`ray_jobs.pmc.sentences` and
:mod:`ray_jobs.pmc.jats` in C, over libxml2's nodes through lxml's public C API.

Each function gives exactly what its Python counterpart gives (``tests/test_ctext.py``
compares them on every real article and on generated and hostile ones); the Python code is
the specification and the fallback where this module is not built. Parsing calls these once
or a few times per article, and each is one pass over the nodes it reads, with the text
written and its whitespace normalised in the same pass: the Python walks cost two to three
times the bare parse, these a fraction of it.
"""

from cpython.unicode cimport (
    Py_UNICODE_ISALNUM,
    Py_UNICODE_ISDECIMAL,
    PyUnicode_DATA,
    PyUnicode_FindChar,
    PyUnicode_DecodeUTF8,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, strcmp
from lxml.includes cimport tree
from lxml.includes.etreepublic cimport (
    LXML_VERSION_STRING,
    _Document,
    _Element,
    attributeValueFromNsName,
    elementFactory,
    import_lxml__etree,
)
from lxml.includes.tree cimport const_xmlChar, xmlNode

import_lxml__etree()

# the lxml this module was compiled against: its C structures must be the running lxml's
COMPILED_LXML = (<bytes>LXML_VERSION_STRING).decode()

# --- tags ------------------------------------------------------------------------------------

cdef enum:
    BLOCK = 1  # text.BLOCK_TAGS
    FLOAT = 2  # text.FLOAT_TAGS
    SPACED = 4  # text._SPACED_TAGS: a space on either side
    CONTAINER = 8  # text._CONTAINERS: always walked
    NESTED = 16  # text.NESTED_TAGS: marks its ancestors as structure (no namespace only)
    ALTERNATIVES = 32
    TEX_MATH = 64
    GRAPHIC = 128  # text._GRAPHIC_TAGS
    SEPARATED = 256  # jats._SEPARATED_BLOCKS (no namespace only)
    FIG = 512
    XREF = 1024
    MENTION = 2048  # jats._MENTION_BLOCKS | jats._MENTION_STOPS (no namespace only)

cdef dict _KINDS = {}


cdef void _add(str names, int kind):
    for name in names.split():
        _KINDS[name.encode()] = _KINDS.get(name.encode(), 0) | kind


_add("p title label list list-item sec caption def-item term def disp-quote disp-formula td th "
     "tr attrib", BLOCK | SPACED)
_add("list list-item sec caption def-item disp-quote disp-formula td th tr", CONTAINER)
_add("fig fig-group table-wrap table-wrap-group supplementary-material boxed-text graphic media "
     "object-id inline-graphic", FLOAT | NESTED)
_add("break", SPACED | NESTED)
_add("alternatives", ALTERNATIVES | NESTED)
_add("tex-math", TEX_MATH | NESTED)
_add("list disp-quote disp-formula def-item table", NESTED)
_add("graphic inline-graphic media", GRAPHIC)
_add("p title td th label list-item term def", SEPARATED)
_add("fig", FIG)
_add("xref", XREF)
_add("p title label term def disp-quote disp-formula td th attrib caption fig fig-group table-wrap "
     "table-wrap-group supplementary-material boxed-text graphic media object-id inline-graphic",
     MENTION)

# The table as C arrays, sorted, with the range of names that start with each byte: a lookup
# is a few byte comparisons, no Python object.
cdef list _NAMES = sorted(_KINDS)
assert len(_NAMES) <= 64 and all(_name for _name in _NAMES)
cdef const char* _NAME_AT[64]
cdef int _KIND_AT[64]
cdef int _FROM[256]
cdef int _TO[256]
for _i, _name in enumerate(_NAMES):
    _NAME_AT[_i] = <const char*>(<bytes>_name)
    _KIND_AT[_i] = _KINDS[_name]
    _first = (<bytes>_name)[0]
    if _TO[_first] == 0:
        _FROM[_first] = _i
    _TO[_first] = _i + 1


cdef inline int kind_of(xmlNode* node) noexcept:
    """The tag's kinds by its local name (any namespace), as text._local reads it."""
    cdef const char* name = <const char*>node.name
    cdef int i
    if name == NULL:
        return 0
    for i in range(_FROM[<unsigned char>name[0]], _TO[<unsigned char>name[0]]):
        if strcmp(name, _NAME_AT[i]) == 0:
            return _KIND_AT[i]
    return 0


cdef inline bint is_element(xmlNode* node):
    return node.type == tree.XML_ELEMENT_NODE


cdef inline bint no_namespace(xmlNode* node):
    return node.ns == NULL


cdef inline size_t address(xmlNode* node):
    return <size_t>node


# --- structure -------------------------------------------------------------------------------


cdef class NodeSet:
    """A set of nodes (an open-addressing hash table of their addresses, each with a number):
    the structure index, the skipped and the marked elements, asked once per element walked,
    with no Python object made per question."""

    cdef size_t* _keys
    cdef Py_ssize_t* _values
    cdef size_t _mask
    cdef Py_ssize_t _count

    def __cinit__(self):
        self._keys = NULL
        self._values = NULL
        self._count = 0
        self._mask = 0
        self._grow(16)

    def __dealloc__(self):
        free(self._keys)
        free(self._values)

    cdef int _grow(self, size_t capacity) except -1:
        cdef size_t* old_keys = self._keys
        cdef Py_ssize_t* old_values = self._values
        cdef size_t old_capacity = self._mask + 1 if old_keys != NULL else 0, i
        self._keys = <size_t*>calloc(capacity, sizeof(size_t))
        self._values = <Py_ssize_t*>malloc(capacity * sizeof(Py_ssize_t))
        if self._keys == NULL or self._values == NULL:
            free(self._keys)
            free(self._values)
            self._keys, self._values = old_keys, old_values
            raise MemoryError()
        self._mask = capacity - 1
        self._count = 0
        for i in range(old_capacity):
            if old_keys[i]:
                self.put(old_keys[i], old_values[i])
        free(old_keys)
        free(old_values)
        return 0

    cdef inline size_t _slot(self, size_t key) noexcept:
        cdef size_t i = ((key >> 4) * <size_t>11400714819323198485ULL) & self._mask
        while self._keys[i] and self._keys[i] != key:
            i = (i + 1) & self._mask
        return i

    cdef int put(self, size_t key, Py_ssize_t value) except -1:
        """Adds ``key`` (or sets its number); returns 1 when it was there already."""
        cdef size_t i = self._slot(key)
        if self._keys[i]:
            self._values[i] = value
            return 1
        self._keys[i] = key
        self._values[i] = value
        self._count += 1
        if <size_t>self._count * 2 > self._mask:
            self._grow((self._mask + 1) * 2)
        return 0

    cdef inline Py_ssize_t get(self, size_t key) noexcept:
        """The key's number, or -1 when it is not in the set."""
        cdef size_t i = self._slot(key)
        return self._values[i] if self._keys[i] else -1

    def __len__(self):
        return self._count

    def __eq__(self, other):
        if not isinstance(other, NodeSet) or len(other) != self._count:
            return False
        cdef NodeSet that = other
        cdef size_t i
        for i in range(self._mask + 1):
            if self._keys[i] and that.get(self._keys[i]) < 0:
                return False
        return True

    __hash__ = None


cdef int _mark_ancestors(xmlNode* node, NodeSet needs) except -1:
    """Adds the element ancestors of ``node`` to ``needs`` (stops at one already there)."""
    node = node.parent
    while node != NULL and is_element(node):
        if needs.put(address(node), 0):
            return 0
        node = node.parent
    return 0


cdef inline bint _attribute_is(xmlNode* node, const char* name, const char* value):
    """Whether the no-namespace attribute ``name`` is ``value`` (``value`` "" asks for one
    that is present and not empty)."""
    cdef tree.xmlAttr* attr = node.properties
    cdef const char* text
    while attr != NULL:
        if attr.ns == NULL and strcmp(<const char*>attr.name, name) == 0:
            if attr.children != NULL and attr.children.next == NULL and (
                attr.children.type == tree.XML_TEXT_NODE and attr.children.content != NULL
            ):
                text = <const char*>attr.children.content
                return (text[0] != 0) if value[0] == 0 else strcmp(text, value) == 0
            found = attributeValueFromNsName(node, NULL, <const_xmlChar*>name)
            return bool(found) if value[0] == 0 else found == (<bytes>value).decode()
        attr = attr.next
    return False


def scan(_Element root):
    """``jats._python_scan`` in one C walk: the structure index, the figures and the figure
    references (``ref-type="fig"`` with a ``rid``) in document order."""
    cdef NodeSet needs = NodeSet()
    cdef list figs = [], xrefs = []
    cdef xmlNode* top = root._c_node
    cdef xmlNode* node = top.children
    cdef int kind
    while node != NULL:
        if is_element(node):
            if no_namespace(node):
                kind = kind_of(node)
                if kind & XREF:
                    if _attribute_is(node, b"ref-type", b"fig") and _attribute_is(
                        node, b"rid", b""
                    ):
                        xrefs.append(elementFactory(root._doc, node))
                elif kind & NESTED:
                    if kind & FIG:
                        figs.append(elementFactory(root._doc, node))
                    _mark_ancestors(node, needs)
            if node.children != NULL:
                node = node.children
                continue
        node = _next_in(node, top)
    return needs, figs, xrefs


cdef inline xmlNode* _next_in(xmlNode* node, xmlNode* top):
    """The next node in document order after ``node``'s subtree, within ``top``."""
    while node != NULL and node != top:
        if node.next != NULL:
            return node.next
        node = node.parent
    return NULL


cdef NodeSet _local_structure(xmlNode* top, list skip):
    """``text.structure_index`` of one subtree, with the ancestors of ``skip`` added."""
    cdef NodeSet needs = NodeSet()
    cdef xmlNode* node = top
    cdef _Element el
    while node != NULL:
        if is_element(node) and no_namespace(node) and kind_of(node) & NESTED:
            _mark_ancestors(node, needs)
        if node.children != NULL and (node == top or is_element(node)):
            node = node.children
            continue
        node = _next_in(node, top)
    for el in skip:
        _mark_ancestors(el._c_node, needs)
    return needs


# --- the output ------------------------------------------------------------------------------

cdef inline size_t _strlen(const unsigned char* s) noexcept:
    cdef size_t n = 0
    while s[n] != 0:
        n += 1
    return n


cdef struct Out:
    char* data
    size_t size
    size_t cap
    Py_ssize_t chars  # code points written (offsets in the Python string)
    bint space  # the last character written is a space, or nothing is written yet


# One output buffer kept between calls: a render asks malloc for nothing, where a buffer of its
# own (and its growth) was a large request each time, and glibc answers those by first
# consolidating the small blocks a freed tree leaves. A render that finds it lent (another
# thread's, while that one runs Python) takes one of its own. Past 4 MiB it is not kept.
cdef char* _spare = NULL
cdef size_t _spare_cap = 0
cdef bint _spare_lent = False
cdef size_t _SPARE_LIMIT = 4 << 20


cdef void _borrow(Out* out) noexcept:
    global _spare, _spare_cap, _spare_lent
    out.size, out.chars, out.space = 0, 0, True
    if _spare_lent:
        out.data, out.cap = NULL, 0
    else:
        out.data, out.cap = _spare, _spare_cap
        _spare, _spare_cap, _spare_lent = NULL, 0, True


cdef void _give_back(Out* out, bint lent) noexcept:
    global _spare, _spare_cap, _spare_lent
    if lent and out.cap <= _SPARE_LIMIT:
        _spare, _spare_cap, _spare_lent = out.data, out.cap, False
    else:
        free(out.data)
        if lent:
            _spare_lent = False
    out.data, out.cap = NULL, 0


cdef int _reserve(Out* out, size_t more) except -1:
    cdef size_t cap
    cdef char* data
    if out.size + more <= out.cap:
        return 0
    cap = out.cap * 2 if out.cap else 4096
    while cap < out.size + more:
        cap *= 2
    data = <char*>realloc(out.data, cap)
    if data == NULL:
        raise MemoryError()
    out.data, out.cap = data, cap
    return 0


cdef int _raw(Out* out, const char* text, size_t n) except -1:
    _reserve(out, n)
    memcpy(out.data + out.size, text, n)
    out.size += n
    return 0


cdef inline unsigned int _code_point(const unsigned char* s, size_t left, size_t* width) noexcept:
    """The code point that starts at ``s`` and its width in bytes; a sequence cut short by
    the end (``left`` bytes remain) reads as width ``left + 1``, which the caller stops at."""
    cdef unsigned char c = s[0]
    width[0] = 2 if c < 0xE0 else (3 if c < 0xF0 else 4)
    if width[0] > left:
        width[0] = left + 1
        return 0
    if c < 0xE0:
        return ((c & 0x1F) << 6) | (s[1] & 0x3F)
    if c < 0xF0:
        return ((c & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F)
    return ((c & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F)


cdef inline bint _odd_space(unsigned int cp) noexcept:
    """text._ODD_SPACES."""
    return (
        cp == 0xA0 or 0x2000 <= cp <= 0x200A or cp == 0x202F or cp == 0x205F or cp == 0x3000
        or cp == 0x1680 or cp == 0x2028 or cp == 0x2029 or cp == 0x85
    )


cdef inline bint _invisible(unsigned int cp) noexcept:
    """text._INVISIBLE."""
    return cp == 0x200B or 0x2060 <= cp <= 0x2064 or cp == 0xFEFF or cp == 0xAD


cdef int _normalised(Out* out, const unsigned char* s, bint marks) except -1:
    """Appends ``s`` with ``text.normalise_space``'s rules, a leading space dropped (what
    ``clean_text`` and the span rendering do), a trailing one kept until the end. Returns 1
    when ``marks`` is set and ``s`` holds a reference marker (dropped), else 0.

    The output never outgrows the input (a space or a character for each), so room is made
    once."""
    cdef size_t i = 0, start, width, n = _strlen(s)
    cdef int found = 0
    cdef unsigned char c
    cdef unsigned int cp
    _reserve(out, n)
    cdef char* data = out.data
    cdef size_t size = out.size
    cdef Py_ssize_t chars = out.chars
    cdef bint space = out.space
    while i < n:
        c = s[i]
        if 32 < c < 0x80:  # a run of plain ASCII, copied whole
            start = i
            i += 1
            while i < n and 32 < s[i] < 0x80:
                i += 1
            memcpy(data + size, s + start, i - start)
            size += i - start
            chars += i - start
            space = False
            continue
        if c < 0x80:
            if c == 32 or c == 10 or c == 9 or c == 13 or c == 11 or c == 12:
                if not space:
                    data[size] = 32
                    size += 1
                    chars += 1
                    space = True
            else:
                data[size] = c
                size += 1
                chars += 1
                space = False
            i += 1
            continue
        cp = _code_point(s + i, n - i, &width)
        if i + width > n:  # libxml2 and lxml give valid UTF-8; a cut sequence ends the text
            break
        if _odd_space(cp):
            if not space:
                data[size] = 32
                size += 1
                chars += 1
                space = True
        elif marks and (cp == 0xE000 or cp == 0xE001):
            found = 1
        elif not _invisible(cp):
            memcpy(data + size, s + i, width)
            size += width
            chars += 1
            space = False
        i += width
    out.size, out.chars, out.space = size, chars, space
    return found


cdef str _result(Out* out, bint strip):
    cdef size_t size = out.size
    if strip and size and out.data[size - 1] == 32:
        size -= 1
    if size == 0:
        return ""
    return PyUnicode_DecodeUTF8(out.data, size, NULL)


# --- rendering -------------------------------------------------------------------------------

cdef class _Renderer:
    """text._Renderer writing into one normalised buffer, with the spans of marked elements."""

    cdef Out out
    cdef NodeSet needs
    cdef NodeSet skip  # or None
    cdef NodeSet marks  # node -> its index in the marked list; or None
    cdef list opened
    cdef list spans
    cdef _Document doc
    cdef object tex
    cdef bint foreign  # the text holds the private-use characters that mark references
    cdef bint lent  # its buffer is the module's spare

    def __cinit__(self):
        self.lent = not _spare_lent
        _borrow(&self.out)

    def __dealloc__(self):
        _give_back(&self.out, self.lent)

    cdef int text(self, xmlNode* node) except -1:
        if node.content != NULL:
            if _normalised(&self.out, <const unsigned char*>node.content, self.marks is not None):
                self.foreign = True
        return 0

    cdef int space(self) except -1:
        if not self.out.space:
            _raw(&self.out, b" ", 1)
            self.out.chars += 1
            self.out.space = True
        return 0

    cdef int open(self, xmlNode* node) except -1:
        cdef Py_ssize_t index
        if self.marks is not None:
            index = self.marks.get(address(node))
            if index >= 0:
                self.opened[index] = self.out.chars
        return 0

    cdef int close(self, xmlNode* node) except -1:
        cdef Py_ssize_t index
        if self.marks is not None:
            index = self.marks.get(address(node))
            if index >= 0 and self.opened[index] is not None:
                self.spans[index] = (self.opened[index], self.out.chars)
        return 0

    cdef int plain(self, xmlNode* el) except -1:
        """Every text below ``el`` (lxml's text serialiser), marks kept."""
        cdef xmlNode* child = el.children
        while child != NULL:
            if child.type == tree.XML_TEXT_NODE or child.type == tree.XML_CDATA_SECTION_NODE:
                self.text(child)
            elif is_element(child):
                self.open(child)
                self.plain(child)
                self.close(child)
            child = child.next
        return 0

    cdef int tex_math(self, xmlNode* el) except -1:
        cdef bytes text = self.tex(elementFactory(self.doc, el)).encode()
        if text:
            _normalised(&self.out, <const unsigned char*><const char*>text, False)
        return 0

    cdef xmlNode* chosen(self, xmlNode* alternatives):
        """text._chosen_alternative."""
        cdef xmlNode* child = alternatives.children
        cdef xmlNode* tex = NULL
        cdef xmlNode* other = NULL
        cdef int kind
        while child != NULL:
            if is_element(child):
                if (
                    child.ns != NULL
                    and child.ns.href != NULL
                    and strcmp(<const char*>child.name, b"math") == 0
                    and strcmp(<const char*>child.ns.href, b"http://www.w3.org/1998/Math/MathML")
                    == 0
                ):
                    return child
                kind = kind_of(child)
                if kind & TEX_MATH:
                    if tex == NULL:
                        tex = child
                elif other == NULL and not kind & (GRAPHIC | FLOAT):
                    other = child
            child = child.next
        return tex if tex != NULL else other

    cdef int content(self, xmlNode* el) except -1:
        """text._Renderer.content: the element's text and its children's, not its tail."""
        cdef xmlNode* child
        cdef xmlNode* chosen
        cdef int kind
        self.open(el)
        if self.needs.get(address(el)) < 0 and not kind_of(el) & CONTAINER:
            return self.plain(el)
        child = el.children
        while child != NULL:
            if child.type == tree.XML_TEXT_NODE or child.type == tree.XML_CDATA_SECTION_NODE:
                self.text(child)
            elif is_element(child):
                kind = kind_of(child)
                if kind & FLOAT or (self.skip is not None and self.skip.get(address(child)) >= 0):
                    pass
                elif kind & SPACED:
                    self.space()
                    self.content(child)
                    self.space()
                elif kind & ALTERNATIVES:
                    chosen = self.chosen(child)
                    if chosen != NULL:
                        if kind_of(chosen) & TEX_MATH:
                            self.tex_math(chosen)
                        else:
                            self.content(chosen)
                elif kind & TEX_MATH:
                    self.tex_math(child)
                else:
                    self.content(child)
                self.close(child)
            child = child.next
        return 0


cdef _Renderer _renderer(_Element el, NodeSet needs, object skip):
    _take_constants()
    cdef _Renderer r = _Renderer()
    cdef _Element item
    r.doc = el._doc
    r.tex = _tex
    cdef list skipped = list(skip) if skip else []
    if skipped:
        r.skip = NodeSet()
        for item in skipped:
            r.skip.put(address(item._c_node), 0)
    r.needs = _local_structure(el._c_node, skipped) if needs is None else needs
    return r


def element_text(_Element el, skip=(), NodeSet needs=None):
    """``text.python_element_text``: the element's text as a reader sees it, normalised and
    stripped."""
    cdef _Renderer r
    if kind_of(el._c_node) & TEX_MATH:
        from ray_jobs.pmc.text import clean_text

        _take_constants()
        return clean_text(_tex(el))
    r = _renderer(el, needs, skip)
    r.content(el._c_node)
    return _result(&r.out, True)


def text_with_spans(_Element block, marked, NodeSet needs=None):
    """``text.python_text_with_spans``: the block's text and each marked element's span in it
    (None where its text is not part of the block's).

    A block where a marked element is not rendered whole (inside a float, an unchosen
    alternative or a formula's TeX), or whose text holds the marker characters, is left to
    the Python walk: its rules for those cases are what the spans must follow, and real
    articles hardly ever take that path."""
    cdef _Renderer r = _renderer(block, needs, ())
    cdef Py_ssize_t i, n = len(marked)
    r.marks = NodeSet()
    for i in range(n):
        r.marks.put(address((<_Element>marked[i])._c_node), i)
    r.opened = [None] * n
    r.spans = [None] * n
    r.content(block._c_node)
    if r.foreign or None in r.spans:
        return _python_text_with_spans(block, marked)
    return _result(&r.out, True), r.spans


def separated_text(_Element scope):
    """``jats._separated_text``: every text below ``scope`` as lxml's text serialiser gives
    it, with U+2029 after each of ``jats._SEPARATED_BLOCKS`` (no namespace)."""
    cdef Out out
    cdef bint lent = not _spare_lent
    _borrow(&out)
    cdef xmlNode* top = scope._c_node
    cdef xmlNode* node = top.children
    cdef xmlNode* up
    try:
        while node != NULL:
            if node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE:
                if node.content != NULL:
                    _raw(&out, <const char*>node.content, _strlen(node.content))
            elif is_element(node) and node.children != NULL:
                node = node.children
                continue
            elif is_element(node) and no_namespace(node) and kind_of(node) & SEPARATED:
                _raw(&out, b"\xe2\x80\xa9", 3)
            # leaving this node's subtree: close each element left on the way up
            while node != NULL and node != top:
                if node.next != NULL:
                    node = node.next
                    break
                up = node.parent
                if up != top and no_namespace(up) and kind_of(up) & SEPARATED:
                    _raw(&out, b"\xe2\x80\xa9", 3)
                node = up
            else:
                node = NULL
        return PyUnicode_DecodeUTF8(out.data, out.size, NULL) if out.size else ""
    finally:
        _give_back(&out, lent)




def structure_index(_Element root):
    """``text.structure_index``, as node addresses (what the other walks here take)."""
    return _local_structure(root._c_node, [])


# --- sentences -------------------------------------------------------------------------------

cdef frozenset _ABBREVIATIONS, _BEFORE_NUMBER, _NAME_LINKS
cdef str _OPENERS, _BRACKETING
cdef object _tex, _python_text_with_spans


cdef int _take_constants() except -1:
    """What this module takes from text and sentences, read once (text imports this module at
    its end)."""
    global _ABBREVIATIONS, _BEFORE_NUMBER, _NAME_LINKS, _OPENERS, _BRACKETING, _tex
    global _python_text_with_spans
    if _ABBREVIATIONS is None:
        from ray_jobs.pmc import sentences, text

        _BEFORE_NUMBER, _NAME_LINKS = sentences._BEFORE_NUMBER, sentences._NAME_LINKS
        _OPENERS, _BRACKETING = sentences._OPENERS, sentences._BRACKETING
        _tex, _python_text_with_spans = text._tex, text.python_text_with_spans
        _ABBREVIATIONS = sentences._ABBREVIATIONS
    return 0


cdef bint _is_initial(str text, Py_ssize_t start, str token, str next_char) except -1:
    """sentences._is_initial."""
    if len(token) != 1 or not token.isupper() or not next_char.isalpha():
        return False
    cdef str before = text[max(0, start - 40) : start].rstrip()
    cdef str prev = before[before.rfind(" ") + 1 :]
    if not prev or prev in _NAME_LINKS:
        return True
    if prev.endswith("."):
        core = prev[:-1]
        return (len(core) == 1 and core.isupper()) or core.lower() in _ABBREVIATIONS
    return len(prev) > 1 and prev[0].isupper() and prev.isalpha()


cdef bint _is_boundary(str text, Py_ssize_t pos, Py_ssize_t end) except -1:
    """sentences._is_boundary."""
    if text[pos] != ".":
        return True
    cdef Py_ssize_t start = text.rfind(" ", max(0, pos - 40), pos) + 1
    cdef str token = text[start:pos]
    cdef str bare = token.strip(_BRACKETING)
    if not bare:
        return True
    cdef str low = bare.lower()
    if low in _ABBREVIATIONS:
        return False
    cdef str next_char = text[end : end + 1]
    if next_char and next_char in _OPENERS:
        next_char = text[end + 1 : end + 2]
    if low in _BEFORE_NUMBER:
        return not next_char.isdigit()
    if "." in bare and all(len(p) == 1 and p.isalpha() for p in bare.split(".")):
        return False
    if bare != token:
        return True
    return not _is_initial(text, start, bare, next_char)


cdef inline bint _closer(Py_UCS4 c) noexcept:
    return c == u'"' or c == u"'" or c == u"”" or c == u"’" or c == u")" or c == u"]"


cdef inline bint _opener(Py_UCS4 c) noexcept:
    return c == u'"' or c == u"'" or c == u"“" or c == u"‘" or c == u"(" or c == u"["


cdef inline bint _capital_or_digit(Py_UCS4 c) noexcept:
    return (u"A" <= c <= u"Z") or (u"0" <= c <= u"9")


cdef Py_ssize_t _bracket_change(
    unsigned int kind, void* data, Py_ssize_t lo, Py_ssize_t hi, bint square
) noexcept:
    """Openers less closers in ``[lo, hi)``: "(" and ")", and "[" and "]" when ``square``."""
    cdef Py_ssize_t i, change = 0
    cdef Py_UCS4 c
    for i in range(lo, hi):
        c = PyUnicode_READ(kind, data, i)
        change += (c == 40) - (c == 41)
        if square:
            change += (c == 91) - (c == 93)
    return change


cdef Py_ssize_t _bisect_right(Py_ssize_t* values, Py_ssize_t n, Py_ssize_t x) noexcept:
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if x < values[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef class Sentences:
    """``text.Sentences``: the sentence-end candidates are found by one C scan (what
    ``sentences._BOUNDARY`` or ``sentences._PERIOD_BOUNDARY`` match), and judged lazily, each once."""

    cdef str _text
    cdef Py_ssize_t _count, _guards, _floor
    cdef Py_ssize_t* _depths  # openers less closers before each candidate
    cdef Py_ssize_t* _starts
    cdef Py_ssize_t* _ends
    cdef signed char* _verdicts
    cdef Py_ssize_t* _guard_starts
    cdef Py_ssize_t* _guard_reach
    cdef bint _square, _brackets
    cdef object _last
    # candidates looked at and characters counted by the lookups: an operation count that
    # tests read to see the work stay linear (the Python class's calls are counted instead)
    cdef readonly Py_ssize_t steps

    def __cinit__(self):
        self._starts = self._ends = self._guard_starts = self._guard_reach = NULL
        self._depths = NULL
        self._verdicts = NULL

    def __dealloc__(self):
        free(self._starts)
        free(self._ends)
        free(self._depths)
        free(self._verdicts)
        free(self._guard_starts)
        free(self._guard_reach)

    def __init__(self, str text, protected=()):
        _take_constants()
        self._text = text
        self._floor = self.steps = 0
        self._last = None
        self._square = "[" in text or "]" in text
        self._brackets = "(" in text or self._square
        cdef list guarded = sorted(s for s in protected if s is not None and s[1] > s[0])
        cdef Py_ssize_t n = len(text), i = 0, j, k, count = 0, cap = 16, reach = -1
        self._guards = len(guarded)
        self._guard_starts = <Py_ssize_t*>malloc((self._guards + 1) * sizeof(Py_ssize_t))
        self._guard_reach = <Py_ssize_t*>malloc((self._guards + 1) * sizeof(Py_ssize_t))
        self._starts = <Py_ssize_t*>malloc(cap * sizeof(Py_ssize_t))
        self._ends = <Py_ssize_t*>malloc(cap * sizeof(Py_ssize_t))
        if (
            self._guard_starts == NULL or self._guard_reach == NULL or self._starts == NULL
            or self._ends == NULL
        ):
            raise MemoryError()
        for i in range(self._guards):
            self._guard_starts[i] = guarded[i][0]
            reach = max(reach, <Py_ssize_t>guarded[i][1])
            self._guard_reach[i] = reach
        cdef unsigned int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef bint every = "?" in text or "!" in text  # else only "." starts a candidate
        cdef Py_UCS4 c
        i = 0
        while i < n:
            if not every:  # the next period, by CPython's fast search
                i = PyUnicode_FindChar(text, u".", i, n, 1)
                if i < 0:
                    break
            c = PyUnicode_READ(kind, data, i)
            if c == u"." or (every and (c == u"?" or c == u"!")):
                j = i + 1
                if every:
                    while j < n and PyUnicode_READ(kind, data, j) in u".!?":
                        j += 1
                while j < n and _closer(PyUnicode_READ(kind, data, j)):
                    j += 1
                if j < n and PyUnicode_READ(kind, data, j) == u" ":
                    k = j + 1
                    if k < n and (
                        _capital_or_digit(PyUnicode_READ(kind, data, k))
                        or (
                            _opener(PyUnicode_READ(kind, data, k))
                            and k + 1 < n
                            and _capital_or_digit(PyUnicode_READ(kind, data, k + 1))
                        )
                    ):
                        if count == cap:
                            cap *= 2
                            self._starts = <Py_ssize_t*>_grown(self._starts, cap)
                            self._ends = <Py_ssize_t*>_grown(self._ends, cap)
                        self._starts[count] = i
                        self._ends[count] = k
                        count += 1
                        i = k
                        continue
            i += 1
        self._count = count
        self._verdicts = <signed char*>malloc(count + 1)
        self._depths = <Py_ssize_t*>malloc((count + 1) * sizeof(Py_ssize_t))
        if self._verdicts == NULL or self._depths == NULL:
            raise MemoryError()
        cdef Py_ssize_t depth = 0, at = 0
        for i in range(count):
            self._verdicts[i] = -1
            if self._brackets:  # the bracket depth at each candidate, in one forward count
                depth += _bracket_change(kind, data, at, self._starts[i], self._square)
                self.steps += self._starts[i] - at
                at = self._starts[i]
            self._depths[i] = depth

    cdef bint _accepted(self, Py_ssize_t i) except -1:
        cdef Py_ssize_t pos, g
        if self._verdicts[i] < 0:
            pos = self._starts[i]
            g = _bisect_right(self._guard_starts, self._guards, pos) - 1
            if g >= 0 and pos < self._guard_reach[g]:
                self._verdicts[i] = 0
            elif not _is_boundary(self._text, pos, self._ends[i]):
                self._verdicts[i] = 0
            else:
                self._verdicts[i] = not self._brackets or self._depths[i] <= 0
        return self._verdicts[i]

    def at(self, Py_ssize_t offset):
        """The sentence holding ``offset`` (offsets in increasing order are linear)."""
        cdef Py_ssize_t i, start, end
        last = self._last
        if last is not None and last[0] <= offset < last[1]:
            return last[2]
        if last is not None and offset >= last[1]:
            self._floor = last[1]
        elif offset < self._floor:
            self._floor = 0
        start = self._floor
        i = _bisect_right(self._ends, self._count, offset) - 1
        while i >= 0 and self._starts[i] >= self._floor:
            self.steps += 1
            if self._accepted(i):
                start = self._ends[i]
                break
            i -= 1
        end = len(self._text)
        for i in range(_bisect_right(self._ends, self._count, offset), self._count):
            self.steps += 1
            if self._starts[i] >= self._floor and self._accepted(i):
                end = self._ends[i]
                break
        sentence = self._text[start:end].strip()
        self._last = (start, end, sentence)
        return sentence


cdef void* _grown(void* block, Py_ssize_t count) except NULL:
    cdef void* grown = realloc(block, count * sizeof(Py_ssize_t))
    if grown == NULL:
        raise MemoryError()
    return grown


# --- acronyms --------------------------------------------------------------------------------
# acronyms.py's matcher, the same steps with typed locals and C calls between them. A character
# taken from a str here is a C code point, so where the Python lower-cases one character (which
# can give two) this takes a one-character slice instead.

cdef object _DEFINED, _CITATION_TAIL, _CITATION_REST, _ADDRESS_REST, _DIGITS, _WORDS
cdef object _TOKEN_BREAKS
cdef frozenset _UNITS, _BRACKETS
cdef str _BLOCK_END


cdef int _take_acronym_constants() except -1:
    global _DEFINED, _CITATION_TAIL, _CITATION_REST, _ADDRESS_REST, _DIGITS, _WORDS
    global _TOKEN_BREAKS, _UNITS, _BRACKETS, _BLOCK_END
    if _DEFINED is None:
        from ray_jobs.pmc import acronyms as a

        _CITATION_TAIL, _CITATION_REST, _ADDRESS_REST = (
            a._CITATION_TAIL, a._CITATION_REST, a._ADDRESS_REST
        )
        _DIGITS, _WORDS, _TOKEN_BREAKS = a._DIGITS, a._WORDS, a._TOKEN_BREAKS
        _UNITS, _BRACKETS, _BLOCK_END = a._UNITS, a._BRACKETS, a.BLOCK_END
        _DEFINED = a._DEFINED
    return 0


cdef inline bint _name_like(str short):
    return short.isalpha() and short[0].isupper() and short[1:].islower()


cdef bint _not_a_definition(str short, str rest):
    if short in _UNITS:
        return True
    if not rest or not _name_like(short):
        return False
    return bool(_CITATION_REST.search(rest) or _ADDRESS_REST.match(rest))


cdef str _candidate_words(str text_before, str short):
    cdef str text = (
        _CITATION_TAIL.sub("", text_before) if "]" in text_before[-8:] else text_before
    )
    cdef Py_ssize_t cut = max(
        text.rfind("("), text.rfind(")"), text.rfind("["), text.rfind("]"), text.rfind("{"),
        text.rfind("}"), text.rfind(". "), text.rfind("; "), text.rfind(": "),
        text.rfind(_BLOCK_END),
    )
    cdef list words = text[cut + 1 :].split()
    return " ".join(words[-min(len(short) + 5, len(short) * 2) :]).rstrip(",;:")


cdef object _initials_long_form(str short, str candidate):
    cdef str low = short.lower()
    cdef str letters = low if low.isalpha() else "".join([c for c in low if c.isalpha()])
    cdef list words = candidate.split()
    cdef str initials = "", parts = "", word, first
    cdef Py_ssize_t take
    for take in range(1, min(len(words), len(letters)) + 1):
        word = words[-take]
        first = word[:1].lower()
        initials = first + initials
        if "-" in word:
            parts = "".join([p[0] for p in word.split("-") if p and p[0].isalpha()]).lower() + parts
        elif word[0].isalpha():
            parts = first + parts
        if initials == letters or parts == letters:
            return " ".join(words[-take:])
        if not (letters.endswith(initials) or letters.endswith(parts)):
            return None
    return None


cdef object _best_long_form(str short, str candidate):
    cdef str low = candidate.lower(), c, long_form
    cdef Py_ssize_t i = len(low) - 1, s, start
    cdef list matched = []
    for s in range(len(short) - 1, -1, -1):
        c = short[s : s + 1].lower()
        if not c.isalnum():
            continue
        i = low.rfind(c, 0, i + 1)
        while s == 0 and i > 0 and low[i - 1].isalnum():
            i = low.rfind(c, 0, i)
        if i < 0:
            return None
        matched.append(i)
        i -= 1
    start = candidate.rfind(" ", 0, i + 1) + 1
    long_form = candidate[start:].strip()
    if len(long_form) <= len(short) or short.lower() in long_form.lower().split():
        return None
    hit = {candidate.rfind(" ", 0, j) for j in matched}
    if len(candidate[start:].split()) - len(hit) > max(2, len(matched) - 1):
        return None
    return long_form


cdef bint _plausible(str short, str long_form):
    if _BRACKETS.intersection(long_form):
        return False
    cdef Py_ssize_t capitals = sum([1 for c in short if c.isupper()])
    if capitals <= 2:
        return True
    cdef Py_ssize_t tokens = len(_TOKEN_BREAKS.split(long_form.strip()))
    return tokens >= capitals - 1 or (tokens == 1 and len(long_form) >= 3 * len(short))


cdef bint _acceptable(str short, str long_form):
    if short.lower() in _WORDS.findall(long_form.lower()):
        return False
    if short in long_form and sum([1 for c in short if c.isupper()]) >= 2:
        return False
    cdef list digits = _DIGITS.findall(short), needed
    cdef Py_ssize_t letters
    if digits:
        letters = sum([1 for c in short if c.isalpha()])
        tail = _DIGITS.search(short + "\x00", len(short.rstrip("0123456789")))
        relaxed = letters >= 2 and tail is not None and len(tail.group()) <= 2
        needed = digits[:-1] if relaxed and short[-1].isdigit() else digits
        for d in needed:
            if d not in long_form:
                return False
    if _name_like(short):
        return len(short) <= 4 and len(long_form.split()) <= 2
    return True


cdef object _long_form_for(str short, str candidate):
    found = _initials_long_form(short, candidate) or _best_long_form(short, candidate)
    if not found:
        return None
    found = " ".join(found.split())
    return found if _plausible(short, found) and _acceptable(short, found) else None


cdef inline bint _ascii_alnum(Py_UCS4 c) noexcept:
    return (u"a" <= c <= u"z") or (u"A" <= c <= u"Z") or (u"0" <= c <= u"9")


cdef inline bint _token_char(Py_UCS4 c) noexcept:
    """``[\\w\\-/+.&]`` (re's \\w: alphanumeric or the underscore)."""
    if c < 128:
        return _ascii_alnum(c) or c == u"_" or c == u"-" or c == u"/" or c == u"+" or (
            c == u"." or c == u"&"
        )
    return Py_UNICODE_ISALNUM(c)


cdef inline bint _capital_like(Py_UCS4 c) noexcept:
    """``[^\\W\\d_a-z]``: a word character that is not a digit, the underscore or a-z."""
    if c < 128:
        return u"A" <= c <= u"Z"
    return Py_UNICODE_ISALNUM(c) and not Py_UNICODE_ISDECIMAL(c)


cdef Py_ssize_t _defined_at(str text, Py_ssize_t p, Py_ssize_t n, Py_ssize_t* short_end) noexcept:
    """``acronyms._DEFINED`` matched at the parenthesis at ``p``: the match's end (and the short
    form's in ``short_end``), or -1. The pattern has one way to match at each position, so
    this follows it without backtracking: a run of 2 to 10 short-form characters, the first
    alphanumeric, a capital-like one among them, then ")" or "; ..." / ", ..." and ")" within
    110 characters holding no parenthesis."""
    cdef unsigned int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t q = p + 1, run, r, limit
    cdef bint capital = False
    cdef Py_UCS4 c
    if q >= n:
        return -1
    c = PyUnicode_READ(kind, data, q)
    if not (_ascii_alnum(c) if c < 128 else Py_UNICODE_ISALNUM(c)):  # [^\\W_]
        return -1
    while q < n and q - p <= 10:
        c = PyUnicode_READ(kind, data, q)
        if not _token_char(c):
            break
        capital = capital or _capital_like(c)
        q += 1
    run = q - p - 1
    if run < 2 or run > 10 or not capital or q >= n:
        return -1
    c = PyUnicode_READ(kind, data, q)
    if q < n and _token_char(c):  # the run goes on past ten characters
        return -1
    short_end[0] = q
    if c == u")":
        return q + 1
    if c != u";" and c != u",":
        return -1
    r = q + 1
    limit = min(n, r + 110)
    while r < limit:
        c = PyUnicode_READ(kind, data, r)
        if c == u"(" or c == u")":
            break
        r += 1
    if r < n and PyUnicode_READ(kind, data, r) == u")":
        return r + 1
    return -1


def find_definitions(str text):
    """``acronyms.python_find_definitions``: in-text definitions, short form -> long form.
    The candidates (``acronyms._DEFINED``) are found by a C scan between the parentheses."""
    _take_acronym_constants()
    cdef dict found = {}
    cdef set tried = set()
    cdef str short, before
    cdef Py_ssize_t start = 0, end, short_end, n = len(text)
    while True:
        start = PyUnicode_FindChar(text, u"(", start, n, 1)
        if start < 0:
            break
        end = _defined_at(text, start, n, &short_end)
        if end < 0:
            start += 1
            continue
        short = text[start + 1 : short_end]
        if not start or not text[start - 1].isspace() or short in tried:
            start = end
            continue
        tried.add(short)
        if short.lower() == short or (_name_like(short) and len(short) > 4) or (
            _not_a_definition(short, text[short_end : end - 1])
        ):
            start = end
            continue
        before = _candidate_words(text[max(0, start - 200) : start], short)
        if before and " " + short[:1].lower() in " " + before.lower().replace("-", " "):
            long_form = _long_form_for(short, before)
            if long_form:
                found[short] = long_form
        start = end
    return found


def definition_candidates(str text):
    """(start, short form, end) of each ``acronyms._DEFINED`` match, as the scan above finds
    them: what the tests compare with the regular expression."""
    cdef list out = []
    cdef Py_ssize_t start = 0, end, short_end, n = len(text)
    while True:
        start = PyUnicode_FindChar(text, u"(", start, n, 1)
        if start < 0:
            return out
        end = _defined_at(text, start, n, &short_end)
        if end < 0:
            start += 1
        else:
            out.append((start, text[start + 1 : short_end], end))
            start = end


# --- mentions --------------------------------------------------------------------------------

cdef object _Mention, _panel_letters, _letter_tail, _element_text_of


cdef int _take_jats() except -1:
    global _Mention, _panel_letters, _letter_tail, _element_text_of
    if _Mention is None:
        from ray_jobs.pmc import jats, records

        _panel_letters, _letter_tail, _element_text_of = (
            jats.panel_letters, jats._letter_tail, jats._text
        )
        _Mention = records.Mention
    return 0


cdef xmlNode* _mention_block(xmlNode* xref) noexcept:
    """jats._mention_block."""
    cdef xmlNode* node = xref.parent
    while node != NULL and is_element(node):
        if no_namespace(node) and kind_of(node) & MENTION:
            return node
        node = node.parent
    return xref


def mentions(list xrefs, fig_numbers, NodeSet needs):
    """``jats._python_mentions`` (after its cap): figure id -> mentions, each block rendered
    once with its references marked and its sentences found by one scan."""
    _take_constants()
    _take_jats()
    cdef NodeSet block_of = NodeSet()  # a reference's parent -> its block
    cdef dict by_block = {}  # block address -> [block, references]
    cdef dict out = {}
    cdef _Element xref
    cdef xmlNode* block
    cdef Py_ssize_t known
    cdef list group, found
    cdef str paragraph, ref_text, sentence
    for xref in xrefs:
        known = block_of.get(address(xref._c_node.parent))
        if known < 0:
            block = _mention_block(xref._c_node)
            block_of.put(address(xref._c_node.parent), <Py_ssize_t>block)
        else:
            block = <xmlNode*>known
        entry = by_block.get(address(block))
        if entry is None:
            by_block[address(block)] = [
                xref if block == xref._c_node else elementFactory(xref._doc, block), [xref]
            ]
        else:
            (<list>(<list>entry)[1]).append(xref)
    for block_el, group in by_block.values():
        paragraph, spans = text_with_spans(block_el, group, needs)
        sentences = Sentences(paragraph, spans)
        for xref, span in zip(group, spans):
            if span is not None and span[1] > span[0]:
                ref_text = paragraph[<Py_ssize_t>span[0] : <Py_ssize_t>span[1]].strip()
                sentence = (<Sentences>sentences).at(span[0])
            else:
                ref_text, sentence = _element_text_of(xref, needs), paragraph
            for rid in xref.get("rid", "").split():
                if rid not in fig_numbers:
                    continue
                tail = xref.tail
                # jats._letter_tail reads letters only where the tail starts with one
                glued = tail and tail[0] < u"\x80" and tail[0].isalpha()
                panels = _panel_letters(
                    ref_text + _letter_tail(tail) if glued else ref_text, fig_numbers[rid]
                )
                mention = _Mention(
                    rid=rid, text=ref_text, sentence=sentence, paragraph=paragraph, panels=panels
                )
                found = out.get(rid)
                if found is None:
                    out[rid] = [mention]
                else:
                    found.append(mention)
    return out


def tag_table():
    """Tag name -> the names of its kinds: the tests compare it with the tag sets of text and
    jats, which it copies."""
    cdef dict labels = {
        BLOCK: "block", FLOAT: "float", SPACED: "spaced", CONTAINER: "container",
        NESTED: "nested", ALTERNATIVES: "alternatives", TEX_MATH: "tex-math",
        GRAPHIC: "graphic", SEPARATED: "separated", FIG: "fig", XREF: "xref", MENTION: "mention",
    }
    return {
        (<bytes>name).decode(): {label for flag, label in labels.items() if kind & flag}
        for name, kind in _KINDS.items()
    }


def bold_labels(_Element caption, NodeSet needs):
    """``jats._bold_labels``: the short bold runs (``bold``, ``b``) of a caption, each once."""
    _take_constants()
    cdef dict runs = {}
    cdef xmlNode* top = caption._c_node
    cdef xmlNode* node = top
    cdef _Renderer r
    cdef str run
    while node != NULL:
        if is_element(node):
            if no_namespace(node) and (
                strcmp(<const char*>node.name, b"bold") == 0
                or strcmp(<const char*>node.name, b"b") == 0
            ):
                r = _Renderer()
                r.doc, r.tex = caption._doc, _tex
                r.needs = _local_structure(node, []) if needs is None else needs
                r.content(node)
                run = _result(&r.out, True).strip("().:, ")
                r = None  # its buffer back to the spare before the next
                if run and len(run) <= 4:
                    runs[run] = None
            if node.children != NULL:
                node = node.children
                continue
        node = _next_in(node, top)
    return list(runs)


# --- figures ---------------------------------------------------------------------------------

cdef object _Figure, _DOI_ONLY, _resolve_image


cdef int _take_figures() except -1:
    global _Figure, _DOI_ONLY, _resolve_image
    if _Figure is None:
        from ray_jobs.pmc import jats, records

        _DOI_ONLY, _resolve_image = jats._DOI_ONLY, jats.resolve_image
        _Figure = records.Figure
    return 0


cdef inline bint _named(xmlNode* node, const char* name) noexcept:
    """An element ``name`` in no namespace (what lxml's ``tag == name`` asks)."""
    return is_element(node) and node.ns == NULL and strcmp(<const char*>node.name, name) == 0


cdef str _node_text(_Document doc, xmlNode* node, NodeSet needs):
    """``jats._text`` of a node: its text as a reader sees it, normalised ("" for none)."""
    if node == NULL:
        return ""
    cdef _Renderer r = _Renderer()
    r.doc, r.tex = doc, _tex
    r.needs = _local_structure(node, []) if needs is None else needs
    r.content(node)
    return _result(&r.out, True)


cdef bint _doi_only(xmlNode* p) except -1:
    """``jats._doi_paragraphs``' test of one caption paragraph: three children at most (as
    lxml counts them) and its text, under 200 characters, only a DOI."""
    cdef Py_ssize_t children = 0
    cdef xmlNode* child = p.children
    cdef Out out
    cdef bint lent = not _spare_lent
    while child != NULL:
        if child.type in (
            tree.XML_ELEMENT_NODE, tree.XML_COMMENT_NODE, tree.XML_PI_NODE,
            tree.XML_ENTITY_REF_NODE,
        ):
            children += 1
        child = child.next
    if children > 3:
        return False
    _borrow(&out)
    try:
        _plain(&out, p)
        if out.size >= 800:  # 200 characters take at most 800 bytes
            return False
        text = PyUnicode_DecodeUTF8(out.data, out.size, NULL) if out.size else ""
        return len(text) < 200 and "10." in text and _DOI_ONLY.match(text) is not None
    finally:
        _give_back(&out, lent)


cdef int _plain(Out* out, xmlNode* el) except -1:
    """Every text below ``el``, as it is (lxml's text serialiser)."""
    cdef xmlNode* child = el.children
    while child != NULL:
        if child.type == tree.XML_TEXT_NODE or child.type == tree.XML_CDATA_SECTION_NODE:
            if child.content != NULL:
                _raw(out, <const char*>child.content, _strlen(child.content))
        elif is_element(child):
            _plain(out, child)
        child = child.next
    return 0


def figures(list figs, media, NodeSet needs):
    """``jats._python_figures``: a Figure for each ``<fig>``."""
    _take_constants()
    _take_figures()
    cdef list out = []
    cdef _Element fig, skipped
    cdef xmlNode* node
    cdef xmlNode* label
    cdef xmlNode* caption
    cdef xmlNode* title
    cdef list hrefs, skip
    for fig in figs:
        fig_id = fig.get("id") or f"fig{len(out) + 1}"
        label = caption = title = NULL
        node = fig._c_node.children
        while node != NULL:
            if label == NULL and _named(node, b"label"):
                label = node
            elif caption == NULL and _named(node, b"caption"):
                caption = node
            node = node.next
        if caption != NULL:
            node = caption.children
            while node != NULL:
                if _named(node, b"title"):
                    title = node
                    break
                node = node.next
        hrefs = []
        node = fig._c_node.children
        while node != NULL:  # fig.iter("graphic"): the descendants, in document order
            if _named(node, b"graphic"):
                href = attributeValueFromNsName(
                    node, <const_xmlChar*>b"http://www.w3.org/1999/xlink", <const_xmlChar*>b"href"
                )
                if href:
                    hrefs.append(href)
            if is_element(node) and node.children != NULL:
                node = node.children
                continue
            node = _next_in(node, fig._c_node)
        skip = []
        caption_text = ""
        bold = []
        if caption != NULL:
            node = caption.children
            while node != NULL:
                if _named(node, b"p") and _doi_only(node):
                    skip.append(elementFactory(fig._doc, node))
                node = node.next
            caption_el = elementFactory(fig._doc, caption)
            caption_text = element_text(caption_el, skip, needs)
            bold = bold_labels(caption_el, needs)
        out.append(
            _Figure(
                id=fig_id,
                label=_node_text(fig._doc, label, needs) or None,
                title=_node_text(fig._doc, title, needs) if caption != NULL else None,
                caption=caption_text,
                graphics=hrefs,
                image=_resolve_image(hrefs, media) if media and hrefs else None,
                bold_labels=bold,
            )
        )
    return out
