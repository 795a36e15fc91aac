"""A fake vLLM server: the OpenAI-compatible HTTP API on loopback, for tests and benchmarks.

It answers ``GET /health``, ``GET /v1/models`` and ``POST /v1/chat/completions`` with the
shapes vLLM and OpenAI use (completion ids, ``choices[].message.content``, ``finish_reason``,
``usage``; errors as ``{"error": {"message", "type", "code"}}`` with their status codes, 404
for a model it does not serve), checks every image part (a ``data:image/...;base64,`` URL that
Pillow can open, else 400), and honours ``response_format``: for a ``json_schema`` it writes
JSON generated from that schema, which it checks against the schema before sending.

Content is deterministic and drawn from the prompt, so a pipeline's output means something:
the user message's ``<tag>…</tag>`` sections (or its whole text) are cut into units (a
section's lines when it is a list, else its sentences); a free string is the first units
joined, an array holds one item per unit, an object inside an array takes its unit as its
first string and a shortened unit as its other strings (a rationale led by the item's
verdict), and an enum value is picked by a hash
of the unit (so some features come back FEASIBLE and some NOT_FEASIBLE, the same every run).

Control (:class:`FakeLLM`): a fixed ``latency``, ``fail_next(n, fault)`` and
``fail_matching(marker, fault, times)`` (requests whose text contains ``marker``), counters of
requests and faults, and the last request bodies. Faults: ``http_500``, ``http_503``,
``http_400``, ``rate_limited`` (429 with Retry-After), ``slow`` (answers after ``slow_s``),
``malformed_json``, ``schema_violation`` and ``connection`` (the connection is dropped
without an answer).

In tests: the ``fake_llm`` fixture, or ``with start_fake_llm(latency=0.01) as fake:``. As its
own process (benchmarks): ``python tests/fake_llm_server.py --latency 0.25`` prints its URL,
and ``GET /_fake/stats`` returns its counters.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import io
import json
import re
import signal
import socket
import threading
import time
import uuid
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastjsonschema
import jsonschema
import pytest
from aiohttp import web

from ray_jobs.figures.images import pillow_open  # Pillow's own: ultralytics' patch pip-installs

FAULTS = frozenset(
    {
        "http_500",
        "http_503",
        "http_400",
        "rate_limited",
        "slow",
        "malformed_json",
        "schema_violation",
        "connection",
    }
)
_SECTION = re.compile(r"<([A-Za-z_][\w-]*)>\s*(.*?)\s*</\1>", re.S)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_SENTENCES = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(\[0-9])")
_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,(.*)$", re.S)
MAX_UNITS = 4  # units in a free string or an unbounded array


@dataclass
class _Rule:
    fault: str
    marker: str | None  # None: any chat request
    remaining: int | None  # None: for ever


class FakeLLM:
    """Settings, fault rules and counters of one fake server; safe to change from a test
    while the server answers in its own thread."""

    def __init__(
        self,
        models: tuple[str, ...] = ("fake-vlm",),
        latency: float = 0.0,
        retry_after: float = 0.05,
        slow_s: float = 3.0,
        keep_bodies: int = 64,
        api_key: str | None = None,
    ):
        self.models = list(models)
        self.api_key = api_key  # like `vllm serve --api-key`: /v1/* want it, /health does not
        self.latency = latency
        self.retry_after = retry_after
        self.slow_s = slow_s
        self.url = ""  # http://127.0.0.1:PORT once started
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self.counts: Counter[str] = Counter()  # by endpoint: health, models, chat
        self.faults: Counter[str] = Counter()  # faults served
        self.bodies: deque[dict[str, Any]] = deque(maxlen=keep_bodies)

    @property
    def chat_requests(self) -> int:
        return self.counts["chat"]

    def fail_next(self, n: int, fault: str) -> None:
        """The next ``n`` chat requests get ``fault``."""
        self._add(_Rule(fault, None, n))

    def fail_matching(self, marker: str, fault: str, times: int | None = None) -> None:
        """Chat requests whose text contains ``marker`` get ``fault`` (``times`` times)."""
        self._add(_Rule(fault, marker, times))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.faults.clear()
            self.bodies.clear()

    def _add(self, rule: _Rule) -> None:
        if rule.fault not in FAULTS:
            raise ValueError(f"unknown fault {rule.fault!r}; one of {sorted(FAULTS)}")
        with self._lock:
            self._rules.append(rule)

    def _take(self, text: str, body: dict[str, Any]) -> str | None:
        with self._lock:
            self.counts["chat"] += 1
            self.bodies.append(body)
            for rule in self._rules:
                if rule.remaining == 0 or (rule.marker is not None and rule.marker not in text):
                    continue
                if rule.remaining is not None:
                    rule.remaining -= 1
                self.faults[rule.fault] += 1
                return rule.fault
        return None

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"counts": dict(self.counts), "faults": dict(self.faults)}


# -- content drawn from the prompt --------------------------------------------------------------


def _units(text: str) -> list[str]:
    sections = [body for _, body in _SECTION.findall(text)] or [text]
    units: list[str] = []
    for body in sections:
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        if len(lines) > 1 or (lines and _BULLET.match(lines[0])):
            pieces = [_BULLET.sub("", line) for line in lines]
        else:
            pieces = _SENTENCES.split(" ".join(lines))
        for piece in pieces:
            piece = " ".join(piece.split()).rstrip(";,:")
            if len(piece.split()) >= 2 and piece not in units:
                units.append(piece)
    return units or ["A figure panel from a biomedical article"]


def _sentence(text: str) -> str:
    return text if text[-1:] in ".!?" else text + "."


def _shorten(unit: str) -> str:
    words = unit.rstrip(".").split()
    return " ".join(words[: max(3, (len(words) + 1) // 2)]).rstrip(",;:") + "."


def _pick(options: list[Any], seed: str) -> Any:
    return options[zlib.crc32(seed.encode()) % len(options)]


def _kind(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind:
        return str(kind)
    if "properties" in schema:
        return "object"
    return "array" if "items" in schema else "string"


def _count(schema: dict[str, Any], available: int) -> int:
    low = int(schema.get("minItems", 0))
    high = int(schema.get("maxItems", MAX_UNITS))
    return max(low, min(high, available, MAX_UNITS))


def generate(schema: dict[str, Any], units: list[str], unit: str | None = None) -> Any:
    """A value that conforms to ``schema``, made of the prompt's units."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return generate(schema[key][0], units, unit)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return _pick(list(schema["enum"]), unit or " ".join(units))
    kind = _kind(schema)
    if kind == "object":
        out: dict[str, Any] = {}
        first = True
        for name, sub in (schema.get("properties") or {}).items():
            if unit is not None and _kind(sub) == "string" and "enum" not in sub:
                if first:
                    out[name], first = unit, False
                else:
                    picked = next(
                        (v for v in out.values() if isinstance(v, str) and v.isupper()), ""
                    )
                    lead = f"{picked.replace('_', ' ').lower()}: " if "ration" in name else ""
                    out[name] = lead + _shorten(unit)
            else:
                out[name] = generate(sub, units, unit)
        return out
    if kind == "array":
        item = schema.get("items") or {"type": "string"}
        n = _count(schema, len(units))
        return [generate(item, units, units[i % len(units)]) for i in range(n)]
    if kind == "string":
        text = unit if unit is not None else " ".join(_sentence(u) for u in units[:MAX_UNITS])
        text = text[: int(schema.get("maxLength", len(text)))]
        return text.ljust(int(schema.get("minLength", 0)), ".")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 10**6)
        value = min(max(len(units), low), high)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return zlib.crc32((unit or units[0]).encode()) % 2 == 0
    return None


