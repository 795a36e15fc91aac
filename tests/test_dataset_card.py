"""The dataset card and the Croissant file a build writes beside its manifest: the card's YAML
header is a valid Hugging Face header whose configs name the real files, the Croissant file
validates in ``mlcroissant`` and its records are the index's, its checksums are the files',
and HF ``datasets`` loads the shards (``webdataset``) and the index (``parquet``) with the
card's features. The dataset is built by the real job, twice, so that it holds superseded
samples (an article republished with new captions)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from ray_jobs.config import load_settings
from ray_jobs.contract.records import INDEX_SCHEMA
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.shards import card, croissant, publish, superseded
from ray_jobs.shards.facts import DatasetFacts
from ray_jobs.shards.fields import FIELDS
from ray_jobs.storage.store import open_storage


def _revise(folder: Path) -> None:
    for xml in [*folder.glob("*.xml"), *folder.glob("*.nxml")]:
        xml.write_text(xml.read_text().replace("<caption><title>", "<caption><title>Revised: "))


@pytest.fixture(scope="module")
def built(ray_address, tmp_path_factory) -> Path:
    """A local output built twice: the second run republishes one article, whose old samples
    stay in their shards behind a tombstone."""
    root = tmp_path_factory.mktemp("card")
    corpus = root / "corpus"
    write_corpus(corpus, 3, "folders", seed=21)
    out = root / "dataset"
    settings = load_settings(
        environ={},
        source={"kind": "local", "path": str(corpus)},
        output={"uri": str(out), "articles_per_part": 2},
        pipeline={"samples_per_shard": 4},
    )
    run_build(settings)
    _revise(corpus / "PMC9000001.1")
    second = run_build(settings)
    assert second.replaced == 1
    return out


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def card_header(out: Path) -> dict:
    text = (out / card.CARD).read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("\n---\n", 1)[0].removeprefix("---\n"))


def index_rows(out: Path, manifest: dict) -> list[dict]:
    rows = []
    for shard in manifest["shards"]:
        rows += pq.read_table(out / shard["index"]).to_pylist()
    return rows


def tombstones(out: Path, manifest: dict) -> set[tuple[str, str]]:
    table = superseded.from_manifest(open_storage(str(out)), manifest)
    return set(zip(table["shard"].to_pylist(), table["key"].to_pylist(), strict=True))


def test_the_build_writes_a_card_whose_header_names_the_files(built: Path) -> None:
    manifest = manifest_of(built)
    assert manifest["superseded"]["samples"] > 0  # the case readers must be told about
    head = card_header(built)
    assert head["license"] in set(card.HUB_LICENSES.values()) | {"other"}
    if head["license"] == "other":
        assert head["license_name"] and head["license_link"]
    assert head["task_categories"] and head["size_categories"] == ["n<1K"]
    assert [c["config_name"] for c in head["configs"]] == ["default"]
    assert head["dataset_info"]["config_name"] == "default"
    for specs, listed in (
        (head["configs"][0]["data_files"], "name"),
        (head["index_files"], "index"),
    ):
        matched = {
            p.relative_to(built).as_posix() for spec in specs for p in built.glob(spec["path"])
        }
        assert matched == {s[listed] for s in manifest["shards"]}

    body = (built / card.CARD).read_text()
    runs = json.loads((built / "runs" / f"{manifest['runs'][-1]}.json").read_text())
    assert f"pmcvl {runs['code_version']}" in body and runs["config_hash"] in body
    assert f"{manifest['samples']} samples readers see" in body
    assert f"{manifest['superseded']['samples']} samples in the files are superseded" in body
    detector = pq.read_table(built / manifest["shards"][0]["index"])["detector_version"][0]
    assert detector.as_py().split(":")[-1] in body  # the version the records carry
    assert "## Known limitations" in body and "## Licenses" in body
    assert all(f"`{name}`" in body for name in FIELDS)


def test_croissant_validates_and_its_records_are_the_index(built: Path) -> None:
    import mlcroissant as mlc

    manifest = manifest_of(built)
    doc = json.loads((built / croissant.CROISSANT).read_text())
    dataset = mlc.Dataset(jsonld=str(built / croissant.CROISSANT))  # raises on an error
    issues = dataset.metadata.ctx.issues
    assert not issues.errors and not issues.warnings, issues.report()

    # every published file, with a checksum that is the file's
    objects = {n["@id"]: n for n in doc["distribution"] if n["@type"] == "cr:FileObject"}
    published = {
        p.relative_to(built).as_posix()
        for d in ("shards", "index", "superseded")
        for p in (built / d).iterdir()
    }
    assert set(objects) == published
    for name, node in objects.items():
        data = (built / name).read_bytes()
        assert node["sha256"] == hashlib.sha256(data).hexdigest()
        assert node["contentSize"] == f"{len(data)} B"

    records = list(dataset.records(croissant.SAMPLES))
    rows = index_rows(built, manifest)
    assert len(records) == len(rows) == sum(s["samples"] for s in manifest["shards"])

    def text(value):
        return value.decode() if isinstance(value, bytes) else value

    got = {(text(r["samples/shard"]), text(r["samples/key"])): r for r in records}
    assert set(got) == {(r["shard"], r["key"]) for r in rows}
    for row in rows:
        record = got[(row["shard"], row["key"])]
        assert text(record["samples/caption"]) == row["caption"]
        assert text(record["samples/split"]) == row["split"]
        assert list(record["samples/panel_bbox"]) == row["panel_bbox"]
        assert record["samples/width"] == row["width"]
        assert record["samples/feasibility"] == []  # no enrichment in this build
    gone = {
        (text(r["superseded/shard"]), text(r["superseded/key"]))
        for r in dataset.records(croissant.SUPERSEDED)
    }
    assert gone == tombstones(built, manifest)
    assert len(set(got) - gone) == manifest["samples"]
    splits = [text(r["splits/name"]) for r in dataset.records(croissant.SPLITS)]
    assert splits == sorted(manifest["splits"])


def test_hf_datasets_loads_the_shards_and_the_index(built: Path, tmp_path: Path) -> None:
    from datasets import Features, load_dataset

    manifest = manifest_of(built)
    head = card_header(built)
    features = Features._from_yaml_list(head["dataset_info"]["features"])
    cache = str(tmp_path / "hf")
    shards = load_dataset(
        "webdataset",
        data_files={"train": [str(built / s["name"]) for s in manifest["shards"]]},
        features=features,
        split="train",
        cache_dir=cache,
    )
    assert shards.num_rows == sum(s["samples"] for s in manifest["shards"])
    gone = tombstones(built, manifest)
    current = shards.filter(
        lambda r: ("shards/" + r["__url__"].rsplit("/", 1)[-1], r["__key__"]) not in gone
    )
    assert current.num_rows == manifest["samples"]
    sample = current[0]
    assert sample["jpg"].size == (sample["json"]["width"], sample["json"]["height"])
    assert sample["txt"] == sample["json"]["text"] and sample["png"] is None

    index = load_dataset(
        "parquet",
        data_files=[str(built / s["index"]) for s in manifest["shards"]],
        split="train",
        cache_dir=cache,
    )
    current_index = index.filter(lambda r: (r["shard"], r["key"]) not in gone)
    assert current_index.num_rows == manifest["samples"]
    assert sorted(current_index["key"]) == sorted(current["__key__"])

    # the card alone: load_dataset on the folder finds the shards and their features
    by_card = load_dataset(str(built), split="train", cache_dir=cache)
    assert by_card.num_rows == shards.num_rows and by_card.features == features


def test_features_and_fields_follow_the_record_contract() -> None:
    from datasets import Features

    assert list(FIELDS) == INDEX_SCHEMA.names
    yaml_form = yaml.safe_load(yaml.safe_dump(card.hub_features(INDEX_SCHEMA)))
    assert Features._from_yaml_list(yaml_form) == Features.from_arrow_schema(INDEX_SCHEMA)


def test_license_header_and_size_category() -> None:
    assert card.license_header({"CC BY": 5}) == {"license": "cc-by-4.0"}
    assert card.license_header({"CC0": 2, "CC BY-NC": 0}) == {"license": "cc0-1.0"}
    mixed = card.license_header(card.license_counts({"CC BY": 3, "CC BY-NC-ND": {"samples": 1}}))
    assert mixed["license"] == "other" and mixed["license_name"] == card.MIXED_LICENSE_NAME
    assert card.license_header({"PD": 4})["license"] == "other"  # no Hub id for it
    assert card.license_counts({"b": 1, "a": 1, "c": 3}) == {"c": 3, "a": 1, "b": 1}
    assert [card.size_category(n) for n in (0, 999, 1000, 10**6, 2 * 10**9)] == [
        "n<1K",
        "n<1K",
        "1K<n<10K",
        "1M<n<10M",
        "n>1B",
    ]


def test_card_files_on_s3_match_the_local_ones(built: Path, s3_admin, moto_endpoint) -> None:
    """The same manifest and facts give the same two files through S3 storage; checksums of
    files an earlier Croissant file listed are taken from it, not read again."""
    s3_admin.create_bucket(Bucket="pmcvl-card")
    settings = load_settings(
        environ={},
        output={
            "uri": "s3://pmcvl-card/ds",
            "s3": {"endpoint_url": moto_endpoint, "anonymous": False},
        },
    )
    remote = open_storage(settings.output.uri, settings.output.s3)
    local = open_storage(str(built))
    manifest = manifest_of(built)
    for path in built.rglob("*"):
        key = path.relative_to(built).as_posix()
        if path.is_file() and key.split("/")[0] in ("shards", "index", "stats", "superseded"):
            remote.write_bytes(key, path.read_bytes())
    facts = DatasetFacts("9.9.9", "abc", "run-1", enrichment={"enabled": False, "reason": "off"})
    publish.write_card_files(remote, manifest, facts)
    publish.write_card_files(local, manifest, facts)
    for name in (card.CARD, croissant.CROISSANT):
        assert remote.read_bytes(name) == local.read_bytes(name)

    index = manifest["shards"][0]["index"]
    doc = json.loads(remote.read_bytes(croissant.CROISSANT))
    for node in doc["distribution"]:
        if node["@id"] == index:
            node["sha256"] = "0" * 64  # what the earlier file said: trusted, immutable files
    remote.write_bytes(croissant.CROISSANT, json.dumps(doc).encode())
    publish.write_card_files(remote, manifest, facts)
    again = json.loads(remote.read_bytes(croissant.CROISSANT))
    assert [n["sha256"] for n in again["distribution"] if n["@id"] == index] == ["0" * 64]


def test_a_rerun_writes_the_card_files_an_older_output_lacks(built: Path, tmp_path: Path) -> None:
    """An output built before the card existed gets it from the next run, new input or not;
    after that a rerun writes nothing again."""
    out = tmp_path / "dataset"
    shutil.copytree(built, out)
    for name in (card.CARD, croissant.CROISSANT):
        (out / name).unlink()
    settings = load_settings(
        environ={},
        source={"kind": "local", "path": str(built.parent / "corpus")},
        output={"uri": str(out), "articles_per_part": 2},
        pipeline={"samples_per_shard": 4},
    )
    assert run_build(settings).pending == 0
    assert (out / card.CARD).is_file() and (out / croissant.CROISSANT).is_file()
    manifest = (out / "manifest.json").read_bytes()
    run_build(settings)
    assert (out / "manifest.json").read_bytes() == manifest
