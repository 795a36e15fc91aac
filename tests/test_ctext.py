"""The parser's C tree walks (``ray_jobs/pmc/_ctext.pyx``) against their Python specification.

Each C function must give what its Python counterpart gives: on every real article of
../shared/data/jats*, on generated articles, and on random trees built here from the markup
that makes the walks branch (floats inside paragraphs, formulas with alternatives, lists, table
cells, breaks, namespaced and unknown elements, comments, CDATA, odd and invisible spaces,
sentence ends next to initials and abbreviations). Whole articles are compared against a
parse in a process that runs the Python walks (``PMCVL_PURE_PYTHON``).
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from ray_jobs.pmc import jats, sentences, text
from ray_jobs.pmc.jats import parse_article
from ray_jobs.pmc.sample_corpus import generate_article

C = text.C_WALKS
MML = "http://www.w3.org/1998/Math/MathML"
XLINK = "http://www.w3.org/1999/xlink"
REPO = Path(__file__).resolve().parents[1]


def test_the_c_walks_are_built_and_used() -> None:
    """`make install` builds them; a silent fallback would halve the parser's speed."""
    assert C is not None, "ray_jobs.pmc._ctext is not built: `pip install -e .` builds it"
    assert text.Sentences is C.Sentences and text.text_with_spans is C.text_with_spans
    assert jats.C_WALKS is C
    assert etree.__version__ == C.COMPILED_LXML


def test_the_c_tag_table_is_the_python_tag_sets() -> None:
    table = C.tag_table()

    def having(kind: str) -> set[str]:
        return {tag for tag, kinds in table.items() if kind in kinds}

    assert having("block") == text.BLOCK_TAGS and having("float") == text.FLOAT_TAGS
    assert having("spaced") == text._SPACED_TAGS and having("container") == text._CONTAINERS
    assert having("nested") == set(text.NESTED_TAGS) and having("graphic") == text._GRAPHIC_TAGS
    assert having("alternatives") == {"alternatives"} and having("tex-math") == {"tex-math"}
    assert having("separated") == set(jats._SEPARATED_BLOCKS)
    assert having("mention") == jats._MENTION_BLOCKS | jats._MENTION_STOPS
    assert having("fig") == {"fig"} and having("xref") == {"xref"}
    assert set(jats._SCAN_TAGS) == having("nested") | having("xref")


# --- random trees ----------------------------------------------------------------------------

WORDS = (
    "see the cells were Fig. Figs. 2B. J. Smith and e.g. The no. 5 min. 10 U.S. (A). "
    "2 h. Occasionally 194.3 °C. Gozutok ... ? ! A B c (in [brackets] ) “quoted.” "
    "Fig.\xa01 N\u200a=\u200a8 soft\xadhyphen zero\u200bwidth tab\tnew\nline "
    "by et al. (2005) Dr. K. R. Next. 3.5 (P < 0.05). Tumour necrosis factor (TNF) "
    "and interleukin-6 (IL-6) in the [TNF] α-β γ"
).split(" ")
INLINE = ("italic", "bold", "sup", "sub", "sc", "named-content", "ext-link", "underline")
BLOCKS = ("p", "title", "label", "sec", "caption", "list", "list-item", "disp-quote")
FLOATS = ("fig", "table-wrap", "graphic", "inline-graphic", "supplementary-material", "media")


# definitions, and parentheses that are not ones
PHRASES = (
    "tumour necrosis factor (TNF)",
    "hormone-sensitive lipase (HSL)",
    "dithiothreitol (DTT; Invitrogen, Carlsbad, CA)",
    "as shown (Holm, 1979)",
    "magnetic resonance imaging (MRI)",
    "reagents (Promega)",
)


def _words(rng: random.Random, n: int) -> str:
    words = [rng.choice(PHRASES) if rng.random() < 0.1 else rng.choice(WORDS) for _ in range(n)]
    return " ".join(words) + rng.choice(("", " ", ". ", "\n"))


