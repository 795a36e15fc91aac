"""The license policy (``output.licenses.allow``): codes checked at config load, articles
outside the list skipped with their reason and counted by license, the standing skips found
again when a wider policy admits them, narrowing refused, and the manifest's per-license
counts of current samples; then one license-filtered build through the real build path."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from ray_jobs.config import load_settings
from ray_jobs.contract.failures import FAILURE_SCHEMA, FailureRecord
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.contract.rows import ARTICLE, failure_row, make_row
from ray_jobs.pipeline.explode import end_marker
from ray_jobs.pmc import license_policy as lp
from ray_jobs.pmc.ledger import Ledger, LedgerEntry, ref_batches, table_refs, version_id
from ray_jobs.pmc.licenses import KNOWN_CODES, parse_allow_list
from ray_jobs.shards import manifest as mf
from ray_jobs.shards.part import PartAssembler
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import LocalStorage

COMMERCIAL = ["CC0", "CC BY"]


def test_allow_list_is_normalised_and_checked_at_load() -> None:
    assert load_settings(environ={}).output.licenses.allow is None  # every license
    cfg = {"licenses": {"allow": ["cc-by", "CC0", "CC_BY", "Unknown", "cc by-nc-nd"]}}
    allow = load_settings(environ={}, output=cfg).output.licenses.allow
    assert allow == ["CC0", "CC BY", "CC BY-NC-ND", "unknown"]  # vocabulary order, once each
    env = {"PMCVL__OUTPUT__LICENSES__ALLOW": "[cc0, cc-by]"}
    assert load_settings(environ=env).output.licenses.allow == COMMERCIAL
    for bad in (["cc-by-4.0"], ["gpl"], ["cc-by", "cc-by-xx"]):
        with pytest.raises(ValidationError, match="unknown license code"):
            load_settings(environ={}, output={"licenses": {"allow": bad}})
    with pytest.raises(ValidationError, match="admits nothing"):
        load_settings(environ={}, output={"licenses": {"allow": []}})
    assert parse_allow_list(list(KNOWN_CODES)) == list(KNOWN_CODES)


def test_the_reason_names_the_license_and_the_list() -> None:
    assert lp.refusal(COMMERCIAL, "CC BY-NC") == "license CC BY-NC not in allow-list [CC0, CC BY]"
    assert lp.refusal(COMMERCIAL, None) == "license unknown not in allow-list [CC0, CC BY]"
    assert lp.refusal(COMMERCIAL, "CC BY") is None and lp.refusal(None, "CC BY-NC") is None
    assert lp.admits([*COMMERCIAL, "unknown"], None) and not lp.admits(COMMERCIAL, "NO-CC CODE")
    row = lp.skip_row(_ref("PMC1"), "CC BY-ND", lp.refusal(COMMERCIAL, "CC BY-ND"))
    assert row == {
        "source_key": "PMC1.1",
        "pmcid": "PMC1",
        "version": 1,
        "license": "CC BY-ND",
        "reason": "license CC BY-ND not in allow-list [CC0, CC BY]",
    }


def _ref(pmcid: str, etag: str = "e") -> ArticleRef:
    return ArticleRef(pmcid, 1, etag, "local", f"/corpus/{pmcid}")


def _skipped_rows(ref: ArticleRef, code: str) -> list[dict]:
    """What the fetch stage gives for an article the policy leaves out: its end marker, with
    the reason (``ray_jobs.pipeline.explode``)."""
    marker = end_marker(ref, code) | {"skipped": lp.refusal(COMMERCIAL, code)}
    return [make_row(ref.key, ARTICLE, marker)]


def _failed_rows(ref: ArticleRef, failure: FailureRecord) -> list[dict]:
    return [failure_row(failure, "article", ref.key), make_row(ref.key, ARTICLE, end_marker(ref))]


def _skipping_part(storage: LocalStorage, name: str = "000000") -> dict:
    """A part with an article the policy left out and a retracted one, assembled for real."""
    nc, retracted = _ref("PMC1"), _ref("PMC2")
    rows = _skipped_rows(nc, "CC BY-NC")
    rows += _failed_rows(retracted, FailureRecord(retracted.key, "fetch", "retracted", "r"))
    return PartAssembler(name, "run").assemble(storage, rows, samples_per_shard=8)


def test_a_skipped_article_is_recorded_and_counted_never_silently(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    record = _skipping_part(storage)
    counts = record["counts"]
    assert counts["articles"] == 2 and counts["articles_skipped"] == 2
    assert counts["articles_failed"] == 0 and record["shards"] == []
    assert counts[lp.SKIPPED] == {"CC BY-NC": 1} and counts[lp.KEPT] == {}
    entries = {e["pmcid"]: e for e in record["entries"]}
    assert (entries["PMC1"]["status"], entries["PMC1"]["retryable"]) == ("skipped", True)
    assert (entries["PMC2"]["status"], entries["PMC2"]["retryable"]) == ("skipped", False)
    (skip,) = pq.read_table(tmp_path / "skips" / "000000.parquet").to_pylist()
    assert (skip["source_key"], skip["license"]) == ("PMC1.1", "CC BY-NC")
    assert skip["reason"] == "license CC BY-NC not in allow-list [CC0, CC BY]"
    failed = pq.read_table(tmp_path / "failures" / "000000.parquet").to_pylist()
    assert [r["source_key"] for r in failed] == ["PMC2.1"]  # the retraction only
    assert counts["failures"] == 1
    assert json.loads((tmp_path / "parts" / "000000.json").read_text())["counts"] == counts


def test_a_wider_policy_plans_exactly_the_skips_it_admits(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    record = _skipping_part(storage)
    ledger = Ledger.load(storage)
    ledger.commit("000000", [LedgerEntry(**e) for e in record.pop("entries")])
    parts = [record]
    listing = [_ref("PMC1"), _ref("PMC2")]  # both listed again, unchanged

    def planned(allow: list[str] | None) -> list[str]:
        revisit = lp.revisits(storage, ledger.latest, parts, allow)
        pending, _ = ledger.pending_table(ref_batches(listing), revisit=revisit)
        return [r.key for r in table_refs(pending)]

    assert planned(COMMERCIAL) == []  # the same policy fetches nothing anew
    assert planned(["CC BY-NC-ND"]) == []
    assert planned([*COMMERCIAL, "CC BY-NC"]) == ["PMC1.1"]  # never the retraction
    assert planned(None) == ["PMC1.1"]
    assert lp.skipped_articles(storage, ledger.latest, ["000000"]) == {"CC BY-NC": 1}

    # a later run built it: the skip no longer stands, and is neither planned nor counted
    ledger.commit("000001", [LedgerEntry.for_ref(_ref("PMC1"), "ok", "000001")])
    assert planned(None) == []
    assert lp.skipped_articles(storage, ledger.latest, ["000000"]) == {}
    assert lp.revisits(storage, ledger.latest, parts, None).to_pylist() == []
    assert version_id("PMC1", 1) not in lp.revisits(storage, ledger.latest, parts, None)


def test_skips_stored_as_failure_rows_by_older_builds_are_still_found(tmp_path: Path) -> None:
    """Datasets built before ``skips/`` existed hold each skip as a failure row of stage
    ``license`` with the license as error_type: a wider policy still finds and revisits them."""
    storage = LocalStorage(tmp_path)
    old = FailureRecord("PMC1.1", lp.LEGACY_STAGE, "CC BY-NC", "license CC BY-NC not in ...")
    fault = FailureRecord("PMC2.1", "parse", "xml_syntax", "bad")
    table = pa.Table.from_pylist([old.to_row(), fault.to_row()], schema=FAILURE_SCHEMA)
    write_parquet(storage, "failures/000000.parquet", table)
    ledger = Ledger.load(storage)
    entries = [lp.skip_entry(_ref("PMC1"), "000000")]
    entries.append(LedgerEntry.for_ref(_ref("PMC2"), "failed", "000000"))
    ledger.commit("000000", entries)
    parts = [{"part": "000000", "counts": {lp.SKIPPED: {"CC BY-NC": 1}}}]
    assert lp.skipped_articles(storage, ledger.latest, ["000000"]) == {"CC BY-NC": 1}
    assert lp.revisits(storage, ledger.latest, parts, None).to_pylist() == [version_id("PMC1", 1)]
    assert lp.revisits(storage, ledger.latest, parts, COMMERCIAL).to_pylist() == []


def test_narrowing_an_output_is_refused() -> None:
    held = {"CC BY": 3, "CC BY-NC": 2, "CC BY-ND": 0}
    why = lp.narrowing(held, COMMERCIAL)
    assert why and "CC BY-NC: 2 samples" in why and "CC BY-ND" not in why
    assert "output.uri" in why
    assert lp.narrowing(held, [*COMMERCIAL, "CC BY-NC"]) is None
    assert lp.narrowing(held, None) is None and lp.narrowing(None, COMMERCIAL) is None


def _index(storage: LocalStorage, name: str, keys: list[str], codes: list[str | None]) -> None:
    table = pa.table(
        {
            "shard": [f"shards/{name}.tar"] * len(keys),
            "key": keys,
            "license": pa.array(codes, pa.string()),
        }
    )
    write_parquet(storage, f"index/{name}.parquet", table)


def test_manifest_counts_current_samples_by_license(tmp_path: Path) -> None:
    """Per-part counts less the tombstones' agree with the index read with its tombstones
    (the fallback for parts written before the counts existed)."""
    storage = LocalStorage(tmp_path)
    _index(storage, "a", ["k1", "k2", "k3"], ["CC BY", "CC BY", None])
    _index(storage, "b", ["k4"], ["CC0"])
    write_parquet(
        storage, "superseded/b.parquet", pa.table({"shard": ["shards/a.tar"], "key": ["k1"]})
    )

    def shard(name: str, n: int) -> dict:
        return {"name": f"shards/{name}.tar", "index": f"index/{name}.parquet", "samples": n}

    old = {"part": "a", "counts": {"kept": 3}, "shards": [shard("a", 3)]}
    new = {
        "part": "b",
        "counts": {"kept": 1, lp.KEPT: {"CC0": 1}},
        "shards": [shard("b", 1)],
        "superseded": {
            "file": "superseded/b.parquet",
            "samples": 1,
            "shards": {"shards/a.tar": 1},
            "licenses": {"CC BY": 1},
        },
    }
    want = {"CC BY": 1, "CC0": 1, "unknown": 1}
    assert mf.license_counts(storage, [old, new]) == want  # from the index
    old["counts"][lp.KEPT] = {"CC BY": 2, "unknown": 1}
    assert mf.license_counts(storage, [old, new]) == want  # from the counts
    storage.delete("index/a.parquet")  # proof the counts alone were used
    assert mf.license_counts(storage, [old, new]) == want


def test_tombstones_count_the_licenses_they_retire(tmp_path: Path) -> None:
    from ray_jobs.shards import superseded

    storage = LocalStorage(tmp_path)
    rows = [
        ("shards/a.tar", "k1", "CC BY"),
        ("shards/a.tar", "k2", None),
        ("shards/b.tar", "k3", "CC BY"),
    ]
    table = pa.table(
        {
            "shard": [r[0] for r in rows],
            "key": [r[1] for r in rows],
            "pmcid": ["PMC1"] * 3,
            "pmc_version": pa.array([1] * 3, pa.int64()),
            "by_part": ["000002"] * 3,
            "license": [r[2] for r in rows],
        },
        schema=superseded.RETIRED_SCHEMA,
    )
    summary = superseded.write(storage, "000002", table)
    assert summary["licenses"] == {"CC BY": 2, "unknown": 1}
    assert summary["shards"] == {"shards/a.tar": 2, "shards/b.tar": 1}
    written = pq.read_table(tmp_path / superseded.file_of("000002"))
    assert written.schema.equals(superseded.SCHEMA)  # the file's format is unchanged


# --- one license-filtered build through the real build path (local Ray cluster) ---------


def _samples(storage) -> dict[str, dict]:
    from ray_jobs.shards import superseded

    manifest = json.loads(storage.read_bytes("manifest.json"))
    tombstones = superseded.from_manifest(storage, manifest)
    rows = {}
    for shard in manifest["shards"]:
        table = pq.read_table(io.BytesIO(storage.read_bytes(shard["index"])))
        rows.update({r["key"]: r for r in superseded.current(table, tombstones).to_pylist()})
    return rows


def _by_license(rows: dict[str, dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows.values():
        code = row["license"] or "unknown"
        out[code] = out.get(code, 0) + 1
    return out


def test_a_license_filtered_build(ray_address, tmp_path: Path) -> None:
    """The sample corpus (seed 5: CC BY, CC BY, CC BY-NC-ND, CC BY-NC, CC0) built for
    commercial use: only CC0 and CC BY reach the index and the shards, the other two are
    skipped with their reasons in the ledger, the failures table and the report, and the
    manifest's counts match the index. A wider policy then builds the CC BY-NC article and
    only it; a republished article keeps the counts those of current samples; narrowing the
    output again is refused before any work."""
    from ray_jobs.jobs.build_dataset import run_build
    from ray_jobs.pmc.sample_corpus import write_corpus
    from ray_jobs.report.page import render_html
    from ray_jobs.report.stats import compute_stats

    corpus, uri = tmp_path / "corpus", str(tmp_path / "dataset")
    write_corpus(corpus, 5, "folders", seed=5)

    def settings(allow: list[str] | None):
        output = {"uri": uri, "articles_per_part": 4, "licenses": {"allow": allow}}
        source = {"kind": "local", "path": str(corpus)}
        return load_settings(
            environ={}, source=source, output=output, pipeline={"samples_per_shard": 8}
        )

    first = run_build(settings(["cc0", "cc-by"]))
    out = LocalStorage(Path(uri))
    manifest = json.loads(out.read_bytes("manifest.json"))
    rows = _samples(out)
    assert rows and {r["license"] for r in rows.values()} <= set(COMMERCIAL)
    assert manifest["license_policy"] == COMMERCIAL == first.license_policy
    assert manifest["licenses"] == _by_license(rows)
    assert sum(manifest["licenses"].values()) == manifest["samples"] == len(rows)
    counts = manifest["counts"]
    assert counts[lp.SKIPPED] == {"CC BY-NC": 1, "CC BY-NC-ND": 1}
    assert counts["articles_skipped"] == 2 and counts["articles_failed"] == 0
    # the shards hold what the index says, nothing else
    import tarfile

    members = set()
    for shard in manifest["shards"]:
        with tarfile.open(fileobj=io.BytesIO(out.read_bytes(shard["name"]))) as tar:
            members |= {m.name.split(".", 1)[0] for m in tar.getmembers()}
    assert members == set(rows)
    skips = {
        r["source_key"]: r
        for k in out.list("skips")
        for r in pq.read_table(io.BytesIO(out.read_bytes(k))).to_pylist()
    }
    assert sorted(r["license"] for r in skips.values()) == ["CC BY-NC", "CC BY-NC-ND"]
    failed = [r for k in out.list("failures") for r in pq.read_table(io.BytesIO(out.read_bytes(k)))]
    assert not [r for r in failed if r["source_key"] in skips]  # a skip is not a failure
    for key, row in skips.items():
        assert row["reason"] == f"license {row['license']} not in allow-list [CC0, CC BY]"
        assert not [r for r in rows.values() if r["pmcid"] == key.rsplit(".", 1)[0]]
    entries = {f"{p}.{v}": e for (p, v), e in Ledger.load(out).entries.items()}
    skipped = {k for k, e in entries.items() if e.status == "skipped"}
    assert skipped == set(skips) and all(entries[k].retryable for k in skipped)
    stats = compute_stats(out)
    assert stats.license_policy == COMMERCIAL and stats.license_policy_recorded
    assert stats.licenses_skipped == {"CC BY-NC": 1, "CC BY-NC-ND": 1}
    assert stats.licenses == manifest["licenses"]
    assert not [w for w in stats.warnings if "license" in w]
    assert "only CC0, CC BY admitted; 2 articles outside it skipped" in render_html(stats, {})

    wider = run_build(settings(["cc0", "cc-by", "cc-by-nc"]))
    assert wider.pending == 1  # the one standing skip it admits, nothing else
    manifest = json.loads(out.read_bytes("manifest.json"))
    after = _samples(out)
    assert {k: after[k] for k in rows} == rows  # what was built stays as it was
    assert {r["license"] for k, r in after.items() if k not in rows} == {"CC BY-NC"}
    assert manifest["licenses"] == _by_license(after)
    assert manifest["license_policy"] == [*COMMERCIAL, "CC BY-NC"]
    stats = compute_stats(out)
    assert stats.licenses_skipped == {"CC BY-NC-ND": 1}  # the skip that still stands

    # a CC BY article republished with new content: its old samples are superseded, and the
    # manifest's per-license counts are still those of the samples readers see; the standing
    # skip is not fetched again
    folder = next(corpus.glob("PMC9000000*"))
    for xml in [*folder.glob("*.xml"), *folder.glob("*.nxml")]:
        xml.write_text(xml.read_text().replace("<caption><title>", "<caption><title>New: "))
    third = run_build(settings(["cc0", "cc-by", "cc-by-nc"]))
    assert (third.pending, third.replaced) == (1, 1)
    manifest = json.loads(out.read_bytes("manifest.json"))
    assert manifest["superseded"]["samples"] > 0
    assert manifest["licenses"] == _by_license(_samples(out)) == compute_stats(out).licenses

    with pytest.raises(SystemExit, match=r"CC BY-NC: \d+ samples"):
        run_build(settings(["cc0", "cc-by"]))
