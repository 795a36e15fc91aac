"""The numbers behind the run report, computed from a dataset output folder alone.

Kept apart from plotting so the statistics can be tested, and read by code, without drawing
anything. Only committed data counts: index parts come from the manifest's shard list (a part
it does not name may be a leftover of a killed run); rejects and failures are read for the
committed parts only (those with a ``parts/<part>.json`` record), for the same reason.
Columns are read with pyarrow and counted with pyarrow compute, so a run of millions of panels
never becomes Python objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ray_jobs.captions.tokens import WINDOWS, long_tokens, token_waste
from ray_jobs.contract.failures import FAILURE_SCHEMA
from ray_jobs.contract.records import INDEX_SCHEMA, REJECT_SCHEMA
from ray_jobs.shards import superseded
from ray_jobs.shards.manifest import PARTS
from ray_jobs.storage.store import Storage

MANIFEST_FORMAT = "pmcvl-dataset/1"
FUNNEL = ("articles", "figures", "panels", "kept", "enriched")
FUNNEL_LOSSES = ("articles_failed", "articles_skipped", "figures_failed")
_INDEX_COLUMNS = (
    "key",
    "shard",
    "figure_key",
    "pmcid",
    "license",
    "modality",
    "modality_l1",
    "modality_evidence",
    "n_panels",
    "caption_agreement",
    "tokens_caption",
    "tokens_subcaption",
    "tokens_long_caption",
    "tokens_long_caption_long",
    "split",
)
INDEX_COLUMNS = pa.schema([INDEX_SCHEMA.field(name) for name in _INDEX_COLUMNS])
CLIP = "CLIP BPE"


@dataclass
class Histogram:
    edges: list[float]  # len(counts) + 1 bin edges, uniform
    counts: list[int]


@dataclass
class TokenStats:
    """One caption kind's length distribution and what each encoder window would cut off."""

    name: str  # caption | subcaption | long_caption | long_caption_long
    unit: str  # what one value is: a figure (captions repeat across panels) or a panel
    tokenizer: str
    n: int = 0
    mean: float = 0.0
    median: float = 0.0
    p95: float = 0.0
    max: int = 0
    waste: dict[int, float] = field(default_factory=dict)  # share of tokens past the window
    truncated: dict[int, float] = field(default_factory=dict)  # share of captions past it
    histogram: Histogram = field(default_factory=lambda: Histogram([], []))
    note: str | None = None  # why there is nothing to show, e.g. enrichment not run


@dataclass
class FailureGroup:
    stage: str
    error_type: str
    count: int
    retryable: bool
    example: str