def _fill(rng: random.Random, el: etree._Element, depth: int, refs: list[str]) -> None:
    """Random mixed content under ``el``: text, inline markup, references, floats, blocks,
    formulas, comments and CDATA."""
    el.text = _words(rng, rng.randint(0, 6)) if rng.random() < 0.8 else None
    for _ in range(rng.randint(0, 5 if depth < 4 else 0)):
        pick = rng.random()
        if pick < 0.3:
            child = etree.SubElement(el, "xref", {"ref-type": "fig", "rid": rng.choice(refs)})
            child.text = rng.choice(("Fig. 1", "Figure 2B", "1C-E", "6A-6D", "", "S2"))
        elif pick < 0.5:
            child = etree.SubElement(el, rng.choice(INLINE))
            _fill(rng, child, depth + 1, refs)
        elif pick < 0.6:
            child = etree.SubElement(el, rng.choice(BLOCKS))
            _fill(rng, child, depth + 1, refs)
        elif pick < 0.68:
            child = etree.SubElement(el, rng.choice(FLOATS), {"id": f"x{rng.random():.6f}"})
            _fill(rng, child, depth + 1, refs)
        elif pick < 0.76:
            child = etree.SubElement(el, "inline-formula")
            alternatives = etree.SubElement(child, "alternatives")
            order = ["math", "tex", "graphic", "other"]
            rng.shuffle(order)
            for kind in order[: rng.randint(0, 4)]:
                if kind == "math":
                    math = etree.SubElement(alternatives, f"{{{MML}}}math")
                    etree.SubElement(math, f"{{{MML}}}mi").text = rng.choice(("x", "L", "α"))
                    etree.SubElement(math, f"{{{MML}}}mo").text = "\u2062"
                elif kind == "tex":
                    tex = etree.SubElement(alternatives, "tex-math")
                    tex.text = rng.choice(
                        ("$x^2$", r"\documentclass{a}\begin{document}$$y$$\end{document}", "")
                    )
                elif kind == "graphic":
                    etree.SubElement(alternatives, "inline-graphic", {f"{{{XLINK}}}href": "g"})
                else:
                    _fill(rng, etree.SubElement(alternatives, "mtext"), depth + 1, refs)
        elif pick < 0.8:
            table = etree.SubElement(el, "table")
            for _ in range(rng.randint(1, 2)):
                row = etree.SubElement(table, "tr")
                for _ in range(rng.randint(1, 3)):
                    _fill(rng, etree.SubElement(row, rng.choice(("td", "th"))), depth + 2, refs)
        elif pick < 0.84:
            etree.SubElement(el, "break")
        elif pick < 0.88:
            child = etree.SubElement(el, "tex-math")
            child.text = "\\alpha + 1"
        elif pick < 0.92:
            el.append(etree.Comment(" a comment "))
        elif pick < 0.95:
            el.append(etree.ProcessingInstruction("pi", "data"))
        else:
            child = etree.SubElement(el, f"{{{MML}}}mrow")
            _fill(rng, child, depth + 1, refs)
        child = el[-1]
        child.tail = _words(rng, rng.randint(0, 5)) if rng.random() < 0.7 else None


def random_article(seed: int) -> bytes:
    rng = random.Random(seed)
    refs = ["f1", "f2", "f1 f2", "missing"]
    root = etree.Element("article", nsmap={"mml": MML, "xlink": XLINK})
    meta = etree.SubElement(etree.SubElement(root, "front"), "article-meta")
    etree.SubElement(meta, "article-id", {"pub-id-type": "pmc"}).text = f"PMC{seed}"
    abstract = etree.SubElement(meta, "abstract")
    _fill(rng, etree.SubElement(abstract, "p"), 2, refs)
    body = etree.SubElement(root, "body")
    for _ in range(rng.randint(1, 4)):
        sec = etree.SubElement(body, "sec")
        etree.SubElement(sec, "title").text = _words(rng, 3)
        for _ in range(rng.randint(1, 4)):
            _fill(rng, etree.SubElement(sec, rng.choice(("p", "p", "list", "disp-quote"))), 1, refs)
    for n, fig_id in enumerate(("f1", "f2"), start=1):
        fig = etree.SubElement(body, "fig", {"id": fig_id})
        etree.SubElement(fig, "label").text = f"Figure {n}"
        caption = etree.SubElement(fig, "caption")
        _fill(rng, etree.SubElement(caption, "title"), 2, refs)
        _fill(rng, etree.SubElement(caption, "p"), 2, refs)
        etree.SubElement(caption, "p").text = "DOI: http://dx.doi.org/10.7554/eLife.00007.003"
    # CDATA survives only through serialisation
    xml = etree.tostring(root, encoding="UTF-8")
    return xml.replace(b"<p>", b"<p><![CDATA[data in CDATA ]]>", 1)


