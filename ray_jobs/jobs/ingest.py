"""Ingest job: list a source, skip what the ledger has, fetch and parse the rest into Parquet.

Output layout under ``output.uri``::

    articles/<part>.parquet   parsed articles (ARTICLE_SCHEMA)
    failures/<part>.parquet   one row per article that failed a stage (FAILURE_SCHEMA)
    _ledger/<part>.parquet    the commit record of each part (see ray_jobs.pmc.ledger)
    runs/<run id>.json        what the run did

Articles are fetched and parsed by a small thread pool (S3 reads wait on the network; lxml
releases the GIL while parsing), a part at a time, so memory stays bounded by one part.
This is the ingest front of the pipeline; the Ray Data job composes the same stage functions.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import islice

import pyarrow as pa
import pyarrow.compute as pc
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ray_jobs import __version__
from ray_jobs.config import Settings
from ray_jobs.contract.failures import FAILURE_SCHEMA, FailureRecord
from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.article_table import ARTICLE_SCHEMA, article_row, articles_table
from ray_jobs.pmc.fetch import RETRACTED, fetch_and_parse, ledger_entry
from ray_jobs.pmc.ledger import Ledger
from ray_jobs.pmc.sources import ArticleSource, open_source
from ray_jobs.storage.lease import OutputLease
from ray_jobs.storage.parquet import read_parquet, write_parquet
from ray_jobs.storage.store import Storage, open_storage

log = logging.getLogger(__name__)

ARTICLES = "articles"
FAILURES = "failures"
RUNS = "runs"


@dataclass
class IngestReport:
    run_id: str
    output: str
    config_hash: str
    code_version: str = __version__
    listed: int = 0
    unchanged: int = 0
    processed: int = 0
    articles: int = 0
    figures: int = 0
    failed: int = 0
    skipped: int = 0
    failures_by_type: dict[str, int] = field(default_factory=dict)
    parts: list[str] = field(default_factory=list)
    orphans_removed: list[str] = field(default_factory=list)
    started: str = ""
    finished: str = ""


@dataclass(slots=True)
class _Outcome:
    ref: ArticleRef
    row: dict[str, object] | None = None
    failure: FailureRecord | None = None


def _process(source: ArticleSource, ref: ArticleRef, settings: Settings) -> _Outcome:
    got = fetch_and_parse(source, ref, settings.archive.max_xml_bytes)
    if isinstance(got, FailureRecord):
        return _Outcome(ref, failure=got)
    return _Outcome(ref, row=article_row(ref, got[1], __version__))


def _chunks(items: Iterable[ArticleRef], size: int) -> Iterator[list[ArticleRef]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
        transient=False,
    )


def _write_part(
    storage: Storage, ledger: Ledger, part: str, outcomes: list[_Outcome], report: IngestReport
) -> None:
    """Articles and failures first, the ledger segment last: the segment commits the part."""
    rows = [o.row for o in outcomes if o.row is not None]
    failures = [o.failure for o in outcomes if o.failure is not None]
    if rows:
        write_parquet(storage, f"{ARTICLES}/{part}.parquet", articles_table(rows))
    if failures:
        table = pa.Table.from_pylist([f.to_row() for f in failures], schema=FAILURE_SCHEMA)
        write_parquet(storage, f"{FAILURES}/{part}.parquet", table)
    entries = [
        ledger_entry(o.ref, part)
        if o.failure is None
        else ledger_entry(o.ref, part, o.failure.error_type, o.failure.retryable)
        for o in outcomes
    ]
    ledger.commit(part, entries)
    report.parts.append(part)
    report.articles += len(rows)
    report.figures += sum(int(r["n_figures"]) for r in rows)  # type: ignore[call-overload]
    for f in failures:
        if f.error_type == RETRACTED:
            report.skipped += 1
        else:
            report.failed += 1
        name = f"{f.stage}/{f.error_type}"
        report.failures_by_type[name] = report.failures_by_type.get(name, 0) + 1


def run_ingest(settings: Settings, *, progress: bool = True) -> IngestReport:
    storage = open_storage(settings.output.uri, settings.output.s3)
    source = open_source(settings.source, settings.archive)
    now = dt.datetime.now(dt.UTC)
    run_id = now.strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:6]
    report = IngestReport(
        run_id=run_id,
        output=storage.uri,
        config_hash=settings.fingerprint(),
        started=now.isoformat(timespec="seconds"),
    )
    if storage.exists("manifest.json"):
        raise SystemExit(
            f"{storage.uri} holds a dataset built by `pmcvl run`; the two jobs keep separate "
            "ledgers, so give the ingest its own output.uri"
        )
    with OutputLease(storage, run_id, settings.output.lease_ttl_s) as lease:
        return _ingest(settings, storage, source, report, lease, progress)


def _ingest(
    settings: Settings,
    storage: Storage,
    source: ArticleSource,
    report: IngestReport,
    lease: OutputLease,
    progress: bool,
) -> IngestReport:
    """The run, holding the output's lease (see :mod:`ray_jobs.storage.lease`)."""
    run_id = report.run_id
    ledger = Ledger.load(storage)
    report.orphans_removed = ledger.remove_orphans((ARTICLES, FAILURES))
    log.info("ledger at %s knows %d article versions", storage.uri, len(ledger))

    log.info("listing %s source", source.name)
    pending, report.listed = ledger.pending(
        source.refs(), retry_failed=settings.ingest.retry_failed
    )
    report.unchanged = report.listed - len(pending)
    if not pending:
        log.info(
            "nothing to do: all %d listed articles are unchanged since the last run", report.listed
        )
    else:
        log.info("%d of %d articles are new or changed", len(pending), report.listed)

    per_part = settings.output.articles_per_part
    with (
        ThreadPoolExecutor(settings.ingest.workers, thread_name_prefix="ingest") as pool,
        _progress(progress and bool(pending)) as bar,
    ):
        task = bar.add_task("fetch + parse", total=len(pending))
        for index, chunk in enumerate(_chunks(pending, per_part)):
            outcomes = []
            for outcome in pool.map(lambda r: _process(source, r, settings), chunk):
                outcomes.append(outcome)
                bar.advance(task)
            lease.check()
            _write_part(storage, ledger, f"{run_id}-{index:05d}", outcomes, report)
            report.processed += len(chunk)

    ledger.compact()
    report.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    storage.write_bytes(f"{RUNS}/{run_id}.json", json.dumps(asdict(report), indent=2).encode())
    log.info(
        "run %s: %d listed, %d unchanged, %d parsed (%d figures), %d failed, %d skipped",
        run_id,
        report.listed,
        report.unchanged,
        report.articles,
        report.figures,
        report.failed,
        report.skipped,
    )
    return report


