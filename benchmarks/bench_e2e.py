"""The build end to end at N and 10N articles: does the driver's cost grow with the data?

Generated articles (``pmcvl sample-corpus``'s generator) through ``run_build`` on a local Ray
instance, one fresh process per size. Prints wall seconds, the driver's CPU seconds (its own
process: planning, commits, Ray's client threads) and peak RSS, kept panels, and the driver's
CPU milliseconds per kept panel: with workers doing all the writing it should stay near
zero, and not grow from N to 10N. Beside it, the CPU of every process the driver started (the
Ray head, its workers and their children; read before shutdown) per panel: the work itself.

    make bench-scale
    python benchmarks/bench_e2e.py --sizes 4 40
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cluster_cpu_seconds() -> float:
    """User and system CPU of every live descendant of this process (Ray's head and workers)."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def child(n: int) -> dict:
    import ray

    from ray_jobs.config import load_settings
    from ray_jobs.jobs.build_dataset import run_build
    from ray_jobs.pmc.sample_corpus import write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_corpus(root / "corpus", n, "folders", seed=5)
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
        settings = load_settings(
            environ={},
            source={"kind": "local", "path": str(root / "corpus")},
            output={"uri": str(root / "out"), "articles_per_part": max(1, n // 4)},
        )
        cpu, start = cpu_seconds(), time.perf_counter()
        report = run_build(settings)
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        cluster = cluster_cpu_seconds()
        ray.shutdown()
    kept = report.counts.get("kept", 0)
    return {
        "articles": report.counts.get("articles", 0),
        "kept": kept,
        "wall_s": wall,
        "driver_cpu_s": cpu,
        "driver_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "driver_ms_per_panel": 1000 * cpu / max(1, kept),
        "cluster_ms_per_panel": 1000 * cluster / max(1, kept),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 40])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    rows = []
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--child", str(n)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print("\nbuild end to end (local Ray, 2 CPUs, no enrichment)")
    print(
        f"{'articles':>9} {'kept':>6} {'wall s':>8} {'driver CPU s':>13} {'driver MB':>10} "
        f"{'driver ms/panel':>16} {'Ray ms/panel':>13}"
    )
    for r in rows:
        print(
            f"{r['articles']:>9} {r['kept']:>6} {r['wall_s']:>8.1f} {r['driver_cpu_s']:>13.2f} "
            f"{r['driver_mb']:>10.0f} {r['driver_ms_per_panel']:>16.1f} "
            f"{r['cluster_ms_per_panel']:>13.1f}"
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        per_panel = last["driver_ms_per_panel"] / first["driver_ms_per_panel"]
        print(
            f"largest/smallest: articles {last['articles'] / max(1, first['articles']):.1f}x, "
            f"driver CPU per panel {per_panel:.2f}x, "
            f"driver RSS {last['driver_mb'] / first['driver_mb']:.2f}x"
        )


if __name__ == "__main__":
    main()
