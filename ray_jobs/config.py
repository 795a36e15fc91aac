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
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from ray_jobs.pmc.licenses import parse_allow_list

ENV_PREFIX = "PMCVL__"
LLM_BASE_URL_ENV = "PMCVL_LLM_BASE_URL"  # the LLM server when longcap.base_url is unset
PROJECT_MODELS = Path(__file__).resolve().parents[1] / "models"  # the shipped checkpoints
LLM_API_KEY_ENV = "PMCVL_LLM_API_KEY"  # its key when longcap.api_key is unset


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
    # max_members and max_total_bytes bound every package, not only a .tar.gz: the files of a
    # folder package (and the siblings an .xml path reads) and the media_urls of an S3 article


class OutputS3Settings(S3Settings):
    """Writes are always signed: anonymous is off unless a file says otherwise explicitly.

    Files from ``multipart_threshold_bytes`` up (shards) go as multipart uploads, streamed
    from disk in parts of ``multipart_part_bytes`` with ``multipart_concurrency`` in flight (the
    memory a writer needs: part size × concurrency); S3 refuses single PUTs over 5 GB."""

    anonymous: bool = False
    multipart_threshold_bytes: int = Field(default=64 * 2**20, ge=5 * 2**20)
    multipart_part_bytes: int = Field(default=16 * 2**20, ge=5 * 2**20)  # S3's least part size
    multipart_concurrency: int = Field(default=4, ge=1)


