"""A circuit breaker, so a dead server fails a job's requests at once instead of each one
waiting out its timeouts and retries.

Closed: calls go through, and consecutive server faults (5xx, timeouts, refused or dropped
connections) are counted; any other answer, a 4xx included, shows the server is up and resets
the count. At ``threshold`` faults it opens: every call fails fast for ``reset_s``. Then it is
half-open: one probe goes through while the others still fail fast; the probe's success closes
it, its failure opens it again.

Small and asyncio-only on purpose: the maintained breaker libraries on PyPI either wrap one
decorated function (a shared per-client breaker is what is needed here), or let every waiting
caller through at once when half-open, which on a recovering server is a thundering herd.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class CircuitOpenError(Exception):
    def __init__(self, retry_in: float):
        super().__init__(
            f"circuit open: the server failed repeatedly; next probe in {retry_in:.1f}s"
        )
        self.retry_in = retry_in


class CircuitBreaker:
    def __init__(self, threshold: int, reset_s: float, clock: Callable[[], float] = time.monotonic):
        self.threshold = threshold
        self.reset_s = reset_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._probing or self._clock() - self._opened_at >= self.reset_s:
            return "half_open"
        return "open"

    def before_call(self) -> None:
        """Raise CircuitOpenError unless this call may go to the server."""
        if self._opened_at is None:
            return
        waited = self._clock() - self._opened_at
        if waited < self.reset_s or self._probing:
            raise CircuitOpenError(max(self.reset_s - waited, 0.0))
        self._probing = True  # this caller is the probe

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def abandon(self) -> None:
        """A call that ended without an answer either way (cancelled): free the probe slot."""
        self._probing = False

    def record_failure(self) -> None:
        self._failures += 1
        if self._probing or self._failures >= self.threshold:
            self._opened_at = self._clock()
            self._probing = False
