"""The dataset-building job on a real local Ray cluster, with S3 on a moto server: output
contract, determinism, a rerun that writes nothing, kill-and-resume, and proof that the shards
load in webdataset, HF datasets and open_clip's own trainer."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import webdataset as wds
from conftest import build_job, upload_tree
from fake_llm_server import fake_llm  # noqa: F401
from PIL import Image

from ray_jobs.build.commit import CRASH_AFTER_PARTS_ENV, CRASH_EXIT_CODE
from ray_jobs.config import load_settings
from ray_jobs.contract.records import INDEX_SCHEMA
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.shards import superseded
from ray_jobs.storage.store import open_storage

N_ARTICLES = 10
PUBLIC_READ = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": ["arn:aws:s3:::pmc-src", "arn:aws:s3:::pmc-src/*"],
        }
    ],
}


@pytest.fixture(scope="module")
def source(moto_endpoint, tmp_path_factory):
    """The sample corpus in PMC's S3 layout, in a world-readable bucket as PMC's is."""
    import boto3

    corpus = tmp_path_factory.mktemp("corpus")
    write_corpus(corpus, N_ARTICLES, "s3", seed=5)
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket="pmc-src")
    client.put_bucket_policy(Bucket="pmc-src", Policy=json.dumps(PUBLIC_READ))
    upload_tree(client, "pmc-src", corpus)
    client.create_bucket(Bucket="pmcvl-build")
    return {"kind": "s3", "bucket": "pmc-src", "s3": {"endpoint_url": moto_endpoint}}


def config(source: dict, uri: str, moto_endpoint: str, **pipeline) -> dict:
    return {
        "source": source,
        "output": {
            "uri": uri,
            "articles_per_part": 4,
            "s3": {"endpoint_url": moto_endpoint, "anonymous": False},
        },
        "pipeline": {"samples_per_shard": 8, **pipeline},
    }


def samples(storage) -> dict[str, dict]:
    """Every sample a reader sees (superseded ones left out), index row by key, without
    shard placement."""
    manifest = json.loads(storage.read_bytes("manifest.json"))
    tombstones = superseded.from_manifest(storage, manifest)
    rows = {}
    for shard in manifest["shards"]:
        table = pq.read_table(io.BytesIO(storage.read_bytes(shard["index"])))
        table = superseded.current(table, tombstones)
        assert table.num_rows == shard["current"]
        for row in table.drop_columns(["shard", "member"]).to_pylist():
            assert row["key"] not in rows, f"{row['key']} written twice"
            rows[row["key"]] = row
    return rows


def failures(storage) -> list[tuple]:
    keys = [k for k in storage.list("failures") if k.endswith(".parquet")]
    rows = [r for k in keys for r in pq.read_table(io.BytesIO(storage.read_bytes(k))).to_pylist()]
    return sorted((r["source_key"], r["stage"], r["error_type"]) for r in rows)


def rejects(storage) -> list[tuple]:
    keys = [k for k in storage.list("rejects") if k.endswith(".parquet")]
    rows = [r for k in keys for r in pq.read_table(io.BytesIO(storage.read_bytes(k))).to_pylist()]
    return sorted((r["key"], r["reason"], r["duplicate_of"]) for r in rows)


@pytest.fixture(scope="module")
def local_run(source, moto_endpoint, ray_address, tmp_path_factory):
    """One uninterrupted build to a local folder."""
    out = tmp_path_factory.mktemp("local") / "dataset"
    settings = load_settings(environ={}, **config(source, str(out), moto_endpoint))
    report = run_build(settings)
    return out, report


def test_build_to_s3_contract_and_rerun(source, moto_endpoint, ray_address, s3_admin, local_run):
    uri = "s3://pmcvl-build/datasets/a"
    settings = load_settings(environ={}, **config(source, uri, moto_endpoint))
    report = run_build(settings)
    storage = open_storage(uri, settings.output.s3)
    manifest = json.loads(storage.read_bytes("manifest.json"))
    counts = manifest["counts"]
    # one article is listed in two versions: the older is recorded as superseded, not built
    assert report.listed == N_ARTICLES + 1 and report.stale == 1
    assert counts["articles"] == N_ARTICLES and counts["articles_superseded"] == 1
    assert counts["articles_skipped"] == 1  # the retracted one: recorded, not silently lost
    assert counts["kept"] == sum(s["samples"] for s in manifest["shards"]) > 0
    assert counts["panels"] == counts["kept"] + sum(counts["dropped"].values())
    assert manifest["enrichment"]["enabled"] is False and manifest["enrichment"]["reason"]
    for shard in manifest["shards"]:
        data = storage.read_bytes(shard["name"])
        assert hashlib.sha256(data).hexdigest() == shard["sha256"] and len(data) == shard["bytes"]
        assert shard["samples"] <= 8
        index = pq.read_table(io.BytesIO(storage.read_bytes(shard["index"])))
        assert index.schema.equals(INDEX_SCHEMA) and index.num_rows == shard["samples"]
    rows = samples(storage)
    assert all("." not in key for key in rows)
    assert {r["split"] for r in rows.values()} == {"train"}
    assert all(r["text"] == r["subcaption"] for r in rows.values())
    assert ("PMC9000007.1", "fetch", "retracted") in failures(storage)
    # nothing escaped the output prefix
    keys = [o["Key"] for o in s3_admin.list_objects_v2(Bucket="pmcvl-build")["Contents"]]
    assert all(k.startswith("datasets/a/") for k in keys)

    # the same input to a local folder gives byte-identical shards
    local = open_storage(str(local_run[0]))
    local_manifest = json.loads(local.read_bytes("manifest.json"))
    assert [s["sha256"] for s in local_manifest["shards"]] == [
        s["sha256"] for s in manifest["shards"]
    ]

    # a rerun over the same input writes nothing
    before = {
        o["Key"]: o["ETag"] for o in s3_admin.list_objects_v2(Bucket="pmcvl-build")["Contents"]
    }
    again = run_build(settings)
    after = {
        o["Key"]: o["ETag"] for o in s3_admin.list_objects_v2(Bucket="pmcvl-build")["Contents"]
    }
    assert again.pending == 0 and again.new_shards == []
    assert after == before


@pytest.mark.parametrize("where", ["local", "s3"])
def test_killed_run_resumes_with_the_same_bytes(
    where, source, moto_endpoint, aws_credentials, ray_address, local_run, tmp_path
):
    """The job dies hard right after committing its first part (the crash hook, as SIGKILL
    would: no cleanup). The next run takes over the plan's other parts under the same names,
    reuses what they staged (no article is detected twice), and the dataset ends up the
    uninterrupted run's, shard for shard and byte for byte."""
    uri = (
        str(tmp_path / "dataset")
        if where == "local"
        else f"s3://pmcvl-build/killed-{tmp_path.name}"
    )
    cfg = config(source, uri, moto_endpoint)
    path = tmp_path / "config.yaml"
    proc = build_job(cfg, path, ray_address, **{CRASH_AFTER_PARTS_ENV: "1"})
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr[-3000:]
    settings = load_settings(path, environ={})
    out = open_storage(uri, settings.output.s3)
    assert len([k for k in out.list("_ledger/") if k.endswith(".parquet")]) == 1
    assert not out.exists("manifest.json")  # nothing published
    staged = {k.split("/")[1] for k in out.list("staging/") if k.endswith("_staged.json")}
    assert staged == {"000001", "000002"}  # the parts not committed were staged already

    report = run_build(settings)
    assert report.pending == local_run[1].pending - 4  # the committed part was not redone
    assert report.resumed_parts == ["000001", "000002"] and report.parts == report.resumed_parts
    whole = open_storage(str(local_run[0]))
    assert samples(out) == samples(whole)
    assert failures(out) == failures(whole)
    assert rejects(out) == rejects(whole)

    def shards(storage) -> list[tuple]:
        manifest = json.loads(storage.read_bytes("manifest.json"))
        return [(s["name"], s["sha256"], s["samples"]) for s in manifest["shards"]]

    assert shards(out) == shards(whole)
    listed = {name for name, _, _ in shards(out)}
    assert set(out.list("shards/")) == listed
    assert list(out.list("staging/")) == []  # committed parts leave no staging behind


