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


def test_enrichment_runs_through_airflow_with_the_connections_key(
    pmc_first_run, pmc_params, tmp_path, monkeypatch
):
    """The enrichment branch for real: the health sensor checks the (fake) vLLM server, which
    wants an API key like ``vllm serve --api-key``; the build job gets that key from the
    ``pmcvl_llm`` connection at submission (never through XCom) and enriches every kept panel."""
    import pyarrow.parquet as pq

    dag, _ = pmc_first_run
    with start_fake_llm(api_key="sk-pmcvl-e2e") as fake:
        monkeypatch.setenv(
            *connection_env("pmcvl_llm", conn_type="http", host=fake.url, password="sk-pmcvl-e2e")
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
    # the key went to the job at submission only: no XCom of the run holds it
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        values = session.query(XComModel.value).filter(XComModel.run_id == run.run_id).all()
    assert values and not any("sk-pmcvl-e2e" in str(v) for (v,) in values)
