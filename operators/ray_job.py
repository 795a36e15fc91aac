"""Runs a command as a Ray job (the Ray Job Submission API) and waits for it, deferrably.

No maintained Ray provider exists for Airflow 3, so this is ours:

- The ``submission_id`` is derived from the DAG, run, task and map index, so a retried or
  restarted task finds the job it already started and re-attaches to it (a running job is
  waited for, a succeeded one is taken as done) instead of starting a second one. Only when
  that job failed or was stopped does a retry submit again, as ``<id>-r2``, ``<id>-r3``...
- While the job runs, :class:`~operators.ray_trigger.RayJobTrigger` polls it in the triggerer
  (no worker slot held) and streams the job's log into the task log; ``deferrable=False``
  polls in the worker instead.
- Killing the task stops the Ray job (``on_kill`` here while submitting or polling in the
  worker, the trigger's ``on_kill`` while deferred).
- The dashboard's token auth comes from the ``pmcvl_ray`` connection (see
  :mod:`operators.connections`).
- A failed job fails the task with the Ray job's own message (its exit code and last log
  lines). A succeeded job returns ``{"submission_id", "status", "message", "summary"}``, where
  ``summary`` is the last JSON object the job printed.
- ``submission_id_env`` hands each submission its own id in that environment variable, so the
  job can file its results under a name the DAG knows (``pmc_dataset`` passes it as the build's
  run id, ``PMCVL_RUN_ID``, and reads ``runs/<submission_id>.json`` instead of the log).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from operators.connections import RAY_CONN_ID, ray_endpoint
from operators.run_params import check_runtime_env

MAX_ATTEMPTS = 50
SUBMIT_WAIT_S = 120.0  # how long a submission waits for a cluster's job agent to register
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def submission_id_for(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A stable, URL-safe job id for one task instance. The readable part is sanitised and cut
    to fit; the hash of the exact ids keeps two instances apart whatever the sanitising merged."""
    raw = f"{dag_id}/{run_id}/{task_id}" + (f"/{map_index}" if map_index >= 0 else "")
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    readable = _UNSAFE.sub("-", f"{dag_id}-{task_id}-{run_id}").strip("-")[:80].rstrip("-")
    return f"{readable}-{digest}"


def _status(info: Any) -> str:
    """``JobStatus`` is a str enum, whose ``str()`` is ``JobStatus.FAILED``: use its value."""
    return str(getattr(info.status, "value", info.status))


def _number(value: Any) -> float | None:
    """Resources may come rendered from params or XCom (``"1"``); Ray wants numbers."""
    return None if value in (None, "") else float(value)


