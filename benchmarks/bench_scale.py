"""Planning at whole-PMC size: a synthetic listing of N article versions against a ledger of
0.857 N (7M against 6M at the top), through the build's own planning path (the listing as
``ArticleRef``s streamed into Arrow batches, anti-joined with the columnar ledger, then given
roles (build, stale, replace) and cut into parts).

Each size runs in a fresh process, so its peak RSS is its own. The reference is the previous
planner (a Python ``LedgerEntry`` per committed entry in a dict, a loop over the listing), run
on the same input at the sizes it can take here. Prints one table: seconds and peak RSS per
size and planner, and the ratio.

    make bench-scale                       # 1M, 3M, 7M (about 10 minutes here)
    python benchmarks/bench_scale.py --sizes 100000 300000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEGMENT_ROWS = 500_000  # a compacted ledger holds many parts' rows per file


def ledger_rows(start: int, stop: int) -> pa.Table:
    """Committed entries for PMC ids ``start..stop``: version 1, etag e<id>, mostly ok."""
    from ray_jobs.pmc.ledger import LEDGER_SCHEMA

    ids = pa.array(range(start, stop), pa.int64())
    text = pc.cast(ids, pa.string())
    n = stop - start
    failed = pc.equal(pc.bit_wise_and(ids, 63), 0)  # 1 in 64 failed, half of them retryable
    return pa.table(
        {
            "pmcid": pc.binary_join_element_wise("PMC", text, ""),
            "version": pa.array([1] * n, pa.int64()),
            "etag": pc.binary_join_element_wise("e", text, ""),
            "status": pc.if_else(failed, "failed", "ok"),
            "retryable": pc.and_(failed, pc.equal(pc.bit_wise_and(ids, 64), 0)),
            "part": pc.binary_join_element_wise(
                "run0-", pc.cast(pc.divide(ids, 500), pa.string()), ""
            ),
            "time": pa.array(["2026-01-01T00:00:00+00:00"] * n),
        },
        schema=LEDGER_SCHEMA,
    )


def write_ledger(root: Path, n: int) -> None:
    from ray_jobs.pmc.ledger import LEDGER_PREFIX
    from ray_jobs.storage.parquet import write_parquet
    from ray_jobs.storage.store import LocalStorage

    storage = LocalStorage(root)
    for start in range(0, n, SEGMENT_ROWS):
        stop = min(start + SEGMENT_ROWS, n)
        write_parquet(
            storage, f"{LEDGER_PREFIX}/compacted-{start:09d}.parquet", ledger_rows(start, stop)
        )


def listing(n: int):
    """N article versions: every ledger id (1 in 50 with new content) plus new ids; 1 in 20
    ids is also listed in a version 2, so the planner has versions to supersede."""
    from ray_jobs.contract.refs import ArticleRef

    count = 0
    for i in range(n):
        etag = f"e{i}" if i % 50 else f"e{i}-changed"
        yield ArticleRef(f"PMC{i}", 1, etag, "s3", f"PMC{i}.1/")
        count += 1
        if i % 20 == 0 and count < n:
            yield ArticleRef(f"PMC{i}", 2, f"e{i}.2", "s3", f"PMC{i}.2/")
            count += 1
        if count >= n:
            return


def plan_arrow(root: Path, n: int) -> dict:
    """The listing against the ledger, then the plan's roles and parts (not written)."""
    from ray_jobs.pipeline.plan import REPLACE, STALE, plan_rows
    from ray_jobs.pmc.ledger import Ledger, ref_batches
    from ray_jobs.storage.store import LocalStorage

    started = time.perf_counter()
    ledger = Ledger.load(LocalStorage(root))
    pending, listed = ledger.pending_table(ref_batches(listing(n)))
    names, rows = plan_rows(pending, ledger.latest, per_part=1000, next_seq=0)
    role = rows["role"]
    return {
        "seconds": time.perf_counter() - started,
        "listed": listed,
        "pending": pending.num_rows,
        "parts": len(names),
        "stale": pc.sum(pc.equal(role, STALE)).as_py(),
        "replaced": pc.sum(pc.equal(role, REPLACE)).as_py(),
    }


def plan_reference(root: Path, n: int) -> dict:
    """The planner before this change: a dict of objects, one per committed entry."""
    import pyarrow.parquet as pq

    from ray_jobs.pmc.ledger import LedgerEntry

    started = time.perf_counter()
    entries = {}
    for path in sorted((root / "_ledger").glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            entry = LedgerEntry(**row)
            entries[(entry.pmcid, entry.version)] = entry
    todo, listed = [], 0
    for ref in listing(n):
        listed += 1
        e = entries.get((ref.pmcid, ref.version))
        if e is None or e.etag != ref.etag or (e.status == "failed" and e.retryable):
            todo.append(ref)
    todo.sort(key=lambda r: (r.pmcid, r.version or 0))
    return {"seconds": time.perf_counter() - started, "listed": listed, "pending": len(todo)}


def child(mode: str, root: str, n: int) -> None:
    result = (plan_arrow if mode == "arrow" else plan_reference)(Path(root), n)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run(mode: str, root: Path, n: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(root), str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 3_000_000, 7_000_000])
    parser.add_argument("--reference-max", type=int, default=3_000_000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="pmcvl-scale-") as tmp:
            ledger_n = int(n * 6 / 7)
            write_ledger(Path(tmp), ledger_n)
            new = run("arrow", Path(tmp), n)
            ref = run("reference", Path(tmp), n) if n <= args.reference_max else None
            if ref is not None:
                assert (ref["listed"], ref["pending"]) == (new["listed"], new["pending"])
            rows.append((n, ledger_n, new, ref))
    print(
        f"{'listed':>10} {'ledger':>10} {'pending':>9} {'stale':>7} {'replaced':>8} {'parts':>6} | "
        f"{'arrow s':>8} {'RSS MB':>7} | "
        f"{'ref s':>7} {'RSS MB':>7} | {'RSS ref/arrow':>13}"
    )
    for n, ledger_n, new, ref in rows:
        ref_s = f"{ref['seconds']:7.1f} {ref['peak_rss_mb']:7.0f}" if ref else f"{'-':>7} {'-':>7}"
        ratio = f"{ref['peak_rss_mb'] / new['peak_rss_mb']:13.2f}" if ref else f"{'-':>13}"
        print(
            f"{n:>10,} {ledger_n:>10,} {new['pending']:>9,} {new['stale']:>7,} "
            f"{new['replaced']:>8,} {new['parts']:>6,} | {new['seconds']:8.1f} "
            f"{new['peak_rss_mb']:7.0f} | {ref_s} | {ratio}"
        )


if __name__ == "__main__":
    main()
