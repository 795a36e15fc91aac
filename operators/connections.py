"""Where the Ray cluster, S3 and the LLM server are, from Airflow's own connections.

Connections are read when a task runs, never at DAG parse time:

- ``pmcvl_ray``: host = the Ray dashboard URL (``http://ray-head:8265``; a bare host gets the
  schema and port, 8265 by default), password = the cluster's auth token (or extra ``token``, or
  extra ``token_path``: a file holding it); extra ``verify`` (false or a CA bundle) and
  ``headers``.
- ``pmcvl_s3``: an ``aws`` connection: login / password = access key / secret; extra
  ``region_name``, ``endpoint_url``, ``aws_session_token``.
- ``pmcvl_llm``: host = the OpenAI-compatible server's base URL, password = its API key.

A connection that is not defined falls back to the environment the tools read themselves
(``RAY_API_SERVER_ADDRESS``, ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` / ``~/.ray/auth_token``;
boto3's credential chain; ``PMCVL_LLM_BASE_URL`` / ``PMCVL_LLM_API_KEY``), so a local run needs no
setup and a deployment needs no code change.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray_jobs.config import LLM_API_KEY_ENV, LLM_BASE_URL_ENV  # pydantic and yaml: cheap

log = logging.getLogger(__name__)

RAY_CONN_ID = "pmcvl_ray"
S3_CONN_ID = "pmcvl_s3"
LLM_CONN_ID = "pmcvl_llm"
DEFAULT_DASHBOARD = "http://127.0.0.1:8265"


def _get_connection(conn_id: str | None) -> Any:
    """The Airflow connection, or None when it is not defined (or no id is given)."""
    if not conn_id:
        return None
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        log.info("connection %s is not defined; using the environment", conn_id)
        return None


async def _aget_connection(conn_id: str | None) -> Any:
    if not conn_id:
        return None
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException:
        return None


def _extra(conn: Any) -> dict[str, Any]:
    return conn.extra_dejson if conn is not None and conn.extra else {}


def _url(host: str, schema: str | None, port: int | None, default_port: int) -> str:
    """``host`` as a URL: kept when it has a scheme, else ``{schema}://{host}:{port}``."""
    if "://" in host:
        return host.rstrip("/")
    scheme = schema if schema in ("http", "https") else "http"
    return f"{scheme}://{host}:{port or default_port}"


@dataclass(frozen=True)
class RayEndpoint:
    """The dashboard's URL and what every request to it carries."""

    url: str
    token: str | None = field(default=None, repr=False)
    verify: bool | str = True
    extra_headers: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        headers = dict(self.extra_headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


def _read_token(path: str | os.PathLike[str]) -> str | None:
    file = Path(path).expanduser()
    if not file.is_file():
        return None
    return file.read_text().strip() or None


def _ray_endpoint(conn: Any) -> RayEndpoint:
    extra = _extra(conn)
    if conn is not None and conn.host:
        url = _url(conn.host, conn.schema, conn.port, 8265)
        token = conn.password or extra.get("token")
        if not token and extra.get("token_path"):
            token = _read_token(extra["token_path"])
    else:
        url = os.environ.get("RAY_API_SERVER_ADDRESS") or DEFAULT_DASHBOARD
        token = os.environ.get("RAY_AUTH_TOKEN") or _read_token(
            os.environ.get("RAY_AUTH_TOKEN_PATH") or "~/.ray/auth_token"
        )
    return RayEndpoint(
        url=url.rstrip("/"),
        token=token,
        verify=extra.get("verify", True),
        extra_headers={str(k): str(v) for k, v in (extra.get("headers") or {}).items()},
    )


def ray_endpoint(conn_id: str | None = RAY_CONN_ID) -> RayEndpoint:
    return _ray_endpoint(_get_connection(conn_id))


async def aray_endpoint(conn_id: str | None = RAY_CONN_ID) -> RayEndpoint:
    """For triggers: reads the connection without blocking the triggerer's event loop."""
    return _ray_endpoint(await _aget_connection(conn_id))


@dataclass(frozen=True)
class LLMEndpoint:
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)


def _llm_endpoint(conn: Any, base_url: str | None) -> LLMEndpoint:
    if not base_url and conn is not None and conn.host:
        base_url = _url(conn.host, conn.schema, conn.port, 8000)
    key = (conn.password if conn is not None else None) or os.environ.get(LLM_API_KEY_ENV)
    return LLMEndpoint(base_url or os.environ.get(LLM_BASE_URL_ENV), key)


def llm_endpoint(conn_id: str | None = LLM_CONN_ID, base_url: str | None = None) -> LLMEndpoint:
    """The LLM server: ``base_url`` (the config's, when it names one) over the connection's host
    over ``PMCVL_LLM_BASE_URL``: the precedence the build job itself applies."""
    return _llm_endpoint(_get_connection(conn_id), base_url)


async def allm_endpoint(
    conn_id: str | None = LLM_CONN_ID, base_url: str | None = None
) -> LLMEndpoint:
    return _llm_endpoint(await _aget_connection(conn_id), base_url)


def aws_env(conn_id: str | None = S3_CONN_ID) -> dict[str, str]:
    """The AWS connection as the environment variables boto3 reads (empty when undefined)."""
    conn = _get_connection(conn_id)
    if conn is None:
        return {}
    extra = _extra(conn)
    endpoint = extra.get("endpoint_url") or (
        (extra.get("service_config") or {}).get("s3", {}).get("endpoint_url")
    )
    env = {
        "AWS_ACCESS_KEY_ID": conn.login,
        "AWS_SECRET_ACCESS_KEY": conn.password,
        "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
        "AWS_DEFAULT_REGION": extra.get("region_name"),
        "AWS_ENDPOINT_URL_S3": endpoint,
    }
    return {k: str(v) for k, v in env.items() if v}


@contextmanager
def aws_environment(conn_id: str | None = S3_CONN_ID) -> Iterator[dict[str, str]]:
    """Run a block with the S3 connection's credentials in ``os.environ``, then restore it:
    the pipeline's storage layer uses boto3's default credential chain."""
    env = aws_env(conn_id)
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
