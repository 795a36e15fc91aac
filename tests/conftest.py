"""Shared fixtures: the real-world data folder, generated corpora, and a moto S3 server."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PMCVL_SHARED_DATA", REPO.parent / "shared" / "data"))
JATS_DIR = SHARED_DATA / "jats"

_HOME_BEFORE = pytest.StashKey[set[str]]()
pytest_plugins = ["airflow_fixtures"]  # Airflow's test home, metadata DB and DAG-run fixtures


def _home_entries() -> set[str]:
    """What sits in the home folder and its usual state folders, to see what a session adds."""
    home = Path.home()
    found: set[str] = set()
    for folder in (home, home / ".cache", home / ".config", home / ".local" / "share"):
        if folder.is_dir():
            found |= {str(p) for p in folder.iterdir()}
    return found


def isolate_user_state() -> Path:
    """Per-user state of the tools under test goes to this session's own folder, never the
    home folder: Ray's auth token (made here, as a fresh machine has none), ultralytics' and
    matplotlib's config, torch's, Hugging Face's and mlcroissant's caches. What a developer's
    shell exports for Ray, ultralytics or pmcvl does not steer the tests either, except where
    the data is and ``PMCVL_PURE_PYTHON`` (run the parser's Python walks, not the C ones)."""
    for name in [n for n in os.environ if n.startswith(("RAY_", "YOLO_", "PMCVL_"))]:
        if name not in ("PMCVL_SHARED_DATA", "PMCVL_PURE_PYTHON"):
            del os.environ[name]
    state = Path(tempfile.mkdtemp(prefix="pmcvl-test-state-"))
    atexit.register(shutil.rmtree, state, ignore_errors=True)
    token = state / "ray" / "auth_token"
    token.parent.mkdir()
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    os.environ.update(
        {
            "RAY_AUTH_TOKEN_PATH": str(token),
            "YOLO_CONFIG_DIR": str(state / "yolo"),
            "MPLCONFIGDIR": str(state / "matplotlib"),
            "TORCH_HOME": str(state / "torch"),
            "HF_HOME": str(state / "hf"),
            "CROISSANT_CACHE": str(state / "croissant"),  # mlcroissant's, read at its import
        }
    )
    return state


def pytest_configure(config: pytest.Config) -> None:
    if not JATS_DIR.is_dir():
        raise pytest.UsageError(
            f"real-world test data not found at {SHARED_DATA}; set PMCVL_SHARED_DATA"
        )
    config.stash[_HOME_BEFORE] = _home_entries()
    isolate_user_state()
    # before anything imports airflow: a throwaway AIRFLOW_HOME, never ~/airflow
    from airflow_fixtures import configure_airflow_env

    configure_airflow_env()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The tests own their state: a session that left anything new in the home folder fails."""
    added = sorted(_home_entries() - session.config.stash.get(_HOME_BEFORE, set()))
    if added:
        session.config.get_terminal_writer().line(
            f"the tests wrote into the home folder: {', '.join(added)}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


CLUSTER_LLM_KEY = "sk-pmcvl-cluster-canary-5e1f"  # grep for it: it must show up nowhere


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real local Ray cluster (``ray start --head --block`` on loopback, dashboard included)
    for the session: yields ``(gcs address, dashboard URL)``.

    Workers and job drivers inherit this environment: dummy AWS credentials (moto accepts any)
    so stages that write to S3 on moto can sign, the real-world data folder, and the venv's
    ``bin`` first on PATH, so a job's ``python`` is this venv's. ``--block`` keeps the cluster
    tied to one process: stopping it stops this cluster only, not others on the machine.
    """
    port, dashboard_port = _free_port(), _free_port()
    # not under pytest's deep tmp path: Ray's socket paths under it must stay within 107 bytes
    temp = Path(tempfile.mkdtemp(prefix="pmcvl-ray-"))
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # stop at once on SIGTERM, no draining
        # `ray start` turns token auth on with the session's token (RAY_AUTH_TOKEN_PATH); a
        # client sends it only when told the mode, so the head, workers and drivers get both
        "RAY_AUTH_MODE": "token",
        # the LLM key as the chart gives it to every Ray pod (from the vllm.apiKey Secret):
        # in the cluster's own environment, never in a job's runtime env
        "PMCVL_LLM_API_KEY": CLUSTER_LLM_KEY,
    }
    ray_bin = str(Path(venv_bin) / "ray")
    log_path = temp / "ray-start.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard_port}",
            # fixed defaults (52365, 10001) clash with any other Ray on the machine
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--ray-client-server-port={_free_port()}",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 180
    while "Ray runtime started" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"ray start failed:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.5)
    address = f"127.0.0.1:{port}"
    previous = {k: os.environ.get(k) for k in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    os.environ.update(RAY_ADDRESS=address, RAY_AUTH_MODE="token")
    yield address, f"http://127.0.0.1:{dashboard_port}"
    import ray

    if ray.is_initialized():
        ray.shutdown()
    proc.terminate()  # drains, then stops this node's processes
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    shutil.rmtree(temp, ignore_errors=True)
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def ray_address(ray_cluster) -> str:
    """The local cluster's GCS address (also exported as ``RAY_ADDRESS``)."""
    return ray_cluster[0]


@pytest.fixture(scope="session")
def ray_dashboard(ray_cluster) -> tuple[str, str]:
    """``(dashboard URL, auth token)`` for the Ray Job Submission API of the local cluster."""
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    url = ray_cluster[1]
    request = urllib.request.Request(
        f"{url}/api/version", headers={"Authorization": f"Bearer {token}"}
    )
    deadline = time.monotonic() + 60
    while True:  # the dashboard's HTTP server may come up after `ray start` says it started
        try:
            with urllib.request.urlopen(request, timeout=5):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    return url, token


def build_job(
    config: dict, path: Path, ray_address: str, **env: str
) -> subprocess.CompletedProcess:
    """``python -m ray_jobs.jobs.build_dataset`` as a Ray job driver would run it: ``config``
    written to ``path``, the driver pointed at ``ray_address``, ``env`` added."""
    import yaml

    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "ray_jobs.jobs.build_dataset", "--config", str(path)],
        env={**os.environ, "RAY_ADDRESS": ray_address, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
