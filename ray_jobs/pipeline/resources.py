"""The one adapter from a stage's declared resources to Ray Data ``map_batches`` arguments.

Requests come from the config, never from probing the driver (which may have no GPU while the
workers do). Ray Data names each operator and its actors after the stage class
(``MapBatches(PanelStage)``), so the dashboard reads as the pipeline does.
"""

from __future__ import annotations

from typing import Any

from ray_jobs.config import StageResources


def map_batches_args(resources: StageResources) -> dict[str, Any]:
    from ray.data import ActorPoolStrategy

    size = resources.concurrency
    pool = (
        ActorPoolStrategy(size=size)
        if isinstance(size, int)
        else ActorPoolStrategy(min_size=size[0], max_size=size[1])
    )
    args: dict[str, Any] = {
        "batch_size": resources.batch_size,
        "batch_format": "pyarrow",
        "num_cpus": resources.num_cpus,
        "compute": pool,
    }
    if resources.num_gpus:
        args["num_gpus"] = resources.num_gpus
    return args