def _revise(folder, new_name: str | None = None) -> None:
    """A new edition of an article folder: its captions changed (in place, or as a copy named
    ``new_name``: a new PMC version of the article)."""
    import shutil

    if new_name is not None:
        folder = shutil.copytree(folder, folder.parent / new_name)
    for xml in [*folder.glob("*.xml"), *folder.glob("*.nxml")]:
        xml.write_text(xml.read_text().replace("<caption><title>", "<caption><title>Revised: "))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_republished_articles_replace_their_samples(
    where, source, moto_endpoint, aws_credentials, ray_address, tmp_path
):
    """One article republished under the same version with new content, another in a new
    version: after the next run, readers (the index with its tombstones, and the training
    filter on the shards themselves) see only the new samples, none of the old; the new ones
    are not judged copies of what they replace; a third run writes nothing."""
    corpus = tmp_path / "corpus"  # a local one, to edit: ``source`` made the output bucket
    write_corpus(corpus, 5, "folders", seed=21)
    uri = str(tmp_path / "dataset") if where == "local" else f"s3://pmcvl-build/{tmp_path.name}"
    cfg = config({"kind": "local", "path": str(corpus)}, uri, moto_endpoint)
    settings = load_settings(environ={}, **cfg)
    first = run_build(settings)
    out = open_storage(uri, settings.output.s3)
    before = samples(out)
    assert first.stale == 0 and first.replaced == 0
    same, bumped = "PMC9000001", "PMC9000003"
    old_same = {k for k, r in before.items() if r["pmcid"] == same}
    old_bumped = {k for k, r in before.items() if r["pmcid"] == bumped}
    assert old_same and old_bumped

    _revise(corpus / f"{same}.1")
    _revise(corpus / f"{bumped}.1", f"{bumped}.2")
    second = run_build(settings)
    # the old version of the bumped article is not listed as new: the ledger names it
    assert (second.pending, second.stale, second.replaced) == (2, 0, 2)
    after = samples(out)
    manifest = json.loads(out.read_bytes("manifest.json"))
    assert manifest["superseded"]["samples"] == len(old_same) + len(old_bumped)
    assert manifest["samples"] == len(after) == sum(s["current"] for s in manifest["shards"])
    # the same version keeps its keys with the new content; the new version has new keys
    assert {k for k, r in after.items() if r["pmcid"] == same} == old_same
    assert all(after[k]["caption"].startswith("Revised: ") for k in old_same)
    new_bumped = {k for k, r in after.items() if r["pmcid"] == bumped}
    assert new_bumped and not new_bumped & old_bumped
    assert {r["pmc_version"] for k, r in after.items() if k in new_bumped} == {2}
    assert all(after[k]["caption"].startswith("Revised: ") for k in new_bumped)
    untouched = {k: r for k, r in before.items() if r["pmcid"] not in (same, bumped)}
    assert {k: after[k] for k in untouched} == untouched
    # the new version's images are the old one's: none was dropped as a copy of those
    assert len(new_bumped) == len(old_bumped)
    assert not [r for r in rejects(out) if r[0].startswith(f"{bumped}v2") and "dup" in r[1]]
    ledger = Ledger.load(out).entries
    assert ledger[(bumped, 1)].status == "superseded" and ledger[(bumped, 2)].status == "ok"

    if where == "local":  # what open_clip's loader sees through the training filter
        from ray_jobs.training.exclusion import ExcludeArticles, read_superseded

        keep = ExcludeArticles(
            frozenset(), lambda sample: True, read_superseded(uri + "/manifest.json")
        )
        urls = [f"{uri}/{s['name']}" for s in manifest["shards"]]
        seen = [s["__key__"] for s in wds.WebDataset(urls, shardshuffle=False) if keep(s)]
        assert sorted(seen) == sorted(after)

    third = run_build(settings)
    assert third.pending == 0 and third.new_shards == []
    assert samples(out) == after


