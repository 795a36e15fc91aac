"""JATS XML → :class:`Article`: metadata, license, abstract, figures, mentions, acronyms.

Written against JATS 1.x and the NLM 2.x archiving DTDs that PMC still serves. Compared with
pubmed_parser it keeps every block of a caption (title, paragraphs, list items), never glues
words at tag boundaries, resolves ``<fig-group>`` children and ``<alternatives>`` graphics, and
ties each figure reference to its sentence and the panel letters it names.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any

from lxml import etree

from ray_jobs.contract.failures import StageError
from ray_jobs.pmc import licenses
from ray_jobs.pmc.acronyms import BLOCK_END, find_definitions, merge_acronyms
from ray_jobs.pmc.figure_refs import figure_number, panel_letters
from ray_jobs.pmc.records import Article, ArticlePackage, Figure, License, Mention
from ray_jobs.pmc.safexml import parse_xml
from ray_jobs.pmc.text import (
    BLOCK_TAGS,
    C_WALKS,
    FLOAT_TAGS,
    NESTED_TAGS,
    Sentences,
    clean_text,
    element_text,
    text_with_spans,
)

XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
ALI_NS = "http://www.niso.org/schemas/ali/1.0/"
STAGE = "parse"
# PMC packages carry web images next to the originals; try these when a graphic href has no
# extension, or names one the package does not hold (a .tif converted to .jpg).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".tif", ".tiff", ".bmp", ".eps")
_MENTION_BLOCKS = BLOCK_TAGS - {"list", "sec", "caption", "tr", "list-item", "def-item"}
# a reference inside a float's caption belongs to the caption, never to the paragraph around it
_MENTION_STOPS = FLOAT_TAGS | {"caption"}
_SCAN_TAGS = tuple(sorted(set(NESTED_TAGS) | {"xref"}))
# far above any real article (the largest seen hold a few hundred figure references); beyond it
# an article is refused with a failure row rather than stored with that many mention records
MAX_FIGURE_REFS = 20_000
_PUB_DATE_ORDER = ("epub", "ppub", "pub", "epub-ppub", "collection", "ecorrected")


def _all(el: etree._Element | None, path: str) -> list[etree._Element]:
    """The elements at a path of child steps ("front/article-meta"), in document order: what
    ElementPath's ``findall`` gives, without its per-call cost (several microseconds a call,
    a few per cent of a small article's parse)."""
    nodes = [el] if el is not None else []
    for tag in _steps(path):
        nodes = [child for node in nodes for child in node.iterchildren(tag)]
    return nodes


@lru_cache(maxsize=64)
def _steps(path: str) -> tuple[str, ...]:
    """A path's steps; a step may be "{namespace}name", whose URI holds slashes."""
    return tuple(re.findall(r"\{[^}]*\}[^/]+|[^/]+", path))


def _first(el: etree._Element | None, path: str) -> etree._Element | None:
    """The first element at a path of child steps (ElementPath's ``find``), or None."""
    steps = _steps(path)
    if el is not None and len(steps) == 1:
        return next(el.iterchildren(steps[0]), None)
    found = _all(el, path)
    return found[0] if found else None


def _descendant(el: etree._Element | None, tag: str) -> etree._Element | None:
    """The first descendant ``tag`` (ElementPath's ``find(".//tag")``), or None."""
    return next(el.iterdescendants(tag), None) if el is not None else None


def _text(el: etree._Element | None, needs: Collection[etree._Element] | None = None) -> str:
    """An element's text; ``needs`` is the tree's :func:`structure_index` (saves a pass)."""
    if el is None:
        return ""
    if not len(el):
        return clean_text(el.text) if el.text else ""
    return element_text(el, (), needs)


def _article_ids(meta: etree._Element | None) -> dict[str, str]:
    ids: dict[str, str] = {}
    if meta is None:
        return ids
    for el in meta.iterchildren("article-id"):
        kind = (el.get("pub-id-type") or "").lower()
        value = (el.text or "").strip()
        if value and kind not in ids:
            ids[kind] = value
    return ids


def _normalise_pmcid(value: str | None) -> str | None:
    if not value:
        return None
    digits = re.sub(r"^PMC", "", value.strip(), flags=re.I)
    return f"PMC{digits}" if digits.isdigit() else None


