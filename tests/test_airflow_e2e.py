"""``pmc_dataset`` end to end: ``dag.test()`` against a real Airflow metadata database (SQLite,
migrated) and a real local Ray cluster reached through its Job Submission API with token auth.
The first run builds the sample corpus into shards and records the Asset event; the second finds
nothing new and ends green at ``discover``; a retried build task re-attaches to the run's job."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from airflow_fixtures import E2E_ARTICLES, connection_env
from fake_llm_server import start_fake_llm


def states(run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.run_id == run.run_id).all()
        return {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in tis}


def asset_events(uri: str) -> list:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .filter(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
            .all()
        )
        session.expunge_all()
        return rows


def test_first_run_builds_validates_and_publishes(pmc_first_run, pmc_params):
    from operators.assets import PMC_SHARDS

    _, run = pmc_first_run
    assert str(run.state.value if hasattr(run.state, "value") else run.state) == "success"
    assert states(run) == {
        "discover": "success",
        "enrichment": "success",
        "llm_health": "skipped",  # enrichment is off in this run
        "build_dataset": "success",
        "validate": "success",
        "publish": "success",
    }
    out = Path(pmc_params["output_uri"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shards"] and all((out / s["name"]).is_file() for s in manifest["shards"])

    events = asset_events(PMC_SHARDS.uri)
    assert len(events) == 1 and events[0].source_run_id == run.run_id
    extra = events[0].extra
    assert extra["manifest"] == PMC_SHARDS.uri == f"file://{out}/manifest.json"
    assert extra["new_shards"] == [s["name"] for s in manifest["shards"]]
    assert extra["dataset_samples"] == manifest["counts"]["kept"] > 0
    assert extra["counts"]["articles"] == manifest["counts"]["articles"] >= E2E_ARTICLES
    assert extra["run_id"] in manifest["runs"]


def test_a_retried_build_task_reattaches_to_its_ray_job(pmc_first_run):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from operators.ray_job import submission_id_for

    dag, run = pmc_first_run
    with create_session() as session:
        query = XComModel.get_many(
            run_id=run.run_id, dag_ids=dag.dag_id, task_ids="build_dataset", key="return_value"
        )
        result = XComModel.deserialize_value(session.scalars(query).first())
    job_id = submission_id_for(dag.dag_id, run.run_id, "build_dataset")
    assert result["submission_id"] == job_id

    # the same task instance again, as Airflow retries it after a lost worker
    op = dag.get_task("build_dataset")
    client = op.client()
    before = [j for j in client.list_jobs() if j.submission_id.startswith(job_id)]
    assert len(before) == 1
    ti = type("TI", (), {})()
    ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.try_number = (
        dag.dag_id,
        run.run_id,
        "build_dataset",
        -1,
        2,
    )
    again = op.execute({"ti": ti})
    assert again["submission_id"] == job_id and again["summary"] == result["summary"]
    after = [j for j in client.list_jobs() if j.submission_id.startswith(job_id)]
    assert len(after) == 1


def test_second_run_finds_nothing_new_and_ends_green(pmc_first_run, pmc_params):
    from operators.assets import PMC_SHARDS

    dag, _ = pmc_first_run
    manifest = (Path(pmc_params["output_uri"]) / "manifest.json").read_bytes()
    run = dag.test(run_conf=pmc_params, logical_date=datetime(2026, 3, 2, tzinfo=UTC))
    assert str(getattr(run.state, "value", run.state)) == "success"
    got = states(run)
    assert got.pop("discover") == "success"
    assert set(got.values()) == {"skipped"}
    assert (Path(pmc_params["output_uri"]) / "manifest.json").read_bytes() == manifest
    assert len(asset_events(PMC_SHARDS.uri)) == 1  # nothing published


def test_enrichment_runs_through_airflow_with_the_clusters_key(
    pmc_first_run, pmc_params, airflow_home, tmp_path, monkeypatch, caplog
):
    """The enrichment branch for real: the health sensor checks the (fake) vLLM server, which
    wants an API key like ``vllm serve --api-key``, with the ``pmcvl_llm`` connection's key;
    the build job takes the same key from the cluster's own environment (as the chart mounts
    it from a Secret) and enriches every kept panel. The key shows up nowhere: not in XCom,
    the task logs, the Ray job's runtime env or metadata, nor any output file."""
    import pyarrow.parquet as pq
    from conftest import CLUSTER_LLM_KEY

    dag, _ = pmc_first_run
    caplog.set_level("INFO")
    with start_fake_llm(api_key=CLUSTER_LLM_KEY) as fake:
        monkeypatch.setenv(
            *connection_env("pmcvl_llm", conn_type="http", host=fake.url, password=CLUSTER_LLM_KEY)
        )
        out = tmp_path / "enriched"
        conf = {
            **pmc_params,
            "output_uri": str(out),
            "enrich": True,
            "overrides": {**pmc_params["overrides"], "longcap": {"model": "fake-vlm"}},
        }
        run = dag.test(run_conf=conf, logical_date=datetime(2026, 3, 3, tzinfo=UTC))
        served = dict(fake.counts)
    assert states(run) == {
        "discover": "success",
        "enrichment": "success",
        "llm_health": "success",
        "build_dataset": "success",
        "validate": "success",
        "publish": "success",
    }
    assert served.get("unauthorized", 0) == 0 and served["models"] >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    kept = manifest["counts"]["kept"]
    assert kept > 0 and manifest["counts"]["enriched"] == kept
    assert served["chat"] >= 2 * kept  # augment + feasibility per kept panel
    rows = pq.read_table(out / "index").to_pylist()
    assert len(rows) == kept and all(r["long_caption"] for r in rows)

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        values = session.query(XComModel.value).filter(XComModel.run_id == run.run_id).all()
    assert values and not any(CLUSTER_LLM_KEY in str(v) for (v,) in values)
    jobs = list(dag.get_task("build_dataset").client().list_jobs())
    assert jobs and not any(
        CLUSTER_LLM_KEY in json.dumps(j.model_dump(), default=str) for j in jobs
    )
    assert "build_dataset" in caplog.text and CLUSTER_LLM_KEY not in caplog.text  # task logs
    files = [p for p in [*(airflow_home / "logs").rglob("*"), *out.rglob("*")] if p.is_file()]
    assert any(p.is_relative_to(out) for p in files)
    assert not [p for p in files if CLUSTER_LLM_KEY.encode() in p.read_bytes()]
