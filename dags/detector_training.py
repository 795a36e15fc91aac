"""``detector_training``: retrain the panel detector on fresh synthetic figures, by hand.

    plan ─▶ synthesize ─┬▶ train ─▶ evaluate_candidate ─┬▶ compare ─▶ publish
                         └▶ evaluate_current ────────────┘

Every step is a Ray job (``pmcvl-dev synth``, ``train-detector``, ``eval-detector``, a copy)
on the Ray connection ``PMCVL_DEV_RAY_CONN`` names (default ``pmcvl_ray``): model development,
so that RayCluster must run the modeldev image (``docker/modeldev.Dockerfile``; the pipeline
image the dataset build runs on never carries ``modeldev/``). The files live where the
cluster's workers see them (``workdir``, a shared volume) and each step is visible in the Ray
dashboard; training and evaluation ask Ray for ``gpus`` and go through the ``gpu`` pool, so
Airflow never sends more GPU work than the pool allows. Both
checkpoints are scored on the same fresh validation split; ``compare`` lets ``publish`` replace
the current checkpoint only when the candidate beats it by ``min_gain`` on ``metric``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import Param, dag, get_current_context, task

from operators.connections import RAY_CONN_ID
from operators.ray_job import RayJobOperator

GPU_POOL = os.environ.get("PMCVL_GPU_POOL", "gpu")
DEV_RAY_CONN_ID = os.environ.get("PMCVL_DEV_RAY_CONN", RAY_CONN_ID)
DETECTOR_DIR = os.environ.get("PMCVL_DETECTOR_DIR", "/opt/airflow/pmcvl/detector")
CURRENT = os.environ.get(
    "PMCVL_DETECTOR_WEIGHTS", "/opt/airflow/pmcvl/models/panel-detector/yolo11n-panels.pt"
)


@dag(
    dag_id="detector_training",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    tags=["pmcvl", "models"],
    params={
        "workdir": Param(DETECTOR_DIR, type="string", description="shared by the Ray workers"),
        "figures": Param(2000, type="integer", minimum=1, description="synthetic figures"),
        "seed": Param(0, type="integer"),
        "arch": Param("yolo11n", enum=["yolo11n", "yolo11s", "yolo11m", "rtdetr-l"]),
        "epochs": Param(30, type="integer", minimum=1),
        "imgsz": Param(320, type="integer", minimum=32),
        "batch": Param(16, type="integer", minimum=1),
        "gpus": Param(1, type="number", minimum=0, description="per training / eval job"),
        "current_weights": Param(CURRENT, type="string", description="the checkpoint in use"),
        "metric": Param("mAP50_95", enum=["mAP50_95", "mAP50", "f1"]),
        "min_gain": Param(0.0, type="number", description="needed over the current checkpoint"),
    },
    doc_md=__doc__,
)
def detector_training():
    @task
    def plan() -> dict:
        """This run's folders and the commands of its Ray jobs."""
        from operators.detector_plan import detector_plan

        context = get_current_context()
        commands = detector_plan(context["params"], context["run_id"])
        for key, value in commands.items():
            context["ti"].xcom_push(key=key, value=value)
        return commands

    steps = plan()
    synthesize = RayJobOperator(
        task_id="synthesize",
        entrypoint=steps["synth"],
        entrypoint_num_cpus=1,
        ray_conn_id=DEV_RAY_CONN_ID,
        poll_interval=15,
    )
    gpu = {
        "entrypoint_num_gpus": steps["gpus"],
        "pool": GPU_POOL,
        "ray_conn_id": DEV_RAY_CONN_ID,
        "poll_interval": 15,
    }
    train = RayJobOperator(task_id="train", entrypoint=steps["train"], **gpu)
    candidate = RayJobOperator(
        task_id="evaluate_candidate", entrypoint=steps["eval_candidate"], **gpu
    )
    current = RayJobOperator(task_id="evaluate_current", entrypoint=steps["eval_current"], **gpu)

    @task.short_circuit
    def compare(steps: dict, candidate: dict, current: dict) -> str | bool:
        """The publish command when the candidate wins, else False (publish is skipped)."""
        from operators.detector_plan import publish_command, wins

        params = get_current_context()["params"]
        ok, why = wins(
            candidate["summary"], current["summary"], params["metric"], params["min_gain"]
        )
        print(why)
        return publish_command(steps, candidate["summary"]) if ok else False

    decision = compare(steps, candidate.output, current.output)
    publish = RayJobOperator(task_id="publish", entrypoint=decision, ray_conn_id=DEV_RAY_CONN_ID)
    synthesize >> [train, current]
    train >> candidate
    decision >> publish


detector_training()
