"""``croissant.json``: the dataset in Croissant 1.0 (JSON-LD), rendered from the manifest.

Every published file (tar shard, index part, tombstone file) is a ``cr:FileObject`` with its
sha256, so a reader can check what it pulled. The records come from two ``cr:FileSet``\\ s over
the folder the file sits in (``index/*.parquet`` and ``superseded/*.parquet``): Croissant has
no way to join one record set over many file objects, and a file set is how it reads a
folder of parts. The ``samples`` record set has one field per index column; ``split`` refers
to a ``cr:Split`` record set. The JSON-LD context is written inline, so no reader fetches
anything to expand it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ray_jobs.contract.records import INDEX_SCHEMA
from ray_jobs.shards.card import HUB_LICENSES, PMC_LICENSES_URL
from ray_jobs.shards.facts import DatasetFacts
from ray_jobs.shards.fields import FIELDS
from ray_jobs.shards.superseded import SCHEMA as TOMBSTONE_SCHEMA

CROISSANT = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
INDEX_FILES, TOMBSTONE_FILES = "index-files", "superseded-files"
SAMPLES, SUPERSEDED, SPLITS = "samples", "superseded", "splits"
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
_SPLIT_URLS = {"train": "cr:TrainingSplit", "val": "cr:ValidationSplit"}
_SPLIT_URLS |= {"validation": "cr:ValidationSplit", "test": "cr:TestSplit"}
_CC_URL = "https://creativecommons.org/licenses/{}/4.0/"


def data_type(kind: pa.DataType) -> str:
    """A (list element's) Arrow type as a schema.org data type."""
    if pa.types.is_integer(kind):
        return "sc:Integer"
    if pa.types.is_floating(kind):
        return "sc:Float"
    if pa.types.is_boolean(kind):
        return "sc:Boolean"
    return "sc:Text"


def file_object(name: str, size: int | None, sha256: str, encoding: str) -> dict[str, Any]:
    node: dict[str, Any] = {
        "@type": "cr:FileObject",
        "@id": name,
        "name": name,
        "contentUrl": name,
        "encodingFormat": encoding,
        "sha256": sha256,
    }
    if size is not None:
        node["contentSize"] = f"{size} B"
    return node


def _field(record_set: str, file_set: str, column: pa.Field, text: str | None) -> dict[str, Any]:
    """One column as a field; a list column is ``repeated``, a list of structs (feasibility)
    has one subfield per struct member, read from the column with a JSON path."""
    kind = column.type
    item = kind.value_type if pa.types.is_list(kind) else kind
    source = {"fileSet": {"@id": file_set}, "extract": {"column": column.name}}
    node: dict[str, Any] = {
        "@type": "cr:Field",
        "@id": f"{record_set}/{column.name}",
        "name": column.name,
        "source": source,
    }
    if text:
        node["description"] = text
    if pa.types.is_struct(item):
        node["subField"] = [
            {
                "@type": "cr:Field",
                "@id": f"{record_set}/{column.name}/{member.name}",
                "name": member.name,
                "dataType": data_type(member.type),
                "source": {**source, "transform": {"jsonPath": member.name}},
            }
            for member in item
        ]
    else:
        node["dataType"] = data_type(item)
    if pa.types.is_list(kind):
        node["repeated"] = True
    if column.name == "split":
        node["references"] = {"field": {"@id": f"{SPLITS}/name"}}
    return node


def _splits(names: list[str]) -> dict[str, Any]:
    return {
        "@type": "cr:RecordSet",
        "@id": SPLITS,
        "name": SPLITS,
        "dataType": "cr:Split",
        "key": {"@id": f"{SPLITS}/name"},
        "field": [
            {"@type": "cr:Field", "@id": f"{SPLITS}/name", "name": "name", "dataType": "sc:Text"},
            {"@type": "cr:Field", "@id": f"{SPLITS}/url", "name": "url", "dataType": "sc:URL"},
        ],
        "data": [
            {f"{SPLITS}/name": n, f"{SPLITS}/url": _SPLIT_URLS.get(n, "cr:TrainingSplit")}
            for n in names
        ],
    }


def licenses(codes: list[str]) -> list[str]:
    """License URLs for the codes present (a code without one points at PMC's license page)."""
    urls = []
    for code in codes:
        hub = HUB_LICENSES.get(code)
        if hub == "cc0-1.0":
            url = "https://creativecommons.org/publicdomain/zero/1.0/"
        elif hub and hub.startswith("cc-by"):
            url = _CC_URL.format(hub.removeprefix("cc-").removesuffix("-4.0"))
        else:
            url = PMC_LICENSES_URL
        if url not in urls:
            urls.append(url)
    return urls or [PMC_LICENSES_URL]


def render(
    manifest: dict[str, Any],
    facts: DatasetFacts,
    license_codes: list[str],
    digests: dict[str, tuple[int, str]],
) -> dict[str, Any]:
    """The Croissant document. ``digests``: file name → (bytes, sha256) for every index and
    tombstone file (shards carry theirs in the manifest)."""
    shards = manifest["shards"]
    tombstones = (manifest.get("superseded") or {}).get("files", [])
    distribution: list[dict[str, Any]] = [
        file_object(s["name"], s["bytes"], s["sha256"], "application/x-tar") for s in shards
    ]
    for name in [s["index"] for s in shards] + list(tombstones):
        size, sha = digests[name]
        distribution.append(file_object(name, size, sha, "application/x-parquet"))
    distribution.append(
        {
            "@type": "cr:FileSet",
            "@id": INDEX_FILES,
            "name": INDEX_FILES,
            "description": "the index parts: one row per sample, the record without its image",
            "encodingFormat": "application/x-parquet",
            "includes": "index/*.parquet",
        }
    )
    record_sets = [
        _splits(sorted({s["split"] for s in shards}) or ["train"]),
        {
            "@type": "cr:RecordSet",
            "@id": SAMPLES,
            "name": SAMPLES,
            "description": (
                "every sample in the shards, superseded ones included: drop those the "
                f"'{SUPERSEDED}' record set names (matched on shard and key)"
            ),
            "key": [{"@id": f"{SAMPLES}/shard"}, {"@id": f"{SAMPLES}/key"}],
            "field": [_field(SAMPLES, INDEX_FILES, c, FIELDS.get(c.name)) for c in INDEX_SCHEMA],
        },
    ]
    if tombstones:
        distribution.append(
            {
                "@type": "cr:FileSet",
                "@id": TOMBSTONE_FILES,
                "name": TOMBSTONE_FILES,
                "description": "tombstones: samples a newer version of their article replaced",
                "encodingFormat": "application/x-parquet",
                "includes": "superseded/*.parquet",
            }
        )
        record_sets.append(
            {
                "@type": "cr:RecordSet",
                "@id": SUPERSEDED,
                "name": SUPERSEDED,
                "description": "samples readers leave out (shard, key)",
                "field": [_field(SUPERSEDED, TOMBSTONE_FILES, c, None) for c in TOMBSTONE_SCHEMA],
            }
        )
    created = str(manifest.get("created") or "")
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": "pmcvl",
        "description": (
            "PubMed Central Open Access figure panels paired with their subcaptions, for "
            f"vision-language training: {manifest['samples']} samples readers see "
            f"({(manifest.get('superseded') or {}).get('samples', 0)} superseded samples stay "
            "in the files). See README.md."
        ),
        "url": "https://pmc.ncbi.nlm.nih.gov/tools/openftlist/",
        "license": licenses(license_codes),
        "version": facts.code_version,
        "datePublished": created[:10],
        "citeAs": "pmcvl dataset built from the PubMed Central Open Access Subset",
        "isAccessibleForFree": True,
        "distribution": distribution,
        "recordSet": record_sets,
    }
