"""The pipeline's stages, in order, as plain classes of the ``stage.Stage`` protocol.

``STAGE_PHASE`` is what every planned article goes through before its part is staged;
``ENRICH_PHASE`` runs afterwards on the panels that stay (so no duplicate costs an LLM call).
The work itself is in the pure stage functions (``explode``, ``panels_stage``,
``relevance_stage``, ``enrich_stage``); each class only loads what the work needs once per
worker.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ray_jobs.config import Settings
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.contract.rows import ARTICLE_CREDIT, FIGURE, OK, REF, Row, make_row
from ray_jobs.pipeline import metrics
from ray_jobs.pipeline.stage import Stage


class FetchStage(Stage):
    """Article refs in; figure rows, failure rows and end markers out."""

    name, status = "fetch", REF

    def setup(self, settings: Settings) -> None:
        from ray_jobs.pmc.sources import open_source

        self.settings = settings
        self.source = open_source(settings.source, settings.archive)
        self.pool = ThreadPoolExecutor(settings.pipeline.fetch_threads, "fetch")

    def rows_in(self, table: pa.Table) -> list[Row]:
        """``table`` is a slice of the plan (``plan.PLAN_SCHEMA`` columns): the rows are made
        here, on the workers, not by the driver for the whole plan. Each article enters with
        its part and its credit."""
        refs = []
        for r in table.to_pylist():
            part = r.pop("part")
            row = make_row(ArticleRef(**r).key, REF, r)
            refs.append({**row, "part": part, "credit": ARTICLE_CREDIT})
        return refs

    def process_batch(self, rows: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.explode import explode_article, ref_of

        def one(row: Row) -> list[Row]:
            out, marker = explode_article(self.source, ref_of(row["record"]), self.settings)
            return [*out, marker]

        return list(self.pool.map(one, rows))

    def close(self) -> None:
        self.pool.shutdown(wait=False)


class PanelStage(Stage):
    """Panel detection and caption pairing (GPU when the stage asks for one)."""

    name, status = "panels", FIGURE

    def setup(self, settings: Settings) -> None:
        from ray_jobs.figures.panels import PanelDetector

        self.settings = settings
        self.detector = PanelDetector(settings.detector)
        self.gallery = None
        if settings.report.gallery_rate > 0:  # the report's sample of figures, thumbnailed here
            from ray_jobs.report.gallery_files import GalleryWriter
            from ray_jobs.storage.store import open_storage

            storage = open_storage(settings.output.uri, settings.output.s3)
            self.gallery = GalleryWriter(storage, settings.report)

    def process_batch(self, rows: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.panels_stage import panel_rows

        return panel_rows(rows, self.detector, self.settings, self.gallery)


class RelevanceStage(Stage):
    """The modality classifier and the keep decision (GPU when the stage asks for one)."""

    name, status = "relevance", OK

    def setup(self, settings: Settings) -> None:
        from ray_jobs.figures.classifier import ModalityClassifier

        self.classifier = ModalityClassifier(settings.classifier)

    def process_batch(self, rows: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.relevance_stage import relevance_rows

        return relevance_rows(rows, self.classifier)


class EnrichStage(Stage):
    """LongCAP enrichment: many concurrent requests per actor through the async client."""

    name, status = "enrich", OK

    def setup(self, settings: Settings) -> None:
        from ray_jobs.longcap.enrich import Enricher
        from ray_jobs.storage.store import open_storage

        self.storage = open_storage(settings.output.uri, settings.output.s3)
        self.enricher = Enricher(settings.longcap, cache=self.storage)
        self.long_tokenizer = settings.captions.long_tokenizer
        self.contexts: dict[str, dict[str, dict[str, Any]]] = {}  # by part, the latest few

    def _articles(self, rows: list[Row]) -> dict[str, dict[str, Any]]:
        """The articles' contexts for ``rows``, read once per part from its staged markers."""
        from ray_jobs.pipeline.staging import article_contexts

        articles: dict[str, dict[str, Any]] = {}
        for part in sorted({row["part"] for row in rows if row.get("part")}):
            if part not in self.contexts:
                while len(self.contexts) >= 4:
                    del self.contexts[next(iter(self.contexts))]
                self.contexts[part] = article_contexts(self.storage, part)
            articles.update(self.contexts[part])
        return articles

    def process_batch(self, rows: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.enrich_stage import enrich_rows

        out = enrich_rows(rows, self.enricher, self.long_tokenizer, self._articles(rows))
        for produced in out:
            for row in produced:
                rec: dict[str, Any] = row["record"]
                if row["status"] == OK and rec.get("llm_calls"):  # cache hits cost nothing
                    for kind in ("prompt", "completion"):
                        metrics.inc(
                            "pmcvl_llm_tokens_total", rec[f"llm_{kind}_tokens"] or 0, {"kind": kind}
                        )
        return out

    def close(self) -> None:
        self.enricher.close()


STAGE_PHASE: tuple[type[Stage], ...] = (FetchStage, PanelStage, RelevanceStage)
ENRICH_PHASE: tuple[type[Stage], ...] = (EnrichStage,)
