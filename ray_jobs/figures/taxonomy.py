"""The modality taxonomy (``taxonomy.yaml``) and the metadata rules that read it.

Rules turn a panel's words into a prior over the fine (L2) classes, with the evidence that
produced it: which phrase matched, and in which scope (:data:`SCOPES`: the panel's own
subcaption counts most, the caption's shared text less, text about the whole figure less again,
the article's keywords least). Text is tokenised first, so "CT,"
"(MRI)" and "T2-weighted" match; a negated mention ("no CT was performed") does not count.
A class's ``weak_keywords`` ("plot", "t1", "mice") name it as evidence but are too common in
other contexts to decide a panel on their own (see ``Evidence.strong``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

TAXONOMY_FILE = Path(__file__).with_name("taxonomy.yaml")
_TOKEN = re.compile(r"[a-z0-9±]+(?:[-/&][a-z0-9]+)*")
_NEGATIONS = frozenset({"no", "not", "non", "without", "absence", "absent", "negative"})
# words that, numbered, cite a part of the article ("Table 1", "table S2"): an article sentence
# about Figure 3 that cites Table 1 says nothing about what Figure 3 shows
_CITING = frozenset({"table"})
_NUMBERED = re.compile(r"s?\d+[a-z]?|[ivx]+")
# where a phrase was read, nearest the panel first: ``own`` its subcaption and the mentions that
# cite its letter; ``shared`` the caption's preamble and trailer (every panel's); ``figure`` a
# caption nobody split, or a panel nobody paired (other panels' words may be in it);
# ``article`` the article's keywords
SCOPES = ("own", "shared", "figure", "article")
WEIGHTS = {"own": 1.0, "shared": 0.6, "figure": 0.4, "article": 0.2}


@dataclass(frozen=True)
class ModalityClass:
    name: str
    l1: str
    keep: bool
    keywords: tuple[tuple[str, ...], ...]
    weak_keywords: tuple[tuple[str, ...], ...] = ()

    @property
    def l0(self) -> str:
        return "other" if self.l1 == "other" else "medical"


@dataclass(frozen=True)
class Taxonomy:
    version: int
    classes: dict[str, ModalityClass]

    @property
    def l2_names(self) -> list[str]:
        return list(self.classes)

    def l1_of(self, l2: str) -> str:
        return self.classes[l2].l1

    def l0_of(self, l2: str) -> str:
        return self.classes[l2].l0


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@lru_cache(maxsize=4)
def load_taxonomy(path: str | None = None) -> Taxonomy:
    spec = yaml.safe_load(Path(path or TAXONOMY_FILE).read_text())
    classes = {
        name: ModalityClass(
            name,
            body["l1"],
            bool(body["keep"]),
            tuple(tuple(tokens(k)) for k in body.get("keywords", [])),
            tuple(tuple(tokens(k)) for k in body.get("weak_keywords", [])),
        )
        for name, body in spec["classes"].items()
    }
    return Taxonomy(int(spec.get("version", 1)), classes)


@dataclass
class Evidence:
    l2: str
    phrase: str
    source: str  # its scope: own | shared | figure | article
    strong: bool = True  # False: a weak keyword, which names the class but decides nothing

    def __str__(self) -> str:
        return f"{self.source}:{self.phrase}->{self.l2}" + ("" if self.strong else "(weak)")


@dataclass
class RulePrior:
    scores: dict[str, float] = field(default_factory=dict)  # L2 → share of the evidence
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def best(self) -> str | None:
        return max(self.scores, key=self.scores.__getitem__) if self.scores else None


def _matches(words: list[str], taxonomy: Taxonomy) -> Iterable[tuple[str, str, bool]]:
    """(class, phrase, strong) for every keyword occurrence, longest phrase first, never
    negated, never a citation ("Table 2")."""
    phrases = sorted(
        [(kw, name, True) for name, cls in taxonomy.classes.items() for kw in cls.keywords]
        + [(kw, name, False) for name, cls in taxonomy.classes.items() for kw in cls.weak_keywords],
        key=lambda item: -len(item[0]),
    )
    taken = [False] * len(words)
    for kw, name, strong in phrases:
        n = len(kw)
        for i in range(len(words) - n + 1):
            if words[i : i + n] == list(kw) and not any(taken[i : i + n]):
                if _NEGATIONS.intersection(words[max(0, i - 2) : i]):
                    continue
                if kw[-1] in _CITING and _NUMBERED.fullmatch(
                    words[i + n] if i + n < len(words) else ""
                ):
                    continue
                for k in range(i, i + n):
                    taken[k] = True
                yield name, " ".join(kw), strong


def metadata_prior(
    subcaption: str = "",
    shared_caption: str = "",
    keywords: Iterable[str] = (),
    taxonomy: Taxonomy | None = None,
    figure_caption: str = "",
) -> RulePrior:
    """A prior over L2 classes from a panel's words, each phrase tagged with its scope.

    ``subcaption`` is the panel's own text (scope ``own``); ``shared_caption`` the caption
    text every panel shares (preamble and trailer, ``shared``), not the other panels'
    subcaptions: "(A) CT ... (B) H&E" must not make panel A look like histology;
    ``figure_caption`` text that may be about any panel of the figure (``figure``).
    """
    taxonomy = taxonomy or load_taxonomy()
    prior = RulePrior()
    raw: dict[str, float] = {}
    for scope, text in (
        ("own", subcaption),
        ("shared", shared_caption),
        ("figure", figure_caption),
        ("article", " ; ".join(keywords)),
    ):
        for name, phrase, strong in _matches(tokens(text), taxonomy):
            raw[name] = raw.get(name, 0.0) + WEIGHTS[scope]
            prior.evidence.append(Evidence(name, phrase, scope, strong))
    total = sum(raw.values())
    prior.scores = {k: round(v / total, 4) for k, v in raw.items()} if total else {}
    return prior
