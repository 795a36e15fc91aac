"""The hand-made panel truth of real article figures, and the evaluator that scores the
product's detector on it (``modeldev.real_figures``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from PIL import Image

from modeldev.real_figures import evaluate as ev
from modeldev.real_figures import truth
from modeldev.real_figures.truth import TruthFigure
from ray_jobs.pmc.jats import XLINK_HREF, parse_article, resolve_image
from ray_jobs.pmc.safexml import parse_xml

ARTICLES = (
    "elife-30274-v1",
    "elife-46793-v1",
    "ijm-00202",
    "plosone-0091296",
    "plosone-0178565",
)


@pytest.fixture(scope="module")
def root(jats_dir: Path) -> Path:
    return jats_dir.parent / "real_articles"


@pytest.fixture(scope="module")
def articles(root: Path) -> list[truth.TruthArticle]:
    return truth.load_all(root)


def test_every_truth_file_validates(articles: list[truth.TruthArticle]) -> None:
    assert [a.article for a in articles] == list(ARTICLES)
    for article in articles:
        assert truth.problems(article) == []
        for fig in article.figures:
            assert fig.path.is_file()
            assert fig.panels
            assert fig.boxes.shape == (len(fig.panels), 4)


def _named_by_jats(folder: Path) -> set[tuple[str, str, str]]:
    """(xml id, image file, figure | table) for every figure and table graphic the article's
    XML names, resolved to the package's files as the product resolves them."""
    xml = (folder / "main.jats.xml").read_bytes()
    names = [p.name for p in folder.iterdir() if p.name != "main.jats.xml"]
    named = {
        (f.id, f.image, "figure")
        for f in parse_article(xml, media_names=names).figures
        if f.image is not None
    }
    media = {n.lower(): n for n in names}
    for table in parse_xml(xml, max_bytes=len(xml)).iter("table-wrap"):
        hrefs = [h for g in table.iter("graphic") if (h := g.get(XLINK_HREF))]
        image = resolve_image(hrefs, media) if hrefs else None
        if image is not None:
            named.add((table.get("id"), image, "table"))
    return named


def test_truth_covers_every_figure_and_table_the_xml_names(
    articles: list[truth.TruthArticle], root: Path
) -> None:
    for article in articles:
        named = _named_by_jats(root / article.article)
        assert named, article.article
        held = {(f.xml_id, f.image, f.kind_of_object) for f in article.figures}
        assert held == named, article.article


def _first_compound(articles: list[truth.TruthArticle]) -> TruthFigure:
    return next(f for f in truth.figures(articles) if len(f.panels) >= 3)


def test_validation_names_each_kind_of_problem(articles: list[truth.TruthArticle]) -> None:
    article = articles[1]
    fig = _first_compound([article])
    first, second = fig.panels[0], fig.panels[1]
    x0, y0, x1, y1 = first.box

    def broken(**changes: object) -> list[str]:
        bad = dataclasses.replace(fig, **changes)
        figures = tuple(bad if f is fig else f for f in article.figures)
        return truth.problems(dataclasses.replace(article, figures=figures))

    outside = dataclasses.replace(first, box=(x0, y0, fig.width + 1, y1))
    reversed_ = dataclasses.replace(first, box=(x1, y0, x0, y1))
    twice = dataclasses.replace(second, label=first.label)
    assert any("leaves" in p for p in broken(panels=(outside, *fig.panels[1:])))
    assert any("reversed" in p for p in broken(panels=(reversed_, *fig.panels[1:])))
    assert any("twice" in p for p in broken(panels=(first, twice, *fig.panels[2:])))
    assert any("the file is" in p for p in broken(width=fig.width + 3))
    assert any("no image" in p for p in broken(path=fig.path.with_name("missing.png")))
    assert broken() == []


def test_load_raises_on_a_bad_truth_file(tmp_path: Path, root: Path) -> None:
    raw = json.loads((truth.TRUTH_DIR / "ijm-00202.json").read_text())
    raw["figures"][0]["panels"][0]["box"][2] = raw["figures"][0]["width"] + 10
    path = tmp_path / "ijm-00202.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(truth.TruthError, match="leaves"):
        truth.load_article(path, root)


