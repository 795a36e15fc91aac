"""The few Ray Jobs REST calls a trigger needs, async and without importing Ray.

``ray.job_submission.JobSubmissionClient`` is synchronous (requests) and imports all of Ray; a
trigger runs in the triggerer's event loop next to many others, so it speaks the same REST API
(``/api/jobs/{id}``, ``/logs``, ``/stop``) through aiohttp instead.
"""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp

from operators.connections import RayEndpoint

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class RayJobsAPI:
    def __init__(self, endpoint: RayEndpoint, session: aiohttp.ClientSession):
        self.endpoint = endpoint
        self.session = session
        verify = endpoint.verify
        self._ssl: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        )

    async def _request(self, method: str, path: str) -> tuple[int, Any]:
        async with self.session.request(
            method, f"{self.endpoint.url}{path}", headers=self.endpoint.headers, ssl=self._ssl
        ) as resp:
            if resp.status == 404:
                return 404, None
            if resp.status >= 400:
                text = await resp.text()
                raise aiohttp.ClientResponseError(
                    resp.request_info, (), status=resp.status, message=text[:500]
                )
            return resp.status, await resp.json(content_type=None)

    async def info(self, submission_id: str) -> dict[str, Any] | None:
        """The job's details (``status``, ``message``, ``error_type``...), None if unknown."""
        return (await self._request("GET", f"/api/jobs/{submission_id}"))[1]

    async def logs(self, submission_id: str) -> str:
        body = (await self._request("GET", f"/api/jobs/{submission_id}/logs"))[1]
        return (body or {}).get("logs") or ""

    async def stop(self, submission_id: str) -> bool:
        body = (await self._request("POST", f"/api/jobs/{submission_id}/stop"))[1]
        return bool((body or {}).get("stopped"))


def new_lines(logs: str, shown: int, final: bool = False) -> tuple[list[str], int]:
    """The complete lines of ``logs`` past offset ``shown``, and the new offset: the logs
    endpoint returns the whole log each time, so a poller prints only what it has not yet.
    A trailing partial line waits for the next poll unless ``final``."""
    if len(logs) < shown:  # not the log we were reading (a restarted driver)
        shown = 0
    chunk = logs[shown:]
    if not final:
        chunk = chunk[: chunk.rfind("\n") + 1]
    return chunk.splitlines(), shown + len(chunk)
