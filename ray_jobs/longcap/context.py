"""What the enrichment LLM may know about one panel, and how it is laid out in the prompt.

The LLM is told to use only this text, so choosing it is choosing what the long caption can
say: the panel's own subcaption first, then the article sentences that cite this very panel
("Fig. 2B"), the figure caption, sentences citing the figure as a whole, the abstract, and the
acronyms that occur in all that. Sentences about other panels of the figure come last, since
they mostly describe what this panel does not show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ray_jobs.longcap.acronyms import find_short_form

if TYPE_CHECKING:
    from ray_jobs.pmc.records import Article, Figure

MAX_SENTENCE_CHARS = 600


@dataclass
class PanelContext:
    key: str  # panel key, e.g. "PMC13901v1-f2-p00"
    subcaption: str
    caption: str
    panel_label: str | None  # e.g. "B"
    figure_label: str | None  # e.g. "Figure 2"
    # (sentence, panel letters it names) for the sentences that cite this figure
    mentions: list[tuple[str, list[str]]] = field(default_factory=list)
    abstract: str = ""
    acronyms: dict[str, str] = field(default_factory=dict)  # short -> long form


@dataclass(frozen=True)
class SelectedMentions:
    panel: list[str]  # name this panel
    figure: list[str]  # name the figure, no panel
    other: list[str]  # name other panels only


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def select_mentions(
    mentions: list[tuple[str, list[str]]], panel_label: str | None, limit: int
) -> SelectedMentions:
    """Up to ``limit`` distinct sentences, those naming this panel first, in article order
    within each group. Without a panel label every sentence is about the figure."""
    label = (panel_label or "").strip().upper()
    # one sentence may cite the figure twice ("Fig. 3A ... Fig. 3D"): it names all those panels
    named_by: dict[str, set[str]] = {}
    for sentence, letters in mentions:
        text = _clip(sentence, MAX_SENTENCE_CHARS)
        if text:
            named_by.setdefault(text, set()).update(x.strip().upper() for x in letters)
    panel: list[str] = []
    figure: list[str] = []
    other: list[str] = []
    for text, named in named_by.items():
        if not named or not label:
            figure.append(text)
        elif label in named:
            panel.append(text)
        else:
            other.append(text)
    budget = max(limit, 0)
    panel = panel[:budget]
    figure = figure[: budget - len(panel)]
    other = other[: budget - len(panel) - len(figure)]
    return SelectedMentions(panel, figure, other)


def render_sections(ctx: PanelContext, *, max_mentions: int, max_abstract_chars: int) -> str:
    """The context as tagged sections (``<subcaption>…</subcaption>``); empty ones left out."""
    chosen = select_mentions(ctx.mentions, ctx.panel_label, max_mentions)
    caption = " ".join(ctx.caption.split())
    subcaption = " ".join(ctx.subcaption.split())
    blocks: list[tuple[str, str]] = [
        ("subcaption", subcaption if subcaption != caption else ""),
        ("panel_mentions", "\n".join(f"- {s}" for s in chosen.panel)),
        ("figure_caption", caption),
        ("figure_mentions", "\n".join(f"- {s}" for s in chosen.figure)),
        ("other_panel_mentions", "\n".join(f"- {s}" for s in chosen.other)),
        ("abstract", _clip(ctx.abstract, max_abstract_chars) if max_abstract_chars else ""),
    ]
    seen_text = "\n".join(text for _, text in blocks)
    used = {
        s: lf for s, lf in sorted(ctx.acronyms.items()) if find_short_form(s, seen_text) is not None
    }
    blocks.append(("acronyms", "\n".join(f"- {s}: {lf}" for s, lf in used.items())))
    return "\n\n".join(f"<{tag}>\n{text}\n</{tag}>" for tag, text in blocks if text)


def panel_context(
    article: Article,
    figure: Figure,
    *,
    key: str,
    subcaption: str,
    panel_label: str | None,
) -> PanelContext:
    """A panel's context from a parsed article (``ray_jobs.pmc.jats``) and one of its figures."""
    return PanelContext(
        key=key,
        subcaption=subcaption,
        caption=figure.caption,
        panel_label=panel_label,
        figure_label=figure.label,
        mentions=[(m.sentence, list(m.panels)) for m in figure.mentions],
        abstract=article.abstract,
        acronyms=dict(article.acronyms),
    )
