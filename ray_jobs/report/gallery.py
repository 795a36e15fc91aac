"""The report's gallery: sampled figures with their boxes, and rejected panels by reason.

The build's workers wrote thumbnails and geometry for a hash-selected sample of figures
(:mod:`ray_jobs.report.gallery_files`); this module picks which of them the page shows and
joins them with what became of each panel: the current index row (kept: subcaption, long
caption, alignment, modality and score) or the committed rejects row (its reason). Picks are
deterministic: within each group, the figures (or rejected panels) whose key hashes lowest.
Only committed, current data is shown: index rows go through the superseded tombstones, a
figure rebuilt by a later part is shown from that part, and rejected panels of an article
version that a later part rebuilt are left out. Selected thumbnails are copied next to the
page (``report/gallery/``), so the report folder stands alone, local or on S3.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ray_jobs.config import ReportSettings
from ray_jobs.contract.records import INDEX_SCHEMA, REJECT_SCHEMA
from ray_jobs.pmc.ledger import version_id
from ray_jobs.report.gallery_files import (
    ENTRIES,
    GalleryEntry,
    GalleryPanel,
    entry_key,
    file_key,
    key_hash,
)
from ray_jobs.shards import superseded
from ray_jobs.storage.parquet import read_parquet
from ray_jobs.storage.store import Storage

FOLDER = "gallery"  # under the report's prefix
_LIGHT = ("key", "figure_key", "shard", "modality_l1", "alignment")
_DETAIL = (
    "key",
    "shard",
    "subcaption",
    "long_caption",
    "alignment",
    "alignment_confidence",
    "modality",
    "modality_l1",
    "modality_score",
    "split",
)
_REJECT = ("key", "figure_key", "reason", "modality", "modality_score")


@dataclass
class PanelView:
    """One panel of a shown figure, with what became of it."""

    panel: GalleryPanel
    thumb: str | None  # name under report/gallery/
    kept: bool
    reason: str | None = None  # the rejects row's reason
    modality: str | None = None
    modality_score: float | None = None
    long_caption: str | None = None
    split: str | None = None


@dataclass
class FigureView:
    entry: GalleryEntry
    thumb: str
    panels: list[PanelView]
    group: str  # e.g. "modality: radiology"


@dataclass
class RejectView:
    key: str
    figure_key: str
    reason: str
    thumb: str | None
    subcaption: str | None = None
    modality: str | None = None
    modality_score: float | None = None
    detector_score: float | None = None


@dataclass
class Gallery:
    figures: list[FigureView] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)  # in page order
    elsewhere: dict[str, list[str]] = field(default_factory=dict)  # group -> figures shown above
    rejects: dict[str, list[RejectView]] = field(default_factory=dict)  # reason -> samples
    reject_counts: dict[str, int] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)  # name under report/gallery/
    sampled: int = 0  # current figures with gallery files
    figures_total: int = 0  # current figures
    note: str | None = None


def _part_of(shard: dict[str, Any]) -> str:
    """A shard's part: recorded in the manifest; else from ``<split>-<part>-<n>.tar``."""
    if shard.get("part"):
        return str(shard["part"])
    stem = str(shard.get("name", "")).rsplit("/", 1)[-1].removesuffix(".tar")
    return stem.split("-")[1] if stem.count("-") >= 2 else stem


def _committed(storage: Storage) -> set[str]:
    return {
        k.rsplit("/", 1)[-1].removesuffix(".json")
        for k in storage.list("parts")
        if k.endswith(".json")
    }


