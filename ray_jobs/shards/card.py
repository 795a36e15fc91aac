"""The dataset card (``README.md``): a Hugging Face card rendered from the manifest.

The YAML header is what the Hub and ``datasets`` read: license, task and size categories, and
two configs, ``default`` (the WebDataset tar shards) and ``index`` (the Parquet index), with
their features, so ``load_dataset`` on the output folder needs no type inference (a field that
is null in the first samples would otherwise be typed null and fail later). The body says what
a reader sees, how the data was made and what it cannot be trusted for.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import yaml

from ray_jobs.contract.records import INDEX_SCHEMA, RECORD_SCHEMA
from ray_jobs.shards.facts import DatasetFacts
from ray_jobs.shards.fields import FIELDS, type_name

CARD = "README.md"
IMAGE_EXTENSIONS = ("jpg", "png")  # a sample holds one of them (detector.crop_format)
# PMC license codes → Hub license ids. The codes carry no version: Creative Commons licenses
# map to 4.0, the version most PMC articles state; each record's license_url names the exact one.
HUB_LICENSES = {
    "CC0": "cc0-1.0",
    "CC BY": "cc-by-4.0",
    "CC BY-SA": "cc-by-sa-4.0",
    "CC BY-ND": "cc-by-nd-4.0",
    "CC BY-NC": "cc-by-nc-4.0",
    "CC BY-NC-SA": "cc-by-nc-sa-4.0",
    "CC BY-NC-ND": "cc-by-nc-nd-4.0",
    "unknown": "unknown",
}
MIXED_LICENSE_NAME = "pmc-open-access-mixed"
PMC_LICENSES_URL = "https://pmc.ncbi.nlm.nih.gov/tools/openftlist/"
_SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")]
_SIZES += [(10**6, "100K<n<1M"), (10**7, "1M<n<10M"), (10**8, "10M<n<100M")]
_SIZES += [(10**9, "100M<n<1B")]


def size_category(samples: int) -> str:
    """The Hub's size bucket for a sample count."""
    return next((name for bound, name in _SIZES if samples < bound), "n>1B")


def hub_license(code: str) -> str:
    """A license code's Hub id; codes outside the Creative Commons family are ``other``."""
    return HUB_LICENSES.get(code, "other")


def license_counts(licenses: dict[str, Any] | None) -> dict[str, int]:
    """Samples per license code from the manifest's ``licenses`` (a count, or a mapping that
    holds ``samples``), most samples first."""
    counts = {
        str(code): int(v["samples"] if isinstance(v, dict) else v)
        for code, v in (licenses or {}).items()
    }
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def license_header(counts: dict[str, int]) -> dict[str, str]:
    """One Hub id when every sample has it; ``other`` with a name and link when they mix (the
    Hub's convention for a license it does not list: the card body gives the breakdown)."""
    ids = {hub_license(code) for code, n in counts.items() if n > 0}
    if len(ids) == 1 and "other" not in ids:
        return {"license": ids.pop()}
    return {
        "license": "other",
        "license_name": MIXED_LICENSE_NAME,
        "license_link": PMC_LICENSES_URL,
    }


def hub_feature(kind: pa.DataType) -> Any:
    """An Arrow type in the YAML form ``datasets`` reads (``Features._from_yaml_list``)."""
    if pa.types.is_list(kind):
        return {"list": hub_feature(kind.value_type)}
    if pa.types.is_struct(kind):
        return {"struct": [{"name": f.name, **hub_feature(f.type)} for f in kind]}
    return {"dtype": "string" if pa.types.is_string(kind) else str(kind)}


def hub_features(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, **hub_feature(f.type)} for f in schema]


def shard_features() -> list[dict[str, Any]]:
    """What the ``webdataset`` builder yields for one sample: the image, the record as a
    struct, the training text, and the sample's key and shard."""
    return [
        *({"name": ext, "dtype": "image"} for ext in IMAGE_EXTENSIONS),
        {"name": "json", "struct": hub_features(RECORD_SCHEMA)},
        {"name": "txt", "dtype": "string"},
        {"name": "__key__", "dtype": "string"},
        {"name": "__url__", "dtype": "string"},
    ]