def test_kept_out_split_names_exactly_the_two_articles(
    articles: list[truth.TruthArticle],
) -> None:
    assert set(truth.KEPT_OUT) == {"elife-30274-v1", "plosone-0178565"}
    kept = {a.article for a in articles if a.split == "kept_out"}
    tune = {a.article for a in articles if a.split == "tune"}
    assert kept == set(truth.KEPT_OUT)
    assert tune == {"elife-46793-v1", "plosone-0091296", "ijm-00202"}
    assert truth.split_of("some-other-article") == "tune"
    assert {f.article for f in truth.figures(articles, "kept_out")} == kept


def test_compound_figures_are_figures_of_two_panels_or_more(
    articles: list[truth.TruthArticle],
) -> None:
    compound = truth.compound_figures(articles)
    keys = {f.key for f in compound}
    assert all(f.kind_of_object == "figure" and len(f.panels) >= 2 for f in compound)
    rest = [f for f in truth.figures(articles) if f.key not in keys]
    assert all(f.kind_of_object == "table" or len(f.panels) == 1 for f in rest)
    assert "elife-46793-v1/fig2.jpg" in keys and "elife-46793-v1/fig1.jpg" not in keys


def test_the_truth_itself_scores_perfectly(articles: list[truth.TruthArticle]) -> None:
    figures = truth.figures(articles)
    rows = ev.evaluate(figures, ev.truth_predictor)
    assert all(r.f1 == 1.0 and r.exact for r in rows)
    summary = ev.report(rows)
    for group in ("tune", "kept_out", "all", "all compound"):
        assert summary[group]["F1@0.5"] == 1.0
        assert summary[group]["exact_count"] == 1.0
        assert summary[group]["over_split"] == summary[group]["under_split"] == 0
    assert summary["all"]["figures"] == len(figures)
    assert summary["all compound"]["figures"] == len(truth.compound_figures(articles))
    assert summary["tune"]["figures"] + summary["kept_out"]["figures"] == len(figures)
    assert summary["all"]["caption_agreement"] == 1.0


def _drop_and_shift(fig: TruthFigure) -> ev.Prediction:
    """The truth less its first panel, with the second shifted right by half its width
    (IoU 1/3 with its own true box: no longer a match). Figures of one panel stay true."""
    boxes = [tuple(float(v) for v in p.box) for p in fig.panels]
    if len(boxes) >= 2:
        x0, y0, x1, y1 = boxes[1]
        half = (x1 - x0) / 2
        boxes = [(x0 + half, y0, x1 + half, y1), *boxes[2:]]
    return ev.Prediction(boxes, [1.0] * len(boxes))  # type: ignore[arg-type]


def test_a_dropped_panel_and_a_shifted_box_cost_what_they_should(
    articles: list[truth.TruthArticle],
) -> None:
    figures = truth.figures(articles)
    rows = ev.evaluate(figures, _drop_and_shift)
    for fig, row in zip(figures, rows, strict=True):
        n = len(fig.panels)
        if n == 1:
            assert (row.matched, row.pred_count, row.f1, row.exact) == (1, 1, 1.0, True)
            continue
        assert (row.matched, row.pred_count, row.true_count) == (n - 2, n - 1, n), fig.key
        assert row.f1 == pytest.approx(2 * (n - 2) / (2 * n - 1))
        assert not row.exact
    four = next(r for r in rows if r.key == "elife-46793-v1/fig2.jpg")
    assert four.f1 == pytest.approx(4 / 7)  # 2 matched of 3 kept and 4 true

    summary = ev.report(rows)["all"]
    total = sum(len(f.panels) for f in figures)
    multi = sum(len(f.panels) >= 2 for f in figures)
    assert summary["true_panels"] == total
    assert summary["pred_panels"] == total - multi
    assert summary["matched"] == total - 2 * multi
    assert summary["F1@0.5"] == pytest.approx(
        2 * (total - 2 * multi) / (2 * total - multi), abs=1e-4
    )
    assert summary["exact_count"] == pytest.approx(1 - multi / len(figures), abs=1e-4)
    assert summary["under_split"] == multi and summary["over_split"] == 0
    assert summary["caption_agreement"] == 0.0  # every captioned figure lost a panel
    assert ev.report(rows)["all compound"]["exact_count"] == 0.0