# --- each walk against its specification -----------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_element_text_and_spans_match_the_python_walks(seed: int) -> None:
    root = etree.fromstring(random_article(seed))
    c_needs, py_needs = C.structure_index(root), text.structure_index(root)
    xrefs = [x for x in root.iter("xref")]
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        assert C.element_text(el) == text.python_element_text(el), (seed, el.tag)
        assert C.element_text(el, (), c_needs) == text.python_element_text(el, (), py_needs)
        marked = [x for x in xrefs if any(a is el for a in x.iterancestors())]
        if marked:
            assert C.text_with_spans(el, marked, c_needs) == text.python_text_with_spans(
                el, marked, py_needs
            ), (seed, el.tag)
    for caption in root.iterfind("body/fig/caption"):
        skip = jats._doi_paragraphs(caption)
        assert skip and C.element_text(caption, skip) == text.python_element_text(caption, skip)


@pytest.mark.parametrize("seed", range(60))
def test_scan_and_separated_text_match_the_python_walks(seed: int) -> None:
    root = etree.fromstring(random_article(seed))
    c_needs, c_figs, c_xrefs = C.scan(root)
    py_needs, py_figs, py_xrefs = jats._python_scan(root)
    assert c_figs == py_figs and c_xrefs == py_xrefs
    # the same index as a walk of its own, in each language, and of the same size
    assert c_needs == C.structure_index(root) and py_needs == text.structure_index(root)
    assert len(c_needs) == len(py_needs)
    for scope in [root, *root.iter("abstract", "body", "sec", "p", "fig")]:
        assert C.separated_text(scope) == jats._xslt_separated_text(scope), (seed, scope.tag)


def test_separated_text_on_real_articles(jats_dir: Path) -> None:
    for path in real_articles(jats_dir):
        root = etree.fromstring(path.read_bytes())
        for scope in [root, *root.iter("abstract", "body")]:
            assert C.separated_text(scope) == jats._xslt_separated_text(scope), path.name


# --- sentences -------------------------------------------------------------------------------

SENTENCE_WORDS = (
    "Fig. 2B. A visual J. Smith and K. Jones e.g. The no. 5 min. 10 2 h. Occasionally "
    "U.S. (A). (2B). Next [see 3]. Then “Quoted.” ‘X’ ... ? ! 194.3 °C. Gozutok by A. "
    "Dr. J. K. Rowling vs. it (unclosed [ ) ] The 5 Ok. B. a. b. ab. Ab. Cd. 1. 2."
).split(" ")


@pytest.mark.parametrize("seed", range(300))
def test_sentences_match_the_python_class(seed: int) -> None:
    rng = random.Random(seed)
    words = [rng.choice(SENTENCE_WORDS) for _ in range(rng.randint(0, 80))]
    if rng.random() < 0.3:
        words = [w.replace("?", ".").replace("!", ".") for w in words]
    paragraph = " ".join(words)
    n = len(paragraph)
    protected = []
    for _ in range(rng.randint(0, 6)):
        a = rng.randint(0, max(0, n - 1))
        protected.append(None if rng.random() < 0.1 else (a, min(n, a + rng.randint(0, 12))))
    offsets = sorted(rng.randint(0, max(0, n - 1)) for _ in range(rng.randint(1, 12)))
    if rng.random() < 0.2:
        rng.shuffle(offsets)  # out of order: the search starts over, in both
    ours, spec = C.Sentences(paragraph, protected), sentences.PythonSentences(paragraph, protected)
    assert [ours.at(o) for o in offsets] == [spec.at(o) for o in offsets], (paragraph, offsets)