def _split_counts(manifest: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per split: shards, samples in the files, and samples readers see."""
    out: dict[str, dict[str, int]] = {}
    for shard in manifest["shards"]:
        entry = out.setdefault(shard["split"], {"shards": 0, "files": 0, "current": 0})
        entry["shards"] += 1
        entry["files"] += shard["samples"]
        entry["current"] += shard["current"]
    return dict(sorted(out.items()))


def header(manifest: dict[str, Any], licenses: dict[str, int]) -> dict[str, Any]:
    splits = _split_counts(manifest)

    return {
        "pretty_name": "pmcvl: PubMed Central figure panels with subcaptions",
        **license_header(licenses),
        "language": ["en"],
        "task_categories": ["image-to-text", "zero-shot-image-classification"],
        "size_categories": [size_category(manifest["samples"])],
        "tags": ["medical", "biology", "pubmed-central", "webdataset", "vision-language"],
        # one config: datasets picks one builder for a whole repository, from the first
        # config's files, so the Parquet index cannot be a config beside the tar shards
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": f"shards/{s}-*.tar"} for s in splits],
            }
        ],
        "dataset_info": {"config_name": "default", "features": shard_features()},
        # not Hub metadata: where the index parts are, for load_dataset("parquet", ...)
        "index_files": [{"split": s, "path": f"index/{s}-*.parquet"} for s in splits],
    }


def _table(head: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


_LOADING = """\
```python
from datasets import load_dataset

# the shards, through this card's config and features
shards = load_dataset("path/to/dataset", split="train")

# or the files directly, with the card's features (fields null in the first samples need them)
import yaml
from datasets import Features

card = yaml.safe_load(open("path/to/dataset/README.md").read().split("---")[1])
features = Features._from_yaml_list(card["dataset_info"]["features"])
shards = load_dataset("webdataset", data_files={"train": "path/to/dataset/shards/train-*.tar"},
                      features=features, split="train")

# the index: the records without images, one Parquet file per shard (one Arrow schema)
index = load_dataset("parquet", data_files={"train": "path/to/dataset/index/train-*.parquet"},
                     split="train")
```

The index is not a second config: `datasets` reads a whole repository with one builder, so it
is loaded as Parquet files. `croissant.json` loads it too (`mlcroissant`, record set `samples`).
"""

_SUPERSEDED = """\
Shards are immutable: when a newer version of an article replaces samples already published,
the old samples stay in their tar and are named in tombstone files (`superseded/*.parquet`:
`shard`, `key`), which every pmcvl reader applies. The index and the shards above hold them
too; drop them as pmcvl does:

```python
import pyarrow.parquet as pq

gone = set()
for path in manifest["superseded"]["files"]:  # manifest.json
    t = pq.read_table(f"path/to/dataset/{path}", columns=["shard", "key"])
    gone |= {(s, k) for s, k in zip(t["shard"].to_pylist(), t["key"].to_pylist())}
shard_of = lambda r: "shards/" + r["__url__"].rsplit("/", 1)[-1]  # the file, as tombstones name it
shards = shards.filter(lambda r: (shard_of(r), r["__key__"]) not in gone)
index = index.filter(lambda r: (r["shard"], r["key"]) not in gone)
```
"""

_LIMITATIONS = [
    "Panels, labels and pairings are machine-made: the panel detector, the label reader and "
    "the caption splitter are trained or tuned on synthetic figures; `alignment`, "
    "`alignment_confidence` and `split_confidence` say how each pairing was made, and "
    "`full_caption` pairs carry the whole caption rather than a subcaption.",
    "The modality classifier shipped with pmcvl is a demonstration model trained on synthetic "
    "panels; `modality` is only as good as the weights named above, and `unknown` means it "
    "abstained.",
    "Near-duplicates are judged on a 64-bit perceptual hash: copies that differ more (crops, "
    "re-renders) stay in.",
    "License codes carry no version: see Licenses. The license is the article's as PMC states "
    "it; figures reproduced from other works may carry their own terms.",
    "Captions are the authors' text; they may contain errors, and enriched captions (when "
    "present) are LLM output, with the feasibility verdicts as the only check.",
]


def render(manifest: dict[str, Any], facts: DatasetFacts, licenses: dict[str, int]) -> str:
    """The card's text: the YAML header, then the body."""
    splits = _split_counts(manifest)
    gone = manifest.get("superseded") or {}
    counts = manifest.get("counts", {})
    out = ["---", yaml.safe_dump(header(manifest, licenses), sort_keys=False).rstrip(), "---"]
    out += [
        "",
        "# pmcvl: PubMed Central figure panels with subcaptions",
        "",
        "Compound figures of PubMed Central Open Access articles cut into panels, each panel "
        "paired with the part of its caption that describes it, for vision-language (CLIP) "
        f"training. Built by pmcvl {facts.code_version}; this card and `croissant.json` are "
        f"rewritten with `manifest.json` at every build (last: {manifest.get('created')}).",
        "",
        "## Contents",
        "",
        f"{manifest['samples']} samples readers see, from {counts.get('articles', 0)} articles "
        f"and {counts.get('figures', 0)} figures, in {len(manifest['shards'])} shards.",
        "",
        _table(
            ["split", "shards", "samples (readers see)", "samples in the files", "superseded"],
            [
                [s, c["shards"], c["current"], c["files"], c["files"] - c["current"]]
                for s, c in splits.items()
            ],
        ),
        "",
        "Each sample is a WebDataset group in `shards/{split}-{part}-{NNNN}.tar`: `{key}.jpg` "
        "(or `.png`) the panel, `{key}.json` its record, `{key}.txt` the training caption; "
        "`index/` holds the same records (no image) as Parquet with `shard` and `member`. "
        "`manifest.json` lists every shard with its sha256; `croissant.json` describes the "
        "files and fields in Croissant.",
        "",
        "## Loading",
        "",
        _LOADING,
        "## Superseded samples",
        "",
        f"{gone.get('samples', 0)} samples in the files are superseded "
        f"({len(gone.get('files', []))} tombstone file(s)).",
        "",
        _SUPERSEDED,
        "## Fields",
        "",
        _table(
            ["field", "type", "meaning"],
            [[f"`{f.name}`", type_name(f.type), FIELDS[f.name]] for f in INDEX_SCHEMA],
        ),
        "",
        "## How it was made",
        "",
        f"- code: pmcvl {facts.code_version}; config hash `{facts.config_hash}` (last run "
        f"`{facts.run_id}`; runs in the dataset: {', '.join(manifest.get('runs', []))})",
        f"- caption enrichment: {_enrichment(facts.enrichment)}",
        "",
        _table(
            ["model", "weights / id", "version"],
            [
                [m.role, f"`{m.name}`", f"`{m.version}`" if m.version else "n/a"]
                for m in facts.models
            ],
        ),
        "",
        "Settings that shape the samples (the last run's; `config_hash` is of the whole config):",
        "",
        "```yaml",
        yaml.safe_dump(facts.settings, sort_keys=False).rstrip(),
        "```",
        "",
        f"Funnel: {counts.get('panels', 0)} panels detected, {counts.get('kept', 0)} kept, "
        f"dropped: {_inline(counts.get('dropped', {}))}.",
        "",
        "## Licenses",
        "",
        *_licenses(manifest, licenses),
        "",
        "## Known limitations",
        "",
        *(f"- {line}" for line in _LIMITATIONS),
        "",
    ]
    return "\n".join(out)


def _inline(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _enrichment(plan: dict[str, Any]) -> str:
    if not plan.get("enabled"):
        return f"off ({plan.get('reason') or 'not recorded'}); `text` is the subcaption"
    return (
        f"on: `{plan.get('model')}` writes, `{plan.get('vision_model')}` judges, "
        f"prompt version `{plan.get('prompt_version')}`"
    )


def _licenses(manifest: dict[str, Any], licenses: dict[str, int]) -> list[str]:
    policy = manifest.get("license_policy")
    if isinstance(policy, dict):  # {"allow": [...]} as well as the bare list
        policy = policy.get("allow")
    lines = [
        "Each sample keeps its article's license (`license`, `license_url`). Samples per "
        "license code and the Hub id it maps to:",
        "",
        _table(
            ["license", "samples", "Hub id"],
            [[code, n, hub_license(code)] for code, n in licenses.items()],
        ),
        "",
        "Creative Commons codes map to the 4.0 id: the code does not record the version, the "
        "record's `license_url` does. `PD` (public domain) and codes outside Creative Commons "
        "have no Hub id (`other`). With more than one license the header says `other` "
        f"(`{MIXED_LICENSE_NAME}`): use only the samples whose license allows your use.",
    ]
    if policy:
        lines += ["", f"Build license policy: only {', '.join(map(str, policy))} admitted."]
    else:
        lines += ["", "Build license policy: none (every license admitted)."]
    return lines