def attempt_id(base: str, attempt: int) -> str:
    return base if attempt == 1 else f"{base}-r{attempt}"


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in ``text`` that starts at the beginning of a line."""
    decoder = json.JSONDecoder()
    for match in reversed(list(re.finditer(r"(?m)^\{", text))):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


class RayJobOperator(BaseOperator):
    """Submit ``entrypoint`` (a shell command) to the Ray cluster and wait for it to end.

    :param entrypoint: the command the job runs (``python -m ray_jobs.jobs.build_dataset ...``)
    :param runtime_env: Ray runtime environment (``env_vars``, ``working_dir``, ``pip``...)
    :param entrypoint_num_cpus / entrypoint_num_gpus / entrypoint_memory /
        entrypoint_resources: what the driver reserves on the cluster
    :param submission_id: fixed job id; by default derived from the task instance
    :param ray_conn_id: the Ray dashboard connection
    :param poll_interval: seconds between status polls
    :param deferrable: wait in the triggerer (default) or in the worker
    :param submission_id_env: an env var the job gets its own submission id in (each attempt
        has its own: ``<id>``, ``<id>-r2``...)
    """

    template_fields = (
        "entrypoint",
        "runtime_env",
        "metadata",
        "submission_id",
        "entrypoint_num_cpus",
        "entrypoint_num_gpus",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "runtime_env": "json",
        "metadata": "json",
    }
    ui_color = "#d9f1ff"

    def __init__(
        self,
        *,
        entrypoint: str,
        runtime_env: dict[str, Any] | None = None,
        metadata: dict[str, str] | None = None,
        entrypoint_num_cpus: float | None = None,
        entrypoint_num_gpus: float | None = None,
        entrypoint_memory: int | None = None,
        entrypoint_resources: dict[str, float] | None = None,
        submission_id: str | None = None,
        ray_conn_id: str | None = RAY_CONN_ID,
        poll_interval: float = 10.0,
        deferrable: bool = True,
        stream_logs: bool = True,
        submission_id_env: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.entrypoint = entrypoint
        self.runtime_env = runtime_env
        self.metadata = metadata
        self.entrypoint_num_cpus = entrypoint_num_cpus
        self.entrypoint_num_gpus = entrypoint_num_gpus
        self.entrypoint_memory = entrypoint_memory
        self.entrypoint_resources = entrypoint_resources
        self.submission_id = submission_id
        self.ray_conn_id = ray_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.stream_logs = stream_logs
        self.submission_id_env = submission_id_env
        self._job_id: str | None = None

    # -- the client ---------------------------------------------------------------------------

    def client(self):  # type: ignore[no-untyped-def]
        """A ``JobSubmissionClient`` for the connection's dashboard (imports Ray: only here)."""
        from ray.job_submission import JobSubmissionClient

        endpoint = ray_endpoint(self.ray_conn_id)
        return JobSubmissionClient(
            address=endpoint.url, headers=endpoint.headers, verify=endpoint.verify
        )

    @staticmethod
    def _info(client, submission_id: str):  # type: ignore[no-untyped-def]
        """The job's details, or None when the cluster has no job with this id."""
        try:
            return client.get_job_info(submission_id)
        except RuntimeError as exc:
            if "status code 404" in str(exc) or "does not exist" in str(exc):
                return None
            raise

    def _runtime_env(self, job_id: str) -> dict[str, Any] | None:
        """``runtime_env`` as given, once checked to hold no secret: the Ray dashboard shows
        every job's runtime env, so keys come from the cluster's own Secret (the chart mounts
        ``PMCVL_LLM_API_KEY`` from ``vllm.apiKey.existingSecret`` into every Ray pod). With
        ``submission_id_env``, the job's own id is added to its env vars."""
        check_runtime_env(self.runtime_env)
        env = dict(self.runtime_env or {})
        if self.submission_id_env:
            env["env_vars"] = {**(env.get("env_vars") or {}), self.submission_id_env: job_id}
        return env or None

    # -- submit or re-attach ------------------------------------------------------------------

    def base_id(self, context: Mapping[str, Any]) -> str:
        if self.submission_id:
            return self.submission_id
        ti = context["ti"]
        return submission_id_for(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)

    def attach_or_submit(self, client, context: Mapping[str, Any]) -> tuple[str, Any]:  # type: ignore[no-untyped-def]
        """The job this task instance owns: its latest attempt when that one is running or
        succeeded, else a new submission. Returns (submission id, details or None if new)."""
        base = self.base_id(context)
        latest: tuple[str, Any] | None = None
        attempt = 1
        while attempt <= MAX_ATTEMPTS:
            info = self._info(client, attempt_id(base, attempt))
            if info is None:
                break
            latest = (attempt_id(base, attempt), info)
            attempt += 1
        if latest is not None and _status(latest[1]) not in ("FAILED", "STOPPED"):
            self.log.info("re-attaching to Ray job %s (%s)", latest[0], _status(latest[1]))
            return latest
        if attempt > MAX_ATTEMPTS:
            raise AirflowException(f"{MAX_ATTEMPTS} Ray jobs failed for {base}; giving up")
        if latest is not None:
            self.log.info("Ray job %s ended %s; submitting again", latest[0], _status(latest[1]))
        job_id = attempt_id(base, attempt)
        ti = context.get("ti")
        metadata = {
            **({k: str(v) for k, v in (self.metadata or {}).items()}),
            "airflow_dag_id": str(getattr(ti, "dag_id", "")),
            "airflow_run_id": str(getattr(ti, "run_id", "")),
            "airflow_task_id": str(getattr(ti, "task_id", "")),
            "airflow_try_number": str(getattr(ti, "try_number", "")),
        }
        deadline = time.monotonic() + SUBMIT_WAIT_S
        while True:
            try:
                client.submit_job(
                    entrypoint=self.entrypoint,
                    submission_id=job_id,
                    runtime_env=self._runtime_env(job_id),
                    metadata=metadata,
                    entrypoint_num_cpus=_number(self.entrypoint_num_cpus),
                    entrypoint_num_gpus=_number(self.entrypoint_num_gpus),
                    entrypoint_memory=self.entrypoint_memory,
                    entrypoint_resources=self.entrypoint_resources,
                )
                break
            except RuntimeError as exc:
                if "already exists" in str(exc):
                    self.log.info("Ray job %s was submitted concurrently; re-attaching", job_id)
                    return job_id, self._info(client, job_id)
                # a head that just (re)started has no job agent registered for a few seconds
                if "No available agent" not in str(exc) or time.monotonic() > deadline:
                    raise
                self.log.info("the Ray cluster has no job agent yet; retrying")
                time.sleep(2)
        self.log.info("submitted Ray job %s: %s", job_id, self.entrypoint)
        return job_id, None

    # -- run ----------------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        client = self.client()
        job_id, info = self.attach_or_submit(client, context)
        self._job_id = job_id
        if info is not None and _status(info) == "SUCCEEDED":
            return self.finish(job_id, "SUCCEEDED", info.message, client)
        if self.deferrable:
            from operators.ray_trigger import RayJobTrigger

            timeout = self.execution_timeout
            self.defer(
                trigger=RayJobTrigger(
                    submission_id=job_id,
                    ray_conn_id=self.ray_conn_id,
                    poll_interval=self.poll_interval,
                    stream_logs=self.stream_logs,
                    # the trigger stops the job at the deadline (see RayJobTrigger)
                    deadline=time.time() + timeout.total_seconds() if timeout else None,
                ),
                method_name="execute_complete",
            )
        return self.wait(client, job_id)

    def wait(self, client, job_id: str) -> Any:  # type: ignore[no-untyped-def]
        """Poll in the worker (``deferrable=False``), streaming the log like the trigger."""
        from operators.ray_rest import TERMINAL, new_lines

        shown = 0
        try:
            while True:
                info = client.get_job_info(job_id)
                status = _status(info)
                if self.stream_logs:
                    logs = client.get_job_logs(job_id)
                    lines, shown = new_lines(logs, shown, final=status in TERMINAL)
                    for line in lines:
                        self.log.info("[ray] %s", line)
                if status in TERMINAL:
                    break
                time.sleep(self.poll_interval)
        except BaseException:  # a timeout in the worker must not leave the job running unowned
            self.on_kill()
            raise
        return self.finish(job_id, status, info.message, client)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        self._job_id = event["submission_id"]
        return self.finish(event["submission_id"], event["status"], event.get("message"))

    def finish(self, job_id: str, status: str, message: str | None, client=None) -> Any:  # type: ignore[no-untyped-def]
        """The task's result for a job that ended: its summary, or the job's own error."""
        if status != "SUCCEEDED":
            raise AirflowException(f"Ray job {job_id} {status}: {message or 'no message'}")
        client = client or self.client()
        summary = last_json_object(client.get_job_logs(job_id))
        self.log.info("Ray job %s succeeded", job_id)
        return {"submission_id": job_id, "status": status, "message": message, "summary": summary}

    def on_kill(self) -> None:
        if not self._job_id:
            return
        try:
            stopped = self.client().stop_job(self._job_id)
            self.log.info("stop requested for Ray job %s: %s", self._job_id, stopped)
        except Exception as exc:  # killing must not raise; the job may already be gone
            self.log.warning("could not stop Ray job %s: %r", self._job_id, exc)