# -- the HTTP API ---------------------------------------------------------------------------------


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None):
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status, headers=headers)


class BadRequest(Exception):
    pass


def _check_image(url: object) -> None:
    if not isinstance(url, str):
        raise BadRequest("image_url.url must be a string")
    m = _DATA_URL.match(url)
    if not m:
        raise BadRequest("image_url.url must be a data:image/...;base64, URL")
    try:
        raw = base64.b64decode(m.group(2), validate=True)
        with pillow_open()(io.BytesIO(raw)) as image:
            image.verify()
    except (binascii.Error, ValueError, OSError) as exc:
        raise BadRequest(f"the image does not decode: {exc}") from None


def _read_messages(messages: object) -> tuple[str, str, int]:
    """(all text, the last user message's text, number of images); BadRequest when malformed."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    texts: list[str] = []
    last_user = ""
    images = 0
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "user",
            "assistant",
            "developer",
        ):
            raise BadRequest("each message needs a role: system, user, assistant or developer")
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            raise BadRequest("message content must be a string or a list of parts")
        mine: list[str] = []
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                mine.append(part["text"])
            elif kind == "image_url" and isinstance(part.get("image_url"), dict):
                _check_image(part["image_url"].get("url"))
                images += 1
            else:
                raise BadRequest(f"unsupported content part {str(part)[:80]}")
        texts.extend(mine)
        if message["role"] == "user":
            last_user = "\n".join(mine)
    return "\n".join(texts), last_user, images


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Callable[[Any], Any]:
    """Checked (jsonschema's metaschema) and compiled (fastjsonschema) once per distinct
    schema, as vLLM caches its grammars: the fake's CPU must not be what a benchmark sees."""
    schema = json.loads(schema_json)
    jsonschema.validators.validator_for(schema).check_schema(schema)
    return fastjsonschema.compile(schema)


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer must follow; None for free text."""
    fmt = body.get("response_format")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    if fmt.get("type") != "json_schema":
        raise BadRequest(f"unsupported response_format type {fmt.get('type')!r}")
    spec = fmt.get("json_schema") or {}
    schema = spec.get("schema")
    if not isinstance(schema, dict) or not spec.get("name"):
        raise BadRequest("response_format.json_schema needs a name and a schema object")
    try:
        _validator(json.dumps(schema, sort_keys=True))
    except jsonschema.SchemaError as exc:
        raise BadRequest(f"invalid JSON schema: {exc.message}") from None
    return schema


def make_app(fake: FakeLLM) -> web.Application:
    @web.middleware
    async def authenticate(request: web.Request, handler):  # type: ignore[no-untyped-def]
        wanted = None if fake.api_key is None else f"Bearer {fake.api_key}"
        if (
            wanted
            and request.path.startswith("/v1/")
            and request.headers.get("Authorization") != wanted
        ):
            fake.counts["unauthorized"] += 1
            return web.json_response({"error": "Unauthorized"}, status=401)  # vLLM's body
        return await handler(request)

    app = web.Application(client_max_size=64 * 2**20, middlewares=[authenticate])

    async def health(_: web.Request) -> web.Response:
        fake.counts["health"] += 1
        return web.Response(status=200)

    async def models(_: web.Request) -> web.Response:
        fake.counts["models"] += 1
        now = int(time.time())
        data = [
            {"id": m, "object": "model", "created": now, "owned_by": "vllm", "root": m}
            for m in fake.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(fake.stats())

    async def chat(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON", "BadRequestError")
        model = body.get("model") if isinstance(body, dict) else None
        if model not in fake.models:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        try:
            text, user_text, images = _read_messages(body.get("messages"))
            schema = _schema_of(body)
        except BadRequest as exc:
            fake.counts["bad_request"] += 1
            return _error(400, str(exc), "BadRequestError")
        fault = fake._take(text, body)
        if fake.latency:
            await asyncio.sleep(fake.latency)
        if fault == "connection":
            assert request.transport is not None
            request.transport.abort()
            await asyncio.sleep(3600)  # cancelled once the connection is gone
        if fault in ("http_500", "http_503"):
            return _error(int(fault[5:]), "injected server error", "InternalServerError")
        if fault == "http_400":
            return _error(400, "injected bad request", "BadRequestError")
        if fault == "rate_limited":
            headers = {"Retry-After": f"{fake.retry_after:g}"}
            return _error(429, "injected rate limit", "RateLimitError", headers)
        if fault == "slow":
            await asyncio.sleep(fake.slow_s)

        units = _units(user_text)
        finish = "stop"
        if schema is None:
            content = " ".join(_sentence(u) for u in units[:2])
        else:
            value = generate(schema, units)
            _validator(json.dumps(schema, sort_keys=True))(value)  # the fake's answers conform
            content = json.dumps(value, ensure_ascii=False)
            if fault == "malformed_json":
                content, finish = content[: max(len(content) // 2, 2)], "length"
            elif fault == "schema_violation":
                content = json.dumps({"unexpected": [1, 2, 3]})
        prompt_tokens = len(text.split()) + 256 * images
        completion_tokens = max(len(content.split()), 1)
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/_fake/stats", stats)
    return app


# -- running it -----------------------------------------------------------------------------------


async def _serve(fake: FakeLLM, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(
        make_app(fake), access_log=None, handler_cancellation=True, shutdown_timeout=0.5
    )
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    site = web.SockSite(runner, sock, backlog=2048)
    await site.start()
    fake.url = f"http://{host}:{sock.getsockname()[1]}"
    return runner


@contextmanager
def start_fake_llm(host: str = "127.0.0.1", port: int = 0, **options: Any) -> Iterator[FakeLLM]:
    """Run a fake server in a background thread; yields its control handle (``.url``)."""
    fake = FakeLLM(**options)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-llm", daemon=True)
    thread.start()
    runner = asyncio.run_coroutine_threadsafe(_serve(fake, host, port), loop).result(10)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake vLLM server serving the model ``fake-vlm``, fresh for each test."""
    with start_fake_llm() as fake:
        yield fake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--model", action="append", dest="models")
    args = parser.parse_args()
    fake = FakeLLM(models=tuple(args.models or ["fake-vlm"]), latency=args.latency)

    async def run() -> None:
        runner = await _serve(fake, args.host, args.port)
        print(fake.url, flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(run())


if __name__ == "__main__":
    main()
