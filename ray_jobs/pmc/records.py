"""Typed records that flow from article sources through JATS parsing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ray_jobs.contract.refs import ArticleRef


@dataclass(slots=True)
class ArticlePackage:
    """The bytes of one article: its JATS XML and its media files by name."""

    ref: ArticleRef
    xml: bytes
    xml_name: str
    media: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None  # the PMC Cloud JSON, when the source has one


@dataclass(slots=True)
class License:
    code: str | None  # normalised, e.g. "CC BY", "CC BY-NC-ND", "CC0", "PD"
    url: str | None
    text: str | None = None


@dataclass(slots=True)
class Mention:
    """One ``xref[@ref-type='fig']`` that points at a figure, with its textual context."""

    rid: str
    text: str  # the xref's own text, e.g. "Fig. 1B"
    sentence: str
    paragraph: str
    panels: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Figure:
    id: str
    label: str | None
    title: str | None
    caption: str
    graphics: list[str] = field(default_factory=list)
    image: str | None = None  # the media file name in the package that a graphic resolves to
    mentions: list[Mention] = field(default_factory=list)
    bold_labels: list[str] = field(default_factory=list)  # short bold runs: panel labels, often


@dataclass(slots=True)
class Article:
    pmcid: str | None
    version: int | None
    pmid: str | None
    doi: str | None
    title: str | None
    journal: str | None
    year: int | None
    article_type: str | None
    license: License
    abstract: str
    keywords: list[str]
    figures: list[Figure]
    acronyms: dict[str, str]
    is_retracted: bool = False
    subjects: list[str] = field(default_factory=list)  # article-categories, headings excluded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self, ref: ArticleRef) -> tuple[str, int | None]:
        """(pmcid, version): the article's own ids, else the listing's. Keys are built from
        these, so every table must take them the same way."""
        return self.pmcid or ref.pmcid, self.version if self.version is not None else ref.version