def test_shards_load_in_webdataset_hf_datasets_and_open_clip(local_run, tmp_path) -> None:
    out, _ = local_run
    manifest = json.loads((out / "manifest.json").read_text())
    urls = [str(out / s["name"]) for s in manifest["shards"]]
    dataset = wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("jpg", "txt", "json")
    seen = 0
    for image, text, meta in dataset:
        assert isinstance(image, Image.Image) and image.size == (meta["width"], meta["height"])
        assert text == meta["text"] and meta["format"] == "pmcvl-panel/1"
        seen += 1
    assert seen == manifest["counts"]["kept"]

    from datasets import load_dataset

    index = load_dataset(
        "parquet",
        data_files=[str(out / s["index"]) for s in manifest["shards"]],
        split="train",
        cache_dir=str(tmp_path / "hf"),
    )
    assert index.num_rows == seen and "subcaption" in index.column_names

    logs = tmp_path / "logs"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ray_jobs.training.train",
            "--manifest",
            str(out / "manifest.json"),
            "--model",
            "pmcvl-tiny",
            "--context-length",
            "77",
            "--batch-size",
            "4",
            "--train-num-samples",
            "8",
            "--workers",
            "0",
            "--precision",
            "fp32",
            "--device",
            "cpu",
            "--warmup",
            "1",
            "--log-every-n-steps",
            "1",
            "--logs",
            str(logs),
            "--name",
            "demo-shards",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (logs / "demo-shards" / "checkpoints" / "epoch_1.pt").is_file()