def _committed_parts(
    storage: Storage, prefix: str, ledger: Ledger
) -> Iterator[tuple[str, pa.Table]]:
    committed = ledger.committed_parts()
    for key in sorted(storage.list(prefix)):
        part = key.rsplit("/", 1)[-1].removesuffix(".parquet")
        if key.endswith(".parquet") and part in committed:
            yield part, read_parquet(storage, key)


def read_table(storage: Storage, prefix: str) -> pa.Table:
    """All committed parts under ``prefix`` as one table, history included."""
    tables = [t for _, t in _committed_parts(storage, prefix, Ledger.load(storage))]
    schema = FAILURE_SCHEMA if prefix == FAILURES else ARTICLE_SCHEMA
    return pa.concat_tables(tables) if tables else schema.empty_table()


def current_articles(storage: Storage) -> pa.Table:
    """The articles table as of the latest ledger entry of each article version."""
    ledger = Ledger.load(storage)
    ok = ledger.latest.filter(pc.equal(ledger.latest["status"], "ok"))
    # source_key (PMC1.2, or PMC1 unversioned) and part, as one string per entry: columns,
    # not a Python object per article
    version = pc.binary_join_element_wise(".", pc.cast(ok["version"], pa.string()), "")
    key = pc.binary_join_element_wise(ok["pmcid"], pc.fill_null(version, ""), "")
    current = pc.binary_join_element_wise(key, ok["part"], "\0")
    tables = []
    for part, table in _committed_parts(storage, ARTICLES, ledger):
        mine = pc.binary_join_element_wise(table["source_key"], pa.scalar(part), "\0")
        kept = table.filter(pc.is_in(mine, current))
        if kept.num_rows:
            tables.append(kept)
    return pa.concat_tables(tables) if tables else ARTICLE_SCHEMA.empty_table()


def failure_counts(storage: Storage) -> Counter[str]:
    table = read_table(storage, FAILURES)
    pairs = zip(table["stage"].to_pylist(), table["error_type"].to_pylist(), strict=True)
    return Counter(f"{stage}/{kind}" for stage, kind in pairs)
