"""Shared fixtures: the real-world data folder, generated corpora, and a moto S3 server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PMCVL_SHARED_DATA", REPO.parent / "shared" / "data"))
JATS_DIR = SHARED_DATA / "jats"


def pytest_configure(config: pytest.Config) -> None:
    if not JATS_DIR.is_dir():
        raise pytest.UsageError(
            f"real-world test data not found at {SHARED_DATA}; set PMCVL_SHARED_DATA"
        )


@pytest.fixture(scope="session")
def jats_dir() -> Path:
    return JATS_DIR


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory):
    """A real S3 API server (moto's server mode) on loopback, for the whole session."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials: moto accepts any, and nothing must reach real AWS."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def s3_admin(moto_endpoint: str, aws_credentials: None):
    return boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")


def upload_tree(client, bucket: str, root: Path, skip: tuple[str, ...] = ("truth.jsonl",)) -> int:
    count = 0
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in skip:
            client.put_object(
                Bucket=bucket, Key=path.relative_to(root).as_posix(), Body=path.read_bytes()
            )
            count += 1
    return count
