"""``pmc_dataset``: every day, the new and changed PMC articles become new shards.

    discover ─▶ enrichment ─▶ llm_health ─▶ build_dataset ─▶ validate ─▶ publish
                     └──────────────────────────▲

- ``discover`` asks the ledger (through the source's listing or S3 inventory) what is new,
  without starting cluster work; nothing new skips the rest and the run ends green.
- ``enrichment`` goes through ``llm_health`` (waits, deferred, for the vLLM server and its
  model) only when caption enrichment is on for this run.
- ``build_dataset`` runs ``ray_jobs.jobs.build_dataset`` as a Ray job and waits deferred; a
  retry re-attaches to the job it started. The job's submission id is its run id
  (``PMCVL_RUN_ID``), so its record is ``runs/<submission id>.json`` under the output.
- ``validate`` reads that run record (not the job's log) and checks the manifest and the run's
  new shards (``ray_jobs.shards.validate``, as ``pmcvl validate`` does); ``publish`` emits the
  ``pmcvl_shards`` Asset event, whose extra says where the manifest is and what was added.

Heavy modules (Ray, pyarrow, the pipeline) are imported inside the tasks only.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import Param, dag, get_current_context, task

from operators.assets import PMC_SHARDS, dataset_uri, manifest_asset_uri
from operators.connections import LLM_CONN_ID, RAY_CONN_ID, S3_CONN_ID
from operators.llm_health import LLMHealthSensor
from operators.ray_job import RayJobOperator

RUN_ID_ENV = "PMCVL_RUN_ID"  # ray_jobs.jobs.build_dataset.RUN_ID_ENV (not imported: heavy)
GPU_POOL = os.environ.get("PMCVL_GPU_POOL", "gpu")
RETRIES = int(os.environ.get("PMCVL_DAG_RETRIES", "2"))  # 0 for a local demo: fail at once


@dag(
    dag_id="pmc_dataset",
    schedule=os.environ.get("PMCVL_DATASET_SCHEDULE", "@daily"),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=24),
    default_args={"retries": RETRIES, "retry_delay": timedelta(minutes=5)},
    tags=["pmcvl", "dataset"],
    params={
        "config": Param(
            os.environ.get("PMCVL_CONFIG"),
            type=["null", "string"],
            description="pipeline config YAML, a path both Airflow and the Ray cluster can read",
        ),
        "output_uri": Param(
            dataset_uri(), type="string", description="where the dataset is (output.uri)"
        ),
        "source": Param(
            {}, type="object", description="overrides of the source section, e.g. {kind, path}"
        ),
        "enrich": Param(
            None,
            type=["null", "boolean"],
            description="caption enrichment through the LLM server; null: as the config says",
        ),
        "overrides": Param(
            {},
            type="object",
            description=(
                "further config overrides, nested as in the YAML; secrets are refused (use the"
                " connection and the cluster's Secret), model paths must be under model_roots"
            ),
        ),
    },
    doc_md=__doc__,
)
def pmc_dataset():
    @task.short_circuit
    def discover() -> dict | bool:
        """What is new and changed since the ledger's last commit; False ends the run."""
        from operators.build_plan import plan_build
        from operators.connections import aws_environment

        context = get_current_context()
        with aws_environment(S3_CONN_ID):
            plan = plan_build(context["params"], LLM_CONN_ID)
        print(
            f"{plan['pending']} of {plan['listed']} listed article versions are new or changed"
            f" (first: {', '.join(plan['first_pending']) or '-'}); enrichment "
            f"{'on' if plan['enrich'] else 'off'}"
        )
        ti = context["ti"]
        for key in ("entrypoint", "runtime_env", "llm_base_url", "llm_model"):
            ti.xcom_push(key=key, value=plan[key])
        return plan if plan["pending"] else False

    @task.branch
    def enrichment(plan: dict) -> list[str]:
        """The health check only when enrichment is on; the build waits for it then."""
        return ["llm_health", "build_dataset"] if plan["enrich"] else ["build_dataset"]

    plan = discover()
    llm_health = LLMHealthSensor(
        task_id="llm_health",
        model=plan["llm_model"],
        base_url=plan["llm_base_url"],
        llm_conn_id=LLM_CONN_ID,
        poke_interval=15,
        timeout=timedelta(minutes=30),
    )
    build = RayJobOperator(
        task_id="build_dataset",
        entrypoint=plan["entrypoint"],
        runtime_env=plan["runtime_env"],
        ray_conn_id=RAY_CONN_ID,
        pool=GPU_POOL,
        poll_interval=10,
        execution_timeout=timedelta(hours=20),
        trigger_rule="none_failed_min_one_success",
        submission_id_env=RUN_ID_ENV,
    )

    @task
    def validate(plan: dict, job: dict) -> dict:
        """The manifest adds up; the run's new shards are what its run record says, rows
        included. The record is ``runs/<submission id>.json``: the job's id is its run id."""
        import logging

        from operators.build_plan import run_settings
        from operators.shard_validation import validate_build

        settings = run_settings(get_current_context()["params"])
        log = logging.getLogger(__name__)
        return validate_build(
            plan["output_uri"], job["submission_id"], settings.output.s3, log, S3_CONN_ID
        )

    @task(outlets=[PMC_SHARDS])
    def publish(plan: dict, checked: dict) -> dict:
        """Tell ``pmcvl_shards`` consumers (CLIP training) where the new shards are."""
        run = checked["run"]  # from the run record
        new = checked["checked"]
        extra = {
            "manifest": manifest_asset_uri(plan["output_uri"]),
            "output": run["output"],
            "run_id": run["run_id"],
            "new_shards": new[:500],
            "new_shard_count": len(new),
            "counts": run.get("counts") or {},
            "dataset_shards": checked["shards"],
            "dataset_samples": checked["samples"],
            "config_hash": plan["config_hash"],
        }
        get_current_context()["outlet_events"][PMC_SHARDS].extra = extra
        print(f"published {len(new)} new shard(s) of run {run['run_id']}: {extra['manifest']}")
        return extra

    checked = validate(plan, build.output)
    plan >> enrichment(plan) >> [llm_health, build]
    llm_health >> build
    publish(plan, checked)


pmc_dataset()
