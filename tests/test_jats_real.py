"""JATS parsing on the real PMC articles in ../shared/data/jats, one test per article."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ray_jobs.pmc.jats import parse_article
from ray_jobs.pmc.records import Article


def load(jats_dir: Path, name: str) -> Article:
    return parse_article((jats_dir / name).read_bytes())


def mention_panels(article: Article, index: int) -> list[list[str]]:
    return [m.panels for m in article.figures[index].mentions]


def test_every_real_article_parses_with_sane_text(jats_dir: Path) -> None:
    files = sorted(jats_dir.glob("*.nxml"))
    assert len(files) == 8
    for path in files:
        article = parse_article(path.read_bytes())
        assert article.pmcid and article.pmcid.startswith("PMC"), path.name
        assert article.title and article.abstract, path.name
        for figure in article.figures:
            # no glued words at tag boundaries, no doubled whitespace, no leftover markup
            assert "  " not in figure.caption, path.name
            assert not re.search(r"</?[a-z-]+[ >]", figure.caption), path.name
            for mention in figure.mentions:
                assert mention.sentence in mention.paragraph
                assert re.search(r"\d", mention.text), mention.text


def test_bmc_microbiology_lysis_time(jats_dir: Path) -> None:
    a = load(jats_dir, "1471-2180-11-174.nxml")
    assert (a.pmcid, a.pmid, a.doi) == ("PMC3166277", "21810267", "10.1186/1471-2180-11-174")
    assert a.year == 2011 and a.journal == "BMC Microbiology"
    assert a.license.code == "CC BY"
    assert a.license.url == "http://creativecommons.org/licenses/by/2.0"
    assert a.abstract.startswith("Background: Despite identical genotypes")
    assert [f.label for f in a.figures] == ["Figure 1", "Figure 2", "Figure 3", "Figure 4"]
    # the bold title and the paragraph that follows it, with every panel's text
    f2 = a.figures[1].caption
    assert f2.startswith("Samples of a lysis recording and frequency distributions")
    assert "(A) Sample recordings from strain IN63." in f2
    assert "(B) Sample frequency distributions of lysis times" in f2
    assert f2.endswith("Additional data are shown in Tables 1 and 2.")
    assert "(D) Effect of lysogen growth rate on MLT, SD, and CV." in a.figures[2].caption
    assert [len(f.mentions) for f in a.figures] == [4, 2, 8, 4]
    assert mention_panels(a, 2) == [["A"], ["A"], ["B"], ["C"], ["D"], ["B"], ["D"], ["C"]]
    first = a.figures[1].mentions[0]
    assert first.text == "2A" and first.panels == ["A"]
    assert first.sentence.startswith("Using a microscope-mounted, temperature-controlled")
    assert first.sentence.endswith("(Figure 2A).")
    assert a.figures[0].graphics == ["1471-2180-11-174-1"]
    assert a.acronyms["MLT"] == "mean lysis time"
    assert a.acronyms["CV"] == "coefficient of variation"


def test_bmc_oral_health_has_no_figures(jats_dir: Path) -> None:
    a = load(jats_dir, "1472-6831-8-11.nxml")
    assert a.pmcid == "PMC2329613" and a.year == 2008
    assert a.figures == []
    assert a.license.code == "CC BY"
    assert a.acronyms["OHIP"] == "Oral Health Impact Profile"


def test_bjc_without_license_keeps_structured_abstract(jats_dir: Path) -> None:
    a = load(jats_dir, "6605965a.nxml")
    assert a.pmcid == "PMC2994229" and a.doi == "10.1038/sj.bjc.6605965"
    assert a.license.code is None  # only a copyright statement: no open license to claim
    assert a.abstract.startswith("Background: Oral contraceptive use")
    assert "Background::" not in a.abstract
    sections = a.abstract.split("\n")
    assert len(sections) >= 3 and all(": " in s for s in sections)
    assert a.keywords == [
        "oral contraceptives",
        "reproductive history",
        "colorectal cancer",
        "cohort study",
    ]
    assert a.acronyms["EPIC"] == "European Prospective Investigation into Cancer and Nutrition"
    assert a.acronyms["BMI"] == "body mass index"


def test_ehp_public_domain_two_paragraph_captions(jats_dir: Path) -> None:
    a = load(jats_dir, "ehp-116-1694.nxml")
    assert a.license.code == "PD"
    assert a.license.url == "http://creativecommons.org/publicdomain/mark/1.0/"
    assert len(a.figures) == 3
    # both caption paragraphs, and T<sub>4</sub> stays one word
    assert a.figures[0].caption == (
        "Exposure to PBDE-47 depressed circulating concentrations of total T4 in males and "
        "females (A), but had no effect on total T3 in males (B). *p < 0.05 compared with control."
    )
    assert mention_panels(a, 2) == [["A"], ["B"], ["C"]]
    assert [len(f.mentions) for f in a.figures] == [2, 1, 3]
    assert a.acronyms["PBDE"] == "Polybrominated diphenyl ether"
    assert a.acronyms["TH"] == "thyroid hormone"


def test_annals_oncology_non_commercial(jats_dir: Path) -> None:
    a = load(jats_dir, "mds526.nxml")
    assert a.license.code == "CC BY-NC"
    assert [f.label for f in a.figures] == ["Figure 1.", "Figure 2."]
    assert a.abstract.split("\n")[1].startswith("Patients and methods:")
    assert all(len(f.mentions) == 1 for f in a.figures)
    assert a.acronyms["IMD"] == "Index of Multiple Deprivation"


def test_pntd_caption_title_and_self_reference(jats_dir: Path) -> None:
    a = load(jats_dir, "pntd.0002065.nxml")
    assert a.license.code == "CC BY" and a.license.url is None  # stated in prose only
    (fig,) = a.figures
    assert fig.title == "Location of the study areas."
    assert fig.caption.startswith(
        "Location of the study areas. Figure 1 shows the map of the Zambézia Province"
    )
    # one mention in the body, one inside the caption itself
    assert len(fig.mentions) == 2
    assert any(m.sentence.startswith("Figure 1 shows the map") for m in fig.mentions)
    assert a.acronyms["RVF"] == "Rift Valley fever"
    assert a.acronyms["ELISA"] == "enzyme-linked immunosorbent assay"


def test_plos_one_license_in_copyright_statement(jats_dir: Path) -> None:
    a = load(jats_dir, "pone.0000217.nxml")
    assert a.license.code == "CC BY"
    assert [len(f.mentions) for f in a.figures] == [2, 1, 2]
    assert all(f.title and f.caption.startswith(f.title) for f in a.figures)
    assert a.acronyms["VSV"] == "vesicular stomatitis virus"


def test_plos_one_bold_panel_labels_and_ranges(jats_dir: Path) -> None:
    a = load(jats_dir, "pone.0046493.nxml")
    assert a.pmcid == "PMC3460867" and a.year == 2012
    assert a.subjects[:3] == ["Biology", "Biochemistry", "Enzymes"]  # not the "heading" group
    assert "Research Article" not in a.subjects
    f1 = a.figures[0]
    # <bold>A</bold>, THL: the label keeps its comma and space, nothing glued
    assert "Chemical structures of A, THL and B, MmPPOX." in f1.caption
    assert f1.graphics == ["pone.0046493.g001"]
    assert mention_panels(a, 0) == [["A"], ["B"]]
    # "Figure 3A–C" names three panels
    assert mention_panels(a, 2)[0] == ["A", "B", "C"]
    assert [len(f.mentions) for f in a.figures] == [2, 3, 4, 1]
    assert a.acronyms["THL"] == "Tetrahydrolipstatin"
    assert a.acronyms["ILI"] == "intracellular lipid inclusions"
    assert "3H" not in a.acronyms  # "oxadiazol-2(3H)-one" is chemistry, not a definition


@pytest.mark.parametrize(
    ("name", "media", "expected"),
    [
        (
            "pone.0046493.nxml",
            ["pone.0046493.g001.png", "pone.0046493.g001.jpg"],
            "pone.0046493.g001.jpg",
        ),
        ("1471-2180-11-174.nxml", ["1471-2180-11-174-1.gif"], "1471-2180-11-174-1.gif"),
        ("ehp-116-1694.nxml", ["other.jpg"], None),
    ],
)
def test_graphic_resolves_to_package_media(
    jats_dir: Path, name: str, media: list[str], expected: str | None
) -> None:
    article = parse_article((jats_dir / name).read_bytes(), media_names=media)
    assert article.figures[0].image == expected