def _year(meta: etree._Element | None) -> int | None:
    if meta is None:
        return None
    dates = meta.iterchildren("pub-date")
    ranked: list[tuple[int, int]] = []
    for el in dates:
        kind = el.get("pub-type") or el.get("date-type") or ""
        if el.get("publication-format") == "electronic" and kind in ("pub", ""):
            kind = "epub"
        year_el = _first(el, "year")
        if year_el is None or not (year_el.text or "").strip()[:4].isdigit():
            continue
        rank = _PUB_DATE_ORDER.index(kind) if kind in _PUB_DATE_ORDER else len(_PUB_DATE_ORDER)
        ranked.append((rank, int(year_el.text.strip()[:4])))
    return min(ranked)[1] if ranked else None


def _license(meta: etree._Element | None, metadata: Mapping[str, Any] | None) -> License:
    url: str | None = None
    text: str | None = None
    code: str | None = None
    lic = _first(meta, "permissions/license")
    if lic is not None:
        ali = _first(lic, f"{{{ALI_NS}}}license_ref")
        if ali is None:
            ali = _first(meta, f"permissions/{{{ALI_NS}}}license_ref")
        url = (ali.text or "").strip() if ali is not None else None
        url = url or lic.get(XLINK_HREF)
        if not url:
            for link in lic.iter("ext-link", "uri"):
                href = link.get(XLINK_HREF) or (link.text or "")
                if "creativecommons.org" in href:
                    url = href.strip()
                    break
        text = _text(lic) or None
        code = licenses.code_from_url(url) or licenses.code_from_text(text)
        if code is None and (lic.get("license-type") or "").lower() == "public-domain":
            code = "PD"
    elif meta is not None:
        # older articles state the license only in a copyright statement (NLM 2.x puts it
        # straight under article-meta)
        text = _text(_descendant(meta, "copyright-statement")) or None
        code = licenses.code_from_text(text)
    json_code = licenses.normalise_code((metadata or {}).get("license_code"))
    return License(code=json_code or code, url=url or None, text=text)


_ABSTRACT_HEADING = re.compile(r"^(?:abstract|summary)\s*(?:[:.\-–—]\s*|$)", re.I)


def _abstract(meta: etree._Element | None, needs: Collection[etree._Element]) -> str:
    """The main abstract: its paragraphs, and each section as "Title: text"; the abstract's own
    heading ("Abstract", "Summary", as a title or as the first words) is left out."""
    if meta is None:
        return ""
    abstracts = _all(meta, "abstract")
    main = [a for a in abstracts if not a.get("abstract-type")] or abstracts[:1]
    parts: list[str] = []
    for abstract in main:
        for child in abstract:
            tag = child.tag
            if tag in ("title", "label") or not isinstance(tag, str) or tag in FLOAT_TAGS:
                continue
            if tag != "sec":
                parts.append(_text(child, needs))
                continue
            title = _text(_first(child, "title"), needs)
            body = " ".join(
                _text(p, needs)
                for p in child
                if isinstance(p.tag, str) and p.tag not in ("title", "label")
            )
            if title and not title.endswith((":", ".", "?")):
                title += ":"
            parts.append(f"{title} {body}" if title else body)
    parts = [p for p in parts if p]
    if parts:
        first = _ABSTRACT_HEADING.sub("", parts[0], count=1)
        parts[0:1] = [first] if first else []
    return "\n".join(parts)


def _media_index(names: Iterable[str]) -> dict[str, str]:
    """Lower-cased base name → the name in the package."""
    index: dict[str, str] = {}
    for name in names:
        index.setdefault(name.rsplit("/", 1)[-1].lower(), name)
    return index


def resolve_image(hrefs: list[str], media: Mapping[str, str]) -> str | None:
    """The package file a figure's graphic points to, preferring web formats over TIFF/EPS."""
    best: tuple[int, str] | None = None
    for href in hrefs:
        base = href.rsplit("/", 1)[-1].lower()
        stem, dot, ext = base.rpartition(".")
        candidates = [base] + [base + e for e in IMAGE_EXTENSIONS]
        if dot and "." + ext in IMAGE_EXTENSIONS:
            candidates += [stem + e for e in IMAGE_EXTENSIONS]
        for cand in candidates:
            if cand in media:
                ext_rank = next(
                    (i for i, e in enumerate(IMAGE_EXTENSIONS) if cand.endswith(e)),
                    len(IMAGE_EXTENSIONS),
                )
                if best is None or ext_rank < best[0]:
                    best = (ext_rank, media[cand])
                break
    return best[1] if best else None