class LicenseSettings(_Section):
    """Which article licenses a build admits, e.g. ``allow: [cc0, cc-by]`` for a commercial-use
    subset. Codes in any spelling ``normalise_code`` reads, checked against the vocabulary at
    load (a typo must not build an empty subset); ``unknown`` admits articles whose license
    could not be read. None: every article, whatever its license. An article outside the list
    is recorded as skipped with its reason (``ray_jobs.pmc.license_policy``)."""

    allow: list[str] | None = None

    @field_validator("allow")
    @classmethod
    def _known_codes(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else parse_allow_list(value)


class OutputSettings(_Section):
    """Where a run writes: a local folder or ``s3://bucket/prefix``."""

    uri: str = "output"
    s3: OutputS3Settings = Field(default_factory=OutputS3Settings)
    licenses: LicenseSettings = Field(default_factory=LicenseSettings)
    articles_per_part: int = Field(default=500, ge=1)
    # at most this many new parts per run (the rest waits for the next run): bounds a run's
    # staging space and time, e.g. for the first run over the whole corpus; None: no bound
    max_parts_per_run: int | None = Field(default=None, ge=1)
    # one run at a time per output: a run's lease outlives its last heartbeat by this long
    lease_ttl_s: float = Field(default=300.0, ge=5)


class DetectorSettings(_Section):
    """The panel detector and what counts as a panel. Weights come from a path, never a hub."""

    weights: str = "models/panel-detector/yolo11n-panels.pt"
    # reads the letter on each label box the detector finds; None: letters stay unread
    label_reader_weights: str | None = "models/label-reader/label-reader.pt"
    # the size the shipped checkpoint (version 7, as versions 4 to 6) was chosen at
    imgsz: int = Field(default=320, ge=32)
    # a figure whose smallest panel comes out under this many pixels at ``imgsz`` is read again
    # at ``zoom_imgsz``: the small panels of a dense figure are near the detector's limit once
    # letterboxed, and only such figures pay for the larger size; 0: never (model card)
    zoom_below_px: float = Field(default=35.0, ge=0)
    zoom_imgsz: int = Field(default=416, ge=32)
    # a panel below this is not a panel (chosen with version 7 on the dev seeds: model card)
    conf: float = Field(default=0.5, gt=0, lt=1)
    label_conf: float = Field(default=0.25, gt=0, lt=1)
    iou: float = Field(default=0.5, gt=0, lt=1)  # NMS overlap
    batch_size: int = Field(default=8, ge=1)
    min_side_px: int = Field(default=16, ge=1)
    min_area_fraction: float = Field(default=0.002, ge=0, lt=1)
    pad_px: int = Field(default=0, ge=0)  # added around each crop, clipped to the figure
    # a kept box whose grey levels vary less than this (std, 0-255) is an empty grid cell; 0: off
    blank_std: float = Field(default=4.0, ge=0)
    # ... or whose pixels are this share or less off the page's colour: bare page with a speck
    blank_ink_share: float = Field(default=0.001, ge=0, lt=1)
    # a kept box that is a colour-bar legend beside the panels is dropped (model card)
    drop_colour_bars: bool = True
    # cut a box that holds a second panel's label, where the image shows an edge at the cut
    # (``label_splits``): the detector's merges of touching white panels
    split_at_labels: bool = True
    max_pixels: int = Field(default=80_000_000, ge=1)
    # bytes one figure takes on its way to RGB (4 a pixel, 8 for 16-bit and float images),
    # judged from the header before decoding: max_pixels alone lets a 16-bit figure take twice
    # the memory of an RGB one (image_too_large)
    max_decoded_bytes: int = Field(default=512 * 2**20, ge=1)
    # a figure with more panels than this fails whole (too_many_panels): keeping some would
    # pair the rest of its subcaptions with the wrong panels
    max_panels: int = Field(default=100, ge=1)
    crop_format: Literal["jpeg", "png"] = "jpeg"


class ClassifierSettings(_Section):
    """The modality classifier and the keep decision. Weights from a path, never a hub.

    The image model abstains (``unknown``) when its calibrated top probability is below
    ``min_confidence`` or its out-of-distribution score (``ood_score``, thresholded by the
    checkpoint's calibration) says the image is unlike its training data. A clinical modality
    named in the subcaption or caption keeps the panel whatever the image model says; a panel
    is dropped as non-clinical on the image alone only when its calibrated non-clinical
    probability reaches ``drop_confidence`` (unset: the checkpoint's, chosen so that at most 1%
    of the clinical panels of a family the model never trained on are dropped; 0.9 without).
    Words count by scope: the panel's own subcaption and the caption's shared parts decide; a
    caption nobody split only suggests, and loses to a confident non-clinical image. A panel
    with no clinical evidence is not published (``no_clinical_evidence``) unless
    ``keep_without_evidence``: most PMC panels are charts the image model cannot name.
    """

    weights: str = "models/modality-classifier/shufflenet-modality.pt"
    backbone: str = "resnet101"  # for training; a checkpoint names its own
    pretrained: str | None = None  # local ImageNet weights to start training from
    imgsz: int = Field(default=224, ge=32)
    batch_size: int = Field(default=32, ge=1)
    min_confidence: float = Field(default=0.5, ge=0, le=1)  # calibrated top probability
    rules_weight: float = Field(default=0.3, ge=0, le=1)  # the prior's share in modality_probs
    min_side_px: int = Field(default=32, ge=1)
    ood_score: Literal["energy", "msp", "none"] = "energy"
    drop_confidence: float | None = Field(default=None, ge=0, le=1.01)  # > 1: never on the image
    # no clinical evidence (no clinical word about the panel or its figure, no confident
    # clinical image): drop as no_clinical_evidence, or keep it as unknown
    keep_without_evidence: bool = False


class CaptionSettings(_Section):
    """How a panel's training text is put together, and how tokens are counted."""

    join_preamble: bool = True  # the text before the first label goes with every panel
    join_trailer: bool = True  # so do the shared notes after the last one
    # a figure whose boxes and caption labels disagree (``captions.layout``): published whole
    # with its whole caption, or rejected; its boxes are never paired by reading order
    on_disagreement: Literal["whole", "reject"] = "whole"
    # a figure of several boxes whose caption names no panels: published whole (its caption
    # describes the whole; on real figures such boxes are mostly pieces of one chart or
    # table), or each box with the whole caption (``alignment: full_caption``)
    unlabelled_figures: Literal["whole", "panels"] = "whole"
    long_tokenizer: str | None = None  # a local tokenizer.json (e.g. BioClinical ModernBERT)
    token_windows: list[int] = Field(default_factory=lambda: [77, 154, 256, 512])


class StageResources(_Section):
    """What one pipeline stage asks Ray for; the adapter turns it into ``map_batches`` args."""

    num_cpus: float = Field(default=1.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    batch_size: int = Field(default=16, ge=1)
    # actors in the stage's pool: a fixed size, or (min, max) for Ray Data to autoscale
    concurrency: int | tuple[int, int] = 1

    @field_validator("concurrency")
    @classmethod
    def _pool(cls, value: int | tuple[int, int]) -> int | tuple[int, int]:
        low, high = (value, value) if isinstance(value, int) else value
        if low < 1 or high < low:
            raise ValueError(f"a pool needs 1 <= min <= max actors, got {value}")
        return value


class PipelineSettings(_Section):
    """The dataset-building job: Ray resources per stage, shards, splits and dedup.

    The defaults fit one small machine: Ray Data holds back about half of the cluster's CPUs
    from actor pools, so the stages' minimum pools together must fit in the other half (on two
    cores, at most one CPU in all, else the pipeline waits forever for actors). Fractional
    CPUs are logical shares: torch still runs one thread per actor. The Helm chart's
    ``values-gpu-cluster.yaml`` shows GPU stages and wide pools for a cluster.
    """

    # None: RAY_ADDRESS when set, else a local Ray instance of the run's own (never the cluster
    # a stale /tmp/ray/ray_current_cluster names)
    ray_address: str | None = None
    # a configured cluster that does not answer within this long fails the run, naming it
    ray_connect_timeout_s: float = Field(default=30.0, gt=0)
    # an autoscaler adds nodes on demand: a cluster too small now only warns before the run
    autoscaling: bool = False
    # fail, saying what was waited for, when the stages' minimum actors have not all started
    # in this long, or when no stage has moved a block in this long; -1: wait for ever
    actor_start_timeout_s: int = Field(default=600, ge=-1)
    no_progress_timeout_s: int = Field(default=1800, ge=-1)
    fetch: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.25, batch_size=4)
    )
    fetch_threads: int = Field(default=8, ge=1)  # concurrent downloads inside one fetch actor
    panels: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.25, batch_size=8)
    )
    relevance: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.25, batch_size=32)
    )
    # dedup runs as Ray tasks (route, judge, resolve), each given num_cpus; a bucket holds
    # about dedup_rows_per_bucket panels, and the number of buckets grows with the data
    dedup: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.1, batch_size=64)
    )
    dedup_rows_per_bucket: int = Field(default=500_000, ge=1)
    # the tasks that write staged fragments and assemble each part's shards
    write: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.25, batch_size=256)
    )
    # a batch several times longcap.max_concurrency keeps the actor's requests in flight
    enrich: StageResources = Field(
        default_factory=lambda: StageResources(num_cpus=0.1, batch_size=64)
    )
    samples_per_shard: int = Field(default=1000, ge=1)
    # a shard also closes before the sample that would take it past this many bytes (a sample
    # larger than that alone is a shard of its own); shards stream through a temp file
    max_shard_bytes: int = Field(default=2**30, ge=2**16)
    # what one article may put into the pipeline: many <fig> elements naming one huge image
    # would otherwise be copied once per figure through every stage. The first figures within
    # both bounds go on; the rest become one figure failure row (too_many_figures or
    # too_many_decoded_bytes), the decoded size read from each image's header
    max_figures_per_article: int = Field(default=300, ge=1)
    max_decoded_bytes_per_article: int = Field(default=4 * 2**30, ge=1)
    # work seconds one article may take where its content decides the cost: fetch, parse and
    # explode, then each of its figures' decode, detection and pairing (the time left rides on
    # the figure rows). Checked between steps (stages run in thread pools, which Python cannot
    # preempt; each step is bounded by the size caps); the excess is a time_budget failure row
    max_seconds_per_article: float = Field(default=600.0, gt=0)
    # share of articles (by a hash of the PMCID, so an article never straddles splits) in "val"
    val_fraction: float = Field(default=0.0, ge=0, lt=1)
    # perceptual-hash Hamming distance (of 64 bits) at or under which two panels are one image;
    # -1 turns near-duplicate search off (exact duplicates are always dropped)
    near_duplicate_bits: int = Field(default=3, ge=-1, le=3)


