"""Dedup at whole-dataset size, hashes only: synthetic index rows at 1M, 3M and 10M panels
(half published, half new; 4% exact copies, 4% near copies, some of them chains), through the
build's own distributed step (``ray_jobs.dedup.shuffle.find_duplicates`` on a local Ray).

Each size runs in a fresh process with its own Ray instance, so the peaks are its own: the
driver's peak RSS, and the largest private memory (USS) of any Ray worker process, sampled every
0.2 s (its RSS is printed too: it also counts the shared object-store pages it touched).
Memory per process must stay flat as the dataset grows. The reference is the same verdicts
computed in one process (``groups.verdicts_in_one``: every hash row in one table, as a single
dedup actor would hold them), run at the sizes it can take here.

    make bench-scale                        # with the planning and end-to-end benchmarks
    python benchmarks/bench_dedup.py --sizes 100000 300000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FILE_ROWS = 100_000


def hash_rows(n: int, seed: int = 0) -> pa.Table:
    """``n`` panels of ``n / 4`` articles; every 25th panel copies an earlier one exactly, and
    every 25th (offset) is a near copy (1 to 3 bits) of an earlier one."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    keys = pa.array([f"PMC{i // 4:08d}v1-F1-p{i % 4:02d}" for i in range(n)])
    sha = rng.integers(0, 2**63, size=(n, 4), dtype=np.int64)
    ph = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
    exact = idx[(idx % 25 == 7) & (idx > 100)]
    near = idx[(idx % 25 == 19) & (idx > 100)]
    src_e = rng.integers(0, exact, dtype=np.int64)
    sha[exact], ph[exact] = sha[src_e], ph[src_e]
    src_n = rng.integers(0, near, dtype=np.int64)
    flips = np.zeros(len(near), np.uint64)
    for _ in range(3):
        flips ^= np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)
    ph[near] = ph[src_n] ^ flips
    sha_hex = [f"{a:016x}{b:016x}{c:016x}{d:016x}" for a, b, c, d in sha.astype(np.uint64)]
    return pa.table({"key": keys, "sha256": sha_hex, "phash": [f"{int(h):016x}" for h in ph]})


def write_inputs(root: Path, n: int) -> list:  # run in its own process: see ``child``
    """The first half as published index files, the second half as staged fragments."""
    from ray_jobs.dedup.shuffle import HashSource
    from ray_jobs.storage.parquet import write_parquet
    from ray_jobs.storage.store import LocalStorage

    storage = LocalStorage(root)
    table = hash_rows(n)
    sources = []
    half = n // 2
    for lo, hi, published in ((0, half, True), (half, n, False)):
        for start in range(lo, hi, FILE_ROWS):
            chunk = table.slice(start, min(FILE_ROWS, hi - start))
            if published:
                path = f"index/{start:09d}.parquet"
            else:
                part = f"{start // FILE_ROWS:06d}"
                chunk = chunk.append_column("part", pa.array([part] * chunk.num_rows))
                chunk = chunk.append_column("status", pa.array(["ok"] * chunk.num_rows))
                path = f"staging/{part}/stage-{start:09d}.parquet"
            write_parquet(storage, path, chunk)
            sources.append(HashSource(path, published, chunk.num_rows))
    return sources


