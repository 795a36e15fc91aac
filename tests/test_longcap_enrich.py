"""LongCAP enrichment end to end against the fake vLLM server: real articles and figures,
per-panel failures, the cache."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLM, start_fake_llm
from PIL import Image

from ray_jobs.captions.split import split_caption
from ray_jobs.config import LongCapSettings
from ray_jobs.contract.failures import FailureRecord
from ray_jobs.longcap.context import PanelContext, panel_context
from ray_jobs.longcap.enrich import Enricher, EnrichResult, refine
from ray_jobs.longcap.prompting import load_prompts, prompt_set_from_texts, prompt_texts
from ray_jobs.pmc.jats import parse_article
from ray_jobs.storage.store import LocalStorage

Items = list[tuple[PanelContext, bytes]]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with start_fake_llm() as fake:
        yield fake


def fast(url: str, **over: Any) -> LongCapSettings:
    values: dict[str, Any] = {
        "base_url": url,
        "model": "fake-vlm",
        "timeout_s": 2.0,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "breaker_threshold": 100,
        "max_concurrency": 8,
    }
    return LongCapSettings(**{**values, **over})


@pytest.fixture(scope="module")
def medicat(jats_dir: Path) -> Items:
    """Real figures (MedICaT sample) with their captions and the sentences citing them."""
    folder = jats_dir.parent / "medicat_figures"
    items = []
    for line in (folder / "sample.jsonl").read_text().splitlines():
        row = json.loads(line)
        image = (folder / f"{row['pdf_hash']}_{row['fig_uri']}").read_bytes()
        ctx = PanelContext(
            key=f"{row['pdf_hash'][:8]}-{row['fig_key']}",
            subcaption=row["s2_caption"],
            caption=row["s2_caption"],
            panel_label=None,
            figure_label=re.sub(r"(\D)(\d)", r"\1 \2", row["fig_key"]),
            mentions=[(s, []) for s in row["s2orc_references"] or []],
        )
        items.append((ctx, image))
    return items


@pytest.fixture(scope="module")
def lipase_panels(jats_dir: Path, medicat: Items) -> Items:
    """Panels A-D of a real article's Figure 3 (a real figure image stands in for the crops)."""
    article = parse_article((jats_dir / "pone.0046493.nxml").read_bytes())
    figure = article.figures[2]
    split = split_caption(figure.caption, frozenset(figure.bold_labels))
    image = medicat[1][1]
    return [
        (
            panel_context(
                article,
                figure,
                key=f"PMC3460867-g003-p0{i}",
                subcaption=s.text,
                panel_label=s.label,
            ),
            image,
        )
        for i, s in enumerate(split.subcaptions)
    ]


def _results(out: list[EnrichResult | FailureRecord]) -> list[EnrichResult]:
    assert all(isinstance(r, EnrichResult) for r in out), [
        r for r in out if isinstance(r, FailureRecord)
    ]
    return [r for r in out if isinstance(r, EnrichResult)]


def test_panels_of_a_real_article_are_enriched(llm: FakeLLM, lipase_panels: Items) -> None:
    enricher = Enricher(fast(llm.url))
    try:
        results = _results(enricher.enrich_batch(lipase_panels))
    finally:
        enricher.close()
    assert [r.key for r in results] == [c.key for c, _ in lipase_panels]
    verdicts = {f.verdict for r in results for f in r.features}
    assert verdicts == {"FEASIBLE", "NOT_FEASIBLE"}
    for r in results:
        assert r.calls == 2 and r.prompt_tokens > 256 and r.completion_tokens > 0
        assert r.prompt_version == load_prompts().version and r.llm_model == "fake-vlm"
        assert all(f.rationale for f in r.features)
        kept = " ".join(f.feature for f in r.features if f.verdict == "FEASIBLE")
        for f in r.features:  # refinement keeps what the image supports, drops the rest
            if f.verdict == "FEASIBLE":
                assert f.feature.rstrip(".") in r.long_caption
            elif f.feature.rstrip(".") not in kept:
                assert f.feature.rstrip(".") not in r.long_caption
    panel_d = results[3]
    # the context put panel D's own mentions first; the acronym is expanded from the article
    assert "Figure 3D" in " ".join(f.feature for f in panel_d.features)
    assert "Peptide mass fingerprinting (PMF)" in panel_d.long_caption


