"""Parse untrusted XML with lxml without XXE, entity expansion or network access.

The parser never loads a DTD or resolves an entity. Documents that declare entities in an
internal subset are refused outright (the defusedxml policy): JATS from PMC never needs them, and
an unexpanded entity would otherwise leak its name into the text.
"""

from __future__ import annotations

import threading

from lxml import etree

from ray_jobs.contract.failures import StageError

_local = threading.local()


def _parser() -> etree.XMLParser:
    # XMLParser objects are not thread-safe; keep one per thread.
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False,
            load_dtd=False,
            dtd_validation=False,
            no_network=True,
            huge_tree=False,
        )
        _local.parser = parser
    return parser


def parse_xml(data: bytes, *, max_bytes: int, stage: str = "parse") -> etree._Element:
    """Return the root element, or raise StageError saying why the bytes are not usable XML."""
    if len(data) > max_bytes:
        raise StageError(stage, "xml_too_large", f"{len(data)} bytes exceeds the {max_bytes} limit")
    if not data or data.isspace():  # a C scan that stops at the first byte, no copy
        raise StageError(stage, "xml_empty", "the XML file is empty")
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise StageError(stage, "xml_syntax", str(exc)) from None
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None:
        entities = [e.name for e in dtd.iterentities()]
        if entities:
            raise StageError(
                stage,
                "xml_entities",
                f"entity declarations are refused (XXE / expansion risk): {entities[:5]}",
            )
    return root
