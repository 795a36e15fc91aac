"""``pmcvl llm-check``: is this server usable for enrichment, and what exactly fails?

Four probes, each independent so one failure does not hide the others: ``/health``, the model
list (is the configured model served?), one JSON-schema constrained text call (is guided
decoding on?) and one call with an image (is the model multimodal, and are data URLs
accepted?). No retries: a check reports what a first attempt gets.
"""

from __future__ import annotations

import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from PIL import Image, ImageDraw

from ray_jobs.config import LongCapSettings
from ray_jobs.longcap.client import LLMClient, LLMError
from ray_jobs.longcap.images import image_data_url

PROBE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answer", "reason"],
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "reason": {"type": "string"},
    },
}


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not applicable to this server
    detail: str
    seconds: float = 0.0


def probe_image() -> bytes:
    """A red disc on white: any vision model can say what it sees."""
    image = Image.new("RGB", (96, 64), "white")
    ImageDraw.Draw(image).ellipse((28, 12, 68, 52), fill=(220, 30, 30))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _failure(exc: Exception) -> str:
    if isinstance(exc, LLMError):
        return f"{exc.error_type}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


async def run_checks(settings: LongCapSettings, base_url: str | None = None) -> list[Check]:
    probe = settings.model_copy(update={"max_retries": 0, "breaker_threshold": 1_000})
    client = LLMClient(probe, base_url=base_url)
    checks: list[Check] = []

    async def timed(
        name: str, probe_call: Callable[[], Awaitable[tuple[bool | None, str]]]
    ) -> None:
        start = time.perf_counter()
        try:
            ok, detail = await probe_call()
        except (
            LLMError,
            aiohttp.ClientError,
            TimeoutError,
            ValueError,
            KeyError,
            TypeError,
        ) as exc:
            ok, detail = False, _failure(exc)
        checks.append(Check(name, ok, detail, time.perf_counter() - start))

    async def health() -> tuple[bool | None, str]:
        code = await client.health()
        if code == 404:
            return None, "no /health endpoint (not vLLM?)"
        return code == 200, f"HTTP {code}"

    async def models() -> tuple[bool | None, str]:
        served = await client.models()
        wanted = {probe.model, probe.vision_model or probe.model}
        missing = sorted(wanted - set(served))
        listed = ", ".join(served) or "none"
        if missing:
            return False, f"{', '.join(missing)} not served (served: {listed})"
        return True, f"served: {listed}"

    async def schema_call() -> tuple[bool | None, str]:
        answer = await client.chat(
            [{"role": "user", "content": "Is the heart an organ? Answer yes or no, and why."}],
            schema=PROBE_SCHEMA,
            schema_name="probe",
            max_tokens=128,
        )
        return True, f"{answer.content} ({answer.prompt_tokens}+{answer.completion_tokens} tokens)"

    async def image_call() -> tuple[bool | None, str]:
        url = image_data_url(probe_image(), probe.image_max_side)
        answer = await client.chat(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": url}},
                        {"type": "text", "text": "Describe this image in one short sentence."},
                    ],
                }
            ],
            model=probe.vision_model or probe.model,
            max_tokens=64,
        )
        text = " ".join(str(answer.content).split())
        return bool(text), repr(text[:120]) if text else "empty answer"

    try:
        await timed("health", health)
        await timed("models", models)
        await timed("schema call", schema_call)
        await timed("image call", image_call)
    finally:
        await client.aclose()
    return checks