@dataclass
class ReportStats:
    uri: str
    manifest_found: bool = False
    format: str | None = None
    created: str | None = None
    code_version: str | None = None
    config_hash: str | None = None
    runs: list[str] = field(default_factory=list)
    shards: int = 0
    shard_bytes: int = 0
    splits: dict[str, int] = field(default_factory=dict)  # samples per split in the index
    funnel: dict[str, int] = field(default_factory=dict)  # FUNNEL, in order
    losses: dict[str, int] = field(default_factory=dict)  # FUNNEL_LOSSES
    dropped: dict[str, int] = field(default_factory=dict)  # panels dropped after detection
    detector_dropped: dict[str, int] = field(default_factory=dict)  # crops never panels
    rejects: dict[str, int] = field(default_factory=dict)  # rows of rejects/*.parquet by reason
    modality_l1: dict[str, int] = field(default_factory=dict)
    modality_l2: dict[str, int] = field(default_factory=dict)
    # published panels by the scope of the evidence that decided them: own (the panel's
    # subcaption), shared (the caption's preamble or trailer), figure, article, image, none
    modality_scope: dict[str, int] = field(default_factory=dict)
    panels_per_figure: dict[int, int] = field(default_factory=dict)  # n_panels -> figures
    # published figures by how boxes and caption agreed (``captions.layout``), and the
    # disagreeing figures that have no sample
    caption_agreement: dict[str, int] = field(default_factory=dict)
    compound_figures: int = 0  # figures with two panels or more
    mean_panels_per_compound: float = 0.0
    windows: list[int] = field(default_factory=lambda: list(WINDOWS))
    tokens: list[TokenStats] = field(default_factory=list)
    licenses: dict[str, int] = field(default_factory=dict)  # kept panels per license
    license_articles: dict[str, int] = field(default_factory=dict)  # articles per license
    # the allow-list the output was built under (None: every license), whether the manifest
    # records one at all (older ones do not), and the articles it left out, by license
    license_policy: list[str] | None = None
    license_policy_recorded: bool = False
    licenses_skipped: dict[str, int] = field(default_factory=dict)
    failures_total: int = 0
    failures_retryable: int = 0
    failures_by_stage: dict[str, int] = field(default_factory=dict)
    failures: list[FailureGroup] = field(default_factory=list)  # by stage and error type
    enrichment: dict[str, Any] = field(default_factory=dict)
    tokenizer_long: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @property
    def enrichment_ran(self) -> bool:
        return bool(self.enrichment.get("enabled"))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The schema's columns in its order, nulls for any a part lacks (an older writer)."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _read_parts(
    storage: Storage, keys: Iterable[str], schema: pa.Schema, warnings: list[str]
) -> pa.Table:
    tables = []
    for key in keys:
        try:
            data = storage.read_bytes(key)
        except FileNotFoundError:
            warnings.append(f"{key} is listed in the manifest but missing")
            continue
        part = pq.ParquetFile(pa.BufferReader(data))
        names = [n for n in schema.names if n in part.schema_arrow.names]
        tables.append(_conform(part.read(columns=names), schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _parts(storage: Storage, folder: str) -> list[str]:
    """The folder's Parquet parts that a committed part record names."""
    committed = {
        k.rsplit("/", 1)[-1].removesuffix(".json")
        for k in storage.list(PARTS)
        if k.endswith(".json")
    }
    return sorted(
        k
        for k in storage.list(folder)
        if k.endswith(".parquet") and k.rsplit("/", 1)[-1].removesuffix(".parquet") in committed
    )


def _counts(column: pa.ChunkedArray | pa.Array, missing: str | None = "unknown") -> dict:
    """Value -> rows, most frequent first; nulls count as ``missing`` (or are left out)."""
    column = pc.drop_null(column) if missing is None else pc.fill_null(column, missing)
    counted = pc.value_counts(column)
    pairs = zip(
        counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True
    )
    return dict(sorted(pairs, key=lambda kv: (-kv[1], str(kv[0]))))


def _int_map(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    pairs = ((str(k), int(v)) for k, v in value.items() if isinstance(v, int | float))
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def _step(top: int, bins: int = 40) -> int:
    """A round bin width (1, 2, 5, 10, 20, 50, ...) giving at most ``bins`` bins up to ``top``."""
    scale = 1
    while True:
        for mult in (1, 2, 5):
            if top / (mult * scale) <= bins:
                return mult * scale
        scale *= 10


def token_stats(
    name: str,
    lengths: Sequence[int] | np.ndarray,
    windows: Sequence[int],
    *,
    unit: str = "panel",
    tokenizer: str = CLIP,
    note: str | None = None,
) -> TokenStats:
    values = np.asarray(lengths, dtype=np.int64)
    stats = TokenStats(name, unit, tokenizer, note=note)
    if values.size == 0:
        return stats
    top = int(values.max())
    step = _step(max(top, 1))
    edges = np.arange(0, (top // step + 1) * step + 1, step)
    counts, _ = np.histogram(values, bins=edges)
    stats.n = int(values.size)
    stats.mean = round(float(values.mean()), 2)
    stats.median = float(np.median(values))
    stats.p95 = float(np.percentile(values, 95))
    stats.max = top
    stats.waste = token_waste(values.tolist(), windows)
    stats.truncated = {w: float((values > w).mean()) for w in windows}
    stats.histogram = Histogram([float(e) for e in edges], [int(c) for c in counts])
    return stats


def _lengths(column: pa.ChunkedArray) -> np.ndarray:
    return pc.drop_null(column).to_numpy().astype(np.int64)


def _long_counts(
    storage: Storage, keys: Sequence[str], tokenizer: str, warnings: list[str]
) -> np.ndarray:
    """Long captions counted with the configured tokenizer when the run did not count them."""
    texts = _read_parts(storage, keys, pa.schema([INDEX_SCHEMA.field("long_caption")]), [])
    lengths = [long_tokens(t, tokenizer) for t in pc.drop_null(texts["long_caption"]).to_pylist()]
    if lengths:
        warnings.append(f"long-caption tokens counted now with {tokenizer} (the run did not)")
    return np.asarray(lengths, dtype=np.int64)


def _caption_tokens(
    stats: ReportStats,
    index: pa.Table,
    figures: pa.Table,
    storage: Storage,
    index_keys: Sequence[str],
    long_tokenizer: str | None,
) -> list[TokenStats]:
    windows = stats.windows
    out = [
        token_stats("caption", _lengths(figures["tokens_caption_max"]), windows, unit="figure"),
        token_stats("subcaption", _lengths(index["tokens_subcaption"]), windows),
    ]
    if not stats.enrichment_ran:
        reason = stats.enrichment.get("reason") or "enrichment disabled"
        out.append(token_stats("long_caption", [], windows, note=f"not run: {reason}"))
        return out
    long_clip = _lengths(index["tokens_long_caption"])
    note = None if long_clip.size else "enrichment ran but produced no long captions"
    out.append(token_stats("long_caption", long_clip, windows, note=note))
    long_long = _lengths(index["tokens_long_caption_long"])
    name = stats.tokenizer_long
    if not long_long.size and long_tokenizer and Path(long_tokenizer).is_file() and long_clip.size:
        long_long = _long_counts(storage, index_keys, long_tokenizer, stats.warnings)
        name = Path(long_tokenizer).parent.name or long_tokenizer
    if long_long.size:
        out.append(token_stats("long_caption_long", long_long, windows, tokenizer=name or "long"))
    return out


def _failures(stats: ReportStats, failures: pa.Table) -> None:
    stats.failures_total = failures.num_rows
    stats.failures_retryable = int(pc.sum(pc.fill_null(failures["retryable"], False)).as_py() or 0)
    stats.failures_by_stage = _counts(failures["stage"])
    groups = (
        failures.group_by(["stage", "error_type"], use_threads=False)
        .aggregate([([], "count_all"), ("retryable", "any"), ("message", "first")])
        .to_pylist()
    )
    stats.failures = sorted(
        (
            FailureGroup(
                g["stage"] or "unknown",
                g["error_type"] or "unknown",
                g["count_all"],
                bool(g["retryable_any"]),
                (g["message_first"] or "")[:300],
            )
            for g in groups
        ),
        key=lambda f: (-f.count, f.stage, f.error_type),
    )


def _read_manifest(storage: Storage, stats: ReportStats) -> dict[str, Any]:
    if not storage.exists("manifest.json"):
        stats.warnings.append("no manifest.json: no run has committed output here yet")
        return {}
    try:
        manifest = json.loads(storage.read_bytes("manifest.json"))
    except ValueError as exc:
        stats.warnings.append(f"manifest.json is not valid JSON: {exc}")
        return {}
    if not isinstance(manifest, dict):
        stats.warnings.append("manifest.json is not a JSON object")
        return {}
    stats.manifest_found = True
    stats.format = manifest.get("format")
    if stats.format != MANIFEST_FORMAT:
        stats.warnings.append(f"manifest format {stats.format!r}, expected {MANIFEST_FORMAT!r}")
    stats.created = manifest.get("created")
    stats.code_version = manifest.get("code_version")
    stats.config_hash = manifest.get("config_hash")
    stats.runs = [str(r) for r in manifest.get("runs") or []]
    stats.tokenizer_long = manifest.get("tokenizer_long")
    return manifest


def _license_policy(
    stats: ReportStats, storage: Storage, manifest: dict[str, Any], counts: dict[str, Any]
) -> None:
    """The policy from the manifest, and the skips that stand (from the skips tables and
    the ledger: the parts' counts also hold skips a later, wider run built); the manifest's
    per-license sample counts checked against the index's (both count what readers see)."""
    from ray_jobs.pmc.ledger import Ledger
    from ray_jobs.pmc.license_policy import skipped_articles

    if "license_policy" in manifest:
        stats.license_policy_recorded = True
        policy = manifest["license_policy"]
        stats.license_policy = [str(c) for c in policy] if isinstance(policy, list) else None
    if _int_map(counts.get("skipped_by_license")):
        keys = [*_parts(storage, "skips"), *_parts(storage, "failures")]  # failures: older builds
        parts = {k.rsplit("/", 1)[-1].removesuffix(".parquet") for k in keys}
        stats.licenses_skipped = skipped_articles(storage, Ledger.load(storage).latest, parts)
    recorded = manifest.get("licenses")
    if isinstance(recorded, dict) and _int_map(recorded) != stats.licenses:
        stats.warnings.append(
            f"the manifest counts samples by license as {_int_map(recorded)}, the index as "
            f"{stats.licenses}"
        )


def compute_stats(
    storage: Storage,
    *,
    windows: Sequence[int] = WINDOWS,
    long_tokenizer: str | None = None,
) -> ReportStats:
    """Everything the report shows, for the committed output under ``storage``.

    ``long_tokenizer`` (a local ``tokenizer.json``) is used only when the run itself did not
    count long-caption tokens with a long-context tokenizer.
    """
    stats = ReportStats(uri=storage.uri, windows=sorted({int(w) for w in windows}))
    manifest = _read_manifest(storage, stats)
    shards = [s for s in manifest.get("shards") or [] if isinstance(s, dict)]
    stats.shards = len(shards)
    stats.shard_bytes = sum(int(s.get("bytes") or 0) for s in shards)
    enrichment = manifest.get("enrichment")
    stats.enrichment = dict(enrichment) if isinstance(enrichment, dict) else {}
    stats.enrichment.setdefault("enabled", False)
    if not stats.enrichment["enabled"] and not stats.enrichment.get("reason"):
        stats.enrichment["reason"] = "the manifest does not record an enrichment run"

    index_keys = [s["index"] for s in shards if s.get("index")]
    index = _read_parts(storage, index_keys, INDEX_COLUMNS, stats.warnings)
    index = superseded.current(index, superseded.from_manifest(storage, manifest))
    rejects = _read_parts(storage, _parts(storage, "rejects"), REJECT_SCHEMA, stats.warnings)
    failures = _read_parts(storage, _parts(storage, "failures"), FAILURE_SCHEMA, stats.warnings)

    stats.splits = _counts(index["split"])
    stats.modality_l1 = _counts(index["modality_l1"])
    stats.modality_l2 = _counts(index["modality"])
    evidence = pc.list_flatten(index["modality_evidence"])
    scopes = pc.filter(evidence, pc.starts_with(evidence, "scope:"))
    stats.modality_scope = {k.removeprefix("scope:"): n for k, n in _counts(scopes, None).items()}
    stats.licenses = _counts(index["license"])
    articles = index.group_by(["pmcid", "license"]).aggregate([])
    stats.license_articles = _counts(articles["license"])
    figures = index.group_by("figure_key").aggregate(
        [("n_panels", "max"), ("tokens_caption", "max")]
    )
    stats.panels_per_figure = dict(sorted(_counts(figures["n_panels_max"], None).items()))
    agreement = index.group_by(["figure_key", "caption_agreement"]).aggregate([])
    stats.caption_agreement = _counts(agreement["caption_agreement"], "not recorded")
    refused = rejects.filter(pc.equal(rejects["reason"], "caption_disagreement"))
    refused = pc.unique(refused["figure_key"]).filter(
        pc.invert(pc.is_in(pc.unique(refused["figure_key"]), agreement["figure_key"]))
    )
    if len(refused):
        # refused by ``captions.on_disagreement: reject``, or its whole figure dropped later
        stats.caption_agreement["disagree, not published"] = len(refused)
    compound = [n for n in stats.panels_per_figure if n >= 2]
    stats.compound_figures = sum(stats.panels_per_figure[n] for n in compound)
    if stats.compound_figures:
        total = sum(n * stats.panels_per_figure[n] for n in compound)
        stats.mean_panels_per_compound = round(total / stats.compound_figures, 2)

    counts = manifest.get("counts") if isinstance(manifest.get("counts"), dict) else {}
    all_figures = pa.chunked_array(
        index["figure_key"].chunks + rejects["figure_key"].chunks, type=pa.string()
    )
    derived = {
        "articles": pc.count_distinct(index["pmcid"]).as_py(),
        "figures": pc.count_distinct(all_figures).as_py(),
        "panels": index.num_rows + rejects.num_rows,
        "kept": index.num_rows,
        "enriched": index.num_rows - index["tokens_long_caption"].null_count,
    }
    stats.funnel = {
        k: int(counts[k]) if isinstance(counts.get(k), int) else derived[k] for k in FUNNEL
    }
    stats.losses = {k: int(counts.get(k) or 0) for k in FUNNEL_LOSSES}
    if isinstance(counts.get("kept"), int) and counts["kept"] != index.num_rows:
        stats.warnings.append(
            f"the manifest counts {counts['kept']} kept panels, the index holds "
            f"{index.num_rows} rows"
        )
    stats.rejects = _counts(rejects["reason"])
    stats.dropped = _int_map(counts.get("dropped")) if "dropped" in counts else stats.rejects
    stats.detector_dropped = _int_map(counts.get("detector_dropped"))
    _license_policy(stats, storage, manifest, counts)

    stats.tokens = _caption_tokens(stats, index, figures, storage, index_keys, long_tokenizer)
    _failures(stats, failures)
    if isinstance(counts.get("failures"), int) and counts["failures"] != stats.failures_total:
        stats.warnings.append(
            f"the manifest counts {counts['failures']} failures, failures/ holds "
            f"{stats.failures_total} rows"
        )
    return stats
