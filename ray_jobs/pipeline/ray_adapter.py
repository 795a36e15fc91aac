"""The one adapter from stages to Ray Data: each ``stage.Stage`` becomes a ``map_batches``
operator whose actors load the stage once and run ``process_batch`` on Arrow batches.

Requests come from the config (``pipeline.<stage name>``), never from probing the driver
(which may have no GPU while the workers do). The actor class takes the stage's class name,
so Ray Data names the operator and its actors ``MapBatches(PanelStage)`` and the dashboard
reads as the pipeline does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from ray_jobs.config import Settings, StageResources
from ray_jobs.contract.rows import encode, expand
from ray_jobs.pipeline import metrics
from ray_jobs.pipeline.stage import Stage


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


def actor_class(stage_cls: type[Stage]) -> type:
    """A callable class for ``map_batches`` that runs ``stage_cls`` on one actor."""

    class Actor:
        def __init__(self, settings: Settings):
            self.stage = stage_cls()
            self.stage.setup(settings)
            self.work = metrics.counted(stage_cls.name, self.stage.process_batch)

        def __call__(self, table: pa.Table) -> pa.Table:
            return encode(expand(self.stage.rows_in(table), stage_cls.status, self.work))

        def __del__(self) -> None:
            stage = getattr(self, "stage", None)
            if stage is not None:
                stage.close()

    Actor.__name__ = Actor.__qualname__ = stage_cls.__name__
    return Actor


def apply(ds: Any, stages: Iterable[type[Stage]], settings: Settings) -> Any:
    """``ds`` (a Ray Dataset) through ``stages`` in order."""
    for stage_cls in stages:
        ds = ds.map_batches(
            actor_class(stage_cls),
            fn_constructor_args=(settings,),
            **map_batches_args(stage_cls.resources(settings.pipeline)),
        )
    return ds