class _Source:
    """The committed output the gallery reads: light index columns, rejects, tombstones."""

    def __init__(self, storage: Storage, manifest: dict[str, Any]):
        self.storage = storage
        shards = [s for s in manifest.get("shards") or [] if isinstance(s, dict) and s.get("index")]
        self.shard_part = {s["name"]: _part_of(s) for s in shards}
        self.shard_index = {s["name"]: s["index"] for s in shards}
        tables = [self._read(s["index"], _LIGHT, INDEX_SCHEMA) for s in shards]
        index = pa.concat_tables(tables) if tables else _empty(_LIGHT, INDEX_SCHEMA)
        self.index = superseded.current(index, superseded.from_manifest(storage, manifest))
        self.tombstones = self._tombstones(manifest.get("superseded", {}).get("files", []))
        committed = _committed(storage)
        rejects = []
        for key in sorted(storage.list("rejects")):
            part = key.rsplit("/", 1)[-1].removesuffix(".parquet")
            if key.endswith(".parquet") and part in committed:
                table = self._read(key, _REJECT, REJECT_SCHEMA)
                rejects.append(table.append_column("part", pa.array([part] * len(table))))
        schema = _empty(_REJECT, REJECT_SCHEMA).schema.append(pa.field("part", pa.string()))
        self.rejects = pa.concat_tables(rejects) if rejects else schema.empty_table()
        # the part each figure is shown from: the newest committed part that holds it
        self.figure_part: dict[str, str] = {}
        index_parts = [self.shard_part.get(s, "") for s in self.index["shard"].to_pylist()]
        pairs = zip(self.index["figure_key"].to_pylist(), index_parts, strict=True)
        reject_pairs = zip(
            self.rejects["figure_key"].to_pylist(), self.rejects["part"].to_pylist(), strict=True
        )
        for fk, part in [*pairs, *reject_pairs]:
            if fk and part > self.figure_part.get(fk, ""):
                self.figure_part[fk] = part
        self._entries: dict[str, GalleryEntry | None] = {}
        # the sampled figures: those whose entry exists in the part they are shown from
        listed = set()
        for key in storage.list(ENTRIES):
            part, _, name = key.removeprefix(f"{ENTRIES}/").partition("/")
            if name.endswith(".json"):
                listed.add((part, name.removesuffix(".json")))
        self.sampled = {fk for fk, part in self.figure_part.items() if (part, fk) in listed}

    def _read(self, key: str, names: Iterable[str], schema: pa.Schema) -> pa.Table:
        try:
            part = pq.ParquetFile(pa.BufferReader(self.storage.read_bytes(key)))
        except FileNotFoundError:
            return _empty(names, schema)
        table = part.read(columns=[n for n in names if n in part.schema_arrow.names])
        cols = [
            table[n].cast(schema.field(n).type)
            if n in table.column_names
            else pa.nulls(len(table), schema.field(n).type)
            for n in names
        ]
        return pa.Table.from_arrays(cols, names=list(names))

    def _tombstones(self, files: list[str]) -> dict[str, str]:
        """Article version id -> the newest part that rebuilt it."""
        newest: dict[str, str] = {}
        for key in files:
            table = read_parquet(self.storage, key, ["pmcid", "pmc_version", "by_part"])
            for row in table.to_pylist():
                vid = version_id(row["pmcid"], row["pmc_version"])
                newest[vid] = max(newest.get(vid, ""), row["by_part"] or "")
        return newest

    def entry(self, figure_key: str) -> GalleryEntry | None:
        """The figure's gallery entry from the part it is shown from, when it is current."""
        if figure_key not in self._entries:
            self._entries[figure_key] = self._load(figure_key)
        return self._entries[figure_key]

    def _load(self, figure_key: str) -> GalleryEntry | None:
        part = self.figure_part.get(figure_key)
        if part is None:
            return None
        try:
            entry = GalleryEntry.from_json(self.storage.read_bytes(entry_key(part, figure_key)))
        except (FileNotFoundError, ValueError, TypeError):
            return None  # not sampled when it was built, or an unreadable entry
        rebuilt = self.tombstones.get(version_id(entry.pmcid, entry.pmc_version), "")
        return None if rebuilt > part else entry

    def thumb(self, entry: GalleryEntry, name: str | None, files: dict[str, bytes]) -> str | None:
        """Copy one thumbnail into ``files``; its name there, or None when it is missing."""
        if not name:
            return None
        if name not in files:
            try:
                files[name] = self.storage.read_bytes(file_key(entry.part, name))
            except FileNotFoundError:
                return None
        return name