def _mention_block(xref: etree._Element) -> etree._Element:
    """The paragraph-like block a reference sits in (a caption's own, inside a float)."""
    node = xref.getparent()
    while node is not None:
        tag = node.tag if isinstance(node.tag, str) else ""
        if tag in _MENTION_BLOCKS or tag in _MENTION_STOPS:
            return node
        node = node.getparent()
    return xref


def _scan(
    root: etree._Element,
) -> tuple[Collection[Any], list[etree._Element], list[etree._Element]]:
    """One pass over the tree: its :func:`structure_index`, its figures and its figure
    references (in document order). In C where built (``_ctext.scan``)."""
    if C_WALKS is not None:
        return C_WALKS.scan(root)
    return _python_scan(root)


def _python_scan(
    root: etree._Element,
) -> tuple[set[etree._Element], list[etree._Element], list[etree._Element]]:
    """:func:`_scan` in Python: the specification of ``_ctext.scan``."""
    needs: set[etree._Element] = set()
    add = needs.add
    figs: list[etree._Element] = []
    xrefs: list[etree._Element] = []
    for part in root:
        if type(part.tag) is not str:  # a comment or a processing instruction
            continue
        for el in part.iter(*_SCAN_TAGS):
            tag = el.tag
            if tag == "xref":
                if el.get("ref-type") == "fig" and el.get("rid"):
                    xrefs.append(el)
                continue
            if tag == "fig":
                figs.append(el)
            node = el.getparent()
            while node is not None and node not in needs:
                add(node)
                node = node.getparent()
    return needs, figs, xrefs


def _mentions(
    xrefs: list[etree._Element],
    fig_numbers: Mapping[str, str | None],
    max_refs: int | None,
    needs: Collection[etree._Element],
) -> dict[str, list]:
    """Figure id → mentions, for the figure references (``_scan``) at any depth of the article.

    Linear in the article: each block is rendered once with all its references marked, its
    sentence boundaries found in one pass, and each reference's sentence by binary search;
    a sentence or paragraph shared by many references is one string.
    """
    if max_refs is not None and len(xrefs) > max_refs:
        raise StageError(
            STAGE,
            "too_many_figure_refs",
            f"more than {max_refs} figure references: refused, not a real article",
        )
    if C_WALKS is not None:
        return C_WALKS.mentions(xrefs, fig_numbers, needs)
    return _python_mentions(xrefs, fig_numbers, needs)


def _python_mentions(
    xrefs: list[etree._Element],
    fig_numbers: Mapping[str, str | None],
    needs: Collection[etree._Element],
) -> dict[str, list]:
    """:func:`_mentions` in Python after its cap: the specification of ``_ctext.mentions``."""
    by_block: dict[etree._Element, list[etree._Element]] = {}
    block_of: dict[etree._Element | None, etree._Element] = {}
    for xref in xrefs:
        parent = xref.getparent()  # references share a paragraph: its block is looked up once
        block = block_of.get(parent)
        if block is None:
            block = block_of[parent] = _mention_block(xref)
        group = by_block.get(block)
        if group is None:
            by_block[block] = [xref]
        else:
            group.append(xref)
    out: dict[str, list[Mention]] = {}
    for block, group in by_block.items():
        paragraph, spans = text_with_spans(block, group, needs)
        sentences = Sentences(paragraph, spans)
        for xref, span in zip(group, spans, strict=True):
            if span is not None and span[1] > span[0]:
                start, end = span
                ref_text = paragraph[start:end].strip()
                sentence = sentences.at(start)
            else:
                ref_text, sentence = _text(xref, needs), paragraph
            rids = xref.get("rid", "")
            for rid in rids.split():
                if rid not in fig_numbers:
                    continue
                tail = xref.tail
                panels = panel_letters(
                    ref_text + _letter_tail(tail) if tail else ref_text, fig_numbers[rid]
                )
                mention = Mention(
                    rid=rid, text=ref_text, sentence=sentence, paragraph=paragraph, panels=panels
                )
                found = out.get(rid)
                if found is None:
                    out[rid] = [mention]
                else:
                    found.append(mention)
    return out


_TAIL_LETTERS = re.compile(r"^([A-Za-z](?:\s*[-–—,]\s*[A-Za-z])*)(?![A-Za-z])")


