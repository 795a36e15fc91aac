"""The PMC Cloud S3 layout against a real S3 API server (moto) on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import upload_tree

from ray_jobs.config import ArchiveLimits, SourceSettings, load_settings
from ray_jobs.contract.failures import StageError
from ray_jobs.jobs.ingest import current_articles, failure_counts, run_ingest
from ray_jobs.pmc.jats import parse_package
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.pmc.sources import PmcS3Source
from ray_jobs.storage.store import open_storage

N_ARTICLES = 24


@pytest.fixture
def pmc_bucket(s3_admin, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, Path]:
    """A bucket in the PMC Cloud layout, holding a generated corpus and its inventory."""
    bucket = "pmc-" + request.node.name.lower().replace("_", "-")[:40]
    corpus = tmp_path / "corpus"
    write_corpus(corpus, N_ARTICLES, "s3", seed=11)
    s3_admin.create_bucket(Bucket=bucket)
    # world-readable, as PMC's bucket is: anonymous clients may list and get
    s3_admin.put_bucket_policy(
        Bucket=bucket,
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": ["s3:GetObject", "s3:ListBucket"],
                        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                    }
                ],
            }
        ),
    )
    upload_tree(s3_admin, bucket, corpus)
    return bucket, corpus


def source_settings(endpoint: str, bucket: str, **extra) -> SourceSettings:
    return SourceSettings(kind="s3", bucket=bucket, s3={"endpoint_url": endpoint}, **extra)


def truth(corpus: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (corpus / "truth.jsonl").read_text().splitlines()]
    return {r["key"]: r for r in rows}


def test_listing_by_prefix_and_by_inventory_agree(moto_endpoint, pmc_bucket) -> None:
    bucket, corpus = pmc_bucket
    by_prefix = list(PmcS3Source(source_settings(moto_endpoint, bucket), ArchiveLimits()).refs())
    by_inventory = list(
        PmcS3Source(
            source_settings(moto_endpoint, bucket, listing="inventory"), ArchiveLimits()
        ).refs()
    )
    expected = truth(corpus)
    assert sorted(r.key for r in by_prefix) == sorted(expected)
    assert sorted(by_prefix, key=lambda r: r.key) == sorted(by_inventory, key=lambda r: r.key)
    assert all(len(r.etag) == 32 for r in by_prefix)  # the metadata object's ETag (an MD5)


def test_prefix_and_limit_narrow_the_listing(moto_endpoint, pmc_bucket) -> None:
    bucket, _ = pmc_bucket
    refs = list(
        PmcS3Source(
            source_settings(moto_endpoint, bucket, prefix="PMC900001"), ArchiveLimits()
        ).refs()
    )
    assert refs and all(r.pmcid.startswith("PMC900001") for r in refs)
    limited = PmcS3Source(source_settings(moto_endpoint, bucket, limit=3), ArchiveLimits())
    assert len(list(limited.refs())) == 3


def test_fetch_reads_anonymously_and_parses_to_truth(
    moto_endpoint, pmc_bucket, monkeypatch
) -> None:
    bucket, corpus = pmc_bucket
    # no credentials at all: the source must sign nothing, as with PMC's public bucket
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    source = PmcS3Source(source_settings(moto_endpoint, bucket), ArchiveLimits())
    expected = truth(corpus)
    parsed = retracted = 0
    for ref in source.refs():
        t = expected[ref.key]
        if t["retracted"]:
            with pytest.raises(StageError) as info:
                source.fetch(ref)
            assert info.value.error_type == "retracted"
            retracted += 1
            continue
        package = source.fetch(ref)
        assert set(package.media) == {f["image"] for f in t["figures"]}
        assert package.metadata["license_code"] == t["license_code"]
        article = parse_package(package)
        assert (article.pmcid, article.version) == (t["pmcid"], t["version"])
        assert [f.image for f in article.figures] == [f["image"] for f in t["figures"]]
        parsed += 1
    assert parsed >= 20 and retracted >= 1


def test_corrupt_media_fails_its_md5(moto_endpoint, pmc_bucket, s3_admin) -> None:
    bucket, corpus = pmc_bucket
    key = sorted(truth(corpus))[0]
    image = truth(corpus)[key]["figures"][0]["image"]
    s3_admin.put_object(Bucket=bucket, Key=f"{key}/{image}", Body=b"not the image")
    source = PmcS3Source(source_settings(moto_endpoint, bucket), ArchiveLimits())
    ref = next(r for r in source.refs() if r.key == key)
    with pytest.raises(StageError) as info:
        source.fetch(ref)
    assert info.value.error_type == "md5_mismatch" and info.value.retryable


def test_ingest_from_s3_to_s3_with_ledger(moto_endpoint, pmc_bucket, s3_admin) -> None:
    bucket, corpus = pmc_bucket
    s3_admin.create_bucket(Bucket="pmcvl-out")
    # one article loses its XML: a fetch failure that is recorded, not fatal
    broken = sorted(k for k, t in truth(corpus).items() if not t["retracted"])[1]
    s3_admin.delete_object(Bucket=bucket, Key=f"{broken}/{broken}.xml")
    endpoint = {"endpoint_url": moto_endpoint}
    settings = load_settings(
        source={"kind": "s3", "bucket": bucket, "listing": "inventory", "s3": endpoint},
        output={"uri": "s3://pmcvl-out/runs/a", "s3": {**endpoint, "anonymous": False}},
        environ={},
    )
    report = run_ingest(settings, progress=False)
    expected = truth(corpus)
    n_retracted = sum(t["retracted"] for t in expected.values())
    assert report.listed == len(expected)
    assert report.skipped == n_retracted
    assert report.failures_by_type == {"fetch/missing_object": 1, "fetch/retracted": n_retracted}
    assert report.articles == len(expected) - n_retracted - 1

    storage = open_storage("s3://pmcvl-out/runs/a", settings.output.s3)
    table = current_articles(storage)
    assert sorted(table["source_key"].to_pylist()) == sorted(
        k for k, t in expected.items() if not t["retracted"] and k != broken
    )
    assert failure_counts(storage)["fetch/missing_object"] == 1
    keys = {o["Key"] for o in s3_admin.list_objects_v2(Bucket="pmcvl-out")["Contents"]}
    assert all(k.startswith("runs/a/") for k in keys)
    assert any(k.startswith("runs/a/_ledger/") for k in keys)

    rerun = run_ingest(settings, progress=False)
    assert rerun.processed == 0 and rerun.unchanged == len(expected)

    # the article is republished with its XML (a new ETag on its metadata): only it is redone
    meta = json.loads((corpus / broken / f"{broken}.json").read_text())
    meta["doi"] = "10.5555/updated"
    s3_admin.put_object(
        Bucket=bucket,
        Key=f"{broken}/{broken}.xml",
        Body=next((corpus / broken).glob("*.xml")).read_bytes(),
    )
    for key in (f"metadata/{broken}.json", f"{broken}/{broken}.json"):
        s3_admin.put_object(Bucket=bucket, Key=key, Body=json.dumps(meta).encode())
    settings.source.listing = "prefix"  # the inventory is a day old; the listing is current
    third = run_ingest(settings, progress=False)
    assert third.processed == 1 and third.articles == 1
    dois = dict(
        zip(*(current_articles(storage)[c].to_pylist() for c in ("source_key", "doi")), strict=True)
    )
    assert dois[broken] == "10.5555/updated"