def test_sentence_work_is_linear_in_references() -> None:
    """The C class counts the candidates it looks at and the characters it counts brackets
    in (``steps``): 8× the references, about 8× the steps (quadratic would be 64×)."""

    def steps(refs: int) -> int:
        parts = [f"see (Fig. {i % 9}B) and [J. S.]. Then e.g. the" for i in range(refs)]
        paragraph = " ".join(parts) + "."
        spans = [(m, m + 5) for m in range(0, len(paragraph), len(parts[0]) + 1)]
        sentences = C.Sentences(paragraph, spans)
        for start, _ in spans:
            assert sentences.at(start)
        return sentences.steps

    small, large = steps(1000), steps(8000)
    assert small > 1000 and large < 9.5 * small, (small, large)


# --- whole articles against a parse with the Python walks -------------------------------------


def real_articles(jats_dir: Path) -> list[Path]:
    return sorted(
        path
        for folder in sorted(jats_dir.parent.glob("jats*"))
        for path in folder.iterdir()
        if path.suffix in (".nxml", ".xml")
    )


PARSE_ALL = """
import pickle, sys
from pathlib import Path
from ray_jobs.pmc import text
from ray_jobs.pmc.jats import parse_article
assert text.C_WALKS is None
out = []
for path in sys.argv[2:]:
    try:
        out.append(parse_article(Path(path).read_bytes(), max_figure_refs=None).to_dict())
    except Exception as exc:
        out.append(repr(exc))
Path(sys.argv[1]).write_bytes(pickle.dumps(out))
"""


def parse_all(paths: list[Path]) -> list:
    out = []
    for path in paths:
        try:
            out.append(parse_article(path.read_bytes(), max_figure_refs=None).to_dict())
        except Exception as exc:
            out.append(repr(exc))
    return out


def test_whole_articles_match_a_parse_with_the_python_walks(jats_dir: Path, tmp_path: Path) -> None:
    paths = real_articles(jats_dir)
    assert len(paths) >= 22
    for i in range(40):
        path = tmp_path / f"generated{i}.nxml"
        path.write_bytes(generate_article(i % 5, i, image_width=32).xml)
        paths.append(path)
    for seed in range(200):
        path = tmp_path / f"random{seed}.xml"
        path.write_bytes(random_article(1000 + seed))
        paths.append(path)
    result = tmp_path / "python.pickle"
    env = {**os.environ, "PMCVL_PURE_PYTHON": "1"}
    subprocess.run(
        [sys.executable, "-c", PARSE_ALL, str(result), *map(str, paths)],
        env=env,
        cwd=REPO,
        check=True,
        timeout=600,
    )
    spec = pickle.loads(result.read_bytes())
    ours = parse_all(paths)
    assert len(ours) == len(spec) == len(paths)
    for path, a, b in zip(paths, ours, spec, strict=True):
        assert a == b, path.name
    # the random articles make the walks branch: mentions, formulas and acronyms are there
    random_ones = [a for a in ours[-200:] if isinstance(a, dict)]
    assert len(random_ones) == 200
    assert sum(len(f["mentions"]) for a in random_ones for f in a["figures"]) > 500
    assert sum(bool(a["acronyms"]) for a in random_ones) > 20


