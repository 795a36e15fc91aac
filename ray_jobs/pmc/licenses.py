"""Normalise article licenses to one vocabulary ("CC BY", "CC BY-NC-ND", "CC0", "PD").

A dataset is only as shareable as its most restrictive record, so every record carries a code
that a filter can trust, whether the article said it with a URL, an ALI element, prose, or the
PMC Cloud JSON's ``license_code``.
"""

from __future__ import annotations

import re

_CC_URL = re.compile(
    r"creativecommons\.org/(licenses|publicdomain)/([a-z\-]+)(?:/(\d+(?:\.\d+)?))?", re.I
)
_TEXT_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bCC0\b|public\s+domain\s+dedication", re.I), "CC0"),
    (re.compile(r"\bpublic\s+domain\b", re.I), "PD"),
    (
        re.compile(
            r"attribution[\s\-]*non[\s\-]*commercial[\s\-]*(no[\s\-]*deriv|no[\s\-]*derivatives)",
            re.I,
        ),
        "CC BY-NC-ND",
    ),
    (
        re.compile(r"attribution[\s\-]*non[\s\-]*commercial[\s\-]*share[\s\-]*alike", re.I),
        "CC BY-NC-SA",
    ),
    (re.compile(r"attribution[\s\-]*non[\s\-]*commercial", re.I), "CC BY-NC"),
    (re.compile(r"attribution[\s\-]*no[\s\-]*deriv", re.I), "CC BY-ND"),
    (re.compile(r"attribution[\s\-]*share[\s\-]*alike", re.I), "CC BY-SA"),
    (re.compile(r"creative\s+commons\s+attribution", re.I), "CC BY"),
]


def code_from_url(url: str | None) -> str | None:
    if not url:
        return None
    m = _CC_URL.search(url)
    if not m:
        return None
    kind, name = m.group(1).lower(), m.group(2).lower()
    if kind == "publicdomain":
        return "CC0" if name == "zero" else "PD"
    return "CC " + name.upper()


def code_from_text(text: str | None) -> str | None:
    if not text:
        return None
    for pattern, code in _TEXT_RULES:
        if pattern.search(text):
            return code
    return None


def normalise_code(code: str | None) -> str | None:
    """``cc-by-nc`` / ``CC_BY_NC`` / ``CC BY-NC`` → ``CC BY-NC``; other codes upper-cased."""
    if not code or not code.strip():
        return None
    raw = code.strip().upper().replace("_", "-")
    if raw in ("CC0", "CC-0", "CC ZERO", "CC-ZERO"):
        return "CC0"
    if raw.startswith("CC-") or raw.startswith("CC "):
        return "CC " + raw[3:].replace(" ", "-")
    return raw


# Every code the parsers above can name for a Creative Commons or public-domain article, in
# order from least to most restrictive, roughly: what an allow-list may name.
KNOWN_CODES = (
    "CC0",
    "PD",
    "CC BY",
    "CC BY-SA",
    "CC BY-ND",
    "CC BY-NC",
    "CC BY-NC-SA",
    "CC BY-NC-ND",
)
UNKNOWN = "unknown"  # an article whose license could not be read, as counts and lists name it


def label(code: str | None) -> str:
    """The code as counts, reasons and allow-lists name it: ``unknown`` when there is none."""
    return code or UNKNOWN


def parse_allow_list(values: list[str]) -> list[str]:
    """An allow-list from a config, normalised (``cc-by`` → ``CC BY``), deduplicated and in
    :data:`KNOWN_CODES` order; ``unknown`` admits articles without a readable license.
    A code outside the vocabulary is an error, not an empty subset built quietly."""
    if not values:
        raise ValueError(
            "an empty license allow-list admits nothing; leave it unset (null) for every license"
        )
    codes = set()
    for value in values:
        text = str(value).strip()
        code = UNKNOWN if text.lower() == UNKNOWN else normalise_code(text)
        if code != UNKNOWN and code not in KNOWN_CODES:
            raise ValueError(
                f"unknown license code {value!r}; known: {', '.join(KNOWN_CODES)} (any spelling "
                f"such as cc-by-nc), or {UNKNOWN!r} for articles whose license could not be read"
            )
        codes.add(code)
    return [c for c in (*KNOWN_CODES, UNKNOWN) if c in codes]