class LongCapSettings(_Section):
    """LongCAP caption enrichment through an OpenAI-compatible (vLLM) server.

    ``base_url`` unset falls back to the ``PMCVL_LLM_BASE_URL`` environment variable and
    ``api_key`` to ``PMCVL_LLM_API_KEY`` (then ``"EMPTY"``, what vLLM accepts without
    ``--api-key``), read when the client starts, so a key never lands in a config dump.
    """

    enabled: bool = False
    base_url: str | None = None  # e.g. http://vllm:8000 (a trailing /v1 is accepted)
    model: str = "Qwen/Qwen2.5-VL-7B-Instruct"  # writes the description
    vision_model: str | None = None  # judges feasibility from the image; None: ``model``
    api_key: SecretStr | None = None
    max_concurrency: int = Field(default=32, ge=1)  # requests in flight per Enricher
    timeout_s: float = Field(default=120.0, gt=0)  # one request, connect to last byte
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=4, ge=0)  # on 429, 5xx, timeouts and connection errors
    backoff_base_s: float = Field(default=1.0, ge=0)  # exponential backoff with jitter
    backoff_max_s: float = Field(default=30.0, ge=0)  # also caps a server's Retry-After
    breaker_threshold: int = Field(default=5, ge=1)  # consecutive server faults to open
    breaker_reset_s: float = Field(default=30.0, gt=0)  # open this long, then one probe
    max_tokens: int = Field(default=1024, ge=16)
    temperature: float = Field(default=0.0, ge=0, le=2)
    image_max_side: int = Field(default=1024, ge=32)  # larger panels are resized first
    max_features: int = Field(default=12, ge=1)
    max_mentions: int = Field(default=6, ge=0)  # article sentences citing the figure
    max_abstract_chars: int = Field(default=2000, ge=0)
    cache: bool = True  # llm_cache/ in the run's output: a rerun pays for nothing twice