def test_requests_are_a_text_call_then_an_image_call_with_schemas(
    llm: FakeLLM, medicat: Items
) -> None:
    ctx, image = medicat[0]
    enricher = Enricher(fast(llm.url, image_max_side=200))
    try:
        result = _results(enricher.enrich_batch([(ctx, image)]))[0]
    finally:
        enricher.close()
    augment, judge = llm.bodies
    assert augment["response_format"]["json_schema"]["name"] == "augment"
    assert isinstance(augment["messages"][1]["content"], str)
    assert "<figure_caption>" in augment["messages"][1]["content"]
    schema = judge["response_format"]["json_schema"]["schema"]
    n = len(result.features)
    assert schema["properties"]["judgements"]["minItems"] == n
    assert schema["properties"]["judgements"]["maxItems"] == n
    image_part, text_part = judge["messages"][1]["content"]
    head, payload = image_part["image_url"]["url"].split(",", 1)
    assert head == "data:image/jpeg;base64"
    assert max(Image.open(io.BytesIO(base64.b64decode(payload))).size) == 200
    assert text_part["text"].count("\n1. ") == 1


def test_real_figures_enrich_in_one_batch(llm: FakeLLM, medicat: Items) -> None:
    enricher = Enricher(fast(llm.url))
    try:
        results = _results(enricher.enrich_batch(medicat))
    finally:
        enricher.close()
    assert len(results) == len(medicat) and llm.chat_requests == 2 * len(medicat)
    assert all(r.long_caption and r.features for r in results)


@pytest.mark.parametrize(
    ("fault", "error_type", "retryable"),
    [
        ("http_500", "http_500", True),
        ("rate_limited", "rate_limited", True),
        ("slow", "timeout", True),
        ("connection", "connection", True),
        ("malformed_json", "malformed_json", False),
        ("schema_violation", "schema_violation", False),
    ],
)
def test_one_panel_failing_never_fails_the_others(
    llm: FakeLLM, lipase_panels: Items, fault: str, error_type: str, retryable: bool
) -> None:
    llm.slow_s = 1.0
    marker = lipase_panels[1][0].subcaption  # only panel B's prompt holds it as its subcaption
    llm.fail_matching(f"<subcaption>\n{marker}", fault)
    enricher = Enricher(fast(llm.url, timeout_s=0.3))
    try:
        out = enricher.enrich_batch(lipase_panels)
    finally:
        enricher.close()
    failed = out[1]
    assert isinstance(failed, FailureRecord)
    assert (failed.source_key, failed.stage, failed.error_type) == (
        lipase_panels[1][0].key,
        "enrich",
        error_type,
    )
    assert failed.retryable is retryable
    assert all(isinstance(r, EnrichResult) for i, r in enumerate(out) if i != 1)


def test_retries_recover_inside_a_batch(llm: FakeLLM, lipase_panels: Items) -> None:
    llm.fail_next(3, "http_503")
    enricher = Enricher(fast(llm.url, max_retries=4))
    try:
        results = _results(enricher.enrich_batch(lipase_panels))
    finally:
        enricher.close()
    assert sum(r.calls for r in results) == 2 * len(lipase_panels) + 3


def test_an_unreadable_image_fails_alone_without_a_call(llm: FakeLLM, medicat: Items) -> None:
    items = [(medicat[0][0], b"\x89PNG broken"), medicat[1]]
    enricher = Enricher(fast(llm.url))
    try:
        bad, good = enricher.enrich_batch(items)
    finally:
        enricher.close()
    assert isinstance(bad, FailureRecord) and bad.error_type == "bad_image"
    assert isinstance(good, EnrichResult) and llm.chat_requests == 2