def _empty(names: Iterable[str], schema: pa.Schema) -> pa.Table:
    return pa.schema([schema.field(n) for n in names]).empty_table()


def _details(source: _Source, keys: set[str]) -> dict[str, dict[str, Any]]:
    """Index rows (the heavy columns) of ``keys``, read only from the shards that hold them."""
    index = source.index.filter(pc.is_in(source.index["key"], pa.array(sorted(keys), pa.string())))
    pairs = set(zip(index["shard"].to_pylist(), index["key"].to_pylist(), strict=True))
    out: dict[str, dict[str, Any]] = {}
    for shard in sorted({s for s, _ in pairs}):
        table = source._read(source.shard_index[shard], _DETAIL, INDEX_SCHEMA)
        for row in table.to_pylist():
            if (row["shard"], row["key"]) in pairs:
                out[row["key"]] = row
    return out


def _figure_groups(source: _Source) -> dict[str, list[str]]:
    """Group name -> sampled current figures in hash order: by modality L1, by alignment."""
    groups: dict[str, set[str]] = {}
    index = source.index
    for fk, l1, alignment in zip(
        index["figure_key"].to_pylist(),
        index["modality_l1"].to_pylist(),
        index["alignment"].to_pylist(),
        strict=True,
    ):
        if fk not in source.sampled:
            continue
        groups.setdefault(f"modality: {l1 or 'unknown'}", set()).add(fk)
        groups.setdefault(f"alignment: {alignment or 'unknown'}", set()).add(fk)
    order = sorted(groups, key=lambda g: (not g.startswith("modality"), -len(groups[g]), g))
    return {g: sorted(groups[g], key=key_hash) for g in order}


def _panel_views(
    source: _Source,
    entry: GalleryEntry,
    details: dict[str, dict[str, Any]],
    rejected: dict[str, dict[str, Any]],
    files: dict[str, bytes],
) -> list[PanelView]:
    views = []
    for p in sorted(entry.panels, key=lambda p: p.panel_index):
        row, rej = details.get(p.key), rejected.get(p.key)
        src = row or rej or {}
        views.append(
            PanelView(
                panel=p,
                thumb=source.thumb(entry, p.thumb, files),
                kept=row is not None,
                reason=None if row else (rej or {}).get("reason"),
                modality=src.get("modality"),
                modality_score=src.get("modality_score"),
                long_caption=(row or {}).get("long_caption"),
                split=(row or {}).get("split"),
            )
        )
    return views


def _rejected_rows(source: _Source) -> list[dict[str, Any]]:
    """Committed rejects rows from the part each figure is shown from."""
    return [
        r
        for r in source.rejects.to_pylist()
        if source.figure_part.get(r["figure_key"]) == r["part"]
    ]


def build_gallery(storage: Storage, manifest: dict[str, Any], limits: ReportSettings) -> Gallery:
    """Pick and gather the gallery of the committed output under ``storage``."""
    gallery = Gallery()
    source = _Source(storage, manifest)
    gallery.sampled, gallery.figures_total = len(source.sampled), len(source.figure_part)
    rejects = _rejected_rows(source)
    by_key = {r["key"]: r for r in rejects}
    chosen: list[tuple[str, GalleryEntry]] = []
    seen: set[str] = set()
    per_group = limits.gallery_figures_per_group
    for group, figures in _figure_groups(source).items():
        taken = 0
        gallery.groups.append(group)
        for fk in figures[: 4 * per_group + 4]:  # bounded reads: skip a few missing entries
            if taken >= per_group:
                break
            if fk in seen:  # shown in an earlier group: named there, drawn once
                gallery.elsewhere.setdefault(group, []).append(fk)
                taken += 1
                continue
            entry = source.entry(fk)
            if entry is not None:
                chosen.append((group, entry))
                seen.add(fk)
                taken += 1
    keys = {p.key for _, e in chosen for p in e.panels}
    details = _details(source, keys)
    for group, entry in chosen:
        thumb = source.thumb(entry, entry.thumb, gallery.files)
        if thumb is None:
            continue
        views = _panel_views(source, entry, details, by_key, gallery.files)
        gallery.figures.append(FigureView(entry, thumb, views, group))
    counts = manifest.get("counts") if isinstance(manifest.get("counts"), dict) else {}
    for reason, n in (counts.get("detector_dropped") or {}).items():
        gallery.reject_counts[f"detector:{reason}"] = int(n)
    _rejects(source, rejects, limits, gallery)
    if not gallery.figures and not any(gallery.rejects.values()):
        gallery.note = (
            "No sampled figure in this output: the build writes thumbnails for the share "
            "report.gallery_rate of figures, chosen by a hash of the key (0: none)."
        )
    return gallery


