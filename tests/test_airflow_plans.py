"""How ``pmc_dataset``'s params become the settings of the worker-side discovery and of the Ray
job (the same ones on both sides), and what discovery reports without starting Ray."""

from __future__ import annotations

import json

import pytest
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


def test_run_params_refuse_secrets_and_models_from_elsewhere(tmp_path, monkeypatch):
    """Params are shown in the Airflow UI, XCom and the Ray dashboard, and a checkpoint is
    code: a key, a URL with credentials, or weights outside the configured model roots are
    refused before anything is planned, naming the param and where it belongs instead."""
    from operators.run_params import MODEL_FIELDS, ParamRefused, check_runtime_env
    from ray_jobs.config import PROJECT_MODELS, Settings

    corpus = tmp_path / "corpus"
    write_corpus(corpus, 1, "folders", seed=1)
    base = {"output_uri": str(tmp_path / "out"), "source": {"kind": "local", "path": str(corpus)}}
    shipped = str(PROJECT_MODELS / "panel-detector" / "yolo11n-panels.pt")
    elsewhere = tmp_path / "evil.pt"
    elsewhere.write_bytes(b"not a checkpoint")
    refused = [
        ("longcap.api_key", {"longcap": {"api_key": "sk-canary-param"}}),
        ("longcap.base_url", {"longcap": {"base_url": "http://user:sk-canary@vllm:8000/v1"}}),
        ("detector.weights", {"detector": {"weights": str(PROJECT_MODELS / ".." / "evil.pt")}}),
        ("classifier.weights", {"classifier": {"weights": str(elsewhere)}}),
        ("detector.weights", {"detector": {"weights": "s3://someone-else/yolo.pt"}}),
        ("model_roots", {"model_roots": [str(tmp_path)]}),
    ]
    for name, overrides in refused:
        with pytest.raises(ParamRefused) as info:
            plan_build({**base, "overrides": overrides}, llm_conn_id=None)
        assert f"{name}" in str(info.value)
        assert "sk-canary" not in str(info.value)  # the refusal does not print the secret
    plan = plan_build({**base, "overrides": {"detector": {"weights": shipped}}}, llm_conn_id=None)
    assert plan["runtime_env"]["env_vars"]["PMCVL__DETECTOR__WEIGHTS"] == json.dumps(shipped)
    # a root the config itself names admits its models
    monkeypatch.setenv("PMCVL__MODEL_ROOTS", json.dumps([str(tmp_path)]))
    plan_build({**base, "overrides": {"classifier": {"weights": str(elsewhere)}}}, None)

    with pytest.raises(ParamRefused, match="PMCVL_LLM_API_KEY"):
        check_runtime_env({"env_vars": {"PMCVL_LLM_API_KEY": "x", "PMCVL__OUTPUT__URI": "y"}})
    check_runtime_env({"env_vars": {"PMCVL__OUTPUT__URI": "y"}})

    # every config field that names a model file is in the guarded list
    def names(model, path=()):
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and hasattr(kind, "model_fields"):
                yield from names(kind, (*path, name))
            else:
                yield (*path, name)

    looks_like_model = {
        p
        for p in names(Settings)
        if any(w in p[-1] for w in ("weights", "pretrained", "tokenizer"))
    } | {p for p in names(Settings) if p[-1].startswith("hf_") and p[-1].endswith("path")}
    assert looks_like_model <= MODEL_FIELDS
