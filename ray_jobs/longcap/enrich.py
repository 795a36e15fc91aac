"""LongCAP enrichment of one panel, and of a batch of panels concurrently (a Ray actor's job).

Per panel, two calls: the text LLM writes a description from the panel's context only and
breaks it into features (``prompts/augment.yaml``); the vision-language model sees the image
and judges each feature FEASIBLE or NOT_FEASIBLE, with a rewrite of what the image does support
(``prompts/feasibility.yaml``). Refinement is then deterministic: the feasible features and
the non-empty rewrites, in order. A third LLM call could smooth the prose, but it could also
bring back the claims just removed, and it would cost half as much again. When the image
supports none of it, the long caption is the panel's own subcaption: enrichment then adds
nothing rather than invent. Acronyms are expanded last with the article's own list.

Each call's answer is cached (see :mod:`ray_jobs.longcap.cache`), so a panel whose second call
failed only repeats that call on the next run. A panel's failure is a failure record in its
place in the output; it never fails the batch.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ray_jobs.config import LongCapSettings
from ray_jobs.contract.failures import FailureRecord, StageError
from ray_jobs.contract.records import Feature
from ray_jobs.longcap.acronyms import expand_acronyms
from ray_jobs.longcap.cache import LLMCache
from ray_jobs.longcap.client import STAGE, LLMClient, LLMError
from ray_jobs.longcap.context import PanelContext, render_sections
from ray_jobs.longcap.images import image_data_url
from ray_jobs.longcap.prompting import PromptSet, load_prompts
from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

FEASIBLE = "FEASIBLE"
NOT_FEASIBLE = "NOT_FEASIBLE"


@dataclass
class EnrichResult:
    key: str
    long_caption: str
    features: list[Feature]
    llm_model: str
    prompt_version: str
    prompt_tokens: int  # of the answers used, whether fresh or from the cache
    completion_tokens: int
    calls: int  # HTTP calls actually made, retries included (0 when fully served from the cache)


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if not text or text[-1] in ".!?" else text + "."


def refine(features: list[str], judgements: list[dict[str, Any]]) -> str:
    """The feasible features, and the rewrites of the others where the image supports part."""
    kept: list[str] = []
    for feature, judgement in zip(features, judgements, strict=True):
        if judgement["verdict"] == FEASIBLE:
            text = feature
        else:
            text = judgement.get("rewrite", "").strip()
            if text.rstrip(".").lower() == feature.rstrip(".").lower():
                continue  # "reworded" into itself: still unsupported
        text = _sentence(text)
        if text and text not in kept:
            kept.append(text)
    return " ".join(kept)


def _subject(ctx: PanelContext) -> str:
    figure = ctx.figure_label.rstrip(".") if ctx.figure_label else "the figure"
    return f"Panel {ctx.panel_label} of {figure}" if ctx.panel_label else f"A panel of {figure}"


class Enricher:
    """Enriches panels against one server. Build one per Ray actor and reuse it: the HTTP
    connections, the circuit breaker and the event loop of :meth:`enrich_batch` live here."""

    def __init__(
        self,
        settings: LongCapSettings,
        cache: Storage | None = None,
        *,
        prompts: PromptSet | None = None,
        base_url: str | None = None,
    ):
        self.settings = settings
        self.prompts = prompts or load_prompts()
        store = LLMCache(cache) if cache is not None and settings.cache else None
        self.client = LLMClient(settings, cache=store, base_url=base_url)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def prompt_version(self) -> str:
        return self.prompts.version

    @property
    def llm_model(self) -> str:
        s = self.settings
        vision = s.vision_model or s.model
        return s.model if vision == s.model else f"{s.model} + {vision}"

    async def enrich_one(self, ctx: PanelContext, image: bytes) -> EnrichResult:
        """Raises StageError (stage ``enrich``) when the panel cannot be enriched."""
        s, version = self.settings, self.prompts.version
        image_url = await asyncio.to_thread(image_data_url, image, s.image_max_side)

        augment = self.prompts.augment
        sections = render_sections(
            ctx, max_mentions=s.max_mentions, max_abstract_chars=s.max_abstract_chars
        )
        first = await self.client.chat(
            [
                {"role": "system", "content": augment.system},
                {
                    "role": "user",
                    "content": augment.render(subject=_subject(ctx), sections=sections),
                },
            ],
            model=s.model,
            schema=augment.schema_with(features={"maxItems": s.max_features}),
            schema_name="augment",
            cache_tag=version,
        )
        features = list(dict.fromkeys(f.strip() for f in first.content["features"] if f.strip()))
        if not features:
            raise LLMError("schema_violation", "the description came back without features")

        judge = self.prompts.feasibility
        numbered = "\n".join(f"{i}. {' '.join(f.split())}" for i, f in enumerate(features, 1))
        second = await self.client.chat(
            [
                {"role": "system", "content": judge.system},
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": image_url}},
                        {"type": "text", "text": judge.render(features=numbered)},
                    ],
                },
            ],
            model=s.vision_model or s.model,
            schema=judge.schema_with(
                judgements={"minItems": len(features), "maxItems": len(features)}
            ),
            schema_name="feasibility",
            cache_tag=version,
        )
        judgements = second.content["judgements"]
        refined = refine(features, judgements) or _sentence(ctx.subcaption or ctx.caption)
        return EnrichResult(
            key=ctx.key,
            long_caption=expand_acronyms(refined, ctx.acronyms),
            features=[
                Feature(feature=f, verdict=j["verdict"], rationale=" ".join(j["rationale"].split()))
                for f, j in zip(features, judgements, strict=True)
            ],
            llm_model=self.llm_model,
            prompt_version=version,
            prompt_tokens=first.prompt_tokens + second.prompt_tokens,
            completion_tokens=first.completion_tokens + second.completion_tokens,
            calls=first.calls + second.calls,
        )

    async def _guarded(
        self, ctx: PanelContext, image: bytes, gate: asyncio.Semaphore
    ) -> EnrichResult | FailureRecord:
        async with gate:
            try:
                return await self.enrich_one(ctx, image)
            except StageError as exc:
                failure = FailureRecord.from_exception(ctx.key, STAGE, exc)
            except Exception as exc:  # a bug must cost one panel, not the batch
                log.exception("enrich %s failed unexpectedly", ctx.key)
                failure = FailureRecord.from_exception(ctx.key, STAGE, exc)
        log.warning("enrich %s: %s: %s", ctx.key, failure.error_type, failure.message)
        return failure

    async def enrich_many(
        self, items: list[tuple[PanelContext, bytes]]
    ) -> list[EnrichResult | FailureRecord]:
        """Results in the order of ``items``. Panels in progress are bounded (twice the
        request concurrency, so one panel's second call can follow while others wait)."""
        gate = asyncio.Semaphore(2 * self.settings.max_concurrency)
        return list(await asyncio.gather(*(self._guarded(c, i, gate) for c, i in items)))

    def enrich_batch(
        self, items: list[tuple[PanelContext, bytes]]
    ) -> list[EnrichResult | FailureRecord]:
        """:meth:`enrich_many` from synchronous code (a Ray ``map_batches`` actor), on an event
        loop kept for the Enricher's life so connections are reused across batches."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("enrich_batch inside a running event loop: await enrich_many")
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self.enrich_many(items))

    async def aclose(self) -> None:
        await self.client.aclose()

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        try:
            loop.run_until_complete(self.client.aclose())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
