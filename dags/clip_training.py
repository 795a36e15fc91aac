"""``clip_training``: new shards published → a CLIP model trained on GPU nodes → its scores.

    plan ─▶ train ─▶ evaluate ─▶ record_scores

- Scheduled on the ``pmcvl_shards`` Asset that ``pmc_dataset`` publishes. ``plan`` takes the
  manifest from the triggering event's extra (``manifest``; the Asset's URI when absent),
  reads its shard list (failing before any GPU is asked for when the split is empty), names the
  run and renders both Kubernetes Jobs from the config's ``training`` section
  (``ray_jobs.training.k8s_job``; the config file is ``$PMCVL_CONFIG``).
- ``train`` runs the training Job and waits, deferred: the pod pulls the dataset, builds the
  held-out benchmark of the newest articles and trains with those articles excluded.
- ``evaluate`` runs the evaluation Job the same way; the scores come back through the
  operator's XCom sidecar. ``record_scores`` keeps them with the run: its XCom, and the
  ``pmcvl_clip_checkpoints`` Asset event's extra.

Only Airflow, the cncf-kubernetes provider and the light config module are imported at the top.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.sdk import Asset, dag, get_current_context, task

from operators.assets import PMC_SHARDS
from ray_jobs.config import load_settings

SETTINGS = load_settings(os.environ.get("PMCVL_CONFIG") or None).training
K8S_CONN_ID = os.environ.get("PMCVL_K8S_CONN_ID", "kubernetes_default")
CLIP_CHECKPOINTS = Asset(
    name="pmcvl_clip_checkpoints",
    uri=(SETTINGS.output_uri or f"file://{SETTINGS.work_dir}/runs").rstrip("/"),
    group="pmcvl",
)


class RenderedJobOperator(KubernetesJobOperator):
    """``KubernetesJobOperator`` for a Job spec rendered at run time by an upstream task.

    ``full_job_spec`` is not a templated field, so the spec (a dict, from XCom) arrives as
    ``job_spec`` and becomes the ``V1Job`` when the task runs. The operator's own fields
    (namespace, labels for finding the pods, the XCom sidecar) are merged over it as usual.
    """

    template_fields = (*KubernetesJobOperator.template_fields, "job_spec")

    def __init__(self, *, job_spec: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_spec = job_spec

    def execute(self, context: Any) -> Any:
        from ray_jobs.training.k8s_job import to_v1job

        self.full_job_spec = to_v1job(self.job_spec)
        return super().execute(context)


def _job_operator(task_id: str, job: Any, container: str, deadline_s: int, **kwargs: Any):  # type: ignore[no-untyped-def]
    return RenderedJobOperator(
        task_id=task_id,
        job_spec=job,
        namespace=SETTINGS.namespace,
        kubernetes_conn_id=K8S_CONN_ID,
        base_container_name=container,
        wait_until_job_complete=True,
        deferrable=True,
        job_poll_interval=60,
        get_logs=True,
        startup_timeout_seconds=1800,  # GPU scale-up and image pull, when not deferred
        on_finish_action="delete_succeeded_pod",  # a failed pod stays to be looked at
        execution_timeout=timedelta(seconds=deadline_s + 3600),
        **kwargs,
    )


@dag(
    dag_id="clip_training",
    schedule=[PMC_SHARDS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},  # a Job is not retried blind: backoffLimit decides in-cluster
    tags=["pmcvl", "training"],
    doc_md=__doc__,
)
def clip_training():
    @task(multiple_outputs=True)
    def plan() -> dict[str, Any]:
        """The manifest, its shard list, the run's name and its two Job specs."""
        from operators.connections import S3_CONN_ID, aws_environment
        from ray_jobs.training import run_plan

        context = get_current_context()
        try:
            events = list(context["triggering_asset_events"][PMC_SHARDS])
        except KeyError:  # a manual trigger
            events = []
        manifest = run_plan.manifest_from_events(events, PMC_SHARDS.uri)
        run = run_plan.run_name(context["run_id"], context["dag_run"].run_after)
        with aws_environment(S3_CONN_ID):
            summary = run_plan.manifest_summary(manifest, SETTINGS.split, SETTINGS.s3)
        print(f"run {run}: {summary['shards']} shards, {summary['samples']} samples of {manifest}")
        return run_plan.plan_run(SETTINGS, manifest, run, summary)

    planned = plan()
    train = _job_operator(
        "train",
        planned["train_job"],
        "train",
        SETTINGS.train.active_deadline_seconds,
        do_xcom_push=False,
    )
    evaluate = _job_operator(
        "evaluate",
        planned["eval_job"],
        "evaluate",
        SETTINGS.evaluation.active_deadline_seconds,
        do_xcom_push=True,  # the scores JSON, written to /airflow/xcom/return.json
    )

    @task(outlets=[CLIP_CHECKPOINTS])
    def record_scores(plan: dict[str, Any], scores: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint and its headline scores, as this task's XCom and the Asset event."""
        from ray_jobs.training.run_plan import scores_record

        record = scores_record(plan, scores)
        get_current_context()["outlet_events"][CLIP_CHECKPOINTS].extra = record
        print(f"run {record['run']}: mean recall {record['mean_recall']}")
        return record

    train >> evaluate
    record_scores(planned, evaluate.output)


clip_training()