def _rejects(
    source: _Source, rejects: list[dict[str, Any]], limits: ReportSettings, gallery: Gallery
) -> None:
    """Up to ``gallery_rejects_per_reason`` panels per drop reason: the relevance and duplicate
    drops of the rejects table, then the boxes the detector dropped."""
    n = limits.gallery_rejects_per_reason
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for r in rejects:
        gallery.reject_counts[r["reason"]] = gallery.reject_counts.get(r["reason"], 0) + 1
    relevance = [k for k in gallery.reject_counts if not k.startswith("detector:")]
    for r in rejects:
        if r["figure_key"] in source.sampled:
            by_reason.setdefault(r["reason"], []).append(r)
    for reason in sorted(relevance, key=lambda k: (-gallery.reject_counts[k], k)):
        shown = gallery.rejects.setdefault(reason, [])
        for r in sorted(by_reason.get(reason, []), key=lambda r: key_hash(r["key"])):
            if len(shown) >= n:
                break
            entry = source.entry(r["figure_key"])
            panel = next((p for p in entry.panels if p.key == r["key"]), None) if entry else None
            if entry is None or panel is None:
                continue
            thumb = source.thumb(entry, panel.thumb, gallery.files)
            shown.append(
                RejectView(
                    r["key"],
                    r["figure_key"],
                    reason,
                    thumb,
                    panel.subcaption,
                    r["modality"],
                    r["modality_score"],
                    panel.score,
                )
            )
    for reason in sorted(
        (k for k in gallery.reject_counts if k.startswith("detector:")),
        key=lambda k: (-gallery.reject_counts[k], k),
    ):
        gallery.rejects.setdefault(reason, [])
    _detector_drops(source, limits, gallery)


def _detector_drops(source: _Source, limits: ReportSettings, gallery: Gallery) -> None:
    """Boxes the detector dropped, from the first ``gallery_scan_limit`` sampled figures."""
    figures = sorted(source.sampled, key=key_hash)
    for fk in figures[: limits.gallery_scan_limit]:
        entry = source.entry(fk)
        for i, drop in enumerate(entry.dropped if entry else []):
            reason = f"detector:{drop.reason}"
            shown = gallery.rejects.setdefault(reason, [])
            if len(shown) >= limits.gallery_rejects_per_reason:
                continue
            thumb = source.thumb(entry, drop.thumb, gallery.files)
            shown.append(RejectView(f"{fk}-d{i:02d}", fk, reason, thumb, detector_score=drop.score))


# ---- HTML ---------------------------------------------------------------------------------

