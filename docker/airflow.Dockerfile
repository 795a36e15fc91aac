# syntax=docker/dockerfile:1
# Airflow with our providers, operators and DAGs baked in (no git-sync, no DAG volume): one
# image tag is one tested set of DAGs. Used by the official Apache Airflow chart through
# helm/pmcvl/airflow-values.yaml.
#   docker build -f docker/airflow.Dockerfile -t pmcvl/airflow:0.1.0 .

FROM apache/airflow:3.3.2-python3.11 AS wheel
WORKDIR /home/airflow/src
COPY --chown=airflow:0 pyproject.toml setup.py README.md ./
COPY --chown=airflow:0 ray_jobs ray_jobs
COPY --chown=airflow:0 operators operators
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /home/airflow/wheels .

FROM apache/airflow:3.3.2-python3.11
# pmcvl's dependencies less the ML stack (torch, ultralytics, open_clip): DAGs and operators
# plan runs and submit work, the Ray and trainer images do it, so task pods stay small.
# Installed as the airflow user, as Airflow's image wants; constraints.txt pins apache-airflow
# to the base image's version, so pip cannot move it.
COPY --chown=airflow:0 pyproject.toml requirements/constraints.txt docker/requirements_from_pyproject.py /tmp/pmcvl/
RUN python /tmp/pmcvl/requirements_from_pyproject.py /tmp/pmcvl/pyproject.toml \
        --without torch torchvision ultralytics open-clip-torch > /tmp/pmcvl/requirements.txt \
    && pip install --no-cache-dir -c /tmp/pmcvl/constraints.txt -r /tmp/pmcvl/requirements.txt

COPY --from=wheel --chown=airflow:0 /home/airflow/wheels /tmp/wheels
# The import check fails the build, not a task, when an operator needs something left out.
RUN pip install --no-cache-dir --no-deps /tmp/wheels/*.whl \
    && python -c "import importlib, pkgutil, operators, ray_jobs.jobs.build_dataset; [importlib.import_module(f'operators.{m.name}') for m in pkgutil.iter_modules(operators.__path__)]"

COPY --chown=airflow:0 dags/ /opt/airflow/dags/
USER 50000