class WorkerPeak:
    """The largest memory of any Ray worker process seen while running: its private memory
    (USS), and its RSS, which also counts the pages of Ray's shared object store the worker
    has touched (shared with every other process, and growing with what passed through it)."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.peak = 0
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in self.psutil.process_iter(["cmdline"]):
                cmd = proc.info["cmdline"] or []
                if not (cmd and cmd[0].startswith("ray::")):
                    continue
                try:
                    memory = proc.memory_full_info()
                except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                    continue
                self.peak = max(self.peak, memory.uss)
                self.peak_rss = max(self.peak_rss, memory.rss)
            time.sleep(0.2)

    def __enter__(self) -> WorkerPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_distributed(root: Path, n: int, rows_per_bucket: int) -> dict:
    import ray

    from ray_jobs.config import OutputSettings
    from ray_jobs.dedup.shuffle import HashSource, find_duplicates

    listing = json.loads((root / "sources.json").read_text())
    sources = [HashSource(**s) for s in listing]
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with WorkerPeak() as workers:
        start = time.perf_counter()
        verdicts = find_duplicates(
            OutputSettings(uri=str(root)), sources, bits=3, rows_per_bucket=rows_per_bucket
        )
        seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ray.shutdown()
    return {
        "seconds": seconds,
        "driver_mb": peak / 1024,
        "driver_before_mb": base / 1024,
        "worker_mb": workers.peak / 2**20,
        "worker_rss_mb": workers.peak_rss / 2**20,
        "dropped": verdicts.dropped,
        "buckets": len(verdicts.buckets),
        "rounds": verdicts.rounds,
    }


def run_reference(n: int) -> dict:
    from ray_jobs.dedup import groups

    table = hash_rows(n)
    half = n // 2
    published = pa.array([i < half for i in range(n)])
    parts = pa.array([None if i < half else f"{i // FILE_ROWS:06d}" for i in range(n)], pa.string())
    table = table.append_column("part", parts).append_column("published", published)
    start = time.perf_counter()
    found = groups.verdicts_in_one(table.select(groups.HASH_SCHEMA.names), 3)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "driver_mb": peak / 1024, "dropped": found.num_rows}


def child(kind: str, n: int, rows_per_bucket: int, root: Path | None) -> None:
    """One measurement in a fresh process; ``write`` makes the inputs in a process of its own,
    so their making does not count in the driver's peak."""
    if kind == "write":
        sources = write_inputs(root, n)
        (root / "sources.json").write_text(json.dumps([vars(s) for s in sources]))
        result = {}
    elif kind == "ours":
        result = run_distributed(root, n, rows_per_bucket)
    else:
        result = run_reference(n)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    parser.add_argument("--reference-max", type=int, default=3_000_000)
    parser.add_argument("--rows-per-bucket", type=int, default=500_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.rows_per_bucket, args.root)
        return
    rows = []

    def run(kind: str, n: int, root: str) -> dict:
        cmd = [sys.executable, __file__, "--child", kind, str(n), "--root", root]
        cmd += ["--rows-per-bucket", str(args.rows_per_bucket)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run("write", n, tmp)
            rows.append((n, "ours", run("ours", n, tmp)))
        print(n, "ours", rows[-1][2], file=sys.stderr, flush=True)
        if n <= args.reference_max:
            rows.append((n, "reference", run("reference", n, ".")))
            print(n, "reference", rows[-1][2], file=sys.stderr, flush=True)
    print(f"\ndedup over hash rows (half published), rows per bucket {args.rows_per_bucket}")
    print(
        f"{'panels':>11} {'dedup':>10} {'s':>8} {'driver MB':>10} {'worker MB':>10} "
        f"{'worker RSS':>11} {'dropped':>9} {'buckets':>8}"
    )
    for n, kind, r in rows:
        print(
            f"{n:>11,} {kind:>10} {r['seconds']:>8.1f} {r['driver_mb']:>10.0f} "
            f"{r.get('worker_mb', 0):>10.0f} {r.get('worker_rss_mb', 0):>11.0f} "
            f"{r['dropped']:>9,} {r.get('buckets', 1):>8}"
        )
    ours = [r for _, k, r in rows if k == "ours"]
    if len(ours) > 1:
        for name in ("driver_mb", "worker_mb"):
            print(f"{name}: largest / smallest size = {ours[-1][name] / ours[0][name]:.2f}")
    for n, kind, r in rows:
        ref = next((x for m, k, x in rows if m == n and k == "reference"), None)
        if kind == "ours" and ref:
            largest = max(r["driver_mb"], r["worker_mb"]) / ref["driver_mb"]
            print(
                f"{n:,}: verdicts {'agree' if ref['dropped'] == r['dropped'] else 'DIFFER'}, "
                f"time ours/reference {r['seconds'] / ref['seconds']:.2f}, "
                f"largest process ours/reference {largest:.2f}"
            )


if __name__ == "__main__":
    main()
