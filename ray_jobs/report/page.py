"""The report page: one self-contained HTML file next to its PNGs and ``stats.json``.

Every chart has the table of numbers behind it, so the page reads without images and can be
quoted. All text that comes from the data is escaped. Files go through the Storage, so a
report on S3 is written where its dataset lives. (Named ``page`` so as not to shadow the
standard ``html`` module it uses.)
"""

from __future__ import annotations

import html
from collections.abc import Collection, Iterable, Mapping, Sequence

from ray_jobs.report import gallery as gallery_page
from ray_jobs.report.gallery import Gallery
from ray_jobs.report.plots import charts, drop_counts
from ray_jobs.report.stats import FUNNEL, ReportStats
from ray_jobs.storage.store import Storage

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f5f8}
img{max-width:100%;display:block;margin:.6em 0}
.notice{background:#fff4d6;border:1px solid #e0b84c;padding:.6em 1em;margin:.6em 0}
.warn{background:#fde8e8;border:1px solid #d66;padding:.6em 1em;margin:.6em 0}
.muted{color:#666}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _cell(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"<td>{_e(value)}</td>"
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
    return f'<td class="n">{text}</td>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _counts(headers: Sequence[str], counts: Mapping[object, int]) -> str:
    total = sum(counts.values())
    return _table([*headers, "share"], ((k, v, _share(v, total)) for k, v in counts.items()))


def _img(name: str, images: Collection[str], alt: str) -> str:
    if name not in images:
        return '<p class="muted">No data.</p>'
    return f'<img src="{_e(name)}" alt="{_e(alt)}">'


def _header(s: ReportStats) -> str:
    rows = [
        ("output", s.uri),
        ("created", s.created or "–"),
        ("code version", s.code_version or "–"),
        ("config hash", s.config_hash or "–"),
        ("runs", ", ".join(s.runs) or "–"),
        ("shards", s.shards),
        ("shard bytes", s.shard_bytes),
    ]
    notes = "".join(f'<div class="warn">{_e(w)}</div>' for w in s.warnings)
    if not s.enrichment_ran:
        notes += (
            '<div class="notice"><strong>LongCAP enrichment did not run.</strong> '
            f"{_e(s.enrichment.get('reason'))}</div>"
        )
    splits = _counts(["split", "samples"], s.splits) if s.splits else ""
    return f"<h1>pmcvl dataset report</h1>{notes}{_table(['', ''], rows)}{splits}"


def _funnel(s: ReportStats, images: Collection[str]) -> str:
    rows, previous = [], None
    for stage in FUNNEL:
        n = s.funnel.get(stage, 0)
        rows.append((stage, n, round(n / previous, 2) if previous else "–"))
        previous = n
    losses = _table(["lost before the funnel", "count"], s.losses.items())
    drops = drop_counts(s)
    drop_rows = [
        (reason, n, s.rejects.get(reason, 0))  # detector drops have no rejects rows
        for reason, n in drops.items()
    ]
    return (
        "<h2>Funnel</h2>"
        + _img("funnel.png", images, "funnel")
        + _table(["stage", "count", "ratio to previous stage"], rows)
        + losses
        + "<h2>Drop reasons</h2>"
        + _img("drops.png", images, "drop reasons")
        + _table(["reason", "panels (manifest)", "rows in rejects/"], drop_rows)
    )


def _modality(s: ReportStats, images: Collection[str]) -> str:
    return (
        "<h2>Modality (kept panels)</h2><h3>L1</h3>"
        + _img("modality_l1.png", images, "modality L1")
        + _counts(["L1", "panels"], s.modality_l1)
        + "<h3>L2</h3>"
        + _img("modality_l2.png", images, "modality L2")
        + _counts(["L2", "panels"], s.modality_l2)
        + "<p>What decided each published panel's modality, by scope: its own subcaption, "
        + "the caption's shared parts, the whole figure's caption, the article, the image.</p>"
        + _counts(["decided by (scope)", "panels"], s.modality_scope)
    )


def _panels(s: ReportStats, images: Collection[str]) -> str:
    return (
        "<h2>Panels per figure</h2>"
        + f"<p>{s.compound_figures:,} compound figures (two panels or more), "
        + f"{s.mean_panels_per_compound:.2f} panels each on average.</p>"
        + _img("panels_per_figure.png", images, "panels per figure")
        + _counts(["panels detected", "figures"], s.panels_per_figure)
        + "<p>Boxes, letters read and the caption's labels (<code>caption_agreement</code>): "
        + "<em>anchored</em> figures had pieces joined at their labels; <em>disagree</em> ones "
        + "were published whole with their whole caption, never paired by reading order.</p>"
        + _counts(["agreement", "figures"], s.caption_agreement)
    )


def _tokens(s: ReportStats, images: Collection[str]) -> str:
    parts = ["<h2>Caption lengths (tokens)</h2>"]
    for t in s.tokens:
        parts.append(f"<h3>{_e(t.name.replace('_', ' '))}</h3>")
        if t.note:
            parts.append(f'<div class="notice">{_e(t.note)}</div>')
        parts.append(_img(f"tokens_{t.name}.png", images, t.name))
    summary = [
        (t.name, t.unit, t.tokenizer, t.n, *((t.mean, t.median, t.p95, t.max) if t.n else "––––"))
        for t in s.tokens
    ]
    parts.append(
        _table(["caption", "per", "tokenizer", "n", "mean", "median", "p95", "max"], summary)
    )
    parts.append(
        "<p>Token waste: the share of all tokens beyond an encoder's window; truncated: the "
        "share of captions longer than it.</p>"
    )
    waste = [
        (
            t.name,
            *(f"{t.waste[w]:.1%} / {t.truncated[w]:.1%}" if t.n else "–" for w in s.windows),
        )
        for t in s.tokens
    ]
    parts.append(_table(["caption", *(f"{w}: waste / truncated" for w in s.windows)], waste))
    return "".join(parts)


def _licenses(s: ReportStats, images: Collection[str]) -> str:
    names = list(dict.fromkeys([*s.licenses, *s.license_articles, *s.licenses_skipped]))
    rows = [
        (n, s.licenses.get(n, 0), s.license_articles.get(n, 0), s.licenses_skipped.get(n, 0))
        for n in names
    ]
    if not s.license_policy_recorded:
        policy = "The manifest records no license policy (built before policies existed)."
    elif s.license_policy is None:
        policy = "License policy: every license admitted (<code>output.licenses.allow</code>)."
    else:
        allowed = ", ".join(_e(c) for c in s.license_policy)
        policy = (
            f"License policy: only {allowed} admitted; "
            f"{sum(s.licenses_skipped.values()):,} articles outside it skipped (failures, "
            "stage <code>license</code>)."
        )
    return (
        "<h2>Licenses</h2>"
        + f"<p>{policy}</p>"
        + _img("licenses.png", images, "licenses")
        + _table(["license", "kept panels", "articles", "articles skipped by policy"], rows)
    )


def _failures(s: ReportStats, images: Collection[str]) -> str:
    rows = [(f.stage, f.error_type, f.count, f.retryable, f.example) for f in s.failures]
    return (
        "<h2>Failures</h2>"
        + f"<p>{s.failures_total:,} failure rows, {s.failures_retryable:,} retryable.</p>"
        + _img("failures_stage.png", images, "failures by stage")
        + _counts(["stage", "failures"], s.failures_by_stage)
        + _img("failures_type.png", images, "failures by type")
        + _table(["stage", "error type", "count", "retryable", "example message"], rows)
    )


def _enrichment(s: ReportStats) -> str:
    rows = [(k, v) for k, v in s.enrichment.items()]
    rows.append(("long-context tokenizer", s.tokenizer_long or "–"))
    return "<h2>Enrichment</h2>" + _table(["", ""], rows)


def render_html(stats: ReportStats, images: Collection[str], gallery: Gallery | None = None) -> str:
    """The page; ``images`` names the PNGs written next to it (others show "No data"), and
    ``gallery`` is the sample of figures and rejected panels shown after the funnel."""
    body = "".join(
        [
            _header(stats),
            _funnel(stats, images),
            gallery_page.render(gallery) if gallery is not None else "",
            _modality(stats, images),
            _panels(stats, images),
            _tokens(stats, images),
            _licenses(stats, images),
            _failures(stats, images),
            _enrichment(stats),
            '<p class="muted">Numbers in <a href="stats.json">stats.json</a>.</p>',
        ]
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>pmcvl report: {_e(stats.uri)}</title>"
        f"<style>{_CSS}{gallery_page.CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def write_report(
    storage: Storage, stats: ReportStats, prefix: str = "report", gallery: Gallery | None = None
) -> str:
    """Write the PNGs, ``stats.json``, the gallery's thumbnails and ``index.html`` under
    ``prefix``; the page's key.

    PNGs and thumbnails left by an earlier report that this one does not show are removed, so
    the folder never shows a picture of data that is gone.
    """
    images = charts(stats)
    for name, png in images.items():
        storage.write_bytes(f"{prefix}/{name}", png)
    for key in list(storage.list(prefix)):
        if key.endswith(".png") and key.removeprefix(f"{prefix}/") not in images:
            storage.delete(key)
    thumbs = gallery.files if gallery is not None else {}
    folder = f"{prefix}/{gallery_page.FOLDER}"
    for name, data in thumbs.items():
        storage.write_bytes(f"{folder}/{name}", data)
    for key in list(storage.list(folder)):
        if key.removeprefix(f"{folder}/") not in thumbs:
            storage.delete(key)
    storage.write_bytes(f"{prefix}/stats.json", stats.to_json().encode())
    storage.write_bytes(f"{prefix}/index.html", render_html(stats, images, gallery).encode())
    return f"{prefix}/index.html"
