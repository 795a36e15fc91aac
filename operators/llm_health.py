"""Waits until the OpenAI-compatible (vLLM) server is up and serves the expected model.

A build with caption enrichment on should not start on a cluster whose LLM server is still
loading weights (vLLM takes minutes) or serves another model. The sensor checks once in the
worker; if the server is not ready it defers to :class:`LLMHealthTrigger`, which polls
``/health`` and ``/v1/models`` in the triggerer until both are good or ``timeout`` passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout
from airflow.triggers.base import BaseTrigger, TriggerEvent

from operators.connections import LLM_CONN_ID, allm_endpoint, llm_endpoint


def _root(base_url: str) -> str:
    """``http://vllm:8000/v1`` and ``http://vllm:8000`` are the same server."""
    return base_url.rstrip("/").removesuffix("/v1")


async def check_llm(
    base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0
) -> tuple[bool, str]:
    """(ready, why): ``/health`` answers 200 (a server without one, 404, is judged by its
    model list alone) and ``/v1/models`` lists ``model``."""
    import aiohttp

    root = _root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout_s), headers=headers
        ) as session:
            async with session.get(f"{root}/health") as resp:
                if resp.status not in (200, 404):
                    return False, f"{root}/health answered HTTP {resp.status}"
            async with session.get(f"{root}/v1/models") as resp:
                if resp.status != 200:
                    return False, f"{root}/v1/models answered HTTP {resp.status}"
                body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return False, f"{root} is not reachable: {exc!r}"
    served = sorted(str(m.get("id")) for m in (body or {}).get("data") or [])
    if model not in served:
        return False, f"{model} is not served at {root} (served: {', '.join(served) or 'none'})"
    return True, f"{root} is healthy and serves {model}"


class LLMHealthTrigger(BaseTrigger):
    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        llm_conn_id: str | None = LLM_CONN_ID,
        poll_interval: float = 15.0,
        timeout: float = 1800.0,
    ):
        super().__init__()
        self.model = model
        self.base_url = base_url
        self.llm_conn_id = llm_conn_id
        self.poll_interval = poll_interval
        self.timeout = timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "model": self.model,
                "base_url": self.base_url,
                "llm_conn_id": self.llm_conn_id,
                "poll_interval": self.poll_interval,
                "timeout": self.timeout,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # the key is read here, in the triggerer, so it is never stored with the trigger
        endpoint = await allm_endpoint(self.llm_conn_id, self.base_url)
        deadline = time.monotonic() + self.timeout
        while True:
            ok, detail = await check_llm(endpoint.base_url or "", self.model, endpoint.api_key)
            if ok or time.monotonic() + self.poll_interval > deadline:
                yield TriggerEvent({"ok": ok, "detail": detail})
                return
            self.log.info("LLM server not ready: %s", detail)
            await asyncio.sleep(self.poll_interval)


class LLMHealthSensor(BaseSensorOperator):
    """Succeeds once the LLM server is healthy and lists ``model``.

    :param model: the model the build will ask for (``longcap.model``)
    :param base_url: the server; by default the ``pmcvl_llm`` connection's host, then
        ``PMCVL_LLM_BASE_URL``
    :param deferrable: wait in the triggerer (default) or poke from the worker
    """

    template_fields = ("model", "base_url")
    ui_color = "#e8f7e4"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        llm_conn_id: str | None = LLM_CONN_ID,
        deferrable: bool = True,
        poke_interval: float = 15.0,
        timeout: float = 1800.0,
        **kwargs: Any,
    ):
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.model = model
        self.base_url = base_url
        self.llm_conn_id = llm_conn_id
        self.deferrable = deferrable

    def _check(self) -> tuple[bool, str]:
        endpoint = llm_endpoint(self.llm_conn_id, self.base_url or None)
        if not endpoint.base_url:
            raise AirflowException(
                "no LLM server configured: set the pmcvl_llm connection, longcap.base_url "
                "or PMCVL_LLM_BASE_URL"
            )
        return asyncio.run(check_llm(endpoint.base_url, self.model, endpoint.api_key))

    def poke(self, context: Any) -> bool:
        ok, detail = self._check()
        self.log.info("%s", detail)
        return ok

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        ok, detail = self._check()
        self.log.info("%s", detail)
        if ok:
            return detail
        self.defer(
            trigger=LLMHealthTrigger(
                model=self.model,
                base_url=self.base_url or None,
                llm_conn_id=self.llm_conn_id,
                poll_interval=self.poke_interval,
                timeout=self.timeout,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + self.poke_interval + 60),
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> str:
        if not event.get("ok"):
            raise AirflowSensorTimeout(f"LLM server not ready: {event.get('detail')}")
        self.log.info("%s", event["detail"])
        return event["detail"]
