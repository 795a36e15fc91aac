"""One failure schema for every stage of the pipeline.

Stage functions raise :class:`StageError` (or let any exception escape); the runner turns it into
a :class:`FailureRecord` and goes on with the next record. ``retryable`` separates faults of the
world (a network error) from faults of the input (malformed XML), so the ledger knows which
articles are worth trying again on the next run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

import pyarrow as pa


class StageError(Exception):
    """An expected, explained failure of one record in one stage."""

    def __init__(self, stage: str, error_type: str, message: str, *, retryable: bool = False):
        super().__init__(f"[{stage}/{error_type}] {message}")
        self.stage = stage
        self.error_type = error_type
        self.message = message
        self.retryable = retryable


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class FailureRecord:
    source_key: str
    stage: str
    error_type: str
    message: str
    retryable: bool = False
    time: str = field(default_factory=_now)

    @classmethod
    def from_exception(cls, source_key: str, stage: str, exc: BaseException) -> FailureRecord:
        """A StageError keeps its own stage and type; anything else is named by its class."""
        if isinstance(exc, StageError):
            return cls(source_key, exc.stage, exc.error_type, exc.message, exc.retryable)
        return cls(source_key, stage, type(exc).__name__, str(exc) or repr(exc), False)

    def to_row(self) -> dict[str, object]:
        return asdict(self)


FAILURE_SCHEMA = pa.schema(
    [
        ("source_key", pa.string()),
        ("stage", pa.string()),
        ("error_type", pa.string()),
        ("message", pa.string()),
        ("retryable", pa.bool_()),
        ("time", pa.string()),
    ]
)
