"""The record contract: what each WebDataset sample's ``.json`` and each index row hold.

One dataclass (:class:`PanelRecord`) and one explicit Arrow schema (:data:`INDEX_SCHEMA`), so
every index part reads as one dataset in pandas, pyarrow and HF ``datasets`` whatever a part
happened to contain. Keys hold no dot (WebDataset splits member names at the first dot of the
base name): ``PMC13901v1-f2-p00``.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import pyarrow as pa

RECORD_FORMAT = "pmcvl-panel/1"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "x"


def figure_key(pmcid: str | None, version: int | None, figure_id: str, ordinal: int) -> str:
    """``PMC13901v1-f2``: stable across runs, no dots, unique within an article (the ordinal
    breaks ties between figure ids that sanitise to the same text)."""
    article = _safe(pmcid or "unknown") + (f"v{version}" if version is not None else "")
    return f"{article}-{_safe(figure_id)}{'' if ordinal == 0 else f'_{ordinal}'}"


def panel_key(fig_key: str, panel_index: int) -> str:
    return f"{fig_key}-p{panel_index:02d}"


@dataclass
class Feature:
    """One statement of an enriched caption and whether the image supports it."""

    feature: str
    verdict: str  # FEASIBLE | NOT_FEASIBLE
    rationale: str


@dataclass
class PanelRecord:
    key: str
    figure_key: str
    pmcid: str | None
    pmc_version: int | None
    pmid: str | None
    doi: str | None
    journal: str | None
    year: int | None
    license: str | None
    license_url: str | None
    figure_id: str
    figure_label: str | None
    caption: str
    subcaption: str
    panel_index: int
    n_panels: int  # panels detected in the figure
    panel_label: str | None
    alignment: str  # letter | label | single | full_caption | figure
    alignment_confidence: float
    panel_bbox: list[int]  # x0, y0, x1, y1 in source pixels
    panel_status: str  # ok | fallback (the whole figure passed through as one panel)
    detector_score: float | None
    detector_version: str
    split_confidence: float = 0.0  # how sure the caption's panel-label sequence is; 0: no split
    # how the figure's boxes, letters and caption labels agreed (``captions.layout``):
    # single | unlabelled | letters | count | anchored | disagree (published whole)
    caption_agreement: str | None = None
    layout_reason: str | None = None  # why they disagreed, when they did
    label_bbox: list[int] | None = None  # the panel letter's box in the figure, when found
    modality: str | None = None  # taxonomy L2
    modality_l1: str | None = None
    modality_score: float | None = None
    # which evidence decided keep or drop (image, subcaption, caption, ...), and all of it
    modality_decided_by: str | None = None
    modality_evidence: list[str] = field(default_factory=list)
    inline_mentions: list[str] = field(default_factory=list)
    long_caption: str | None = None
    feasibility: list[Feature] = field(default_factory=list)
    llm_model: str | None = None
    prompt_version: str | None = None
    llm_prompt_tokens: int | None = None
    llm_completion_tokens: int | None = None
    width: int = 0
    height: int = 0
    sha256: str = ""
    phash: str = ""  # 64-bit perceptual hash, hex
    tokens_caption: int = 0  # CLIP BPE tokens, start and end included
    tokens_subcaption: int = 0
    tokens_long_caption: int | None = None
    tokens_long_caption_long: int | None = None  # the long-context tokenizer, when configured
    split: str = "train"
    text: str = ""  # the training caption: the long caption where enrichment ran
    format: str = RECORD_FORMAT

    def to_json_dict(self) -> dict[str, Any]:
        """Shallow, by hand: ``dataclasses.asdict`` deep-copies and dominates shard writing."""
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["feasibility"] = [asdict(f) for f in self.feasibility]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PanelRecord:
        values = {
            k: v
            for k, v in data.items()
            if k in _FIELD_NAMES and not (v is None and k in _NOT_NONE)
        }
        values["feasibility"] = [
            f if isinstance(f, Feature) else Feature(**f) for f in values.get("feasibility") or []
        ]
        return cls(**values)


_FIELD_NAMES = tuple(f.name for f in fields(PanelRecord))
# fields whose default is not None: a record in flight holds every field of its schema, None
# where no stage set it, and such a None means "not set", so the default stands
_NOT_NONE = frozenset(
    f.name
    for f in fields(PanelRecord)
    if f.default is not None and (f.default is not MISSING or f.default_factory is not MISSING)
)
FEATURE = pa.struct(
    [("feature", pa.string()), ("verdict", pa.string()), ("rationale", pa.string())]
)
_TYPES: dict[str, pa.DataType] = {
    "pmc_version": pa.int64(),
    "year": pa.int64(),
    "panel_index": pa.int32(),
    "n_panels": pa.int32(),
    "alignment_confidence": pa.float32(),
    "split_confidence": pa.float32(),
    "panel_bbox": pa.list_(pa.int32()),
    "label_bbox": pa.list_(pa.int32()),
    "detector_score": pa.float32(),
    "modality_score": pa.float32(),
    "inline_mentions": pa.list_(pa.string()),
    "modality_evidence": pa.list_(pa.string()),
    "feasibility": pa.list_(FEATURE),
    "llm_prompt_tokens": pa.int32(),
    "llm_completion_tokens": pa.int32(),
    "width": pa.int32(),
    "height": pa.int32(),
    "tokens_caption": pa.int32(),
    "tokens_subcaption": pa.int32(),
    "tokens_long_caption": pa.int32(),
    "tokens_long_caption_long": pa.int32(),
}
RECORD_SCHEMA = pa.schema([(f.name, _TYPES.get(f.name, pa.string())) for f in fields(PanelRecord)])
INDEX_SCHEMA = RECORD_SCHEMA.append(pa.field("shard", pa.string())).append(
    pa.field("member", pa.string())
)

SKIP_SCHEMA = pa.schema(
    [  # skips/<part>.parquet: articles the license policy left out, one row each
        ("source_key", pa.string()),  # the article's ref key, PMC1.2
        ("pmcid", pa.string()),
        ("version", pa.int64()),
        ("license", pa.string()),  # its label (``ray_jobs.pmc.licenses.label``)
        ("reason", pa.string()),  # license X not in allow-list [..]
    ]
)

REJECT_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("figure_key", pa.string()),
        # no_clinical_evidence | non_clinical:<l2> | too_small | duplicate_* |
        # caption_disagreement | unpaired_panel (low_confidence: datasets built before issue 40)
        ("reason", pa.string()),
        ("duplicate_of", pa.string()),
        ("modality", pa.string()),
        ("modality_l1", pa.string()),
        ("modality_score", pa.float32()),
        ("modality_decided_by", pa.string()),
        ("sha256", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("layout_reason", pa.string()),  # caption_disagreement: the counts that disagreed
        # where the panel was and how it was paired: a rejected panel is still evidence of
        # the figure's layout (``modeldev.detector.pseudo_labels`` learns from it)
        ("panel_bbox", pa.list_(pa.int32())),
        ("label_bbox", pa.list_(pa.int32())),
        ("alignment", pa.string()),
        ("caption_agreement", pa.string()),
    ]
)