def test_matching_is_at_iou_one_half(articles: list[truth.TruthArticle]) -> None:
    fig = _first_compound(articles)
    x0, y0, x1, y1 = fig.panels[0].box
    w = x1 - x0

    def moved(fraction: float) -> ev.Prediction:
        first = (x0 + fraction * w, float(y0), x1 + fraction * w, float(y1))
        rest = [tuple(float(v) for v in p.box) for p in fig.panels[1:]]
        return ev.Prediction([first, *rest], [1.0] * len(fig.panels))  # type: ignore[list-item]

    n = len(fig.panels)
    assert ev.score_figure(fig, moved(0.2)).matched == n  # IoU 0.8 / 1.2
    assert ev.score_figure(fig, moved(0.5)).matched == n - 1  # IoU 1/3
    empty = ev.score_figure(fig, ev.Prediction([], []))
    assert (empty.matched, empty.f1, empty.exact) == (0, 0.0, False)


def test_kept_out_figures_are_never_shown_one_by_one(
    articles: list[truth.TruthArticle], tmp_path: Path
) -> None:
    chosen = [a for a in articles if a.article in ("elife-30274-v1", "plosone-0091296")]
    figures = truth.figures(chosen)
    rows = ev.evaluate(figures, _drop_and_shift)
    assert {r.split for r in ev.figure_rows(rows)} == {"tune"}
    assert all(r.split == "tune" for r in ev.worst(rows, len(rows)))
    assert ev.report(rows)["kept_out"]["figures"] == 5  # in the aggregate all the same

    written = ev.write_overlays(figures, rows, tmp_path)
    tune = [f for f in figures if f.split == "tune"]
    assert sorted(written) == sorted(tmp_path / f.article / f"{f.image}.png" for f in tune)
    assert not (tmp_path / "elife-30274-v1").exists()
    # a predicted box is drawn green over the truth's red
    fig = next(f for f in tune if f.image == "g003.png")
    row = next(r for r in rows if r.key == fig.key)
    x0, y0, _, _ = (round(v) for v in row.pred_boxes[-1])
    with Image.open(tmp_path / fig.article / "g003.png.png") as img:
        assert img.size == (fig.width, fig.height)
        assert img.getpixel((x0, y0 + 3)) == ev.PRED_COLOUR


def test_eval_real_command_scores_the_shipped_detector(tmp_path: Path, root: Path) -> None:
    from click.testing import CliRunner

    from modeldev.cli import main

    out = tmp_path / "real.json"
    result = CliRunner().invoke(
        main,
        [
            "eval-real",
            "--article",
            "ijm-00202",
            "--article",
            "elife-30274-v1",
            "--no-medicat",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "kept_out compound" in result.output and "elife-30274-v1/" not in result.output
    report = json.loads(out.read_text())
    assert report["summary"]["tune"]["figures"] == 6
    assert report["summary"]["kept_out"]["figures"] == 5
    assert report["summary"]["tune"]["true_panels"] == 6
    assert {r["article"] for r in report["figures"]} == {"ijm-00202"}  # kept-out: aggregate only
    for row in report["figures"]:
        assert row["pred_count"] == len(row["pred_boxes"])
        assert 0 <= row["matched"] <= min(row["pred_count"], row["true_count"])
        assert row["exact"] == (row["pred_count"] == row["true_count"])
        assert row["cpu_s"] > 0
    bad = CliRunner().invoke(main, ["eval-real", "--article", "no-such-article"])
    assert bad.exit_code != 0 and "no truth" in bad.output
