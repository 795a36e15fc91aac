"""What one ``pmc_dataset`` run builds: its settings, what is pending, and the Ray job for it.

The run's params (config file, output URI, source and other overrides, enrichment on / off)
become settings twice, identically: here in the Airflow worker, to ask the ledger what is new
before any cluster work starts, and in the Ray job, through ``PMCVL__SECTION__KEY``
environment variables in its runtime environment (the job applies them over the same file).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from operators.connections import LLM_CONN_ID, llm_endpoint
from operators.run_params import ParamRefused, check_overrides, has_credentials
from ray_jobs.config import (  # pydantic and yaml only: cheap at DAG parse time
    LLM_BASE_URL_ENV,
    deep_merge,
)

ENTRYPOINT = "python -m ray_jobs.jobs.build_dataset"


def settings_env(tree: Mapping[str, Any], prefix: str = "PMCVL") -> dict[str, str]:
    """``{"output": {"uri": "s3://b/p"}}`` → ``{"PMCVL__OUTPUT__URI": '"s3://b/p"'}``. Values
    are JSON, which the config loader reads as YAML, so types survive ("1" stays a string)."""
    env: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}__{str(key).upper()}"
        if isinstance(value, Mapping) and value:
            env.update(settings_env(value, name))
        else:
            env[name] = json.dumps(value)
    return env


def run_overrides(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params as one nested override of the config (``overrides`` < the named params)."""
    tree = deep_merge({}, params.get("overrides") or {})
    if params.get("source"):
        tree = deep_merge(tree, {"source": params["source"]})
    if params.get("output_uri"):
        tree = deep_merge(tree, {"output": {"uri": params["output_uri"]}})
    if params.get("enrich") is not None:
        tree = deep_merge(tree, {"longcap": {"enabled": bool(params["enrich"])}})
    return tree


def run_settings(params: Mapping[str, Any]):  # type: ignore[no-untyped-def]
    """The run's settings; params that may not be params (secrets, models from elsewhere) are
    refused first (:mod:`operators.run_params`)."""
    from ray_jobs.config import load_settings

    tree = run_overrides(params)
    check_overrides(tree, load_settings(params.get("config") or None).model_roots)
    return load_settings(params.get("config") or None, **tree)


def entrypoint(params: Mapping[str, Any]) -> str:
    config = params.get("config")
    return ENTRYPOINT + (f" --config {shlex.quote(str(config))}" if config else "")


def plan_build(params: Mapping[str, Any], llm_conn_id: str | None = LLM_CONN_ID) -> dict[str, Any]:
    """Ask the ledger what is new (no Ray), and say how the job would run."""
    from ray_jobs.build.planning import pending_refs
    from ray_jobs.pmc.ledger import table_refs

    settings = run_settings(params)
    pending, listed = pending_refs(settings)
    llm = llm_endpoint(llm_conn_id, settings.longcap.base_url)
    enrich = bool(settings.longcap.enabled and llm.base_url)
    env = settings_env(run_overrides(params))
    if enrich and not settings.longcap.base_url:
        if has_credentials(llm.base_url):  # the runtime env is shown in the Ray dashboard
            raise ParamRefused(
                f"the {llm_conn_id} connection's URL carries credentials; give the key as the "
                "connection's password and in the cluster's Secret instead"
            )
        env[LLM_BASE_URL_ENV] = str(llm.base_url)  # from the connection: the job needs it
    return {
        "output_uri": settings.output.uri,
        "listed": listed,
        "pending": pending.num_rows,
        "first_pending": [ref.key for ref in table_refs(pending.slice(0, 10))],
        "enrich": enrich,
        "llm_base_url": llm.base_url if enrich else None,
        "llm_model": settings.longcap.model,
        "entrypoint": entrypoint(params),
        "runtime_env": {"env_vars": env},
        "config_hash": settings.fingerprint(),
    }