CSS = """
.gfig{border:1px solid #ddd;border-radius:4px;margin:1em 0;padding:.6em;display:flex;
gap:1em;flex-wrap:wrap;align-items:flex-start}
.gimg{position:relative;flex:none;line-height:0}
.gimg img{margin:0;max-width:none}
.gimg svg{position:absolute;left:0;top:0;width:100%;height:100%;overflow:visible}
.gside{flex:1;min-width:22em}
.gside table{width:100%}
.gside td img{margin:0;max-width:7em;max-height:7em}
.gside td{vertical-align:top}
.tag{display:inline-block;border-radius:3px;padding:0 .4em;font-size:.85em;color:#fff}
.kept{background:#2a7d3a}.rej{background:#b33}.other{background:#777}
.legend span{display:inline-block;width:1.2em;height:.8em;vertical-align:middle;margin:0 .3em}
.grej{display:flex;flex-wrap:wrap;gap:.8em}
.grej div{border:1px solid #ddd;padding:.4em;width:11em;font-size:.85em}
.grej img{margin:0 0 .3em;max-width:100%}
details{margin:.3em 0}.small{font-size:.85em}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ints(values: Iterable[object]) -> list[int]:
    """Numbers from an entry's JSON, as numbers: nothing else reaches the SVG's attributes."""
    return [int(float(v)) for v in values]  # type: ignore[arg-type]


def _overlay(view: FigureView) -> str:
    """Boxes in source pixels over the thumbnail: panels (red, numbered in reading order),
    label boxes (blue), the detector's dropped boxes (grey, dashed)."""
    e = view.entry
    font = max(_ints([e.width, e.height])) / 22
    parts = []
    for d in e.dropped:
        x0, y0, x1, y1 = _ints(d.bbox)
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
            'stroke="#888" stroke-width="2" stroke-dasharray="6 4" '
            f'vector-effect="non-scaling-stroke"><title>{_e(d.reason)}</title></rect>'
        )
    for pv in view.panels:
        p = pv.panel
        x0, y0, x1, y1 = _ints(p.bbox)
        color = "#e02828" if pv.kept else "#f0a000"
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
            f'stroke="{color}" stroke-width="3" vector-effect="non-scaling-stroke"/>'
        )
        if p.label_bbox:
            lx0, ly0, lx1, ly1 = _ints(p.label_bbox)
            parts.append(
                f'<rect x="{lx0}" y="{ly0}" width="{lx1 - lx0}" height="{ly1 - ly0}" '
                'fill="none" stroke="#1e78ff" stroke-width="2" '
                'vector-effect="non-scaling-stroke"/>'
            )
        r = font * 0.7
        cx, cy = x0 + r + 2, y0 + r + 2
        parts.append(
            f'<circle cx="{cx:.0f}" cy="{cy:.0f}" r="{r:.0f}" fill="{color}"/>'
            f'<text x="{cx:.0f}" y="{cy:.0f}" font-size="{font:.0f}" fill="#fff" '
            'text-anchor="middle" dominant-baseline="central" '
            f'font-family="sans-serif">{p.panel_index + 1}</text>'
        )
    w, h = _ints(e.thumb_size)
    width, height = _ints([e.width, e.height])
    return (
        f'<div class="gimg"><img src="{FOLDER}/{_e(view.thumb)}" width="{w}" height="{h}" '
        f'alt="figure {_e(e.figure_key)}"><svg viewBox="0 0 {width} {height}" '
        f'preserveAspectRatio="none" aria-hidden="true">{"".join(parts)}</svg></div>'
    )


def _status(pv: PanelView) -> str:
    if pv.kept:
        return f'<span class="tag kept">kept</span> <span class="small">{_e(pv.split)}</span>'
    if pv.reason:
        return f'<span class="tag rej">dropped</span> <span class="small">{_e(pv.reason)}</span>'
    return '<span class="tag other">not in the dataset</span>'


_SHORT = 180  # subcaption characters shown before "more"


def _text(subcaption: str, caption: str) -> str:
    """A subcaption at a glance: the whole caption named as such, long text folded."""
    if not subcaption:
        return '<div class="muted"><i>(empty)</i></div>'
    if subcaption.strip() == caption.strip():
        return '<div class="muted"><i>the whole caption</i></div>'
    if len(subcaption) <= _SHORT:
        return f"<div>{_e(subcaption)}</div>"
    cut = subcaption[:_SHORT].rsplit(" ", 1)[0]
    return f"<details><summary>{_e(cut)} …</summary>{_e(subcaption[len(cut) :])}</details>"


