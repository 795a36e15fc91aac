"""Airflow for the tests: a throwaway ``AIRFLOW_HOME`` with a real (SQLite) metadata database.

Airflow reads its configuration once, when ``airflow`` is first imported, so
:func:`configure_airflow_env` runs from ``conftest.pytest_configure``, before any test module
(or ``operators``, which imports ``airflow.sdk``) is collected. The database is migrated lazily,
by the ``airflow_home`` fixture, only for the tests that need one.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "dags"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def configure_airflow_env() -> Path:
    """Point Airflow at a fresh home (dags from the repo, no examples, SQLite)."""
    if "airflow" in sys.modules:
        raise RuntimeError("airflow was imported before the test environment was configured")
    home = Path(tempfile.mkdtemp(prefix="pmcvl-airflow-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    # what a developer's shell may carry from the README's local setup must not steer the tests
    for name in [n for n in os.environ if n.startswith(("AIRFLOW_CONN_PMCVL", "AIRFLOW__"))]:
        del os.environ[name]
    for name in ("PMCVL_CONFIG", "PMCVL_DATASET_SCHEDULE", "RAY_ADDRESS", "PMCVL_LLM_BASE_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            # the Asset's URI comes from here at import: a local folder of this session
            "PMCVL_DATASET_URI": str(home / "dataset"),
        }
    )
    return home


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The session's AIRFLOW_HOME, its metadata database migrated (``airflow db migrate``)."""
    home = Path(os.environ["AIRFLOW_HOME"])
    if not (home / ".migrated").exists():
        subprocess.run(
            [AIRFLOW, "db", "migrate"], check=True, capture_output=True, timeout=300, text=True
        )
        (home / ".migrated").touch()
    return home


def connection_env(conn_id: str, **fields: object) -> tuple[str, str]:
    """``AIRFLOW_CONN_<ID>`` in the JSON form Airflow reads connections from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields)


def load_dag(dag_id: str):  # type: ignore[no-untyped-def]
    """The DAG as Airflow parses it (a DagBag over its file), with no import errors."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / f"{dag_id}.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


@pytest.fixture(scope="session")
def ray_connection(ray_dashboard):
    """``pmcvl_ray`` pointing at the local cluster's dashboard, with its token."""
    url, token = ray_dashboard
    name, value = connection_env("pmcvl_ray", conn_type="http", host=url, password=token)
    os.environ[name] = value
    yield url
    os.environ.pop(name, None)


E2E_ARTICLES = 8


@pytest.fixture(scope="session")
def pmc_params(tmp_path_factory) -> dict:
    """``pmc_dataset`` params for the sample corpus, built into the Asset's own folder."""
    from ray_jobs.pmc.sample_corpus import write_corpus

    corpus = tmp_path_factory.mktemp("e2e") / "corpus"
    write_corpus(corpus, E2E_ARTICLES, "folders", seed=3)
    return {
        "config": None,
        "output_uri": os.environ["PMCVL_DATASET_URI"],
        "source": {"kind": "local", "path": str(corpus)},
        "enrich": False,
        "overrides": {"output": {"articles_per_part": 4}, "pipeline": {"samples_per_shard": 8}},
    }


@pytest.fixture(scope="session")
def pmc_first_run(airflow_home, ray_connection, pmc_params):
    """One ``dag.test()`` of ``pmc_dataset`` on the sample corpus: (dag, dag run)."""
    from datetime import UTC, datetime

    dag = load_dag("pmc_dataset")
    for task in dag.tasks:  # a failure should fail the test now, not after the retry delays
        task.retries = 0
        if hasattr(task, "poll_interval"):
            task.poll_interval = 1
    run = dag.test(run_conf=pmc_params, logical_date=datetime(2026, 3, 1, tzinfo=UTC))
    return dag, run
