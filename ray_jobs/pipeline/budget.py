"""Work seconds per article (``pipeline.max_seconds_per_article``), where content sets the cost.

The fetch stage times an article's fetch, parse and explode; what is left of the budget rides
on each of its figure rows (``rows.BUDGET_LEFT``), and the panel stage charges each figure its
share of the detector batch plus its own pairing and crops. Later stages cost the same for any
panel (a fixed-size classifier input; LLM calls bounded by the client's timeouts and retries),
so the budget stops there. The checks fall between steps: the stages run in thread pools,
which Python cannot preempt, and each step is itself bounded by the size caps.
"""

from __future__ import annotations

from ray_jobs.contract.failures import FailureRecord

ERROR = "time_budget"


def overrun(key: str, stage: str, spent: float, left: float, what: str) -> FailureRecord | None:
    """The failure row when ``spent`` seconds went past the ``left`` ones, else None."""
    if spent <= left:
        return None
    message = (
        f"{what} took {spent:.3g}s of the {max(left, 0):.3g}s the article had left "
        "(pipeline.max_seconds_per_article)"
    )
    return FailureRecord(key, stage, ERROR, message)