def _panel_row(pv: PanelView, caption: str) -> str:
    p = pv.panel
    crop = f'<img src="{FOLDER}/{_e(pv.thumb)}" alt="{_e(p.key)}">' if pv.thumb else "–"
    label = p.panel_label or (f"({p.letter})" if p.letter else "")
    text = _text(p.subcaption, caption)
    if pv.long_caption:
        text += (
            f'<details><summary class="small">long caption</summary>'
            f'<div class="small">{_e(pv.long_caption)}</div></details>'
        )
    modality = f"{_e(pv.modality) or '–'}<br><span class=small>{_num(pv.modality_score)}</span>"
    return (
        f"<tr><td>{p.panel_index + 1} {_e(label)}</td><td>{crop}</td><td>{text}</td>"
        f"<td>{_e(p.alignment)}<br><span class=small>{_num(p.alignment_confidence)}</span></td>"
        f"<td>{modality}</td><td>{_status(pv)}</td></tr>"
    )


def _figure_card(view: FigureView) -> str:
    e = view.entry
    head = (
        f"<div><strong>{_e(e.figure_key)}</strong> {_e(e.figure_label)} · "
        f"{len(e.panels)} panels · {e.width}×{e.height} px</div>"
        f'<details><summary class="small">caption</summary><div class="small">'
        f"{_e(e.caption)}</div></details>"
    )
    rows = "".join(_panel_row(pv, e.caption) for pv in view.panels)
    table = (
        "<table><tr><th>#</th><th>crop</th><th>subcaption</th><th>alignment</th>"
        f"<th>modality</th><th>status</th></tr>{rows}</table>"
    )
    side = f'<div class="gside">{head}{table}</div>'
    return f'<div class="gfig" id="fig-{_e(e.figure_key)}">{_overlay(view)}{side}</div>'


def _reject_card(r: RejectView) -> str:
    img = f'<img src="{FOLDER}/{_e(r.thumb)}" alt="{_e(r.key)}">' if r.thumb else ""
    lines = [f"<strong>{_e(r.key)}</strong>"]
    if r.modality:
        lines.append(f"{_e(r.modality)} {_num(r.modality_score)}")
    if r.detector_score is not None:
        lines.append(f"detector score {_num(r.detector_score)}")
    if r.subcaption:
        lines.append(f'<span class="muted">{_e(r.subcaption[:160])}</span>')
    return f"<div>{img}{'<br>'.join(lines)}</div>"


def render(gallery: Gallery) -> str:
    """The gallery section of the page."""
    out = [
        "<h2>Gallery</h2>",
        f'<p class="muted">A deterministic sample: {gallery.sampled:,} of the '
        f"{gallery.figures_total:,} figures have thumbnails (the build keeps them for those "
        "whose key hashes below <code>report.gallery_rate</code>); the page shows the "
        "lowest-hashing ones of each group, each figure once, with what became of each of its "
        "panels.</p>",
    ]
    if gallery.note:
        out.append(f'<div class="notice">{_e(gallery.note)}</div>')
    if gallery.figures:
        out.append(
            '<p class="legend small"><span style="border:3px solid #e02828"></span>kept panel '
            '(number: reading order)<span style="border:3px solid #f0a000"></span>panel not '
            'kept<span style="border:2px solid #1e78ff"></span>label box'
            '<span style="border:2px dashed #888"></span>box the detector dropped</p>'
        )
    for group in gallery.groups:
        views = [v for v in gallery.figures if v.group == group]
        also = gallery.elsewhere.get(group, [])
        if not views and not also:
            continue
        out.append(f"<h3>{_e(group)}</h3>")
        out.extend(_figure_card(v) for v in views)
        if also:
            links = ", ".join(f'<a href="#fig-{_e(fk)}">{_e(fk)}</a>' for fk in also)
            out.append(f'<p class="small">Also in this group, shown above: {links}</p>')
    if gallery.rejects:
        out.append("<h3>Rejected panels by reason</h3>")
    for reason, shown in gallery.rejects.items():
        total = gallery.reject_counts.get(reason)
        count = f" ({total:,} in all)" if total else ""
        out.append(f"<h4>{_e(reason)}{_e(count)}</h4>")
        if shown:
            out.append('<div class="grej">' + "".join(_reject_card(r) for r in shown) + "</div>")
        else:
            out.append('<p class="muted">None of these panels is in the sampled figures.</p>')
    return "".join(out)
