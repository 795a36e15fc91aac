"""Text helpers: panel letters, sentences, acronyms, licenses."""

from __future__ import annotations

import pytest
from lxml import etree

from ray_jobs.pmc.acronyms import best_long_form, find_definitions
from ray_jobs.pmc.figure_refs import panel_letters
from ray_jobs.pmc.licenses import code_from_text, code_from_url, normalise_code
from ray_jobs.pmc.sentences import sentence_spans
from ray_jobs.pmc.text import element_text


@pytest.mark.parametrize(
    ("ref", "number", "expected"),
    [
        ("Fig. 1B", None, ["B"]),
        ("Figs. 1C–E", None, ["C", "D", "E"]),
        ("Figure 2A and B", None, ["A", "B"]),
        ("Figure 1", None, []),
        ("2a", None, ["A"]),
        ("Figs. 1C and 2A", "2", ["A"]),
        ("Fig. 3, panels A and B", None, ["A", "B"]),
        ("Figures 2a-c", None, ["A", "B", "C"]),
        ("Figure 1 and Table 2", None, []),
        ("Supplementary Fig. S3B", "S3", ["B"]),
    ],
)
def test_panel_letters(ref: str, number: str | None, expected: list[str]) -> None:
    assert panel_letters(ref, number) == expected


def test_sentences_respect_abbreviations_brackets_and_protected_spans() -> None:
    text = (
        "Cells were imaged (Fig. 1B). See e.g. Smith et al. for details. "
        "Then J. Smith said (n = 3. Really) ok! Next one."
    )
    assert [text[a:b].strip() for a, b in sentence_spans(text)] == [
        "Cells were imaged (Fig. 1B).",
        "See e.g. Smith et al. for details.",
        "Then J. Smith said (n = 3. Really) ok!",
        "Next one.",
    ]


def test_element_text_blocks_inline_and_floats() -> None:
    el = etree.fromstring(
        b"<caption><title>Chem.</title><p>Of <bold>A</bold>, THL and <bold>B</bold>,\n"
        b"  M<italic>m</italic>PPOX.</p><p>Next<fig><caption><p>inner</p></caption></fig> para."
        b"</p><list><list-item><p>one</p></list-item><list-item><p>two</p></list-item></list>"
        b"</caption>"
    )
    assert element_text(el) == "Chem. Of A, THL and B, MmPPOX. Next para. one two"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We used magnetic resonance imaging (MRI) here.", {"MRI": "magnetic resonance imaging"}),
        ("the Hormone-Sensitive Lipase (HSL) family", {"HSL": "Hormone-Sensitive Lipase"}),
        ("lysogeny broth [55] (LB) was", {"LB": "lysogeny broth"}),
        # a definition inside parentheses is still one; the long form never crosses the "("
        ("levels (hazard ratio (HR) 1.2)", {"HR": "hazard ratio"}),
        ("levels (see the hazard ratio) (HR) rose", {}),
        ("an oxadiazol-2(3H)-one ring", {}),
        ("cells (see above) grew", {}),
        ("IL-6 (interleukin 6) rose", {}),  # the reversed form is deliberately not read
        ("the wild type (WT; n = 4) and", {"WT": "wild type"}),
    ],
)
def test_in_text_acronyms(text: str, expected: dict[str, str]) -> None:
    assert find_definitions(text) == expected


def test_schwartz_hearst_core() -> None:
    assert best_long_form("RVFV", "Rift Valley fever virus") == "Rift Valley fever virus"
    assert best_long_form("XYZ", "nothing matches here") is None


def test_license_codes() -> None:
    assert code_from_url("https://creativecommons.org/licenses/by-nc-nd/4.0/") == "CC BY-NC-ND"
    assert code_from_url("http://creativecommons.org/publicdomain/zero/1.0/") == "CC0"
    assert code_from_url("https://example.org/license") is None
    assert code_from_text("under the Creative Commons Attribution Non-Commercial License") == (
        "CC BY-NC"
    )
    assert normalise_code("cc_by_nc") == "CC BY-NC" and normalise_code("CC0") == "CC0"
    assert normalise_code("  ") is None


FIG_GROUP = b"""<article xmlns:xlink="http://www.w3.org/1999/xlink"><front><article-meta>
<article-id pub-id-type="pmc">PMC77</article-id></article-meta></front><body>
<p>Both panels (<xref ref-type="fig" rid="g1a g1b">Figs. 1a and 1b</xref>) and
<xref ref-type="fig" rid="g1b">Fig. 1b</xref>C.</p>
<fig-group id="g1"><caption><p>Group caption.</p></caption>
<fig id="g1a"><label>Figure 1a</label><caption><title>Left.</title><p>First
<list><list-item><p>item one</p></list-item><list-item><p>item two</p></list-item></list>
</p></caption><alternatives><graphic xlink:href="g1a.tif"/><graphic xlink:href="g1a.png"/>
</alternatives></fig>
<fig id="g1b"><label>Figure 1b</label><caption><p>Right<sup>2</sup> side.</p></caption>
<graphic xlink:href="g1b"/></fig></fig-group></body></article>"""


def test_fig_group_children_alternatives_and_extensionless_hrefs() -> None:
    from ray_jobs.pmc.jats import parse_article

    article = parse_article(FIG_GROUP, media_names=["g1a.tif", "g1a.png", "g1b.jpg", "x.json"])
    a, b = article.figures
    assert (a.id, a.label, b.id) == ("g1a", "Figure 1a", "g1b")
    assert a.caption == "Left. First item one item two"
    assert b.caption == "Right2 side."
    assert a.graphics == ["g1a.tif", "g1a.png"]
    assert a.image == "g1a.png"  # a web format wins over TIFF
    assert b.image == "g1b.jpg"  # the extension PMC left off
    # one xref naming both figures counts for each; letters glued after the xref count too
    assert [m.text for m in a.mentions] == ["Figs. 1a and 1b"]
    assert [m.panels for m in a.mentions] == [[]]  # "1a" is this figure's label, not a panel
    assert [(m.text, m.panels) for m in b.mentions] == [("Figs. 1a and 1b", []), ("Fig. 1b", ["C"])]
