"""Acronym definitions: an article's glossary plus in-text "long form (SF)" definitions.

The in-text matcher follows Schwartz & Hearst (2003): a short form in parentheses, and the
shortest run of preceding words whose characters contain the short form's characters in order,
the first one starting a word. A long form whose words' initials spell the short form is
preferred. The reversed form "SF (long form)" is not read: it is rare in biomedical prose, and
most parentheses after a capitalised word are not definitions.

What parentheses hold besides definitions is refused: citations ("(Holm, 1979)"), vendors and
their addresses ("(Promega)", "(Teca, Chicago, IL)"), places, genus names ("(Plasmodium)"),
units ("(mM)"), and ids whose digits the long form does not carry: catalogue numbers
("(T1892)"), sample ids ("(S24)"), mutants ("(L451G)"), panels ("(1A)"). A short form that is
a capitalised word is a name unless its long form is one or two words ("Sonic Hedgehog (Shh)").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ray_jobs.pmc.text import C_WALKS

# "long form (SF)" / "long form (SF; ...)". The pattern starts with a literal, which lets the
# regex engine skip ahead instead of trying every position of a long body.
_DEFINED = re.compile(
    # a letter other than a-z among the first ten characters (an acronym carries a capital) is
    # checked here, in C; the pattern starts with the literal "(", which the engine skips to
    r"\((?=[\w\-/+.&]{0,9}?[^\W\d_a-z])([^\W_][\w\-/+.&]{1,9})(?:[;,][^()]{0,110})?\)"
)
_SHORT_CHARS = re.compile(r"^[\w\-/+.&]+$")
_CITATION_TAIL = re.compile(r"\s*\[[\d,\s–\-]+\]\s*$")
_BRACKETS = frozenset("()[]{}")
# the JATS parser ends each block with this: a long form never spans two blocks
BLOCK_END = "\u2029"
_CUTS = ("(", ")", "[", "]", "{", "}", ". ", "; ", ": ", BLOCK_END)
# what follows the short form inside the parentheses: a year or "et al." makes it a citation
_CITATION_REST = re.compile(r"\b(?:1[6-9]|20)\d\d[a-z]?\b|\bet al\b|\bin press\b", re.I)
# ", Madison, WI" / ", St. Louis, MO, USA": two or more capitalised parts, an address
_ADDRESS_REST = re.compile(r"^[,;]\s*[A-Z][^,;]*(?:,\s*[A-Z][^,;]*)+$")
_DIGITS = re.compile(r"\d+")
_WORDS = re.compile(r"[^\W_]+")
# units with a capital, which parentheses after a table header or a quantity hold
_UNITS = frozenset(
    "mM µM μM nM pM fM kDa Da kD MDa mL µL μL nL dL Hz kHz MHz GHz Gy cGy mGy Sv mSv kV mV µV "
    "mA µA nA pA mW kW MW kJ kPa MPa Pa mmHg IU mIU mU kU kb Kb Mb Gb kbp Bq kBq MBq GBq Ci mCi "
    "µCi dB mT µT ppm ppb".split()
)


def is_short_form(candidate: str) -> bool:
    sf = candidate.strip()
    if not 2 <= len(sf) <= 10 or not _SHORT_CHARS.match(sf):
        return False
    if not sf[0].isalnum() or not any(c.isalpha() for c in sf):
        return False
    # an acronym carries at least one capital ("mRNA", "IL-6"); plain words do not define one
    return any(c.isupper() for c in sf)


def best_long_form(short: str, candidate: str) -> str | None:
    """Schwartz–Hearst: match the short form's characters right to left inside the candidate.

    A match that passes over more words than the short form has characters, less one (two at
    least), is a phrase rather than the expansion: "T3 status and mRNA levels for thyrotropin
    β-subunit (TSHβ)", "human progesterone receptor ligand-binding domain (hPR)".
    """
    low = candidate.lower()
    i = len(low) - 1
    matched: list[int] = []
    for s in range(len(short) - 1, -1, -1):
        c = short[s].lower()
        if not c.isalnum():
            continue
        i = low.rfind(c, 0, i + 1)
        # the short form's first character must start a word of the long form
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
    if _unmatched_words(candidate, start, matched) > max(2, len(matched) - 1):
        return None
    return long_form


def _unmatched_words(candidate: str, start: int, matched: list[int]) -> int:
    """Words of ``candidate[start:]`` that hold none of the ``matched`` offsets."""
    hit = {candidate.rfind(" ", 0, i) for i in matched}  # a word is known by the space before it
    return len(candidate[start:].split()) - len(hit)


def _candidate_words(text_before: str, short: str) -> str:
    """The words a long form may span: at most min(|SF|+5, 2|SF|), never across a bracket, a
    sentence end or a clause break, and never a trailing citation ("broth [55] (LB)")."""
    text = _CITATION_TAIL.sub("", text_before) if "]" in text_before[-8:] else text_before
    r = text.rfind  # the last of _CUTS, one C scan each (no generator: the hot path)
    cut = max(
        r("("), r(")"), r("["), r("]"), r("{"), r("}"), r(". "), r("; "), r(": "), r(BLOCK_END)
    )
    words = text[cut + 1 :].split()
    return " ".join(words[-min(len(short) + 5, len(short) * 2) :]).rstrip(",;:")


def _initials_long_form(short: str, candidate: str) -> str | None:
    """The last words whose initials spell the short form ("Hormone-Sensitive Lipase" → HSL).

    Built from the last word backwards, one word at a time, and given up as soon as neither
    spelling (word initials, or the initials of hyphenated parts) ends the short form's letters:
    most candidates cost a word or two."""
    low = short.lower()
    letters = low if low.isalpha() else "".join(c for c in low if c.isalpha())
    words = candidate.split()
    initials = parts = ""
    for take in range(1, min(len(words), len(letters)) + 1):
        word = words[-take]
        first = word[0].lower()
        initials = first + initials
        if "-" in word:
            parts = "".join(p[0] for p in word.split("-") if p and p[0].isalpha()).lower() + parts
        elif word[0].isalpha():
            parts = first + parts
        if initials == letters or parts == letters:
            return " ".join(words[-take:])
        if not (letters.endswith(initials) or letters.endswith(parts)):
            return None  # prepending letters never makes a suffix of what is not one
    return None


_TOKEN_BREAKS = re.compile(r"[\s\-]+")


def _plausible(short: str, long_form: str) -> bool:
    """Reject S-H matches that fold many capitals into a word or two ("inclusions" for ILI)."""
    if _BRACKETS.intersection(long_form):
        return False
    capitals = sum(1 for c in short if c.isupper())
    if capitals <= 2:  # any long form has a token or more
        return True
    tokens = len(_TOKEN_BREAKS.split(long_form.strip()))
    # one long word may still spell a whole acronym: "Tetrahydrolipstatin (THL)"
    return tokens >= capitals - 1 or (tokens == 1 and len(long_form) >= 3 * len(short))


def _name_like(short: str) -> bool:
    """A capitalised word ("Promega", "Holm", "Shh"): a name, unless shown otherwise."""
    return short.isalpha() and short[0].isupper() and short[1:].islower()


def _acceptable(short: str, long_form: str) -> bool:
    """What Schwartz–Hearst lets through but a definition never is."""
    if short.lower() in _WORDS.findall(long_form.lower()):
        return False  # "Wright–Fisher process (Wright)", "Alexa405-ICAM1 alone (ICAM1)"
    if short in long_form and sum(1 for c in short if c.isupper()) >= 2:
        return False  # "PLCγ1-YFP (PLC)"; a prefix may abbreviate one word: "Elabela (Ela)"
    digits = _DIGITS.findall(short)
    if digits:
        letters = sum(1 for c in short if c.isalpha())
        # "HIV-1", "COX-2", "CCL18": a short number after a name of letters may be a type
        tail = _DIGITS.search(short + "\x00", len(short.rstrip("0123456789")))
        relaxed = letters >= 2 and tail is not None and len(tail.group()) <= 2
        needed = digits[:-1] if relaxed and short[-1].isdigit() else digits
        if any(d not in long_form for d in needed):
            return False  # "(T1892)", "(S24)", "(L451G)", "(1A)", "factor (F2)"
    if _name_like(short):
        return len(short) <= 4 and len(long_form.split()) <= 2
    return True


def long_form_for(short: str, candidate: str) -> str | None:
    found = _initials_long_form(short, candidate) or best_long_form(short, candidate)
    if not found:
        return None
    found = " ".join(found.split())
    return found if _plausible(short, found) and _acceptable(short, found) else None


def _not_a_definition(short: str, rest: str) -> bool:
    """Parentheses that hold a unit, or a name followed by a year or an address: a citation
    ("(Holm, 1979)"), a vendor ("(Teca, Chicago, IL)"). After an acronym the same tail is
    only the vendor of what it defines: "dithiothreitol (DTT; Invitrogen, Carlsbad, CA)"."""
    if short in _UNITS:
        return True
    if not rest or not _name_like(short):
        return False
    return bool(_CITATION_REST.search(rest) or _ADDRESS_REST.match(rest))


def python_find_definitions(text: str) -> dict[str, str]:
    """In-text definitions in one passage, short form → long form.

    Only the first parenthesised use of a short form is tried: that is where authors define it,
    and later uses ("... in the WT (Table 2)") only add false matches and time.
    """
    found: dict[str, str] = {}
    tried: set[str] = set()
    for m in _DEFINED.finditer(text):
        short, start = m.group(1), m.start()
        # prose puts a space before the parenthesis; chemistry ("oxadiazol-2(3H)-one") does not
        if not start or not text[start - 1].isspace() or short in tried:
            continue
        tried.add(short)
        # _DEFINED already bounds length and characters; an acronym also carries a capital
        if short.lower() == short:
            continue
        if (_name_like(short) and len(short) > 4) or _not_a_definition(
            short, m.group(0)[len(short) + 1 : -1]
        ):
            continue  # a name ("(Promega)", "(Plasmodium)") never defines an acronym here
        before = _candidate_words(text[max(0, start - 200) : start], short)
        # S-H needs the short form's first character to start a word of the long form
        if not before or " " + short[0].lower() not in " " + before.lower().replace("-", " "):
            continue
        long_form = long_form_for(short, before)
        if long_form:
            found[short] = long_form
    return found


def merge_acronyms(*sources: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Earlier sources win (the glossary is authoritative, then the text in reading order)."""
    merged: dict[str, str] = {}
    for source in sources:
        for short, long_form in source:
            short, long_form = short.strip(), long_form.strip()
            if short and long_form and short not in merged:
                merged[short] = long_form
    return merged


# The matcher above is the specification of the C one (``_ctext.find_definitions``, the same
# steps with typed locals; the tests compare them) and its fallback.
find_definitions = C_WALKS.find_definitions if C_WALKS is not None else python_find_definitions
