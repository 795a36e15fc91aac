"""The one protocol every pipeline stage follows, so a stage is plain Python (no Ray) and the
pipeline is a list a reader can follow.

A stage declares its ``name`` (the metrics label, the actor's name and the config section of
its resources: ``pipeline.<name>`` holds CPUs, GPUs, batch size and pool size), the row
``status`` it works on, a ``setup`` run once per worker (a model, a client, a pool), and
``process_batch``: the rows of its status in a batch, each turned into the rows it becomes.
Rows of any other status pass by untouched (``rows.expand`` splices results back and splits
credit), which is what lets failures, drops and article markers travel through every stage.
``ray_adapter`` is the only code that turns a stage into Ray Data operators.
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from ray_jobs.config import PipelineSettings, Settings, StageResources
from ray_jobs.contract.rows import Row, decode


class Stage:
    """Base of the stages: override ``setup`` and ``process_batch``; ``rows_in`` only where a
    stage reads something other than pipeline rows (the plan)."""

    name: ClassVar[str]
    status: ClassVar[str]

    @classmethod
    def resources(cls, pipeline: PipelineSettings) -> StageResources:
        return getattr(pipeline, cls.name)

    def setup(self, settings: Settings) -> None:
        """Load what the stage needs once per worker."""

    def rows_in(self, table: pa.Table) -> list[Row]:
        return decode(table)

    def process_batch(self, rows: list[Row]) -> list[list[Row]]:
        """What each row (all of ``status``) becomes: zero, one or many rows."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``setup`` opened (a worker's actor is going away)."""
