"""LLM client throughput against the fake vLLM server: requests/s versus the bound C/L.

With a fixed server latency L and C requests in flight, no client can beat C/L requests/s; a
client that gets close spends little time of its own between requests. The fake server runs
in its own process (``tests/fake_llm_server.py``), so the CPU time measured here is the
client's alone (user and system): building and serialising the request with its image, HTTP,
parsing, and validating the answer against its JSON schema. ``client`` rows: C workers each
sending the enrichment's feasibility call (a real figure as a JPEG crop data URL, a 4-feature
schema) one after another. ``enr/*`` rows: the whole Enricher at the largest C, two calls per
panel, image preparation included (``png``: a PNG figure that must be decoded and resized).
Run with ``make bench-llm``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

from ray_jobs.config import LongCapSettings
from ray_jobs.longcap.client import LLMClient
from ray_jobs.longcap.context import PanelContext
from ray_jobs.longcap.enrich import Enricher, EnrichResult
from ray_jobs.longcap.images import image_data_url
from ray_jobs.longcap.prompting import load_prompts

REPO = Path(__file__).resolve().parents[1]
MEDICAT = REPO.parent / "shared" / "data" / "medicat_figures"
FEATURES = [
    "The panel is a barium enema radiograph.",
    "A narrowing of the distal colon is visible.",
    "The stricture is five centimetres long.",
    "The obstruction followed an anastomosis.",
]


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fake_llm_server.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError("the fake server did not start")
    return proc, url


def feasibility_messages(image_url: str) -> tuple[list[dict], dict]:
    judge = load_prompts().feasibility
    numbered = "\n".join(f"{i}. {f}" for i, f in enumerate(FEATURES, 1))
    messages = [
        {"role": "system", "content": judge.system},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": image_url}},
                {"type": "text", "text": judge.render(features=numbered)},
            ],
        },
    ]
    n = len(FEATURES)
    return messages, judge.schema_with(judgements={"minItems": n, "maxItems": n})


async def client_run(
    settings: LongCapSettings, messages: list, schema: dict, n: int
) -> tuple[float, float]:
    """C workers, each sending its share of ``n`` requests one after another: C in flight."""
    client = LLMClient(settings)
    c = settings.max_concurrency

    async def worker(count: int) -> None:
        for _ in range(count):
            await client.chat(messages, schema=schema)

    try:
        await asyncio.gather(*(worker(1) for _ in range(c)))  # connections open
        cpu, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(n // c) for _ in range(c)))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if client.requests != c + n:
            print(f"note: C={c}: {client.requests - c - n} requests retried", file=sys.stderr)
        return seconds, cpu
    finally:
        await client.aclose()


def row(name: str, c: int, latency: float, n: int, seconds: float, cpu: float) -> str:
    rate, bound = n / seconds, c / latency
    return (
        f"{name:<9} {c:>4} {latency * 1000:>5.0f} {n:>6} {seconds:>7.2f} {rate:>8.1f}"
        f" {bound:>8.1f} {100 * rate / bound:>7.1f}% {1000 * cpu / n:>10.2f}"
    )


def enricher_run(settings: LongCapSettings, image: bytes, panels: int) -> tuple[float, float]:
    """The whole Enricher on ``panels`` panels (two calls each, image preparation included)."""
    items = [
        (
            PanelContext(f"p{i}", "Barium enema.", "Figure 1. (A) Barium enema.", "A", "Figure 1"),
            image,
        )
        for i in range(panels)
    ]
    enricher = Enricher(settings)
    try:
        enricher.enrich_batch(items[: settings.max_concurrency])  # connections open
        cpu, start = time.process_time(), time.perf_counter()
        out = enricher.enrich_batch(items)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        enricher.close()
    assert all(isinstance(r, EnrichResult) for r in out)
    return seconds, cpu


def jpeg_crop(figure: bytes, side: int) -> bytes:
    """What the panel stage hands over: a JPEG crop, small enough to be sent as it is."""
    with Image.open(io.BytesIO(figure)) as image:
        image.thumbnail((side, side))
        out = io.BytesIO()
        image.convert("RGB").save(out, format="JPEG", quality=90)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.25], help="L, seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--rounds", type=int, default=30, help="requests per worker")
    parser.add_argument("--side", type=int, default=512, help="image max side sent")
    args = parser.parse_args()

    figure = sorted(MEDICAT.glob("*.png"))[1].read_bytes()
    crop = jpeg_crop(figure, args.side)
    image_url = image_data_url(crop, args.side)
    messages, schema = feasibility_messages(image_url)
    lines = []
    for latency in args.latency:
        proc, url = start_server(latency)
        try:
            base = LongCapSettings(base_url=url, model="fake-vlm", timeout_s=60, cache=False)
            for c in args.concurrency:
                n = c * max(args.rounds, 20 // c)
                settings = base.model_copy(update={"max_concurrency": c})
                seconds, cpu = asyncio.run(client_run(settings, messages, schema, n))
                lines.append(row("client", c, latency, n, seconds, cpu))
            c = max(args.concurrency)
            settings = base.model_copy(update={"max_concurrency": c, "image_max_side": args.side})
            panels = args.rounds * c // 2
            # the PNG row is CPU-bound (decoding and resizing): fewer panels say as much
            for name, image, count in (("enr/jpeg", crop, panels), ("enr/png", figure, 5 * c)):
                seconds, cpu = enricher_run(settings, image, count)
                lines.append(row(name, c, latency, 2 * count, seconds, cpu))
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"fake vLLM server in its own process; each request: a {len(image_url) // 1024} KiB image"
        f" data URL ({args.side} px JPEG) and the {len(FEATURES)}-feature feasibility schema;"
        " enr/*: the whole Enricher, 2 requests per panel (png: a 736x374 PNG figure resized first)"
    )
    print(
        f"{'path':<9} {'C':>4} {'L ms':>5} {'reqs':>6} {'seconds':>7} {'req/s':>8}"
        f" {'C/L':>8} {'of bound':>8} {'CPU ms/req':>10}"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
