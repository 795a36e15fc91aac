"""Kept panel rows through LongCAP enrichment: a long caption, or a failure row.

A panel whose enrichment failed is not written without its long caption (that would mix
caption kinds silently); it becomes a failure row. A server fault (5xx, 429, timeout, an open
breaker) is retryable: the article is marked for another try and the next run enriches only
the panels still missing, from a warm cache. An answer the schema rejects at temperature 0
would come back the same, so it stays a permanent failure row.
"""

from __future__ import annotations

from ray_jobs.captions.tokens import clip_tokens, long_tokens
from ray_jobs.failures import FailureRecord
from ray_jobs.longcap.context import PanelContext
from ray_jobs.longcap.enrich import Enricher
from ray_jobs.pipeline.rows import Row, failure_row


def panel_context(row: Row) -> PanelContext:
    rec = row["record"]
    context = rec.get("_context") or {}
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


def enrich_rows(
    panels: list[Row], enricher: Enricher, long_tokenizer: str | None = None
) -> list[list[Row]]:
    results = enricher.enrich_batch([(panel_context(p), p["image"]) for p in panels])
    out: list[list[Row]] = []
    for panel, result in zip(panels, results, strict=True):
        rec = panel["record"]
        if isinstance(result, FailureRecord):
            out.append([failure_row(result, "panel", rec["article_key"])])
            continue
        rec.update(
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
        out.append([panel])
    return out