class IngestSettings(_Section):
    retry_failed: bool = False  # re-run articles whose last attempt failed permanently
    workers: int = Field(default=4, ge=1)  # threads fetching and parsing


_QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$"  # a Kubernetes quantity


class JobResources(_Section):
    """What one Kubernetes Job's pod asks for, and how long it may run."""

    gpus: int = Field(default=1, ge=0)  # per pod; > 1 runs torchrun --nproc_per_node=gpus
    cpu: str = Field(default="8", pattern=_QUANTITY)  # requested
    memory: str = Field(default="64Gi", pattern=_QUANTITY)  # requested and the limit
    active_deadline_seconds: int = Field(default=3 * 86400, ge=60)


class TrainingSettings(_Section):
    """The CLIP training and evaluation Jobs (``pmcvl render-training-job``, ``clip_training``).

    Paths here are inside the pod. The image must be pinned (a tag other than ``latest``, or a
    digest) so a retried or re-run Job trains with the same code. Outputs of a run live under
    ``{work_dir}/runs/{run}`` on the work volume (a claim, else an emptyDir) and, when
    ``output_uri`` is set, are pushed to ``{output_uri}/{run}`` for the evaluation Job to pull.
    """

    image: str = "pmcvl/trainer:0.1.0"  # docker/trainer.Dockerfile (make docker-build-trainer)
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(default_factory=list)
    namespace: str = "pmcvl"
    job_name: str = Field(default="pmcvl-clip", pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    service_account: str | None = None
    train: JobResources = Field(default_factory=JobResources)
    evaluation: JobResources = Field(
        default_factory=lambda: JobResources(
            gpus=1, cpu="4", memory="16Gi", active_deadline_seconds=4 * 3600
        )
    )
    gpu_resource: str = "nvidia.com/gpu"
    node_selector: dict[str, str] = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"}
    )  # GPU pods only
    tolerations: list[dict[str, Any]] = Field(
        default_factory=lambda: [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    )  # GPU pods only
    shm_size: str = Field(default="16Gi", pattern=_QUANTITY)  # /dev/shm for dataloader workers
    ttl_seconds_after_finished: int = Field(default=86400, ge=0)
    backoff_limit: int = Field(default=0, ge=0)  # a failed run is looked at, not retried blind
    volume_claim: str | None = None  # a PersistentVolumeClaim at work_dir; None: an emptyDir
    scratch_size: str = Field(default="500Gi", pattern=_QUANTITY)  # the emptyDir's size limit
    work_dir: str = "/mnt/pmcvl"
    output_uri: str | None = "s3://pmcvl/training"  # None: runs stay on the claim
    s3_secret: str | None = "pmcvl-s3"  # holds the two keys below
    s3_access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    s3_secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"
    s3: OutputS3Settings = Field(default_factory=OutputS3Settings)
    model: str = "pmcvl-ViT-B-16-longtext"  # a template in ray_jobs/training/model_configs
    context_length: int = Field(default=256, ge=2)
    hf_text_path: str | None = None  # an HF text tower's folder, in the pod
    caption_key: str = "long_caption;subcaption"
    split: str = "train"
    batch_size: int = Field(default=256, ge=1)  # per GPU
    epochs: int = Field(default=10, ge=1)
    lr: float = Field(default=5e-4, gt=0)
    wd: float = Field(default=0.2, ge=0)
    warmup: int = Field(default=2000, ge=0)
    workers: int = Field(default=8, ge=0)  # per GPU; shards must number >= workers x GPUs
    precision: str = "amp"
    seed: int = 0
    extra_args: list[str] = Field(default_factory=list)  # to open_clip_train, verbatim
    benchmark_size: int = Field(default=1000, ge=1)
    # a benchmark to reuse (pulled into each run), so scores compare across runs; None: built
    # per run from the newest articles of the run's dataset
    benchmark_uri: str | None = None

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str) -> str:
        name, _, tag = image.rpartition(":") if "@" not in image else (image, "", "digest")
        if not name or "/" in tag or tag in ("", "latest"):
            raise ValueError(f"training.image {image!r} must be pinned: a tag (not latest)")
        return image

    @model_validator(mode="after")
    def _paths(self) -> TrainingSettings:
        if not self.work_dir.startswith("/"):
            raise ValueError("training.work_dir must be an absolute path in the pod")
        if self.output_uri is None and self.volume_claim is None:
            raise ValueError(
                "training: set output_uri or volume_claim; on an emptyDir alone the checkpoint "
                "would vanish with the training pod"
            )
        return self


