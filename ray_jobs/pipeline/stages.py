"""The Ray layer: one callable class per stage for ``map_batches``.

Each class loads what it needs once per actor (a source client, a model, an HTTP client) and
maps Arrow batches of pipeline rows to Arrow batches, delegating the work to the pure stage
functions and passing every row it does not own through.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ray_jobs.config import Settings
from ray_jobs.contract.rows import FIGURE, OK, Row, decode, encode, expand
from ray_jobs.pipeline import metrics

REF = "ref"


def _run(
    stage: str, table: pa.Table, status: str, work: Callable[[list[Row]], list[list[Row]]]
) -> pa.Table:
    return encode(expand(decode(table), status, metrics.counted(stage, work)))


class FetchStage:
    """Article refs in; figure rows, failure rows and end markers out."""

    def __init__(self, settings: Settings):
        from ray_jobs.pmc.sources import open_source

        self.settings = settings
        self.source = open_source(settings.source, settings.archive)
        self.pool = ThreadPoolExecutor(settings.pipeline.fetch_threads, "fetch")

    def _work(self, refs: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.explode import explode_article, ref_of

        def one(row: Row) -> list[Row]:
            rows, marker = explode_article(self.source, ref_of(row["record"]), self.settings)
            return [*rows, marker]

        return list(self.pool.map(one, refs))

    def __call__(self, table: pa.Table) -> pa.Table:
        """``table`` is a slice of the plan (``plan.PLAN_SCHEMA`` columns): the rows and their
        JSON are made here, on the workers, not by the driver for the whole plan. Each article
        enters with its part and its credit."""
        from ray_jobs.contract.refs import ArticleRef
        from ray_jobs.contract.rows import ARTICLE_CREDIT, make_row

        refs = []
        for r in table.to_pylist():
            part = r.pop("part")
            row = make_row(ArticleRef(**r).key, REF, r)
            refs.append({**row, "part": part, "credit": ARTICLE_CREDIT})
        counted = metrics.counted("fetch", self._work)
        return encode(expand(refs, REF, counted))


class PanelStage:
    """Panel detection and caption pairing (GPU when the stage asks for one)."""

    def __init__(self, settings: Settings):
        from ray_jobs.figures.panels import PanelDetector

        self.settings = settings
        self.detector = PanelDetector(settings.detector)
        self.gallery = None
        if settings.report.gallery_rate > 0:  # the report's sample of figures, thumbnailed here
            from ray_jobs.report.gallery_files import GalleryWriter
            from ray_jobs.storage.store import open_storage

            storage = open_storage(settings.output.uri, settings.output.s3)
            self.gallery = GalleryWriter(storage, settings.report)

    def __call__(self, table: pa.Table) -> pa.Table:
        from ray_jobs.pipeline.panels_stage import panel_rows

        return _run(
            "panels",
            table,
            FIGURE,
            lambda rows: panel_rows(rows, self.detector, self.settings, self.gallery),
        )


class RelevanceStage:
    """The modality classifier and the keep decision (GPU when the stage asks for one)."""

    def __init__(self, settings: Settings):
        from ray_jobs.figures.classifier import ModalityClassifier

        self.classifier = ModalityClassifier(settings.classifier)

    def __call__(self, table: pa.Table) -> pa.Table:
        from ray_jobs.pipeline.relevance_stage import relevance_rows

        return _run("relevance", table, OK, lambda rows: relevance_rows(rows, self.classifier))


class EnrichStage:
    """LongCAP enrichment: many concurrent requests per actor through the async client."""

    def __init__(self, settings: Settings):
        from ray_jobs.longcap.enrich import Enricher
        from ray_jobs.storage.store import open_storage

        cache = open_storage(settings.output.uri, settings.output.s3)
        self.enricher = Enricher(settings.longcap, cache=cache)
        self.long_tokenizer = settings.captions.long_tokenizer

    def _work(self, panels: list[Row]) -> list[list[Row]]:
        from ray_jobs.pipeline.enrich_stage import enrich_rows

        out = enrich_rows(panels, self.enricher, self.long_tokenizer)
        for rows in out:
            for row in rows:
                rec: dict[str, Any] = row["record"]
                if row["status"] == OK and rec.get("llm_calls"):  # cache hits cost nothing
                    for kind in ("prompt", "completion"):
                        metrics.inc(
                            "pmcvl_llm_tokens_total", rec[f"llm_{kind}_tokens"] or 0, {"kind": kind}
                        )
        return out

    def __call__(self, table: pa.Table) -> pa.Table:
        return _run("enrich", table, OK, self._work)

    def __del__(self) -> None:
        enricher = getattr(self, "enricher", None)
        if enricher is not None:
            enricher.close()