def _letter_tail(tail: str) -> str:
    """Letters glued to the end of a reference (its tail): ``<xref>Fig. 2</xref>B`` names
    panel B."""
    m = _TAIL_LETTERS.match(tail)
    return m.group(1) if m else ""


# a caption paragraph that only gives the figure's DOI (eLife: "DOI: http://dx.doi.org/…")
_DOI_ONLY = re.compile(
    r"^\s*(?:doi\s*:?\s*)?(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?10\.\d{4,9}/\S+\s*$", re.I
)


def _doi_paragraphs(caption: etree._Element) -> list[etree._Element]:
    found = []
    for p in caption.iterchildren("p"):
        if len(p) <= 3:
            text = etree.tostring(p, method="text", encoding="unicode", with_tail=False)
            if len(text) < 200 and "10." in text and _DOI_ONLY.match(text):
                found.append(p)
    return found


def _figures(
    figs: list[etree._Element], media: Mapping[str, str], needs: Collection[etree._Element]
) -> list[Figure]:
    """A :class:`Figure` for each ``<fig>``. In C where built (``_ctext.figures``)."""
    if C_WALKS is not None:
        return C_WALKS.figures(figs, media, needs)
    return _python_figures(figs, media, needs)


def _python_figures(
    figs: Iterable[etree._Element], media: Mapping[str, str], needs: Collection[etree._Element]
) -> list[Figure]:
    """:func:`_figures` in Python: the specification of ``_ctext.figures``."""
    figures: list[Figure] = []
    for fig in figs:
        fig_id = fig.get("id") or f"fig{len(figures) + 1}"
        label = caption = title = None
        for child in fig:  # a loop over the children is cheaper than two find() calls
            if child.tag == "label" and label is None:
                label = child
            elif child.tag == "caption" and caption is None:
                caption = child
        if caption is not None:
            for child in caption:
                if child.tag == "title":
                    title = child
                    break
        hrefs = [h for g in fig.iter("graphic") if (h := g.get(XLINK_HREF))]
        skip = _doi_paragraphs(caption) if caption is not None else ()
        figures.append(
            Figure(
                id=fig_id,
                label=_text(label, needs) or None,
                title=_text(title, needs) if caption is not None else None,
                caption=element_text(caption, skip, needs),
                graphics=hrefs,
                image=resolve_image(hrefs, media) if media and hrefs else None,
                bold_labels=_bold_labels(caption, needs),
            )
        )
    return figures


def _bold_labels(caption: etree._Element | None, needs: Collection[etree._Element]) -> list[str]:
    """Short bold runs in a caption ("<bold>A</bold>"): evidence that they are panel labels."""
    if caption is None:
        return []
    if C_WALKS is not None:
        return C_WALKS.bold_labels(caption, needs)
    runs = (_text(b, needs).strip("().:, ") for b in caption.iter("bold", "b"))
    return list(dict.fromkeys(r for r in runs if r and len(r) <= 4))


def _glossary(root: etree._Element) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for item in root.iter("def-item"):
        term, definition = _text(_first(item, "term")), _text(_first(item, "def"))
        if term and definition and len(term) <= 20:
            pairs.append((term, definition))
    return pairs


_SEPARATED_BLOCKS = ("p", "title", "td", "th", "label", "list-item", "term", "def")
# The text of a scope with a paragraph separator (U+2029) after each block, so that a section
# title or a paragraph never glues onto the next block's first word and a long form never
# spans two blocks (a table's cells). Written in C (``_ctext.separated_text``) or, as its
# specification, by libxslt: one call per scope, no Python step per block, no change to the tree.
_BLOCK_PATTERN = "|".join(_SEPARATED_BLOCKS)
_SEPARATED_XSLT = f"""<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
<xsl:output method="text" encoding="UTF-8"/>
<xsl:template match="/"><xsl:apply-templates select="*/node()"/></xsl:template>
<xsl:template match="{_BLOCK_PATTERN}"><xsl:apply-templates/>{BLOCK_END}</xsl:template>
</xsl:stylesheet>"""
_threads = threading.local()


def _separated_text(scope: etree._Element) -> str:
    """``scope``'s text (as lxml's text serialiser gives it) with :data:`BLOCK_END` after each
    of its blocks. In C where built (``_ctext.separated_text``), else by libxslt."""
    if C_WALKS is not None:
        return C_WALKS.separated_text(scope)
    return _xslt_separated_text(scope)


