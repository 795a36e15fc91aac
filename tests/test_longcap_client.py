"""The LLM client against the fake vLLM server: schemas, images, every fault, the breaker."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_llm_server import FakeLLM, start_fake_llm
from PIL import Image

from ray_jobs.config import LongCapSettings
from ray_jobs.longcap.check import probe_image
from ray_jobs.longcap.client import LLMClient, LLMError
from ray_jobs.longcap.images import image_data_url

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["label", "items"],
    "properties": {
        "label": {"type": "string", "enum": ["yes", "no"]},
        "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "string"}},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
MESSAGES = [
    {"role": "user", "content": "<text>\n- A chest radiograph.\n- Both lungs clear.\n</text>"}
]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with start_fake_llm() as fake:
        yield fake


def fast(url: str, **over: Any) -> LongCapSettings:
    """Settings for tests: tiny backoff, a breaker that stays out of the way."""
    values: dict[str, Any] = {
        "base_url": url,
        "model": "fake-vlm",
        "timeout_s": 2.0,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "breaker_threshold": 100,
        "breaker_reset_s": 0.3,
    }
    return LongCapSettings(**{**values, **over})


def chat(settings: LongCapSettings, **kwargs: Any):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        client = LLMClient(settings)
        try:
            return await client.chat(kwargs.pop("messages", MESSAGES), **kwargs)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_schema_constrained_answer_is_validated_and_sent_as_vllm_expects(llm: FakeLLM) -> None:
    answer = chat(fast(llm.url), schema=SCHEMA, schema_name="probe")
    assert answer.content["label"] in ("yes", "no")
    assert answer.content["items"] == ["A chest radiograph.", "Both lungs clear."]
    assert answer.calls == 1 and answer.prompt_tokens > 0 and answer.completion_tokens > 0
    body = llm.bodies[-1]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "probe", "schema": SCHEMA, "strict": True},
    }
    assert body["temperature"] == 0 and body["model"] == "fake-vlm"


def test_image_parts_arrive_as_decodable_data_urls(llm: FakeLLM) -> None:
    url = image_data_url(probe_image(), 1024)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is this?"},
            ],
        }
    ]
    answer = chat(fast(llm.url), messages=messages)
    assert isinstance(answer.content, str) and answer.content
    sent = llm.bodies[-1]["messages"][0]["content"][0]["image_url"]["url"]
    head, payload = sent.split(",", 1)
    assert head == "data:image/png;base64"
    assert Image.open(io.BytesIO(base64.b64decode(payload))).size == (96, 64)


@pytest.mark.parametrize(
    "url",
    ["https://example.org/x.png", "data:image/png;base64,bm90IGFuIGltYWdl", "data:text/plain,hi"],
)
def test_the_fake_rejects_malformed_images_and_the_client_does_not_retry(
    llm: FakeLLM, url: str
) -> None:
    part = {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(LLMError) as err:
        chat(fast(llm.url), messages=[{"role": "user", "content": [part]}])
    assert err.value.error_type == "http_400" and not err.value.retryable
    assert llm.chat_requests == 0 and llm.counts["bad_request"] == 1


def test_unknown_model_is_a_404(llm: FakeLLM) -> None:
    with pytest.raises(LLMError) as err:
        chat(fast(llm.url), model="gpt-nothing")
    assert err.value.error_type == "http_404" and "does not exist" in err.value.message


def test_health_and_models(llm: FakeLLM) -> None:
    async def go() -> tuple[int, list[str]]:
        client = LLMClient(fast(llm.url + "/v1"))
        try:
            return await client.health(), await client.models()
        finally:
            await client.aclose()

    assert asyncio.run(go()) == (200, ["fake-vlm"])
    with httpx.Client() as http:
        listed = http.get(f"{llm.url}/v1/models").json()
    assert listed["object"] == "list" and listed["data"][0]["object"] == "model"


@pytest.mark.parametrize("fault", ["http_500", "http_503", "rate_limited", "connection", "slow"])
def test_server_faults_are_retried_then_succeed(llm: FakeLLM, fault: str) -> None:
    llm.fail_next(2, fault)
    llm.slow_s = 1.0
    answer = chat(fast(llm.url, timeout_s=0.3), schema=SCHEMA)
    assert answer.calls == 3 and llm.chat_requests == 3
    assert llm.faults[fault] == 2


def test_retry_after_is_honoured(llm: FakeLLM) -> None:
    llm.retry_after = 0.3
    llm.fail_next(1, "rate_limited")
    start = time.perf_counter()
    answer = chat(fast(llm.url, backoff_max_s=1.0))
    assert answer.calls == 2 and time.perf_counter() - start >= 0.3


@pytest.mark.parametrize(
    ("fault", "error_type", "requests"),
    [
        ("http_500", "http_500", 3),
        ("rate_limited", "rate_limited", 3),
        ("connection", "connection", 3),
        ("slow", "timeout", 3),
        ("malformed_json", "malformed_json", 1),  # temperature 0: the same again
        ("schema_violation", "schema_violation", 1),
        ("http_400", "http_400", 1),
    ],
)
def test_exhausted_or_final_faults_raise_typed_errors(
    llm: FakeLLM, fault: str, error_type: str, requests: int
) -> None:
    llm.fail_next(100, fault)
    llm.slow_s = 1.0
    with pytest.raises(LLMError) as err:
        chat(fast(llm.url, timeout_s=0.3), schema=SCHEMA)
    assert err.value.error_type == error_type and err.value.stage == "enrich"
    assert err.value.retryable == (requests > 1)
    assert llm.chat_requests == requests


def test_malformed_answer_names_truncation(llm: FakeLLM) -> None:
    llm.fail_next(1, "malformed_json")
    with pytest.raises(LLMError, match="finish_reason=length"):
        chat(fast(llm.url), schema=SCHEMA)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again: nothing listens there


def _forty_calls(settings: LongCapSettings) -> list[BaseException | object]:
    async def go() -> list[BaseException | object]:
        client = LLMClient(settings)
        try:
            calls = [client.chat(MESSAGES, schema=SCHEMA) for _ in range(40)]
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await client.aclose()

    return asyncio.run(go())


BREAKER = {
    "breaker_threshold": 3,
    "breaker_reset_s": 60,
    "max_retries": 5,
    "backoff_base_s": 0.05,
    "backoff_max_s": 0.2,
    "max_concurrency": 4,
}


def test_circuit_breaker_fails_fast_on_a_dead_server() -> None:
    results = _forty_calls(fast(f"http://127.0.0.1:{_dead_port()}", **BREAKER))
    kinds = [r.error_type for r in results if isinstance(r, LLMError)]
    assert len(kinds) == 40
    assert kinds.count("circuit_open") >= 36 and set(kinds) <= {"connection", "circuit_open"}
    assert all(isinstance(r, LLMError) and r.retryable for r in results)


def test_an_open_breaker_sends_nothing_more_to_a_failing_server(llm: FakeLLM) -> None:
    """40 calls with 5 retries each would be 240 requests; once the breaker opens none go out,
    so the server sees at most the faults that open it plus the calls in flight meanwhile."""
    llm.fail_matching("", "connection")  # every request: the connection is dropped
    results = _forty_calls(fast(llm.url, **BREAKER))
    kinds = [r.error_type for r in results if isinstance(r, LLMError)]
    assert len(kinds) == 40 and kinds.count("circuit_open") >= 36
    threshold, in_flight = BREAKER["breaker_threshold"], BREAKER["max_concurrency"]
    assert threshold <= llm.chat_requests <= threshold + in_flight - 1


def test_breaker_probes_after_reset_and_closes_on_success(llm: FakeLLM) -> None:
    settings = fast(llm.url, breaker_threshold=2, breaker_reset_s=0.3, max_retries=0)

    async def go() -> list[str]:
        client = LLMClient(settings)
        out = []
        try:
            llm.fail_next(2, "http_503")
            for _ in range(3):
                try:
                    await client.chat(MESSAGES)
                    out.append("ok")
                except LLMError as exc:
                    out.append(exc.error_type)
            await asyncio.sleep(0.35)
            await client.chat(MESSAGES)  # the probe
            out.append(client.breaker.state)
        finally:
            await client.aclose()
        return out

    assert asyncio.run(go()) == ["http_503", "http_503", "circuit_open", "closed"]
    assert llm.chat_requests == 3


def test_the_fake_answers_openai_shapes_and_errors(llm: FakeLLM) -> None:
    llm.fail_next(1, "http_500")
    with httpx.Client(base_url=llm.url) as http:
        error = http.post("/v1/chat/completions", json={"model": "fake-vlm", "messages": MESSAGES})
        ok = http.post("/v1/chat/completions", json={"model": "fake-vlm", "messages": MESSAGES})
        bad_schema = http.post(
            "/v1/chat/completions",
            json={
                "model": "fake-vlm",
                "messages": MESSAGES,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "nonsense"}},
                },
            },
        )
    assert error.status_code == 500 and set(error.json()["error"]) >= {"message", "type", "code"}
    body = ok.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == sum(
        body["usage"][k] for k in ("prompt_tokens", "completion_tokens")
    )
    assert bad_schema.status_code == 400
    assert json.loads(json.dumps(llm.stats()))["faults"] == {"http_500": 1}


def test_a_server_url_is_written_down_without_its_credentials() -> None:
    from ray_jobs.longcap.client import redact_url

    assert redact_url("https://user:pw@vllm.example:8000/v1?api_key=x#y") == (
        "https://vllm.example:8000/v1"
    )
    assert redact_url("http://[::1]:8000") == "http://[::1]:8000"
    assert redact_url("http://vllm/v1") == "http://vllm/v1"