class ReportSettings(_Section):
    """The report's gallery: which figures the build keeps thumbnails of, and how many the page
    shows. The panel stage's workers decide alone, from a hash of the figure key (no process
    needs a global view): a figure is sampled when its hash falls below ``gallery_rate``."""

    gallery_rate: float = Field(default=0.002, ge=0, le=1)  # 0: no gallery files
    gallery_figure_px: int = Field(default=360, ge=32, le=2048)  # a figure thumbnail's long side
    gallery_panel_px: int = Field(default=160, ge=16, le=1024)  # a panel crop's long side
    gallery_jpeg_quality: int = Field(default=75, ge=10, le=95)
    gallery_figures_per_group: int = Field(default=2, ge=0)  # per modality L1, per alignment
    gallery_rejects_per_reason: int = Field(default=3, ge=0)
    gallery_scan_limit: int = Field(default=200, ge=0)  # sampled figures read for detector drops


class Settings(_Section):
    source: SourceSettings = Field(default_factory=SourceSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    archive: ArchiveLimits = Field(default_factory=ArchiveLimits)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    detector: DetectorSettings = Field(default_factory=DetectorSettings)
    captions: CaptionSettings = Field(default_factory=CaptionSettings)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    longcap: LongCapSettings = Field(default_factory=LongCapSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # where weights a DAG run's params name may come from: local folders or URI prefixes (by
    # default the project's models/). Set here or in the environment, never by params
    model_roots: list[str] = Field(default_factory=lambda: [str(PROJECT_MODELS)])

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


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
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
    data = deep_merge(data, env_overrides(os.environ if environ is None else environ))
    data = deep_merge(data, overrides)
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