def test_the_python_walks_pass_the_parser_tests() -> None:
    """The fallback is the specification: the parser's own tests pass on it too."""
    files = ["tests/test_jats_defects.py", "tests/test_jats_real.py", "tests/test_text.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        env={**os.environ, "PMCVL_PURE_PYTHON": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


def test_deep_and_wide_trees_are_walked_safely() -> None:
    """The deepest tree the parser accepts, a paragraph of 200k references and a 4 MB text
    node: the C walks give the Python walks' results (no crash, no overflow)."""
    deep = "<p>" + "<italic>x " * 250 + "<xref ref-type='fig' rid='f1'>Fig. 1</xref>"
    deep += "</italic>" * 250 + "</p>"
    root = etree.fromstring(f"<article><body>{deep}</body></article>")
    p = root.find("body/p")
    xref = next(p.iter("xref"))
    assert C.text_with_spans(p, [xref]) == text.python_text_with_spans(p, [xref])
    big = "<p>" + "word\xa0 " * 700_000 + "</p>"
    root = etree.fromstring(f"<article><body>{big}</body></article>")
    assert C.element_text(root) == text.python_element_text(root)
    assert C.separated_text(root) == jats._xslt_separated_text(root)
    wide = "<p>" + "<xref ref-type='fig' rid='f1'>1</xref>. " * 200_000 + "</p>"
    root = etree.fromstring(f"<article><body>{wide}</body></article>")
    p = root.find("body/p")
    marked = list(p)
    got, want = C.text_with_spans(p, marked), text.python_text_with_spans(p, marked)
    assert got == want and got[1][-1] is not None


# --- acronyms --------------------------------------------------------------------------------

ACRONYM_WORDS = (
    "tumour necrosis factor (TNF) hormone-sensitive lipase (HSL) the İstanbul Straße (İS) "
    "Holm (Holm, 1979) reagents (Promega) (Teca, Chicago, IL) cells (T1892) sample (S24) "
    "mutant (L451G) human immunodeficiency virus type 1 (HIV-1) cyclooxygenase-2 (COX-2) "
    "Sonic Hedgehog (Shh) [55] (LB) broth (mM) 5 (1A) ; : . \u2029 ( ) { } Plasmodium "
    "(Plasmodium) ERCP (ERCP) magnetic resonance imaging (MRI; Siemens, Erlangen, Germany)"
).split(" ")


def test_find_definitions_match_the_python_matcher(jats_dir: Path) -> None:
    from ray_jobs.pmc import acronyms

    assert acronyms.find_definitions is C.find_definitions
    texts = []
    for path in real_articles(jats_dir):
        root = etree.fromstring(path.read_bytes())
        meta = root.find("front/article-meta")
        scopes = [*meta.findall("abstract"), *root.findall("body")]
        texts += [jats._separated_text(scope) for scope in scopes]
    rng = random.Random(7)
    windows = [
        t[a : a + rng.randint(10, 2000)]
        for t in texts
        if t
        for a in rng.choices(range(len(t)), k=40)
    ]
    made = [" ".join(rng.choice(ACRONYM_WORDS) for _ in range(60)) for _ in range(500)]
    found = 0
    for passage in texts + windows + made:
        ours = C.find_definitions(passage)
        assert ours == acronyms.python_find_definitions(passage), passage[:200]
        found += len(ours)
    assert found > 500  # the comparison covers definitions found, not only refusals


SOUP = "aZ É ß İ ² ٣ Ⅻ _ - / + . & ; , ( ) ( ) ( )   x1 Q TNF mRNA ǅ ʰ 𝐀 \u2029 \xa0".split(" ")


@pytest.mark.parametrize("seed", range(200))
def test_definition_candidates_are_the_regular_expressions_matches(seed: int) -> None:
    from ray_jobs.pmc import acronyms

    rng = random.Random(seed)
    pieces = [rng.choice(SOUP) + rng.choice(("", "", " ", "(")) for _ in range(rng.randint(0, 400))]
    if rng.random() < 0.3:  # long runs inside the parentheses
        pieces.append("(" + "A" * rng.randint(8, 12) + rng.choice((")", "; x)", ",(")))
    passage = "".join(pieces)
    want = [(m.start(), m.group(1), m.end()) for m in acronyms._DEFINED.finditer(passage)]
    assert C.definition_candidates(passage) == want, passage
