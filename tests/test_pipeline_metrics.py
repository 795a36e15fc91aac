"""Stage counters reach Prometheus: a Ray task counts rows through ``ray_jobs.pipeline.metrics``
and the node's metrics endpoint serves them (a separate local Ray instance, in a subprocess)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import socket, time, urllib.request
import ray

sock = socket.socket(); sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]; sock.close()
ray.init(num_cpus=1, include_dashboard=False, _metrics_export_port=port,
         _system_config={"metrics_report_interval_ms": 500})

@ray.remote
def stage():
    from ray_jobs.pipeline import metrics
    failure = {"stage": "detect", "error_type": "decode", "source_key": "k", "message": "m",
               "retryable": False, "time": ""}
    metrics.observe("panels", [
        {"status": "ok", "record": {}},
        {"status": "ok", "record": {}},
        {"status": "dropped", "record": {"drop_reason": "too_small"}},
        {"status": "failed", "record": {"failure": failure}},
    ])

ray.get(stage.remote())
for _ in range(60):
    time.sleep(1)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    lines = [l for l in text.splitlines() if l.startswith("ray_pmcvl_")]
    if len(lines) >= 4:
        print("\n".join(lines))
        break
ray.shutdown()
"""


def test_stage_counters_are_exported_to_prometheus(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=240,
        env={"RAY_USAGE_STATS_ENABLED": "0", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    lines = result.stdout.splitlines()
    assert any(
        'status="ok"' in x and 'stage="panels"' in x and x.endswith(" 2.0") for x in lines
    ), result.stdout + result.stderr[-2000:]
    assert any('reason="too_small"' in x and x.endswith(" 1.0") for x in lines)
    assert any(
        x.startswith("ray_pmcvl_failures_total") and 'error_type="decode"' in x for x in lines
    )
