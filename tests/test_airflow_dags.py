"""Every DAG file parses without heavy imports, and each of our DAGs has the shape it should:
tasks, dependencies, schedule, pools, params, operators."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from airflow_fixtures import DAGS, load_dag

HEAVY = ("ray", "torch", "pyarrow", "pandas", "ultralytics", "open_clip", "boto3", "aiohttp")

OURS = ("pmc_dataset.py", "detector_training.py")
PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
folder, heavy = sys.argv[1], set(sys.argv[2].split(","))
pulled = {}
for name in sys.argv[3:]:  # our files first, alone: what each pulls in is its own doing
    DagBag(dag_folder=f"{folder}/{name}")
    pulled[name] = sorted({m.split(".")[0] for m in sys.modules} & heavy)
bag = DagBag(dag_folder=folder, known_pools={"default_pool", "gpu"})
print(json.dumps({
    "errors": bag.import_errors,
    "dags": sorted(bag.dags),
    "warnings": sorted(w.message for w in bag.dag_warnings),
    "heavy": pulled,
}))
"""


@pytest.fixture(scope="module")
def parsed() -> dict:
    """The DAG folder parsed in a fresh interpreter, so ``sys.modules`` shows what it pulled in."""
    result = subprocess.run(
        [sys.executable, "-c", PARSE, str(DAGS), ",".join(HEAVY), *OURS],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_dag_file_imports_without_errors(parsed):
    assert parsed["errors"] == {}
    assert {"pmc_dataset", "detector_training", "clip_training"} <= set(parsed["dags"])
    assert parsed["warnings"] == []  # every pool a task names is one we create


def test_dag_files_import_nothing_heavy(parsed):
    """The DAG processor re-parses every file often: what makes parsing slow is importing Ray,
    torch or the like at module level, so that is what is checked (timing is no test)."""
    assert parsed["heavy"] == {name: [] for name in OURS}


def deps(dag) -> dict[str, set[str]]:  # type: ignore[no-untyped-def]
    return {t.task_id: set(t.downstream_task_ids) for t in dag.tasks}


def test_pmc_dataset_structure():
    from operators.assets import PMC_SHARDS
    from operators.llm_health import LLMHealthSensor
    from operators.ray_job import RayJobOperator
    from ray_jobs.jobs.build_dataset import RUN_ID_ENV

    dag = load_dag("pmc_dataset")
    assert deps(dag) == {
        "discover": {"enrichment", "llm_health", "build_dataset", "validate", "publish"},
        "enrichment": {"llm_health", "build_dataset"},
        "llm_health": {"build_dataset"},
        "build_dataset": {"validate"},
        "validate": {"publish"},
        "publish": set(),
    }
    assert type(dag.timetable).__name__ == "CronTriggerTimetable"
    assert "expression='0 0 * * *'" in repr(dag.timetable)  # @daily
    assert dag.catchup is False and dag.max_active_runs == 1
    assert dict(dag.params) == {
        "config": None,
        "output_uri": dag.params["output_uri"],
        "source": {},
        "enrich": None,
        "overrides": {},
    }
    discover = dag.get_task("discover")
    assert type(discover).__name__ == "_ShortCircuitDecoratedOperator"
    assert dag.get_task("enrichment").task_type == "_BranchPythonDecoratedOperator"
    sensor = dag.get_task("llm_health")
    assert isinstance(sensor, LLMHealthSensor) and sensor.deferrable
    assert sensor.timeout == timedelta(minutes=30).total_seconds()
    build = dag.get_task("build_dataset")
    assert isinstance(build, RayJobOperator) and build.deferrable
    assert build.pool == "gpu" and build.ray_conn_id == "pmcvl_ray"
    assert build.trigger_rule == "none_failed_min_one_success"
    assert build.retries == 2
    assert build.submission_id_env == RUN_ID_ENV  # the job's id is its run id: runs/<id>.json
    publish = dag.get_task("publish")
    assert [o.name for o in publish.outlets] == [PMC_SHARDS.name]
    assert all(t.pool == "default_pool" for t in dag.tasks if t.task_id != "build_dataset")


def test_detector_training_structure():
    from operators.ray_job import RayJobOperator

    dag = load_dag("detector_training")
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual only
    assert deps(dag) == {
        "plan": {
            "synthesize",
            "train",
            "evaluate_candidate",
            "evaluate_current",
            "compare",
        },
        "synthesize": {"train", "evaluate_current"},
        "train": {"evaluate_candidate"},
        "evaluate_candidate": {"compare"},
        "evaluate_current": {"compare"},
        "compare": {"publish"},
        "publish": set(),
    }
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert {"workdir", "figures", "arch", "epochs", "gpus", "current_weights", "metric"} <= set(
        dag.params
    )
    for task_id in ("synthesize", "train", "evaluate_candidate", "evaluate_current", "publish"):
        assert isinstance(dag.get_task(task_id), RayJobOperator)
    gpu_tasks = {t.task_id for t in dag.tasks if t.pool == "gpu"}
    assert gpu_tasks == {"train", "evaluate_candidate", "evaluate_current"}
    assert type(dag.get_task("compare")).__name__ == "_ShortCircuitDecoratedOperator"
