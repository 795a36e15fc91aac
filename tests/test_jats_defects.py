"""JATS text defects found on real articles from other publishers (issue 18), each on the real
articles of ../shared/data/jats and jats_more where they occur, and on small constructed XML."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lxml import etree

from ray_jobs.contract.failures import StageError
from ray_jobs.pmc.acronyms import find_definitions
from ray_jobs.pmc.figure_refs import panel_letters
from ray_jobs.pmc.jats import parse_article, parse_root
from ray_jobs.pmc.records import Article
from ray_jobs.pmc.sentences import sentence_at, sentence_spans

MML = "http://www.w3.org/1998/Math/MathML"
ODD_CHARS = re.compile("[\xa0\u2000-\u200b\u202f\u205f\u3000\u2060-\u2064\ufeff\xad\ue000\ue001]")


@pytest.fixture(scope="module")
def more_dir(jats_dir: Path) -> Path:
    return jats_dir.parent / "jats_more"


def real_files(jats_dir: Path, more_dir: Path) -> list[Path]:
    return sorted(jats_dir.glob("*.nxml")) + sorted(more_dir.glob("*.xml"))


def article(body: str, *, front: str = "", back: str = "") -> bytes:
    return (
        f'<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="{MML}"><front>'
        f'<article-meta><article-id pub-id-type="pmc">PMC1</article-id>{front}</article-meta>'
        f"</front><body>{body}</body><back>{back}</back></article>"
    ).encode()


def fig(fig_id: str, label: str, caption: str = "<p>Caption.</p>") -> str:
    return f'<fig id="{fig_id}"><label>{label}</label><caption>{caption}</caption></fig>'


def xref(rid: str, text: str) -> str:
    return f'<xref ref-type="fig" rid="{rid}">{text}</xref>'


def mentions(a: Article, index: int = 0) -> list[tuple[str, list[str]]]:
    return [(m.text, m.panels) for m in a.figures[index].mentions]


# --- inline formulas -----------------------------------------------------------------------

SPRINGER_FORMULA = (
    '<inline-formula id="IEq1"><alternatives><mml:math id="M1"><mml:msup><mml:mi>L</mml:mi>'
    "<mml:mrow><mml:mo>−</mml:mo><mml:mn>1</mml:mn></mml:mrow></mml:msup><mml:mo>&#x2061;</mml:mo>"
    "<mml:msup><mml:mrow><mml:mo>[</mml:mo><mml:mi>Fe</mml:mi><mml:msub><mml:mrow><mml:mo>(</mml:mo>"
    "<mml:mi>CN</mml:mi><mml:mo>)</mml:mo></mml:mrow><mml:mn>6</mml:mn></mml:msub><mml:mo>]</mml:mo>"
    "</mml:mrow><mml:mrow><mml:mn>3</mml:mn><mml:mo>−</mml:mo><mml:mo>/</mml:mo><mml:mn>4</mml:mn>"
    "<mml:mo>−</mml:mo></mml:mrow></mml:msup></mml:math>"
    '<tex-math id="M2">\\documentclass[12pt]{minimal}\\usepackage{amsmath}\\begin{document}'
    "$${L}^{-1}{[Fe(CN)_6]}^{3-/4-}$$\\end{document}</tex-math>"
    '<inline-graphic xlink:href="eq1.gif"/></alternatives></inline-formula>'
)


def test_inline_mathml_stays_in_its_sentence_and_caption() -> None:
    body = (
        f"<p>Cells were held in a 5 mmol {SPRINGER_FORMULA} solution "
        f"({xref('f1', 'Fig. 1')}). Next sentence.</p>"
        + fig("f1", "Fig. 1", f"<p>Cyclic voltammetry in 5 mmol {SPRINGER_FORMULA}.</p>")
    )
    a = parse_article(article(body))
    (m,) = a.figures[0].mentions
    assert m.sentence == "Cells were held in a 5 mmol L−1[Fe(CN)6]3−/4− solution (Fig. 1)."
    assert a.figures[0].caption == "Cyclic voltammetry in 5 mmol L−1[Fe(CN)6]3−/4−."
    assert "documentclass" not in m.paragraph and "Fe(CN)" in m.paragraph


def test_tex_only_alternative_and_glass_transition() -> None:
    tex = (
        "<inline-formula><alternatives><tex-math>\\documentclass[12pt]{minimal}"
        "\\begin{document}$$T_g$$\\end{document}</tex-math>"
        '<inline-graphic xlink:href="eq2.gif"/></alternatives></inline-formula>'
    )
    mml = (
        "<inline-formula><alternatives><mml:math><mml:msub><mml:mi>T</mml:mi><mml:mi>g</mml:mi>"
        "</mml:msub></mml:math><inline-graphic xlink:href='x.gif'/></alternatives></inline-formula>"
    )
    body = (
        f"<p>The glass transition temperature ({mml}) rose ({xref('f1', 'Figure 1')}).</p>"
        f"<p>And in TeX ({tex}) too ({xref('f1', 'Figure 1B')}).</p>" + fig("f1", "Figure 1")
    )
    a = parse_article(article(body))
    sentences = [m.sentence for m in a.figures[0].mentions]
    assert sentences == [
        "The glass transition temperature (Tg) rose (Figure 1).",
        "And in TeX (T_g) too (Figure 1B).",
    ]


# --- panel letters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "number", "expected"),
    [
        ("Figure 2—figure supplement 3A", "3", ["A"]),
        ("Figure 2—figure supplement 3A–C", "3", ["A", "B", "C"]),
        ("Appendix 1—figure 3A", "3", ["A"]),
        ("Figure 1—figure supplement 5A and B", "5", ["A", "B"]),
        ("Figure 2—figure supplement 2A", "2", ["A"]),
        ("Figure1—figure supplement 1A,2", "2", []),  # supplement 2: no letter
        ("Figure 6A-6D", "6", ["A", "B", "C", "D"]),
        ("Fig. 6A–6C", None, ["A", "B", "C"]),
        ("Figs. 6A–6C and 7B", "7", ["B"]),
        ("Figs. 6A–6C and 7B", "6", ["A", "B", "C"]),
        ("Figure 1A′", None, ["A"]),
    ],
)
def test_panel_letters_after_the_last_number(
    ref: str, number: str | None, expected: list[str]
) -> None:
    assert panel_letters(ref, number) == expected


def test_supplement_and_appendix_labels_and_mentions() -> None:
    body = (
        f"<p>As shown ({xref('f2s3', 'Figure 2—figure supplement 3A')}) and "
        f"({xref('a1f3', 'Appendix 1—figure 3B')}), and {xref('f6', 'Figure 6A-6D')}.</p>"
        + fig("f2", "Figure 2.")
        + fig("f2s3", "Figure 2—figure supplement 3.")
        + fig("f6", "Figure 6.")
    )
    back = f'<app id="app1"><title>Appendix 1</title>{fig("a1f3", "Appendix 1—figure 3.")}</app>'
    a = parse_article(article(body, back=back))
    by_id = {f.id: [m.panels for m in f.mentions] for f in a.figures}
    assert by_id == {"f2": [], "f2s3": [["A"]], "f6": [["A", "B", "C", "D"]], "a1f3": [["B"]]}


def test_real_elife_figure_supplement_letters(more_dir: Path) -> None:
    a = parse_article((more_dir / "elife02935.xml").read_bytes())
    s5 = next(f for f in a.figures if f.id == "fig1s5")
    assert s5.label == "Figure 1—figure supplement 5."
    assert [m.panels for m in s5.mentions] == [["A"], ["B"], ["A", "B"]]
    b = parse_article((more_dir / "elife04953.xml").read_bytes())
    s71 = next(f for f in b.figures if f.id == "fig7s1")
    assert ["A", "B", "C"] in [m.panels for m in s71.mentions]
    # one xref naming two supplements: the letter belongs to supplement 1 only
    s12 = next(f for f in b.figures if f.id == "fig1s2")
    joint = [m for m in s12.mentions if m.text == "Figure1—figure supplement 1A,2"]
    assert joint and joint[0].panels == []


# --- sentences -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("As shown in Figure 5B. A visual check agreed.", ["As shown in Figure 5B.", "A visual"]),
        ("See Fig. 4c. Abdali et al. agreed.", ["See Fig. 4c.", "Abdali et al. agreed."]),
        ("Cells grew for 2 h. Occasionally they died.", ["Cells grew for 2 h.", "Occasionally"]),
        ("It melts at 194.3 °C. Gozutok et al. saw.", ["It melts at 194.3 °C.", "Gozutok"]),
        ("Kept for 5 min. The cells were lysed.", ["Kept for 5 min.", "The cells"]),
        ("Data (panel A). Next we did.", ["Data (panel A).", "Next we did."]),
        ("Written by J. K. Rowling in 1997. Then more.", ["Written by J. K. Rowling in 1997."]),
        ("As John F. Kennedy said. Then more.", ["As John F. Kennedy said."]),
        ("See ref. 5 and no. 3 of vol. 2 here. End.", ["See ref. 5 and no. 3 of vol. 2 here."]),
        ("In the U.S. Army. And", ["In the U.S. Army."]),
    ],
)
def test_sentence_ends_after_a_single_letter(text: str, expected: list[str]) -> None:
    sentences = [text[a:b].strip() for a, b in sentence_spans(text)]
    for want, got in zip(expected, sentences, strict=False):
        assert got.startswith(want), (want, got)
    assert sentences[0] == expected[0]


def test_lazy_sentences_agree_with_the_full_split(jats_dir: Path, more_dir: Path) -> None:
    """The per-reference search finds exactly the sentences a full split gives."""
    for path in real_files(jats_dir, more_dir):
        for figure in parse_article(path.read_bytes()).figures:
            for m in figure.mentions:
                full = [m.paragraph[a:b].strip() for a, b in sentence_spans(m.paragraph)]
                assert m.sentence in full or m.sentence == m.paragraph, (path.name, m.sentence)


def test_real_sentences_end_after_a_panel_letter(jats_dir: Path, more_dir: Path) -> None:
    bmc = parse_article((jats_dir / "1471-2180-11-174.nxml").read_bytes())
    assert "The effects of tKCN on lysis time SDs and CVs are shown in Figure 4B." in [
        m.sentence for m in bmc.figures[3].mentions
    ]
    plos = parse_article((jats_dir / "pone.0046493.nxml").read_bytes())
    assert any(
        m.sentence.endswith("as illustrated in Figure 3D.") for m in plos.figures[2].mentions
    )
    elife = parse_article((more_dir / "elife04953.xml").read_bytes())
    f4 = next(f for f in elife.figures if f.id == "fig4")
    assert any(m.sentence.endswith("as described in Figure 4d.") for m in f4.mentions)
    # "200 µm. For phenotype ..." is a sentence end too
    d = parse_article((more_dir / "elife05502.xml").read_bytes())
    for f in d.figures:
        for m in f.mentions:
            assert not re.search(r"\d µm\. [A-Z]", m.sentence), m.sentence


# --- acronyms ------------------------------------------------------------------------------

NOT_DEFINITIONS = (
    "p values were corrected by the Holm-Bonferroni method (Holm, 1979). "
    "Luciferase activity was read with a dual assay system (Promega). "
    "Flies were chilled on a cold plate (Teca, Chicago, IL) at 2 °C. "
    "Cells were treated with trypsin inhibitor (T1892) and Bradford reagent (B6429). "
    "The second tumour sample (S24) and the leucine mutant (L451G) were sequenced. "
    "Malaria parasites (Plasmodium) were grown in Maputo province (Mozambique). "
    "The Wright–Fisher process (Wright) and the kinase construct PLCγ1-YFP (PLC). "
    "Enzyme kinetics Km (mM) were fitted. Shown in the GC-MS analysis (1A). "
    "The transcription factor (F2) was found."
)


def test_acronym_false_positives_are_refused() -> None:
    assert find_definitions(NOT_DEFINITIONS) == {}


def test_a_match_spread_over_a_phrase_is_not_a_long_form() -> None:
    """Schwartz–Hearst finds T, S, H and β in "T3 status ... thyrotropin β-subunit", passing
    over four words that give it nothing: a phrase, not the expansion of TSHβ."""
    text = (
        "We measured plasma T3 status and mRNA levels for thyrotropin β-subunit (TSHβ). "
        "The estrogen receptor (ER) and the human progesterone receptor ligand-binding domain "
        "(hPR) were expressed, with the European Prospective Investigation into Cancer and "
        "Nutrition (EPIC) cohort."
    )
    assert find_definitions(text) == {
        "ER": "estrogen receptor",
        "EPIC": "European Prospective Investigation into Cancer and Nutrition",
    }


def test_acronym_definitions_that_look_alike_are_kept() -> None:
    text = (
        "Samples in dithiothreitol (DTT; Invitrogen, Carlsbad, CA) and "
        "2,2′-azinodiethylbenzothiazoline sulfonic acid (ABTS, KPL Laboratories, Inc.). "
        "Signalling by Sonic Hedgehog (Shh) and the peptide Elabela (Ela). "
        "The human immunodeficiency virus (HIV-1) and C-C motif chemokine ligand 18 (CCL18). "
        "The World Health Organization (WHO, 2019) guidance."
    )
    assert find_definitions(text) == {
        "DTT": "dithiothreitol",
        "ABTS": "2,2′-azinodiethylbenzothiazoline sulfonic acid",
        "Shh": "Sonic Hedgehog",
        "Ela": "Elabela",
        "HIV-1": "human immunodeficiency virus",
        "CCL18": "C-C motif chemokine ligand 18",
        "WHO": "World Health Organization",
    }


@pytest.mark.parametrize(
    ("name", "absent", "present"),
    [
        ("mds526.nxml", ["C18"], {"IMD": "Index of Multiple Deprivation"}),
        ("pone.0046493.nxml", ["mM"], {"DTT": "dithiothreitol"}),
        ("elife00007.xml", ["1A", "F2"], {"EF1A": "Elongation factor 1A"}),
        ("elife02935.xml", ["Wright"], {"VAF": "variant allele fraction"}),
        ("elife04493.xml", ["Teca", "pJFRC2", "hPR"], {"GMC": "ganglion mother cell"}),
        ("ehp-116-1694.nxml", ["TSHβ"], {"GPHα": "glycoprotein hormone α-subunit"}),
        ("elife04953.xml", ["PLC", "ICAM1"], {"TCR": "T cell receptor"}),
        ("elife06726.xml", [], {"Ela": "Elabela", "Shh": "Sonic Hedgehog"}),
        ("tidypmc_7.xml", ["Pierce"], {"SCI": "spinal cord injury"}),
    ],
)
def test_real_acronyms(
    jats_dir: Path, more_dir: Path, name: str, absent: list[str], present: dict[str, str]
) -> None:
    folder = jats_dir if name.endswith(".nxml") else more_dir
    acronyms = parse_article((folder / name).read_bytes()).acronyms
    for short in absent:
        assert short not in acronyms, (short, acronyms.get(short))
    for short, long_form in present.items():
        assert acronyms.get(short) == long_form


def test_acronym_long_forms_never_span_two_blocks() -> None:
    """A title or a table cell ends a block: the words before a parenthesis in the next block
    are not its long form, even where only whitespace separates the two in the XML."""
    xml = article(
        "<sec><title>Liver somatic index</title>\n<p>(LSI) values are listed.</p>"
        "<table-wrap><table><tr><td>Tumour necrosis factor</td>\n<td>(TNF) high</td></tr>"
        "</table></table-wrap><p>The body mass index (BMI) was recorded.</p></sec>",
        front="<abstract><p>We measured glycated haemoglobin</p>\n<p>(GH) and the heart "
        "rate variability (HRV).</p></abstract>",
    )
    assert parse_article(xml).acronyms == {
        "BMI": "body mass index",
        "HRV": "heart rate variability",
    }


def test_parsing_leaves_the_tree_unchanged(jats_dir: Path, more_dir: Path) -> None:
    """The parse reads the tree and puts back what it marks: a caller's tree serialises the
    same after :func:`parse_root` (the acronym text is written without changing any tail)."""
    for path in real_files(jats_dir, more_dir):
        root = etree.fromstring(path.read_bytes())
        before = etree.tostring(root)
        parse_root(root)
        assert etree.tostring(root) == before, path.name


# --- caption noise, spaces, abstract heading ------------------------------------------------


def test_elife_caption_doi_lines_are_dropped(more_dir: Path) -> None:
    captions = 0
    for path in sorted(more_dir.glob("elife*.xml")):
        assert b"<bold>DOI:</bold>" in path.read_bytes()
        for figure in parse_article(path.read_bytes()).figures:
            captions += 1
            assert "dx.doi.org" not in figure.caption and "DOI:" not in figure.caption
            assert figure.caption  # the rest of the caption stays
    assert captions >= 90


def test_doi_paragraph_dropped_but_doi_in_prose_kept() -> None:
    caption = (
        "<title>Growth.</title><p>Data at doi 10.5061/dryad.x1 (Dryad).</p>"
        '<p><bold>DOI:</bold> <ext-link ext-link-type="doi" xlink:href="10.7554/eLife.1.003">'
        "http://dx.doi.org/10.7554/eLife.1.003</ext-link></p>"
    )
    a = parse_article(article(fig("f1", "Figure 1.", caption)))
    assert a.figures[0].caption == "Growth. Data at doi 10.5061/dryad.x1 (Dryad)."


def test_unicode_spaces_read_as_one_space() -> None:
    ref = xref("f1", "Fig.\xa01")
    body = (
        "<p>Mice (N\u200a=\u200a8) were scanned\u2009weekly ("
        + ref
        + ")\u200b.</p>"
        + fig("f1", "Fig.\xa01", "<title>Scans\u202fof mice.</title><p>N\u2009=\u20098 each.</p>")
    )
    front = "<title-group><article-title>A\xa0title</article-title></title-group>"
    a = parse_article(article(body, front=front))
    f = a.figures[0]
    assert a.title == "A title"
    assert f.label == "Fig. 1" and f.caption == "Scans of mice. N = 8 each."
    (m,) = f.mentions
    assert m.text == "Fig. 1"
    assert m.sentence == "Mice (N = 8) were scanned weekly (Fig. 1)."


def test_no_odd_spaces_in_real_articles(jats_dir: Path, more_dir: Path) -> None:
    for path in real_files(jats_dir, more_dir):
        a = parse_article(path.read_bytes())
        texts = [a.title or "", a.abstract, *a.keywords, *a.acronyms.values()]
        for f in a.figures:
            texts += [f.label or "", f.caption, f.title or ""]
            texts += [t for m in f.mentions for t in (m.text, m.sentence, m.paragraph)]
        for text in texts:
            assert not ODD_CHARS.search(text), (path.name, text[:80])
            assert "  " not in text and text == text.strip()
    labels = [f.label for f in parse_article((more_dir / "tidypmc_9.xml").read_bytes()).figures]
    assert "Figure 1" in labels  # "Figure\xa01" in the file


@pytest.mark.parametrize(
    "abstract",
    [
        "<abstract><title>Abstract</title><p>We studied mice.</p></abstract>",
        "<abstract><p>ABSTRACT: We studied mice.</p></abstract>",
        "<abstract><title>Summary</title><p>We studied mice.</p></abstract>",
        "<abstract><p><bold>Abstract</bold></p><p>We studied mice.</p></abstract>",
    ],
)
def test_abstract_heading_is_left_out(abstract: str) -> None:
    assert parse_article(article("<p>x</p>", front=abstract)).abstract == "We studied mice."


def test_abstract_section_comment_is_not_text() -> None:
    front = (
        "<abstract><sec><title>Background</title><!-- converted --><p>We studied mice.</p>"
        "</sec></abstract>"
    )
    assert parse_article(article("<p>x</p>", front=front)).abstract == (
        "Background: We studied mice."
    )


def test_abstract_word_in_prose_is_kept() -> None:
    front = "<abstract><p>Abstract reasoning develops late.</p></abstract>"
    assert parse_article(article("<p>x</p>", front=front)).abstract == (
        "Abstract reasoning develops late."
    )


def test_real_abstracts_have_no_heading(jats_dir: Path, more_dir: Path) -> None:
    for path in real_files(jats_dir, more_dir):
        abstract = parse_article(path.read_bytes()).abstract
        assert abstract and not abstract.lower().startswith(("abstract", "summary")), path.name


# --- linear time on hostile input ------------------------------------------------------------


def hostile(refs: int, sentence_every: int = 0) -> bytes:
    one = xref("f1", "Fig. 1B")
    parts = []
    for i in range(refs):
        parts.append(f"see {one}")
        if sentence_every and i % sentence_every == sentence_every - 1:
            parts[-1] += ". Then"
    return article("<p>" + " ".join(parts) + ".</p>" + fig("f1", "Figure 1"))


def count_calls(xml: bytes) -> int:
    """Python and C function calls made by one parse: an operation count, not a timing."""
    calls = 0

    def profiler(frame, event, arg) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(profiler)
    try:
        parse_article(xml, max_figure_refs=None)
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("sentence_every", [0, 1, 7])
def test_mention_work_is_linear_in_references(sentence_every: int) -> None:
    small, large = (
        count_calls(hostile(1000, sentence_every)),
        count_calls(hostile(8000, sentence_every)),
    )
    # linear: 8× the references, 8× the calls (quadratic would be 64×)
    assert large < 9.5 * small, (small, large)


def test_fifty_thousand_references_in_one_paragraph() -> None:
    xml = hostile(50_000, sentence_every=3)
    start = time.perf_counter()
    a = parse_article(xml, max_figure_refs=None)
    elapsed = time.perf_counter() - start
    mentions = a.figures[0].mentions
    assert len(mentions) == 50_000 and mentions[0].panels == ["B"]
    assert mentions[0].sentence == "see Fig. 1B see Fig. 1B see Fig. 1B."
    assert len({id(m.paragraph) for m in mentions}) == 1  # one string, not 50k copies
    # generous: the quadratic matcher took about 3 s for 8k references, so minutes here
    assert elapsed < 60, elapsed


def test_too_many_references_are_refused_with_a_failure() -> None:
    with pytest.raises(StageError) as info:
        parse_article(hostile(50_000))
    assert (info.value.stage, info.value.error_type) == ("parse", "too_many_figure_refs")


def test_cli_prints_the_refusal_as_a_failure_record(tmp_path: Path) -> None:
    bad = tmp_path / "many.nxml"
    bad.write_bytes(hostile(25_000))
    proc = subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", "parse", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    failure = json.loads(proc.stdout)["failure"]
    assert failure["stage"] == "parse" and failure["error_type"] == "too_many_figure_refs"
    assert "figure references" in failure["message"]


def test_article_marker_characters_do_not_break_spans() -> None:
    body = f"<p>Odd \ue000 and \ue001 text ({xref('f1', 'Fig. 1A')}). Next.</p>" + fig(
        "f1", "Fig. 1"
    )
    (m,) = parse_article(article(body)).figures[0].mentions
    assert (m.text, m.panels) == ("Fig. 1A", ["A"])
    assert m.sentence == "Odd and text (Fig. 1A)."


def test_sentences_are_shared_strings() -> None:
    from ray_jobs.pmc.text import Sentences

    text = "One (Fig. 1) and (Fig. 2). Two (Fig. 3)."
    s = Sentences(text, [(5, 11), (18, 24), (32, 38)])
    first, again, second = s.at(5), s.at(18), s.at(32)
    assert first == "One (Fig. 1) and (Fig. 2)." and first is again
    assert second == "Two (Fig. 3)."
    assert s.at(5) == first  # an offset asked for again, out of order
    assert sentence_at(text, sentence_spans(text), 32) == second
