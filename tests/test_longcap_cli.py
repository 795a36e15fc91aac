"""``pmcvl llm-check`` as a user runs it, against the fake vLLM server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from fake_llm_server import FakeLLM, start_fake_llm


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with start_fake_llm(models=("fake-vlm", "other")) as fake:
        yield fake


def llm_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PMCVL_LLM", "PMCVL__"))}
    return subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", "llm-check", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**clean, **(env or {})},
        timeout=60,
    )


def lines(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """check name -> its status word."""
    out = {}
    for line in proc.stdout.splitlines()[1:]:
        status, rest = line.split(None, 1)
        out[rest.split("  ")[0].strip()] = status
    return out


def test_a_working_server_passes_every_check(llm: FakeLLM) -> None:
    proc = llm_check("--base-url", f"{llm.url}/v1", "--model", "fake-vlm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"server {llm.url}\n")
    assert lines(proc) == {
        "health": "ok",
        "models": "ok",
        "schema call": "ok",
        "image call": "ok",
    }
    assert llm.chat_requests == 2
    image_call = llm.bodies[-1]["messages"][0]["content"][0]
    assert image_call["image_url"]["url"].startswith("data:image/png;base64,")


def test_an_unserved_model_fails_and_says_which(llm: FakeLLM) -> None:
    proc = llm_check("--base-url", llm.url, "--model", "missing-model")
    assert proc.returncode == 1
    assert lines(proc) == {
        "health": "ok",
        "models": "FAIL",
        "schema call": "FAIL",
        "image call": "FAIL",
    }
    assert "missing-model not served (served: fake-vlm, other)" in proc.stdout
    assert "http_404" in proc.stdout


def test_a_server_without_guided_decoding_fails_the_schema_check(llm: FakeLLM) -> None:
    llm.fail_next(1, "schema_violation")
    proc = llm_check("--model", "fake-vlm", env={"PMCVL_LLM_BASE_URL": llm.url})
    assert proc.returncode == 1
    assert lines(proc)["schema call"] == "FAIL" and lines(proc)["image call"] == "ok"
    assert "schema_violation" in proc.stdout


def test_a_dead_server_fails_fast_and_no_server_is_an_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = llm_check("--base-url", f"http://127.0.0.1:{port}", "--model", "m", "--timeout", "5")
    assert proc.returncode == 1
    assert set(lines(proc).values()) == {"FAIL"}
    assert "connection" in proc.stdout
    unset = llm_check("--model", "m")
    assert unset.returncode != 0 and "PMCVL_LLM_BASE_URL" in unset.stderr