def _xslt_separated_text(scope: etree._Element) -> str:
    """:func:`_separated_text` by libxslt: the specification of ``_ctext.separated_text``."""
    transform = getattr(_threads, "separated", None)
    if transform is None:  # XSLT objects are kept per thread, like the parser
        transform = _threads.separated = etree.XSLT(
            etree.XML(_SEPARATED_XSLT), access_control=etree.XSLTAccessControl.DENY_ALL
        )
    return str(transform(scope))


def _in_text_acronyms(meta: etree._Element | None, root: etree._Element) -> list[tuple[str, str]]:
    """Definitions in the abstract, then the body, in reading order.

    The text comes from :func:`_separated_text`, one call per scope, rather than the
    block-aware walk: this is the hot path of parsing.
    """
    scopes = _all(meta, "abstract") + _all(root, "body")
    found: dict[str, str] = {}
    for scope in scopes:
        for short, long_form in find_definitions(_separated_text(scope)).items():
            found.setdefault(short, long_form)
    return list(found.items())


def parse_root(
    root: etree._Element,
    *,
    media_names: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    version: int | None = None,
    max_figure_refs: int | None = MAX_FIGURE_REFS,
) -> Article:
    if not isinstance(root.tag, str) or root.tag.rpartition("}")[2] != "article":
        raise StageError(STAGE, "not_jats", f"root element is <{root.tag}>, not <article>")
    front = _first(root, "front")
    meta = _first(front, "article-meta")
    journal_meta = _first(front, "journal-meta")
    ids = _article_ids(meta)
    metadata = metadata or {}
    journal = None
    if journal_meta is not None:
        journal = _text(_descendant(journal_meta, "journal-title")) or None
        if journal is None:
            for jid in journal_meta.iterchildren("journal-id"):
                journal = (jid.text or "").strip() or None
                if journal:
                    break
    media = _media_index(media_names)
    needs, figs, xrefs = _scan(root)
    figures = _figures(figs, media, needs)
    numbers = {f.id: figure_number(f.label) for f in figures}
    mentions = _mentions(xrefs, numbers, max_figure_refs, needs)
    for figure in figures:
        figure.mentions = mentions.get(figure.id, [])
    keywords = [_text(kw) for kw in _all(root, "front/article-meta/kwd-group/kwd")]
    subjects = [
        _text(subject)
        for categories in _all(root, "front/article-meta/article-categories")
        for group in categories.iterdescendants("subj-group")
        if group.get("subj-group-type") != "heading"
        for subject in group.iterchildren("subject")
    ]
    pmcid = _normalise_pmcid(metadata.get("pmcid")) or _normalise_pmcid(
        ids.get("pmc") or ids.get("pmcid")
    )
    article = Article(
        pmcid=pmcid,
        version=version if version is not None else metadata.get("version"),
        pmid=str(metadata.get("pmid") or ids.get("pmid") or "") or None,
        doi=metadata.get("doi") or ids.get("doi"),
        title=_text(_first(meta, "title-group/article-title")) if meta is not None else None,
        journal=journal,
        year=_year(meta),
        article_type=root.get("article-type"),
        license=_license(meta, metadata),
        abstract=_abstract(meta, needs),
        keywords=[k for k in keywords if k],
        figures=figures,
        acronyms={},
        is_retracted=bool(metadata.get("is_retracted", False)),
        subjects=list(dict.fromkeys(s for s in subjects if s)),
    )
    article.acronyms = merge_acronyms(_glossary(root), _in_text_acronyms(meta, root))
    return article


def parse_article(
    xml: bytes,
    *,
    media_names: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    version: int | None = None,
    max_bytes: int = 64 * 2**20,
    max_figure_refs: int | None = MAX_FIGURE_REFS,
) -> Article:
    """Parse JATS bytes; raises StageError (stage ``parse``) for anything unusable."""
    root = parse_xml(xml, max_bytes=max_bytes, stage=STAGE)
    return parse_root(
        root,
        media_names=media_names,
        metadata=metadata,
        version=version,
        max_figure_refs=max_figure_refs,
    )


def parse_package(package: ArticlePackage, max_xml_bytes: int = 64 * 2**20) -> Article:
    article = parse_article(
        package.xml,
        media_names=package.media.keys(),
        metadata=package.metadata,
        version=package.ref.version,
        max_bytes=max_xml_bytes,
    )
    if article.pmcid is None and package.ref.pmcid.startswith("PMC"):
        article.pmcid = package.ref.pmcid
    return article
