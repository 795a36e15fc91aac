"""LongCAP's deterministic parts: context selection, acronyms, prompts, images, the breaker."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import jsonschema
import pytest
from PIL import Image

from ray_jobs.captions.split import split_caption
from ray_jobs.config import LongCapSettings, load_settings
from ray_jobs.contract.failures import StageError
from ray_jobs.longcap.acronyms import expand_acronyms
from ray_jobs.longcap.breaker import CircuitBreaker, CircuitOpenError
from ray_jobs.longcap.client import server_url
from ray_jobs.longcap.context import PanelContext, panel_context, render_sections, select_mentions
from ray_jobs.longcap.images import image_data_url
from ray_jobs.longcap.prompting import load_prompts, prompt_set_from_texts, prompt_texts
from ray_jobs.pmc.jats import parse_article
from ray_jobs.pmc.records import Article, Figure


@pytest.fixture(scope="module")
def lipase(jats_dir: Path) -> tuple[Article, Figure]:
    """A real article whose Figure 3 has panels A-D, cited as "Figure 3A–C" and "Figure 3D"."""
    article = parse_article((jats_dir / "pone.0046493.nxml").read_bytes())
    return article, article.figures[2]


def _context(article: Article, figure: Figure, label: str) -> PanelContext:
    split = split_caption(figure.caption, frozenset(figure.bold_labels))
    sub = next(s for s in split.subcaptions if s.label == label)
    return panel_context(article, figure, key=f"k-{label}", subcaption=sub.text, panel_label=label)


def test_mentions_naming_the_panel_come_first(lipase) -> None:
    article, figure = lipase
    ctx = _context(article, figure, "D")
    chosen = select_mentions(ctx.mentions, "D", limit=6)
    assert len(chosen.panel) == 2 and all("Figure 3D" in s for s in chosen.panel)
    assert chosen.figure == []
    assert [s for s in chosen.other if "Figure 3A–C" in s]  # about A-C: last
    chosen_c = select_mentions(ctx.mentions, "C", limit=6)
    assert any("3A–C" in s for s in chosen_c.panel) and any(
        "(Figure 3C)" in s for s in chosen_c.panel
    )


def test_mention_selection_limits_dedupes_and_merges_letters() -> None:
    mentions = [
        ("Both panels differ (Fig. 2A and 2B).", ["A"]),
        ("Both panels differ (Fig. 2A and 2B).", ["B"]),  # the same sentence, second xref
        ("The whole figure (Fig. 2).", []),
        ("Only A here (Fig. 2A).", ["A"]),
        ("Only B here (Fig. 2B).", ["b"]),
    ]
    chosen = select_mentions(mentions, "B", limit=3)
    assert chosen.panel == ["Both panels differ (Fig. 2A and 2B).", "Only B here (Fig. 2B)."]
    assert chosen.figure == ["The whole figure (Fig. 2)."]
    assert chosen.other == []  # the limit is reached
    unlabeled = select_mentions(mentions, None, limit=10)
    assert unlabeled.panel == [] and len(unlabeled.figure) == 4  # all about the figure
    assert select_mentions(mentions, "B", limit=0) == select_mentions([], "B", limit=5)


def test_sections_hold_the_panel_context_and_only_used_acronyms(lipase) -> None:
    article, figure = lipase
    text = render_sections(_context(article, figure, "D"), max_mentions=6, max_abstract_chars=300)
    order = [text.index(f"<{tag}>") for tag in ("subcaption", "panel_mentions", "figure_caption")]
    assert order == sorted(order)
    assert "<figure_mentions>" not in text  # empty sections are left out
    assert "<subcaption>\nPMF spectra of LipN" in text
    assert "- PMF: Peptide mass fingerprinting" in text
    assert "DTT" not in text  # defined in the article, absent from this context
    abstract = text.split("<abstract>\n")[1].split("\n</abstract>")[0]
    assert len(abstract) <= 302 and abstract.endswith("…")


def test_acronyms_expand_at_first_use_only() -> None:
    acronyms = {
        "MRI": "magnetic resonance imaging",
        "IL-6": "interleukin 6",
        "MALDI-TOF": "matrix-assisted laser desorption ionization time-of-flight",
        "TOF": "time of flight",
        "mM": "MmPPOX THL Protein Kma",  # a unit mistaken for an acronym by the article's list
        "CT": "computed tomography",
    }
    text = "MRI shows a lesion. A second MRI; MRI-guided biopsy; fMRI. 10 mM; IL-6 and MALDI-TOF."
    assert expand_acronyms(text, acronyms) == (
        "magnetic resonance imaging (MRI) shows a lesion. A second MRI; MRI-guided biopsy; fMRI. "
        "10 mM; interleukin 6 (IL-6) and matrix-assisted laser desorption ionization "
        "time-of-flight (MALDI-TOF)."
    )
    defined = "A computed tomography (CT) scan; CT again."
    assert expand_acronyms(defined, acronyms) == defined
    assert expand_acronyms("no acronyms here", acronyms) == "no acronyms here"


def test_acronyms_from_a_real_article(lipase) -> None:
    article, _ = lipase
    text = "PMF spectra of LipN incubated with MmPPOX at 10 mM in ACN."
    assert expand_acronyms(text, article.acronyms) == (
        "Peptide mass fingerprinting (PMF) spectra of LipN incubated with MmPPOX at 10 mM in "
        "Acetonitrile (ACN)."
    )


def test_prompt_version_follows_the_prompt_files() -> None:
    prompts = load_prompts()
    assert prompts.version.startswith("longcap-") and len(prompts.version) == len("longcap-") + 12
    texts = prompt_texts()
    assert prompt_set_from_texts(texts).version == prompts.version
    edited = {**texts, "augment": texts["augment"].replace("precise", "exact")}
    assert prompt_set_from_texts(edited).version != prompts.version
    for prompt in (prompts.augment, prompts.feasibility):
        jsonschema.Draft202012Validator.check_schema(prompt.schema)
    pinned = prompts.feasibility.schema_with(judgements={"minItems": 3, "maxItems": 3})
    assert pinned["properties"]["judgements"]["maxItems"] == 3
    assert prompts.feasibility.schema["properties"]["judgements"]["maxItems"] == 1  # a copy
    assert "<features>\n1. a\n2. b\n</features>" in prompts.feasibility.render(
        features="1. a\n2. b"
    )


def _png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, "white").save(out, format="PNG")
    return out.getvalue()


def _decode(url: str) -> Image.Image:
    head, payload = url.split(",", 1)
    assert head.startswith("data:image/") and head.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def test_images_go_as_is_when_small_and_resized_when_large(jats_dir: Path) -> None:
    real = sorted((jats_dir.parent / "medicat_figures").glob("*.png"))[0].read_bytes()
    with Image.open(io.BytesIO(real)) as image:
        side = max(image.size)
    url = image_data_url(real, max_side=side)
    assert url.startswith("data:image/png;base64,") and _decode(url).tobytes()
    small = image_data_url(real, max_side=128)
    assert small.startswith("data:image/jpeg;base64,")
    assert max(_decode(small).size) == 128
    assert image_data_url(_png((400, 100), "RGBA"), 100).startswith("data:image/png;")
    with pytest.raises(StageError) as err:
        image_data_url(b"not an image", 128)
    assert err.value.error_type == "bad_image" and not err.value.retryable


def test_breaker_opens_fails_fast_then_lets_one_probe_through() -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=3, reset_s=10, clock=lambda: now[0])
    for _ in range(2):
        breaker.before_call()
        breaker.record_failure()
    breaker.record_success()  # a success resets the count
    for _ in range(3):
        breaker.before_call()
        breaker.record_failure()
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError):
        breaker.before_call()
    now[0] = 10.0
    breaker.before_call()  # the probe
    with pytest.raises(CircuitOpenError):
        breaker.before_call()  # everyone else waits for it
    breaker.record_failure()
    assert breaker.state == "open"
    now[0] = 20.0
    breaker.before_call()
    breaker.record_success()
    assert breaker.state == "closed"
    breaker.before_call()
    for _ in range(3):
        breaker.record_failure()
    now[0] = 30.0
    breaker.before_call()  # a probe that gets cancelled frees the slot for the next caller
    breaker.abandon()
    breaker.before_call()


def test_settings_section_and_server_url() -> None:
    settings = load_settings(
        environ={"PMCVL__LONGCAP__BASE_URL": "http://vllm:8000/v1/", "PMCVL__LONGCAP__API_KEY": "k"}
    )
    assert server_url(settings.longcap) == "http://vllm:8000"
    assert settings.longcap.api_key is not None
    assert "k" not in str(settings.model_dump(mode="json")["longcap"]["api_key"])  # never dumped
    bare = LongCapSettings()
    assert not bare.enabled and bare.cache and bare.temperature == 0
    assert server_url(bare, {"PMCVL_LLM_BASE_URL": "http://env:1"}) == "http://env:1"
    with pytest.raises(ValueError, match="PMCVL_LLM_BASE_URL"):
        server_url(bare, {})
