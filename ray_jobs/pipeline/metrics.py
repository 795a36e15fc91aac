"""Pipeline counters through ``ray.util.metrics``: they show in the Ray dashboard and on the
Prometheus endpoint of every node. Outside a Ray worker (unit tests, plain Python) they are
silently off, so stage code never depends on Ray being there."""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable
from typing import Any

from ray_jobs.contract.rows import FAILED, Row

log = logging.getLogger(__name__)

_DEFS = {
    "pmcvl_rows_total": (
        "Rows produced by a pipeline stage, by status (figure, ok, dropped, failed, article) "
        "and reason",
        ("stage", "status", "reason"),
    ),
    "pmcvl_failures_total": ("Failure rows by stage and error type", ("stage", "error_type")),
    "pmcvl_llm_tokens_total": ("LLM tokens spent on enrichment", ("kind",)),
}
_counters: dict[str, Any] = {}


def _counter(name: str) -> Any | None:
    if name not in _counters:
        try:
            import ray
            from ray.util.metrics import Counter

            if not ray.is_initialized():
                return None
            description, tags = _DEFS[name]
            _counters[name] = Counter(name, description=description, tag_keys=tags)
        except Exception:  # metrics are an aid; never a reason to fail a batch
            log.debug("metrics unavailable", exc_info=True)
            return None
    return _counters[name]


def inc(name: str, value: float, tags: dict[str, str]) -> None:
    counter = _counter(name)
    if counter is not None and value:
        counter.inc(value, tags=tags)


def observe(stage: str, rows: list[Row]) -> None:
    """Count what a stage's work produced."""
    tally: Tally[tuple[str, str]] = Tally()
    for row in rows:
        rec = row["record"]
        reason = rec.get("drop_reason") or ""
        tally[(row["status"], reason)] += 1
        if row["status"] == FAILED:
            failure = rec["failure"]
            inc(
                "pmcvl_failures_total",
                1,
                {"stage": failure["stage"], "error_type": failure["error_type"]},
            )
    for (status, reason), n in tally.items():
        inc("pmcvl_rows_total", n, {"stage": stage, "status": status, "reason": reason})


def counted(
    stage: str, work: Callable[[list[Row]], list[list[Row]]]
) -> Callable[[list[Row]], list[list[Row]]]:
    """``work`` that also counts what each input row became, by stage."""

    def run(todo: list[Row]) -> list[list[Row]]:
        results = work(todo)
        observe(stage, [row for rows in results for row in rows])
        return results

    return run
