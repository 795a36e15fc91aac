"""An asyncio client for an OpenAI-compatible chat server (vLLM), built for batch jobs.

aiohttp does the HTTP and tenacity the retries; this module adds what a job needs on top: a
bounded number of requests in flight, exponential backoff with jitter on 429 / 5xx / timeouts
/ connection errors (a 429's Retry-After is honoured, capped), a circuit breaker shared by all
requests so a dead server fails fast, JSON-schema constrained answers (``response_format`` of
type ``json_schema``, which vLLM enforces by guided decoding) validated again on arrival, and
every failure raised as a typed :class:`LLMError` that the caller turns into a failure record.

Why aiohttp rather than httpx (or openai's client, built on httpx): httpcore's connection pool
scans every connection on every request event, so client CPU per request grows with the number
in flight; measured with ``benchmarks/bench_llm.py`` at 64 in flight, 34 ms of CPU per request
and 10% of the C/L bound, against about one millisecond with aiohttp. Answers are validated
with fastjsonschema (the schema compiled once to Python): 12 µs a feasibility answer, against
200 µs with jsonschema, a fifth of the client's whole CPU per request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import fastjsonschema
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity import wait_exponential_jitter as _expo

from ray_jobs.config import LLM_API_KEY_ENV, LLM_BASE_URL_ENV, LongCapSettings
from ray_jobs.contract.failures import StageError
from ray_jobs.longcap.breaker import CircuitBreaker, CircuitOpenError
from ray_jobs.longcap.cache import CachedAnswer, LLMCache, cache_key

STAGE = "enrich"
Validator = Callable[[Any], Any]  # raises fastjsonschema.JsonSchemaValueException
BASE_URL_ENV, API_KEY_ENV = LLM_BASE_URL_ENV, LLM_API_KEY_ENV


class LLMError(StageError):
    """One failed chat call; ``retry_now`` says whether another attempt may succeed."""

    def __init__(
        self,
        error_type: str,
        message: str,
        *,
        retry_now: bool = False,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(
            STAGE, error_type, message, retryable=retry_now if retryable is None else retryable
        )
        self.retry_now = retry_now
        self.retry_after = retry_after


def server_url(
    settings: LongCapSettings,
    environ: Mapping[str, str] | None = None,
    override: str | None = None,
) -> str:
    """The server's root URL: ``override``, the setting, else ``$PMCVL_LLM_BASE_URL``; a
    trailing ``/v1`` is stripped, so both spellings of a vLLM address work."""
    env = os.environ if environ is None else environ
    url = override or settings.base_url or env.get(BASE_URL_ENV)
    if not url:
        raise ValueError(f"no LLM server: set longcap.base_url or {BASE_URL_ENV}")
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def redact_url(url: str) -> str:
    """``https://user:secret@host:8000/v1?key=x`` → ``https://host:8000/v1``: what may be
    written down or logged about a server."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def api_key(settings: LongCapSettings, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if settings.api_key is not None:
        return settings.api_key.get_secret_value()
    return env.get(API_KEY_ENV) or "EMPTY"


@dataclass
class ChatAnswer:
    content: Any  # parsed JSON when a schema was given, else the text
    prompt_tokens: int
    completion_tokens: int
    model: str
    calls: int  # HTTP requests this answer took now, retries included (0: from the cache)


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@dataclass
class _Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _error_message(response: _Reply) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.body[:300].decode("utf-8", "replace") or f"HTTP {response.status}"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
    return str(data)[:300]


def _retry_after(response: _Reply) -> float | None:
    try:
        return max(float(response.headers.get("retry-after", "")), 0.0)
    except ValueError:
        return None  # absent, or an HTTP date: the exponential backoff decides


def _conforms(validator: Validator | None, content: Any) -> bool:
    try:
        if validator is not None:
            validator(content)
        return True
    except fastjsonschema.JsonSchemaValueException:
        return False


