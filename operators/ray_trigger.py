"""Waits for a Ray job in the triggerer, so a long build holds no worker slot.

It polls the job's status, prints the new lines of the job's log into the task's log as they
come, and fires one event when the job ends (or when the dashboard stays unreachable). Killing
the deferred task (mark failed / success, clear) stops the Ray job through ``on_kill``; a
triggerer restart does not, it only re-creates the trigger, which starts polling again.

The task's ``execution_timeout`` is enforced here, as a ``deadline``: Airflow's own deferral
timeout would fail the task without calling ``on_kill``, leaving the job running unowned, and
the next try would re-attach to it with a fresh timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from operators.connections import RAY_CONN_ID, aray_endpoint


class RayJobTrigger(BaseTrigger):
    def __init__(
        self,
        submission_id: str,
        ray_conn_id: str | None = RAY_CONN_ID,
        poll_interval: float = 10.0,
        stream_logs: bool = True,
        max_errors: int = 30,
        deadline: float | None = None,
    ):
        super().__init__()
        self.deadline = deadline  # epoch seconds: past it, the job is stopped
        self.submission_id = submission_id
        self.ray_conn_id = ray_conn_id
        self.poll_interval = poll_interval
        self.stream_logs = stream_logs
        self.max_errors = max_errors  # consecutive failed polls before giving up

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "submission_id": self.submission_id,
                "ray_conn_id": self.ray_conn_id,
                "poll_interval": self.poll_interval,
                "stream_logs": self.stream_logs,
                "max_errors": self.max_errors,
                "deadline": self.deadline,
            },
        )

    def _event(self, status: str, info: dict[str, Any] | None, message: str) -> TriggerEvent:
        info = info or {}
        return TriggerEvent(
            {
                "submission_id": self.submission_id,
                "status": status,
                "message": info.get("message") or message,
                "error_type": info.get("error_type"),
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        import aiohttp

        from operators.ray_rest import TERMINAL, RayJobsAPI, new_lines

        endpoint = await aray_endpoint(self.ray_conn_id)
        shown, errors = 0, 0
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            api = RayJobsAPI(endpoint, session)
            self.log.info("waiting for Ray job %s at %s", self.submission_id, endpoint.url)
            while True:
                try:
                    info = await api.info(self.submission_id)
                    status = (info or {}).get("status")
                    if self.stream_logs and info is not None:
                        lines, shown = new_lines(
                            await api.logs(self.submission_id), shown, final=status in TERMINAL
                        )
                        for line in lines:
                            self.log.info("[ray] %s", line)
                    errors = 0
                except (aiohttp.ClientError, TimeoutError) as exc:
                    errors += 1
                    self.log.warning("polling Ray job %s failed: %r", self.submission_id, exc)
                    if errors >= self.max_errors:
                        message = f"Ray dashboard unreachable: {exc!r}"
                        yield self._event("UNREACHABLE", None, message)
                        return
                    await asyncio.sleep(self.poll_interval)
                    continue
                if info is None:
                    yield self._event("MISSING", None, "the Ray cluster does not know this job")
                    return
                if status in TERMINAL:
                    yield self._event(status, info, f"Ray job {status}")
                    return
                if self.deadline is not None and time.time() >= self.deadline:
                    stopped = await api.stop(self.submission_id)
                    message = f"execution_timeout reached; stop requested: {stopped}"
                    self.log.warning("Ray job %s: %s", self.submission_id, message)
                    yield self._event("TIMED_OUT", None, message)
                    return
                await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """The user killed the deferred task: stop the Ray job it was waiting for."""
        import aiohttp

        from operators.ray_rest import RayJobsAPI

        endpoint = await aray_endpoint(self.ray_conn_id)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            stopped = await RayJobsAPI(endpoint, session).stop(self.submission_id)
        self.log.info("stop requested for Ray job %s: %s", self.submission_id, stopped)
