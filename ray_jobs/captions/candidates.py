"""Every place in a caption where a panel label could be, with how it reads.

Patterns alone cannot tell a label from a reference ("as in (C)"), a unit ("(x40)") or a word
("B cells"); ``sequence.py`` decides. What is decided here is the form: ``lead``
labels introduce the text after them ("(A) Axial CT", "A. ...", "A Palp, ..."), ``tail`` labels
close a phrase ("T1WI (A) and T2WI (B) show"), and ``weak`` ones (a lone letter or number inside
a sentence, "for A, TARS, B, VEGF") count only as part of a longer unbroken run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ray_jobs.captions.clauses import depths
from ray_jobs.captions.labels import POSITIONS, SPEC, LabelKey, expand, key_of, unprime

# far above any real caption's (at most 30 candidates in the gold sets); bounds the work on
# hostile text, where what lies past them is not split
MAX_CANDIDATES, MAX_MATCHES = 400, 3000
_POS = "|".join(p.replace(" ", r"\s+") for p in POSITIONS)
_CANDIDATES = re.compile(
    rf"(?:(?<![\w(])panels?\s+)?\(\s*(?:(?:panels?|images?)\s+)?(?P<paren>{SPEC})\s*[.:]?\s*\)"
    rf"|\(\s*(?P<paren_note>{SPEC})\s*[,;]\s*[^()]{{1,60}}\)"  # (C, in red, 200x)
    rf"|\([^()]{{1,50}}[,;:]\s*(?:(?:panels?|images?)\s+)?(?P<paren_end>{SPEC})\s*\)"  # (PSA; C)
    rf"|(?P<close>(?<![\w(])(?:{SPEC}))\)"  # A)  a)
    rf"|(?P<punct>(?<![\w(’'-])(?:panels?\s+)?(?:{SPEC}))(?P<punct_mark>[.:,])(?=\s|$)"  # A. A:
    rf"|(?P<dash>(?<![\w(])(?:{SPEC}))(?:\s+[–—-]\s+|\s*[–—]\s*(?=[A-Za-z]{{2}}))(?=\S)"  # A – CT
    rf"|(?P<prose>(?<![\w(])panels?\s+(?:{SPEC}))(?=\s+[a-z])"  # Panel A shows
    rf"|(?P<bare>(?<![\w’'/–-])(?:{SPEC}))(?=\s+[\w*(])"  # a *10, B Whole mount, A Palp
    rf"|(?P<pos>(?<![\w])(?:{_POS})(?:\s+panels?)?)\s*(?P<pos_mark>[:)])"  # Left: (left)
    rf"|\((?P<pos_paren>{_POS})\)",
    re.IGNORECASE,
)
_KINDS = "paren paren_note paren_end close punct dash prose bare pos pos_paren".split()
_REFERENCE = re.compile(
    r"(?:\b(?:in|see|of|from|to|with|as|than|versus|vs\.?|like|by|on|at|between)\s*|[=<>])$",
    re.I,
)
_FIGURE_WORD = re.compile(r"(?:fig(?:ure)?s?\.?|table|supplementary|ref\.?)\s*(?:S?\d+\s*)?$", re.I)
# words a lone capital or number follows without being a label: "type B", "day 6", "vitamin A"
_NOT_LABEL_AFTER = re.compile(
    r"\b(?:type|group|groups|grade|stage|class|zone|site|lane|chain|vitamin|protein|factor|"
    r"complex|well|sample|case|line|day|days|week|weeks|month|months|year|years|hour|hours|"
    r"patient|patients|cell|cells|mouse|mice|rat|rats|no|number|phase|level|layer|exon|"
    r"domain|region|segment|score|point|points|time|times|trial|step|table|series|hepatitis|"
    r"figures?|figs?\.?|panels?|about|approximately|over|under|only|all|each|every|per|"
    r"first|last|the|a|an)\s*$",
    re.I,
)
_UNIT = re.compile(
    r"\s+(?:mm|cm|µm|μm|um|nm|m|h|hr|hrs|min|s|sec|ms|days?|weeks?|months?|years?|"
    r"mg|g|kg|ml|µl|μl|l|mM|µM|μM|nM|%|x|times|patients|cases|mice|rats|cells|samples|"
    r"of|and|or|to|in|were|was|are|is)\b",
    re.I,
)
_CLAUSE_END = re.compile(r"(?:[.;:!?]|[.;:]\s*(?:and|or))\s*$")


@dataclass
class Candidate:
    start: int
    end: int
    labels: list[str]
    keys: list[LabelKey]
    kind: str  # paren, ref, paren_note, close, punct, prose, bare, pos
    strong: bool = False
    weak: bool = False  # only as part of an unbroken run of three or more
    tail: bool = False  # closes the phrase before it rather than opening the text after it
    source: str = ""  # the caption text it was read from
    opens: bool = False  # at the start of a clause
    also: tuple[tuple[int, int], ...] = ()  # spans of sub-labels folded into this one


def clause_start(text: str, pos: int) -> bool:
    """True at the caption start or after . ; : ! ? (optionally followed by "and"/"or")."""
    before = text[max(0, pos - 40) : pos].rstrip()
    return (not before and pos < 40) or bool(_CLAUSE_END.search(before))


def _sentence_start(text: str, pos: int) -> bool:
    before = text[max(0, pos - 40) : pos].rstrip()
    return (not before and pos < 40) or before[-1:] in (".", "!", "?")


def _depth(text: str, pos: int) -> int:
    return depths(text)[pos]


def _closes_phrase(after: str) -> bool:
    return bool(re.match(r"\s*(?:[,.;:)\]]|and\b|or\b|&|$)", after))


def find(text: str, bold: frozenset[str], roman: bool) -> list[Candidate]:
    found: list[Candidate] = []
    for n, m in enumerate(_CANDIDATES.finditer(text)):
        if n >= MAX_MATCHES:
            break
        kind = next(k for k in _KINDS if m.group(k))
        spec = re.sub(r"^(?:panels?|images?)\s+", "", m.group(kind).strip(), flags=re.I)
        start, end = m.start(), m.end("punct_mark") if kind == "punct" else m.end()
        if kind == "paren_end":  # only the labels: the note around them stays in the text
            start, end = m.span(kind)
        if kind in ("pos", "pos_paren"):
            labels = [" ".join(re.sub(r"\s+panels?$", "", spec, flags=re.I).lower().split())]
            kind = "pos"
        else:
            labels = list(dict.fromkeys(unprime(label) for label in expand(spec, roman)))
        keys = [key_of(label, roman) for label in labels]
        if not labels or any(k is None for k in keys):
            continue
        if len({k.scheme for k in keys}) > 1:  # "gleason 6, C)": only the label itself counts
            labels, keys = labels[-1:], keys[-1:]
            start = text.rindex(labels[0], start, end)
        if _FIGURE_WORD.search(text[max(0, start - 30) : start]):
            continue  # "Figure 2:" "Fig. 3."
        cand = _judge(text, kind, m, start, end, labels, keys, bold)  # type: ignore[arg-type]
        if cand is not None:
            found.append(cand)
            if len(found) >= MAX_CANDIDATES:
                break
    return found


def _judge(
    text: str,
    kind: str,
    m: re.Match[str],
    start: int,
    end: int,
    labels: list[str],
    keys: list[LabelKey],
    bold: frozenset[str],
) -> Candidate | None:
    """The candidate's form and strength, or None where its context rules a label out."""
    bolded = bool(bold) and all(label in bold for label in labels)
    clause = clause_start(text, start)
    before = text[max(0, start - 30) : start].rstrip()
    after = text[end : end + 8]
    cand = Candidate(start, end, labels, keys, kind, bolded, source=text[start:end], opens=clause)
    if kind == "paren":
        # "as in (C)." refers to a panel; "from (A) KEGG data" introduces one
        closes = _closes_phrase(after)
        ref = closes and bool(_REFERENCE.search(before))
        cand.strong = bolded or not ref
        cand.kind = "ref" if ref and not bolded else kind
        cand.tail = closes
    elif kind in ("paren_note", "paren_end"):
        cand.kind = "paren_note"
        cand.tail = True  # weak: "(C, in red, 200x)", "(D, upper graph)", "(lower panels, D–F)"

    elif kind == "close":
        if _depth(text, start) > 0:
            return None  # "(see panel B)" is inside a parenthesis
        cand.strong = bolded or clause
    elif kind == "punct":
        mark = m.group("punct_mark")
        listed = bool(re.search(r"(?:[,;]|\band)$", before))
        if not (clause or bolded):
            if _NOT_LABEL_AFTER.search(before):
                return None
            if mark == "." and not re.match(r"\s+[A-Za-z(]", text[end : end + 2]):
                return None
            cand.weak = True  # "for A, TARS, B, VEGF", "structures A. hIRE1 ..."
            cand.strong = listed and mark != "."
        else:  # "A, text" is sure at a sentence start, less so after ";" ("dorsal; A, B")
            cand.strong = bolded or mark != "," or _sentence_start(text, start)
    elif kind == "dash":
        if not clause:
            return None  # "type A - B" and ranges inside a sentence are not labels
        cand.strong = True
    elif kind == "prose":
        if not clause:
            return None  # "as shown in panel B" is a reference
        cand.strong = True
    elif kind == "bare":
        return _judge_bare(text, cand, before)
    elif kind == "pos":
        if not (clause or text[start] == "("):
            return None
        cand.strong = True
    return cand