def test_a_failing_server_fails_the_batch_fast_through_the_breaker(
    llm: FakeLLM, medicat: Items
) -> None:
    """Every request has its connection dropped: the breaker opens after ``threshold`` faults
    and the rest of the batch fails at once, retryable, without reaching the server."""
    llm.fail_matching("", "connection")
    settings = fast(llm.url, breaker_threshold=3, max_retries=5, backoff_base_s=0.1)
    enricher = Enricher(settings)
    try:
        out = enricher.enrich_batch(medicat)
    finally:
        enricher.close()
    assert all(isinstance(r, FailureRecord) and r.retryable for r in out)
    assert sum(r.error_type == "circuit_open" for r in out if isinstance(r, FailureRecord)) >= 5
    # len(medicat) panels x 6 attempts without the breaker; with it, the faults that open it
    # and at most the calls already in flight (max_concurrency) meanwhile
    assert 3 <= llm.chat_requests <= 3 + settings.max_concurrency - 1


def test_a_rerun_is_served_from_the_cache(
    llm: FakeLLM, lipase_panels: Items, tmp_path: Path
) -> None:
    storage = LocalStorage(tmp_path / "out")
    first = Enricher(fast(llm.url), cache=storage)
    try:
        fresh = _results(first.enrich_batch(lipase_panels))
    finally:
        first.close()
    entries = list(storage.list("llm_cache"))
    assert len(entries) == 2 * len(lipase_panels)
    assert all(re.fullmatch(r"llm_cache/([0-9a-f]{2})/\1[0-9a-f]{62}\.json", e) for e in entries)
    entry = json.loads(storage.read_bytes(entries[0]))
    assert entry["prompt_version"] == load_prompts().version and entry["content"]

    requests = llm.chat_requests
    second = Enricher(fast(llm.url), cache=storage)
    try:
        cached = _results(second.enrich_batch(lipase_panels))
    finally:
        second.close()
    assert llm.chat_requests == requests
    assert [r.calls for r in cached] == [0] * len(lipase_panels)
    for a, b in zip(fresh, cached, strict=True):
        assert (a.long_caption, a.features, a.prompt_tokens) == (
            b.long_caption,
            b.features,
            b.prompt_tokens,
        )


def test_a_failed_call_is_not_cached_and_is_retried_next_run(
    llm: FakeLLM, lipase_panels: Items, tmp_path: Path
) -> None:
    storage = LocalStorage(tmp_path / "out")
    llm.fail_matching("Judge every feature", "schema_violation", times=1)  # one 2nd call fails
    first = Enricher(fast(llm.url), cache=storage)
    try:
        out = first.enrich_batch(lipase_panels[:2])
    finally:
        first.close()
    assert sum(isinstance(r, FailureRecord) for r in out) == 1
    assert len(list(storage.list("llm_cache"))) == 3

    requests = llm.chat_requests
    second = Enricher(fast(llm.url), cache=storage)
    try:
        again = _results(second.enrich_batch(lipase_panels[:2]))
    finally:
        second.close()
    assert llm.chat_requests == requests + 1  # only the failed feasibility call
    assert sorted(r.calls for r in again) == [0, 1]


def test_a_new_prompt_version_misses_the_cache(
    llm: FakeLLM, medicat: Items, tmp_path: Path
) -> None:
    storage = LocalStorage(tmp_path / "out")
    items = medicat[:2]
    first = Enricher(fast(llm.url), cache=storage)
    _results(first.enrich_batch(items))
    first.close()
    texts = prompt_texts()
    edited = prompt_set_from_texts({**texts, "feasibility": texts["feasibility"] + "\n# v2\n"})
    changed = Enricher(fast(llm.url), cache=storage, prompts=edited)
    try:
        results = _results(changed.enrich_batch(items))
    finally:
        changed.close()
    assert all(r.calls == 2 and r.prompt_version == edited.version for r in results)
    off = Enricher(fast(llm.url, cache=False), cache=LocalStorage(tmp_path / "off"))
    try:
        _results(off.enrich_batch(items))
    finally:
        off.close()
    assert list(LocalStorage(tmp_path / "off").list("")) == []