def test_enrichment_end_to_end_with_a_failing_article_retried(
    source,
    moto_endpoint,
    ray_address,
    fake_llm,  # noqa: F811
    tmp_path,
):
    """LongCAP on: every kept panel gets a long caption; one article's calls fail with 500s,
    its panels become retryable failures and the next run enriches only them. The server wants
    a key, given in the config: it reaches the enrichment actors and no output file."""
    from ray_jobs.pmc.jats import parse_package
    from ray_jobs.pmc.sources import open_source

    canary = "sk-canary-" + os.urandom(8).hex()
    fake_llm.api_key = canary
    settings = load_settings(
        environ={},
        **config(source, str(tmp_path / "out"), moto_endpoint),
        longcap={
            "enabled": True,
            "api_key": canary,
            "base_url": fake_llm.url,
            "model": "fake-vlm",
            "max_retries": 1,
            "backoff_base_s": 0.01,
            "breaker_threshold": 1000,
        },
    )
    src = open_source(settings.source, settings.archive)
    victim = sorted(src.refs(), key=lambda r: r.key)[2]
    abstract = parse_package(src.fetch(victim)).abstract
    fake_llm.fail_matching(abstract[:60], "http_500")

    first = run_build(settings)
    storage = open_storage(str(tmp_path / "out"))
    rows = samples(storage)
    assert rows and all(r["long_caption"] and r["text"] == r["long_caption"] for r in rows.values())
    assert all(r["llm_model"] == "fake-vlm" and r["prompt_version"] for r in rows.values())
    assert all(r["feasibility"] for r in rows.values())
    assert not any(r["pmcid"] == victim.pmcid for r in rows.values())
    failed = [f for f in failures(storage) if f[1] == "enrich"]
    assert failed and {f[2] for f in failed} == {"http_500"}
    assert first.counts["enriched"] == first.counts["kept"] == len(rows)

    fake_llm.clear_faults()
    fake_llm.reset_counts()
    second = run_build(settings)
    assert second.pending == 1  # only the article whose enrichment failed (retryable)
    again = samples(storage)
    new = {k: r for k, r in again.items() if k not in rows}
    assert new and all(r["pmcid"] == victim.pmcid and r["long_caption"] for r in new.values())
    # the victim's panels cost two calls each (describe, then judge); nothing else was asked
    assert fake_llm.chat_requests == 2 * len(new)
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and not [p for p in written if canary.encode() in p.read_bytes()]


def test_a_dead_llm_server_stops_the_run_before_any_work(source, moto_endpoint, tmp_path):
    settings = load_settings(
        environ={},
        **config(source, str(tmp_path / "out"), moto_endpoint),
        longcap={"enabled": True, "base_url": "http://127.0.0.1:9", "model": "fake-vlm"},
    )
    with pytest.raises(SystemExit, match="not reachable"):
        run_build(settings)
    assert not (tmp_path / "out" / "_ledger").exists()