def _judge_bare(text: str, cand: Candidate, before: str) -> Candidate | None:
    """A label without punctuation: "a Top view, b ...", "A Palp, ... B Palp", "1 holotype"."""
    label, start, end = cand.labels[0], cand.start, cand.end
    after = text[end : end + 40]
    nxt = after.lstrip()[:1]
    sentence = _sentence_start(text, start)
    listed = bool(re.search(r"(?:[,;:(]|\band)$", before))
    if label.islower() and len(cand.labels) == 1 and not (sentence or listed):
        return None  # a lone lowercase letter is a label only where a sentence or item starts
    if _FIGURE_WORD.search(before) or _NOT_LABEL_AFTER.search(before):
        return None
    if _REFERENCE.search(before) and not re.search(r"(?:[,;:]|\band)$", before):
        return None
    if _depth(text, start) > 0 and not before.endswith(("(", ",")):
        return None  # inside a parenthesis only as a list: "(a T2 axial view, b ...)"
    digit = label.isdigit()
    if digit and _UNIT.match(after):
        return None  # "5 mm", "3 days", "2 and 3"
    if len(cand.labels) > 1:
        if not re.match(r"\s+\w", after) or "," in cand.source:
            return None
        if not clause_start(text, start) and not re.search(r"[-–—]", cand.source):
            return None  # "Clades A, B and C are ..." is prose
        # "A–D from the left side" opens a clause; "... ventral view 3–4 Species" a list item
        cand.strong = clause_start(text, start)
        cand.weak = not cand.strong
        return cand
    if label.islower() and not digit:
        cand.weak = not sentence
        cand.strong = sentence
        return cand
    if sentence and (nxt.isupper() or nxt == "*"):
        cand.strong = not digit
        return cand  # "B Whole mount", "A *10"
    title = re.match(r"\s+(?:[a-z]|[A-Z][a-z])", after)
    if sentence and label == "A" and nxt.islower():
        return None  # the article: "A woman with ...", "A 65-year-old ..."
    if label.isupper() and len(label) == 1 and label != "I" and title:
        cand.weak = True  # taxonomy style: "A Palp, prolateral view B Palp, ..."
        return cand
    if digit and (nxt.islower() or nxt.isupper()) and not re.search(r"[=<>±×x(]$", before):
        cand.weak = True  # "1 holotype, dorsal view 2 same, ventral view"
        return cand
    return None
