"""The incremental ledger: a rerun is a no-op; changes, new versions and failures behave."""

from __future__ import annotations

import shutil
from pathlib import Path

from ray_jobs.config import Settings, load_settings
from ray_jobs.jobs.ingest import ARTICLES, current_articles, read_table, run_ingest
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.pmc.sample_corpus import write_corpus
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import LocalStorage


def settings_for(corpus: Path, out: Path, **ingest) -> Settings:
    return load_settings(
        source={"kind": "local", "path": str(corpus)},
        output={"uri": str(out), "articles_per_part": 7},
        ingest=ingest,
        environ={},
    )


def test_rerun_is_a_noop_and_changes_are_picked_up(tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    total = write_corpus(corpus, 20, "folders", seed=5)
    first = run_ingest(settings_for(corpus, out), progress=False)
    assert first.listed == total and first.unchanged == 0
    assert first.articles + first.skipped == total and first.failed == 0
    assert len(first.parts) == 4  # 22 articles, 7 per part
    storage = LocalStorage(out)
    table = current_articles(storage)
    assert table.num_rows == first.articles

    second = run_ingest(settings_for(corpus, out), progress=False)
    assert (second.unchanged, second.processed, second.articles) == (total, 0, 0)
    assert second.parts == []
    assert current_articles(storage).equals(table)

    # an article's content changes: only it is parsed again, and the table shows the new row
    folder = sorted(p for p in corpus.iterdir() if p.name.startswith("PMC9000003"))[0]
    xml = next(folder.glob("*.xml"))
    xml.write_bytes(xml.read_bytes().replace(b"A study of", b"A revised study of"))
    # a new version of another article appears
    old = corpus / "PMC9000004.1"
    new = corpus / "PMC9000004.2"
    shutil.copytree(old, new)
    for path in new.iterdir():
        if path.name.startswith("PMC9000004.1"):
            path.rename(new / path.name.replace(".1.", ".2."))

    third = run_ingest(settings_for(corpus, out), progress=False)
    assert third.processed == 2 and third.unchanged == total - 1
    current = current_articles(storage)
    assert current.num_rows == table.num_rows + 1  # the old row of the changed article is gone
    titles = dict(zip(current["source_key"].to_pylist(), current["title"].to_pylist(), strict=True))
    assert titles[folder.name].startswith("A revised study of")
    assert "PMC9000004.2" in titles and "PMC9000004.1" in titles
    # the full history still holds both versions of the changed article
    history = read_table(storage, ARTICLES)["source_key"].to_pylist()
    assert history.count(folder.name) == 2


def test_interrupted_part_is_removed_and_its_articles_redone(tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    write_corpus(corpus, 6, "folders", seed=6)
    run_ingest(settings_for(corpus, out), progress=False)
    storage = LocalStorage(out)
    before = current_articles(storage)
    # a crash after writing a part but before its ledger segment: the part is an orphan
    write_parquet(storage, f"{ARTICLES}/crashed-00000.parquet", before.slice(0, 2))
    assert read_table(storage, ARTICLES).num_rows == before.num_rows  # readers ignore it
    report = run_ingest(settings_for(corpus, out), progress=False)
    assert report.orphans_removed == [f"{ARTICLES}/crashed-00000.parquet"]
    assert not storage.exists(f"{ARTICLES}/crashed-00000.parquet")
    assert current_articles(storage).equals(before)


def test_permanent_failures_wait_for_retry_failed(tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    write_corpus(corpus, 4, "folders", seed=7)
    broken = sorted(corpus.glob("PMC*"))[0]
    next(broken.glob("*.xml")).write_bytes(b"<article><broken")
    first = run_ingest(settings_for(corpus, out), progress=False)
    assert first.failures_by_type == {"parse/xml_syntax": 1}
    again = run_ingest(settings_for(corpus, out), progress=False)
    assert again.processed == 0  # same bytes, same failure: not worth a retry
    retried = run_ingest(settings_for(corpus, out, retry_failed=True), progress=False)
    assert retried.processed == 1 and retried.failed == 1


def test_compaction_keeps_every_committed_part(tmp_path: Path) -> None:
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    write_corpus(corpus, 10, "folders", seed=8)
    settings = settings_for(corpus, out)
    settings.output.articles_per_part = 1
    run_ingest(settings, progress=False)
    storage = LocalStorage(out)
    before = current_articles(storage)
    ledger = Ledger.load(storage)
    assert ledger.compact(min_segments=3)
    assert len(list(storage.list("_ledger"))) == 1
    reloaded = Ledger.load(storage)
    assert reloaded.entries == ledger.entries
    assert current_articles(storage).equals(before)
    assert run_ingest(settings, progress=False).processed == 0


def test_planning_rules_in_columns(tmp_path: Path) -> None:
    """Each rule of what a run must redo, on a constructed ledger and listing: a new version,
    changed content, a retryable failure (a permanent one only with retry_failed), an
    unversioned article; unchanged ones are left alone, and the plan is sorted."""
    from ray_jobs.contract.refs import ArticleRef
    from ray_jobs.pmc.ledger import LedgerEntry, ref_batches, table_refs

    storage = LocalStorage(tmp_path / "out")
    ledger = Ledger.load(storage)

    def entry(pmcid, version, etag, status="ok", retryable=False, part="p0", time="t0"):
        return LedgerEntry(pmcid, version, etag, status, retryable, part, time)

    ledger.commit(
        "p0",
        [
            entry("PMC1", 1, "a"),
            entry("PMC2", 1, "b"),
            entry("PMC3", 1, "c", "failed", True),
            entry("PMC4", 1, "d", "failed", False),
            entry("PMC5", None, "e"),
            entry("PMC6", None, "f"),
        ],
    )
    ledger.commit("p1", [entry("PMC2", 1, "b2", part="p1", time="t1")])  # redone since
    ledger = Ledger.load(storage)  # as a new run sees it
    assert len(ledger) == 6 and ledger.committed_parts() == {"p0", "p1"}

    def ref(pmcid, version, etag):
        return ArticleRef(pmcid, version, etag, "local", f"/corpus/{pmcid}")

    listing = [
        ref("PMC9", 1, "z"),  # new article
        ref("PMC1", 2, "a"),  # new version
        ref("PMC1", 1, "a"),  # unchanged
        ref("PMC2", 1, "b2"),  # unchanged since its latest entry
        ref("PMC3", 1, "c"),  # failed, retryable
        ref("PMC4", 1, "d"),  # failed for good
        ref("PMC5", None, "e"),  # unchanged, no version
        ref("PMC6", None, "f2"),  # changed, no version
    ]
    plan, listed = ledger.pending_table(ref_batches(listing, size=3))
    assert listed == 8
    assert [r.key for r in table_refs(plan)] == ["PMC1.2", "PMC3.1", "PMC6", "PMC9.1"]
    again, _ = ledger.pending_table(ref_batches(listing, size=3), retry_failed=True)
    assert [r.key for r in table_refs(again)] == ["PMC1.2", "PMC3.1", "PMC4.1", "PMC6", "PMC9.1"]
    assert table_refs(plan)[0] == listing[1]  # every field of the ref survives the plan
