"""One typed configuration for the whole pipeline.

Loaded from YAML (or the built-in local defaults when no file is given), then overridden by
environment variables named ``PMCVL__SECTION__KEY`` (values parsed as YAML scalars), so a
deployment can change one value without shipping a new file. Unknown keys are errors: a typo
must not silently fall back to a default.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

ENV_PREFIX = "PMCVL__"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class S3Settings(_Section):
    """How to reach an S3 API: AWS itself (anonymous for PMC's public bucket) or any endpoint."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    anonymous: bool = True
    max_pool_connections: int = 32


class SourceSettings(_Section):
    """Where articles come from. ``kind`` picks one of the three sources."""

    kind: Literal["s3", "bundles", "local"] = "local"
    # local: a folder of article folders; bundles: a folder of .tar.gz packages
    path: str | None = None
    # bundles: a legacy CSV file list (File, Article Citation, Accession ID, ...); paths in it are
    # relative to ``path`` (or to the CSV's folder when ``path`` is unset)
    file_list: str | None = None
    # s3: the PMC Cloud Service layout
    bucket: str = "pmc-oa-opendata"
    prefix: str = ""
    listing: Literal["prefix", "inventory"] = "prefix"
    inventory_bucket: str | None = None  # defaults to ``bucket``
    inventory_prefix: str = "inventory-reports/pmc-oa-opendata/metadata/"
    s3: S3Settings = Field(default_factory=S3Settings)
    limit: int | None = Field(default=None, ge=1)
    verify_md5: bool = True


class ArchiveLimits(_Section):
    """Bounds that make a hostile or broken package a failure record instead of an outage."""

    max_members: int = Field(default=2_000, ge=1)
    max_member_bytes: int = Field(default=256 * 2**20, ge=1)
    max_total_bytes: int = Field(default=1 * 2**30, ge=1)
    max_ratio: float = Field(default=100.0, gt=1)
    # the ratio is only judged once this many bytes came out: tiny archives compress absurdly well
    ratio_grace_bytes: int = Field(default=4 * 2**20, ge=0)
    max_xml_bytes: int = Field(default=64 * 2**20, ge=1)


class OutputSettings(_Section):
    """Where a run writes: a local folder or ``s3://bucket/prefix``."""

    uri: str = "output"
    s3: S3Settings = Field(default_factory=lambda: S3Settings(anonymous=False))
    articles_per_part: int = Field(default=500, ge=1)


class DetectorSettings(_Section):
    """The panel detector and what counts as a panel. Weights come from a path, never a hub."""

    weights: str = "models/panel-detector/yolo11n-panels.pt"
    imgsz: int = Field(default=256, ge=32)
    conf: float = Field(default=0.25, gt=0, lt=1)  # a panel below this is not a panel
    label_conf: float = Field(default=0.25, gt=0, lt=1)
    iou: float = Field(default=0.5, gt=0, lt=1)  # NMS overlap
    batch_size: int = Field(default=8, ge=1)
    min_side_px: int = Field(default=16, ge=1)
    min_area_fraction: float = Field(default=0.002, ge=0, lt=1)
    pad_px: int = Field(default=0, ge=0)  # added around each crop, clipped to the figure
    max_pixels: int = Field(default=80_000_000, ge=1)
    crop_format: Literal["jpeg", "png"] = "jpeg"


class ClassifierSettings(_Section):
    """The modality classifier and the keep decision. Weights from a path, never a hub."""

    weights: str = "models/modality-classifier/resnet18-modality.pt"
    backbone: str = "resnet101"  # for training; a checkpoint names its own
    pretrained: str | None = None  # local ImageNet weights to start training from
    imgsz: int = Field(default=224, ge=32)
    batch_size: int = Field(default=32, ge=1)
    min_confidence: float = Field(default=0.5, ge=0, le=1)
    rules_weight: float = Field(default=0.3, ge=0, le=1)  # share of the metadata prior
    min_side_px: int = Field(default=32, ge=1)


class CaptionSettings(_Section):
    """How a panel's training text is put together, and how tokens are counted."""

    join_preamble: bool = True  # the text before the first label goes with every panel
    join_trailer: bool = True  # so do the shared notes after the last one
    long_tokenizer: str | None = None  # a local tokenizer.json (e.g. BioClinical ModernBERT)
    token_windows: list[int] = Field(default_factory=lambda: [77, 154, 256, 512])


class IngestSettings(_Section):
    retry_failed: bool = False  # re-run articles whose last attempt failed permanently
    workers: int = Field(default=4, ge=1)  # threads fetching and parsing


class Settings(_Section):
    source: SourceSettings = Field(default_factory=SourceSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    archive: ArchiveLimits = Field(default_factory=ArchiveLimits)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    detector: DetectorSettings = Field(default_factory=DetectorSettings)
    captions: CaptionSettings = Field(default_factory=CaptionSettings)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    def fingerprint(self) -> str:
        """Stable hash of the effective config, recorded with every output."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _set_path(tree: dict[str, Any], path: list[str], value: Any) -> None:
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``PMCVL__OUTPUT__URI=s3://b/p`` becomes ``{"output": {"uri": "s3://b/p"}}``."""
    tree: dict[str, Any] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if path:
            _set_path(tree, path, yaml.safe_load(raw) if raw.strip() else None)
    return tree


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Read YAML (optional), apply env overrides, then keyword overrides, and validate.

    Relative local paths in the file are resolved against the file's folder, so a config works
    from any working directory.
    """
    data: dict[str, Any] = {}
    if path is not None:
        text = Path(path).read_text()
        loaded = yaml.safe_load(text) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: the top level must be a mapping")
        data = _resolve_paths(loaded, Path(path).resolve().parent)
    data = _merge(data, env_overrides(os.environ if environ is None else environ))
    data = _merge(data, overrides)
    return Settings.model_validate(data)


def _resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    def fix(value: Any) -> Any:
        if (
            isinstance(value, str)
            and value
            and "://" not in value
            and not Path(value).is_absolute()
        ):
            return str(base / value)
        return value

    data = json.loads(json.dumps(data))  # a deep copy of plain data
    source = data.get("source") or {}
    for key in ("path", "file_list"):
        if key in source:
            source[key] = fix(source[key])
    output = data.get("output") or {}
    if "uri" in output:
        output["uri"] = fix(output["uri"])
    return data
