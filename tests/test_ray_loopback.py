"""The test Ray cluster (started like the demo's) keeps what our flags control on loopback.

Ray 2.60 still binds its core servers to every interface whatever ``--node-ip-address`` says
(README, "What listens where"); the dashboard and its job API, which take commands, are
ours to place, and must stay on 127.0.0.1.
"""

from __future__ import annotations

import psutil


def test_the_dashboard_and_job_api_listen_on_loopback_only(ray_cluster) -> None:
    _, dashboard = ray_cluster
    port = int(dashboard.rsplit(":", 1)[1])
    listeners = {
        c.laddr.ip
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }
    assert listeners == {"127.0.0.1"}, listeners