def test_enrich_many_from_a_running_loop_and_batches_reuse_the_enricher(
    llm: FakeLLM, medicat
) -> None:
    enricher = Enricher(fast(llm.url))

    async def go() -> list[EnrichResult | FailureRecord]:
        try:
            with pytest.raises(RuntimeError, match="await enrich_many"):
                enricher.enrich_batch(medicat[:1])
            return await enricher.enrich_many(medicat[:2])
        finally:
            await enricher.aclose()

    assert len(_results(asyncio.run(go()))) == 2
    try:
        for _ in range(2):  # one actor, many batches, one event loop
            assert len(_results(enricher.enrich_batch(medicat[2:4]))) == 2
    finally:
        enricher.close()
    enricher.close()  # twice is harmless


def test_refine_keeps_feasible_features_and_rewrites() -> None:
    features = ["A chest CT.", "The tumour is malignant.", "Arrows mark the lesion", "Cured."]
    judgements = [
        {"verdict": "FEASIBLE", "rewrite": ""},
        {"verdict": "NOT_FEASIBLE", "rewrite": "A mass is visible"},
        {"verdict": "FEASIBLE", "rewrite": "ignored"},
        {"verdict": "NOT_FEASIBLE", "rewrite": "cured"},  # reworded into itself: dropped
    ]
    assert refine(features, judgements) == (
        "A chest CT. A mass is visible. Arrows mark the lesion."
    )
    assert refine(["x"], [{"verdict": "NOT_FEASIBLE", "rewrite": ""}]) == ""


def test_corrupt_or_stale_cache_entries_are_misses(
    llm: FakeLLM, medicat: Items, tmp_path: Path
) -> None:
    storage = LocalStorage(tmp_path / "out")
    first = Enricher(fast(llm.url), cache=storage)
    _results(first.enrich_batch(medicat[:1]))
    first.close()
    augment_entry, judge_entry = sorted(
        storage.list("llm_cache"), key=lambda e: json.loads(storage.read_bytes(e))["step"]
    )
    storage.write_bytes(augment_entry, b"{not json")
    stale = json.loads(storage.read_bytes(judge_entry))
    stale["content"] = {"judgements": []}  # no longer fits the schema
    storage.write_bytes(judge_entry, json.dumps(stale).encode())
    second = Enricher(fast(llm.url), cache=storage)
    try:
        result = _results(second.enrich_batch(medicat[:1]))[0]
    finally:
        second.close()
    assert result.calls == 2


def test_a_separate_vision_model_judges_the_image(medicat: Items) -> None:
    with start_fake_llm(models=("writer", "seer")) as fake:
        enricher = Enricher(fast(fake.url, model="writer", vision_model="seer"))
        try:
            result = _results(enricher.enrich_batch(medicat[:1]))[0]
        finally:
            enricher.close()
        assert [b["model"] for b in fake.bodies] == ["writer", "seer"]
    assert result.llm_model == "writer + seer"


def test_no_server_configured_is_an_error_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PMCVL_LLM_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="PMCVL_LLM_BASE_URL"):
        Enricher(LongCapSettings())
    monkeypatch.setenv("PMCVL_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert Enricher(LongCapSettings()).client.root == "http://127.0.0.1:9"


def test_nothing_feasible_falls_back_to_the_subcaption(
    llm: FakeLLM, lipase_panels: Items, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ray_jobs.longcap.enrich.refine", lambda features, judgements: "")
    enricher = Enricher(fast(llm.url))
    try:
        result = _results(enricher.enrich_batch(lipase_panels[3:]))[0]
    finally:
        enricher.close()
    assert result.long_caption.startswith("Peptide mass fingerprinting (PMF) spectra of LipN")
