"""How ``pmc_dataset``'s params become the settings of the worker-side discovery and of the Ray
job (the same ones on both sides), and what discovery reports without starting Ray."""

from __future__ import annotations

from airflow_fixtures import connection_env

from operators.build_plan import entrypoint, plan_build, run_overrides, run_settings, settings_env
from ray_jobs.config import env_overrides, load_settings
from ray_jobs.pmc.sample_corpus import write_corpus


def test_params_reach_the_job_as_the_same_settings(tmp_path):
    params = {
        "config": None,
        "output_uri": "s3://bucket/pmcvl",
        "source": {"kind": "local", "path": "/corpus"},
        "enrich": False,
        "overrides": {
            "pipeline": {"samples_per_shard": 8},
            "source": {"limit": 3, "path": "/ignored"},
            "longcap": {"model": "007"},  # a string that looks like a number stays a string
        },
    }
    tree = run_overrides(params)
    assert tree["source"] == {"kind": "local", "path": "/corpus", "limit": 3}
    env = settings_env(tree)
    assert env["PMCVL__OUTPUT__URI"] == '"s3://bucket/pmcvl"'
    assert env_overrides(env) == tree
    worker = run_settings(params)
    job = load_settings(None, environ=env)
    assert worker == job and job.longcap.model == "007" and job.longcap.enabled is False


def test_entrypoint_quotes_the_config_path():
    assert entrypoint({}) == "python -m ray_jobs.jobs.build_dataset"
    assert entrypoint({"config": "/etc/pmc vl/c.yaml"}).endswith("--config '/etc/pmc vl/c.yaml'")


def test_discovery_counts_pending_articles_and_plans_enrichment(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 3, "folders", seed=1)
    params = {
        "output_uri": str(tmp_path / "out"),
        "source": {"kind": "local", "path": str(corpus)},
        "enrich": False,
    }
    plan = plan_build(params, llm_conn_id=None)
    assert plan["pending"] == plan["listed"] >= 3 and not plan["enrich"]
    assert plan["runtime_env"]["env_vars"]["PMCVL__LONGCAP__ENABLED"] == "false"

    monkeypatch.delenv("PMCVL_LLM_BASE_URL", raising=False)
    on = {**params, "enrich": True}
    assert not plan_build(on, llm_conn_id=None)["enrich"]  # no server anywhere: skipped
    monkeypatch.setenv(*connection_env("llm", conn_type="http", host="http://vllm:8000"))
    plan = plan_build(on, llm_conn_id="llm")
    assert plan["enrich"] and plan["llm_base_url"] == "http://vllm:8000"
    assert plan["runtime_env"]["env_vars"]["PMCVL_LLM_BASE_URL"] == "http://vllm:8000"
    configured = {**on, "overrides": {"longcap": {"base_url": "http://cfg:1"}}}
    plan = plan_build(configured, llm_conn_id="llm")
    assert plan["llm_base_url"] == "http://cfg:1"  # the config's server, as the job will use
    assert "PMCVL_LLM_BASE_URL" not in plan["runtime_env"]["env_vars"]