class LLMClient:
    """One client per Enricher (per Ray actor). Usable from any event loop: the HTTP
    connection pool and the concurrency bound belong to the loop that runs the calls."""

    def __init__(
        self,
        settings: LongCapSettings,
        *,
        cache: LLMCache | None = None,
        base_url: str | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings
        self.root = server_url(settings, environ, base_url)
        self.cache = cache
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_reset_s)
        self._headers = {"Authorization": f"Bearer {api_key(settings, environ)}"}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._validators: dict[str, Validator] = {}
        self._expo = _expo(
            multiplier=settings.backoff_base_s,
            max=settings.backoff_max_s,
            jitter=max(settings.backoff_base_s, 0.001),
        )
        self.requests = 0  # HTTP requests made, all kinds

    # -- connection state, per event loop ---------------------------------------------------

    def _bind(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._http is None or self._slots is None:
            s = self.settings
            self._http = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(
                    total=s.timeout_s, connect=min(s.connect_timeout_s, s.timeout_s)
                ),
                connector=aiohttp.TCPConnector(limit=s.max_concurrency),
            )
            self._slots = asyncio.Semaphore(s.max_concurrency)
            self._loop = loop
        return self._http, self._slots

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.close()
        self._http = self._slots = self._loop = None

    async def _request(self, method: str, path: str, payload: bytes | None = None) -> _Reply:
        """One HTTP exchange; network faults become ``timeout`` / ``connection`` LLMErrors."""
        http, _ = self._bind()
        self.requests += 1
        headers = {"Content-Type": "application/json"} if payload is not None else None
        try:
            async with http.request(
                method, f"{self.root}{path}", data=payload, headers=headers
            ) as response:
                return _Reply(response.status, response.headers, await response.read())
        except TimeoutError:  # aiohttp's timeouts are TimeoutErrors too
            message = f"no answer from {path} within {self.settings.timeout_s:g}s"
            raise LLMError("timeout", message, retry_now=True) from None
        except aiohttp.ClientError as exc:
            message = f"{type(exc).__name__}: {exc}"
            raise LLMError("connection", message, retry_now=True) from None

    # -- plain endpoints -----------------------------------------------------------------------

    async def health(self) -> int:
        """The status code of ``GET /health`` (vLLM: 200 when the engine is up)."""
        return (await self._request("GET", "/health")).status

    async def models(self) -> list[str]:
        response = await self._request("GET", "/v1/models")
        if response.status != 200:
            raise LLMError(f"http_{response.status}", _error_message(response))
        return [str(m["id"]) for m in response.json().get("data", [])]

    # -- chat ----------------------------------------------------------------------------------

    def _validator(self, schema: dict[str, Any]) -> Validator:
        """Compiled once per distinct schema; an invalid schema raises ValueError here."""
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            validator = self._validators[key] = fastjsonschema.compile(schema)
        return validator

    def _wait(self, state: RetryCallState) -> float:
        delay = self._expo(state)
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.settings.backoff_max_s))
        return delay

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        cache_tag: str | None = None,
    ) -> ChatAnswer:
        """One chat completion, retried on server faults; from the cache when ``cache_tag``
        (the prompt version) is given and the same request was answered before.

        Raises LLMError: ``rate_limited``, ``timeout``, ``connection``, ``http_<code>``,
        ``circuit_open``, ``malformed_json``, ``schema_violation``, ``bad_response``.
        """
        s = self.settings
        body: dict[str, Any] = {
            "model": model or s.model,
            "messages": messages,
            "max_tokens": max_tokens or s.max_tokens,
            "temperature": s.temperature,
        }
        validator = None
        if schema is not None:
            validator = self._validator(schema)
            body["response_format"] = response_format(schema_name, schema)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

        key = cache_key(cache_tag, payload) if self.cache and cache_tag else None
        if key is not None and self.cache is not None:
            hit = await self.cache.get(key)
            if hit is not None and _conforms(validator, hit.content):
                return ChatAnswer(
                    hit.content, hit.prompt_tokens, hit.completion_tokens, hit.model, 0
                )

        sent = [0]
        retrying = AsyncRetrying(
            stop=stop_after_attempt(s.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, LLMError) and e.retry_now),
            reraise=True,
        )
        answer: ChatAnswer | None = None
        async for attempt in retrying:
            with attempt:
                answer = await self._post_chat(payload, validator, sent)
        assert answer is not None
        answer.calls = sent[0]
        if key is not None and self.cache is not None:
            cached = CachedAnswer(
                answer.content, answer.prompt_tokens, answer.completion_tokens, answer.model
            )
            await self.cache.put(key, cached, prompt_version=cache_tag, step=schema_name)
        return answer

    async def _post_chat(
        self, payload: bytes, validator: Validator | None, sent: list[int]
    ) -> ChatAnswer:
        _, slots = self._bind()
        async with slots:
            # checked once a slot is free, so requests queued behind a dying server fail fast
            try:
                self.breaker.before_call()
            except CircuitOpenError as exc:
                raise LLMError("circuit_open", str(exc), retryable=True) from None
            sent[0] += 1
            try:
                response = await self._request("POST", "/v1/chat/completions", payload)
            except LLMError:
                self.breaker.record_failure()
                raise
            except BaseException:  # cancelled: says nothing about the server
                self.breaker.abandon()
                raise
        code = response.status
        if code >= 500:
            self.breaker.record_failure()
            raise LLMError(f"http_{code}", _error_message(response), retry_now=True)
        self.breaker.record_success()  # anything else is an answer from a live server
        if code == 429:
            raise LLMError(
                "rate_limited",
                _error_message(response),
                retry_now=True,
                retry_after=_retry_after(response),
            )
        if code >= 400:
            raise LLMError(f"http_{code}", _error_message(response))
        return self._parse(response, validator)

    @staticmethod
    def _parse(response: _Reply, validator: Validator | None) -> ChatAnswer:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
            model = str(data.get("model", ""))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMError("bad_response", f"not a chat completion: {exc!r}") from None
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        if validator is None:
            return ChatAnswer(text, prompt_tokens, completion_tokens, model, 1)
        finish = choice.get("finish_reason")
        cut = " (finish_reason=length: raise max_tokens)" if finish == "length" else ""
        try:
            content = json.loads(text)
        except ValueError as exc:
            raise LLMError("malformed_json", f"{exc}{cut}: {text[:200]!r}") from None
        try:
            validator(content)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise LLMError("schema_violation", f"{exc.message[:300]}{cut}") from None
        return ChatAnswer(content, prompt_tokens, completion_tokens, model, 1)
