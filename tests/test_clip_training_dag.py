"""The ``clip_training`` DAG: it parses, is scheduled on the shards Asset, wires plan → train →
evaluate → record_scores, and its operators turn the rendered specs into valid Jobs with the
configured GPUs. Airflow's environment comes from ``conftest`` (``airflow_fixtures``), set
before anything imports airflow. No cluster: the provider builds the Job request offline."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, upload_tree
from test_benchmark_build import make_dataset

from ray_jobs.config import OutputS3Settings, load_settings
from ray_jobs.training import k8s_job, run_plan

DAG_FILE = REPO / "dags" / "clip_training.py"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: offline, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: offline, context: {cluster: offline, user: offline}}]
current-context: offline
users: [{name: offline, user: {token: offline}}]
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "pmcvl.yaml"
    training = {"namespace": "ml", "train": {"gpus": 2}, "evaluation": {"gpus": 1}}
    path.write_text(yaml.safe_dump({"training": training}))
    return path


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster that is never called: the provider only reads it to build the request."""
    path = tmp_path_factory.mktemp("kube") / "config"
    path.write_text(KUBECONFIG)
    return path


@pytest.fixture(scope="module")
def dag(config: Path):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PMCVL_CONFIG", str(config))
        bag = DagBag(dag_folder=str(DAG_FILE))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["clip_training"]


def test_dag_structure(dag) -> None:  # type: ignore[no-untyped-def]
    from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator

    from operators.assets import PMC_SHARDS

    assert set(dag.task_ids) == {"plan", "train", "evaluate", "record_scores"}
    up = {t.task_id: set(t.upstream_task_ids) for t in dag.tasks}
    assert up == {
        "plan": set(),
        "train": {"plan"},
        "evaluate": {"plan", "train"},
        "record_scores": {"plan", "evaluate"},
    }
    assert tuple(dag.timetable.asset_condition.objects) == (PMC_SHARDS,)
    assert dag.max_active_runs == 1 and not dag.catchup

    train, evaluate = dag.get_task("train"), dag.get_task("evaluate")
    for op, container in ((train, "train"), (evaluate, "evaluate")):
        assert isinstance(op, KubernetesJobOperator)
        assert op.wait_until_job_complete and op.deferrable
        assert op.namespace == "ml" and op.base_container_name == container
        assert "job_spec" in op.template_fields
    assert not train.do_xcom_push and evaluate.do_xcom_push
    assert train.execution_timeout == dt.timedelta(seconds=3 * 86400 + 3600)
    (outlet,) = dag.get_task("record_scores").outlets
    assert outlet.name == "pmcvl_clip_checkpoints" and outlet.uri == "s3://pmcvl/training"


def test_dag_module_imports_nothing_heavy(config: Path) -> None:
    code = (
        "import sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(DAG_FILE)!r})\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "heavy = ['torch', 'open_clip', 'open_clip_train', 'ray', 'pandas', 'webdataset']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    env = {**os.environ, "PMCVL_CONFIG": str(config)}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_plan_from_the_asset_event(
    tmp_path: Path, s3_admin, moto_endpoint: str, config: Path
) -> None:  # type: ignore[no-untyped-def]
    """The manifest named by the newest event, its shard list, and both Jobs rendered."""
    s3_admin.create_bucket(Bucket="pmc")
    upload_tree(s3_admin, "pmc", make_dataset(tmp_path / "dataset"))
    t0 = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    events = [
        SimpleNamespace(extra={"manifest": "s3://pmc/old/manifest.json"}, timestamp=t0),
        SimpleNamespace(extra={"manifest": "s3://pmc/manifest.json"}, timestamp=t0.replace(hour=5)),
        SimpleNamespace(extra={}, timestamp=t0.replace(hour=6)),  # names none: skipped
    ]
    manifest = run_plan.manifest_from_events(events, "file:///fallback/manifest.json")
    assert manifest == "s3://pmc/manifest.json"
    assert run_plan.manifest_from_events([], "s3://x/manifest.json") == "s3://x/manifest.json"

    run = run_plan.run_name("asset_triggered__2026-11-30T05:00:00", t0.replace(hour=5))
    assert run.startswith("clip-20261130-050000-") and len(run) == 27
    summary = run_plan.manifest_summary(
        manifest, "train", OutputS3Settings(endpoint_url=moto_endpoint)
    )
    assert summary["shards"] == 3 and summary["samples"] == 16 and summary["runs"] == ["run-test"]
    with pytest.raises(ValueError, match="no 'test' shards"):
        run_plan.manifest_summary(manifest, "test", OutputS3Settings(endpoint_url=moto_endpoint))

    settings = load_settings(config).training
    plan = run_plan.plan_run(settings, manifest, run, summary)
    assert json.loads(json.dumps(plan)) == plan  # travels as XCom
    train = plan["train_job"]["spec"]["template"]["spec"]["containers"][0]
    assert train["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "--nproc_per_node=2" in train["command"]
    assert plan["checkpoint"] == f"/mnt/pmcvl/runs/{run}/checkpoints/epoch_10.pt"

    scores = {
        "model": "pmcvl-ViT-B-16-longtext-ctx256",
        "context_length": 256,
        "benchmark": {"size": 1000},
        "retrieval": {
            "image_to_text": {"R@1": 0.1, "R@5": 0.3, "median_rank": 12.0},
            "text_to_image": {"R@1": 0.2, "R@5": 0.4, "median_rank": 9.0},
            "mean_recall": 0.25,
        },
        "zero_shot": {"top1": 0.5},
    }
    record = run_plan.scores_record(plan, scores)
    assert record["image_to_text"] == {"R@1": 0.1, "R@5": 0.3} and record["mean_recall"] == 0.25
    assert record["benchmark_size"] == 1000 and record["zero_shot_top1"] == 0.5
    assert record["output"] == f"s3://pmcvl/training/{run}"


@pytest.mark.parametrize(("task_id", "gpus"), [("train", "2"), ("evaluate", "1")])
def test_operators_build_valid_jobs(
    dag, config: Path, kubeconfig: Path, task_id: str, gpus: str
) -> None:  # type: ignore[no-untyped-def]
    """What the provider would send the API server: our spec merged with its own fields."""
    from kubernetes.client import ApiClient

    settings = load_settings(config).training
    run = "clip-20261130-050000-abc123"
    spec = (
        k8s_job.render_training_job(settings, "s3://pmc/manifest.json", run)
        if task_id == "train"
        else k8s_job.render_eval_job(settings, run)
    )
    op = dag.get_task(task_id)
    op.config_file = str(kubeconfig)  # the operator's own parameter, read by its hook
    op.job_spec = spec
    op.full_job_spec = k8s_job.to_v1job(spec)  # what RenderedJobOperator.execute does
    job = ApiClient().sanitize_for_serialization(op.build_job_request_obj(context=None))
    k8s_job.validate(job, "1.30")

    pod = job["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    main = containers[task_id]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == gpus
    assert main["command"] == spec["spec"]["template"]["spec"]["containers"][0]["command"]
    assert job["metadata"]["namespace"] == "ml" and job["metadata"]["name"].startswith("job-")
    assert job["spec"]["activeDeadlineSeconds"] == spec["spec"]["activeDeadlineSeconds"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    if task_id == "evaluate":  # the scores come back through the XCom sidecar
        assert "airflow-xcom-sidecar" in containers
        assert {"name": "xcom", "mountPath": "/airflow/xcom"} in main["volumeMounts"]
        assert k8s_job.XCOM_RETURN in main["command"]
    else:
        assert set(containers) == {"train"}
