"""The Ray cluster a run works on: connected to (or started locally), checked to place the
pipeline's minimum pools before any work, and Ray Data's execution options set from the
config."""

from __future__ import annotations

import os

from ray_jobs.config import Settings


def check_reachable(address: str, timeout_s: float) -> None:
    """A cluster address (``host:port`` or ``ray://host:port``) must answer within
    ``timeout_s``: ``ray.init`` would wait on a dead one with no message."""
    import socket
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise SystemExit(f"Ray address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise SystemExit(
            f"the Ray cluster at {address} does not answer ({exc}); set pipeline.ray_address "
            "or RAY_ADDRESS to a live one, or neither for a local Ray instance of this run"
        ) from exc


def connect_ray(settings: Settings) -> None:
    """The configured cluster (``pipeline.ray_address``, else ``RAY_ADDRESS``), checked to
    answer; else a local instance of the run's own, not whatever cluster Ray last recorded."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the cluster
    address = settings.pipeline.ray_address or os.environ.get("RAY_ADDRESS") or "local"
    check_reachable(address, settings.pipeline.ray_connect_timeout_s)
    ray.init(address=address, log_to_driver=True, configure_logging=False)


def preflight(settings: Settings, enrich: bool) -> None:
    """Refuse, before any work, a pipeline whose minimum pools the cluster cannot place."""
    import ray

    from ray_jobs.pipeline.preflight import check_cluster, nodes_from_ray, stage_asks

    check_cluster(
        stage_asks(settings.pipeline, enrich),
        nodes_from_ray(ray.nodes()),
        autoscaling=settings.pipeline.autoscaling,
    )


def pipeline_context(settings: Settings) -> None:
    import ray

    ctx = ray.data.DataContext.get_current()
    # order is not needed: each part is assembled from its staged rows, sorted by key
    ctx.execution_options.preserve_order = False
    p = settings.pipeline
    ctx.wait_for_min_actors_s = p.actor_start_timeout_s
    ctx.execution_no_progress_timeout_s = p.no_progress_timeout_s
