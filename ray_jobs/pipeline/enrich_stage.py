"""Kept panel rows through LongCAP enrichment: a long caption, or a failure row.

A panel whose enrichment failed is not written without its long caption (that would mix
caption kinds silently); it becomes a failure row. A server fault (5xx, 429, timeout, an open
breaker) is retryable: the article is marked for another try and the next run enriches only
the panels still missing, from a warm cache. An answer the schema rejects at temperature 0
would come back the same, so it stays a permanent failure row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray_jobs.captions.tokens import clip_tokens, long_tokens
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.contract.rows import Row, failure_row
from ray_jobs.longcap.client import STAGE
from ray_jobs.longcap.context import PanelContext
from ray_jobs.longcap.enrich import Enricher, EnrichResult


def panel_context(row: Row, context: Mapping[str, Any] | None = None) -> PanelContext:
    """``context``: the article's abstract and acronyms (``staging.article_contexts``)."""
    rec = row["record"]
    context = context or {}
    return PanelContext(
        key=row["key"],
        subcaption=rec["subcaption"],
        caption=rec["caption"],
        panel_label=rec.get("panel_label"),
        figure_label=rec.get("figure_label"),
        mentions=[(m["sentence"], list(m["panels"])) for m in rec.get("mentions") or []],
        abstract=context.get("abstract") or "",
        acronyms=context.get("acronyms") or {},
    )


def _context(panel: Row, contexts: Mapping[str, Mapping[str, Any]]) -> PanelContext | FailureRecord:
    """The panel's prompt context, or its failure: a malformed record fails its row alone."""
    try:
        return panel_context(panel, contexts.get(panel["record"].get("article_key") or ""))
    except Exception as exc:
        return FailureRecord.from_exception(panel["key"], STAGE, exc)


def _enrich(
    enricher: Enricher, items: list[tuple[PanelContext, bytes]]
) -> list[EnrichResult | FailureRecord]:
    """The enricher isolates each panel's requests itself; should the batch call still raise,
    each panel is sent alone, so only the one that breaks it fails."""
    try:
        return enricher.enrich_batch(items)
    except Exception as exc:  # one bad panel must not cost its batch
        if len(items) == 1:
            return [FailureRecord.from_exception(items[0][0].key, STAGE, exc)]
    out: list[EnrichResult | FailureRecord] = []
    for ctx, image in items:
        try:
            out.extend(enricher.enrich_batch([(ctx, image)]))
        except Exception as exc:
            out.append(FailureRecord.from_exception(ctx.key, STAGE, exc))
    return out


def _long_caption_fields(result: EnrichResult, long_tokenizer: str | None) -> dict[str, Any]:
    return dict(
        long_caption=result.long_caption,
        feasibility=[vars(f) for f in result.features],
        llm_model=result.llm_model,
        prompt_version=result.prompt_version,
        llm_prompt_tokens=result.prompt_tokens,
        llm_completion_tokens=result.completion_tokens,
        llm_calls=result.calls,
        tokens_long_caption=clip_tokens(result.long_caption),
        tokens_long_caption_long=(
            long_tokens(result.long_caption, long_tokenizer) if long_tokenizer else None
        ),
    )


def enrich_rows(
    panels: list[Row],
    enricher: Enricher,
    long_tokenizer: str | None = None,
    articles: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[list[Row]]:
    """One list of rows per panel: the panel with its long caption, or its failure row.
    ``articles`` holds each article's context by article key. A bad row (a record the
    context cannot be read from, a caption the tokenizer rejects) fails alone; the batch goes
    on."""
    contexts = [_context(p, articles or {}) for p in panels]
    asked = [
        (c, p["image"])
        for c, p in zip(contexts, panels, strict=True)
        if not isinstance(c, FailureRecord)
    ]
    answers = iter(_enrich(enricher, asked) if asked else [])
    out: list[list[Row]] = []
    for panel, ctx in zip(panels, contexts, strict=True):
        rec = panel["record"]
        result = ctx if isinstance(ctx, FailureRecord) else next(answers)
        if not isinstance(result, FailureRecord):
            try:
                rec.update(_long_caption_fields(result, long_tokenizer))
            except Exception as exc:
                result = FailureRecord.from_exception(panel["key"], STAGE, exc)
        if isinstance(result, FailureRecord):
            out.append([failure_row(result, "panel", rec.get("article_key", ""))])
        else:
            out.append([panel])
    return out
