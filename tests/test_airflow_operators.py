"""Our Airflow operators and triggers against real services: the Ray Job Submission API of a
local Ray cluster (token auth on) and the fake vLLM server. The deferrable path is driven the
way Airflow drives it: ``execute`` raises ``TaskDeferred``, the trigger runs to its event,
``execute_complete`` gets the payload."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, TaskDeferred
from airflow_fixtures import connection_env
from fake_llm_server import fake_llm, start_fake_llm  # noqa: F401

from operators.connections import llm_endpoint, ray_endpoint
from operators.llm_health import LLMHealthSensor, LLMHealthTrigger, check_llm
from operators.ray_job import RayJobOperator, attempt_id, last_json_object, submission_id_for
from operators.ray_rest import new_lines
from operators.ray_trigger import RayJobTrigger


class Recorder:
    """Stands in for a task's logger: keeps every formatted message."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _log(self, msg: str, *args: object, **_: object) -> None:
        self.lines.append(msg % args if args else msg)

    info = warning = error = debug = exception = _log


def context(run_id: str, task_id: str = "build", try_number: int = 1) -> dict:
    ti = SimpleNamespace(
        dag_id="tests", run_id=run_id, task_id=task_id, map_index=-1, try_number=try_number
    )
    return {"ti": ti}


def run_trigger(trigger):  # type: ignore[no-untyped-def]
    """What the triggerer does with a trigger: run it to its first event."""

    async def first():  # type: ignore[no-untyped-def]
        return await anext(trigger.run())

    return asyncio.run(first()).payload


def deferred(operator: RayJobOperator, ctx: dict) -> RayJobTrigger:
    with pytest.raises(TaskDeferred) as info:
        operator.execute(ctx)
    assert info.value.method_name == "execute_complete"
    return info.value.trigger


@pytest.fixture
def ray_conn(ray_connection):
    return ray_connection


def jobs_of(run_id: str) -> list:
    from ray.job_submission import JobSubmissionClient

    endpoint = ray_endpoint()
    client = JobSubmissionClient(endpoint.url, headers=endpoint.headers)
    return [j for j in client.list_jobs() if (j.metadata or {}).get("airflow_run_id") == run_id]


# -- pure pieces ---------------------------------------------------------------------------


def test_submission_id_is_stable_safe_and_distinct():
    a = submission_id_for("pmc_dataset", "manual__2026-01-01T00:00:00+00:00", "build_dataset")
    assert a == submission_id_for(
        "pmc_dataset", "manual__2026-01-01T00:00:00+00:00", "build_dataset"
    )
    assert all(c.isalnum() or c in "-_" for c in a) and len(a) <= 93
    # ids that sanitise alike stay apart; long ones are cut but still distinct
    assert a != submission_id_for(
        "pmc_dataset", "manual__2026-01-01T00-00-00-00-00", "build_dataset"
    )
    assert a != submission_id_for(
        "pmc_dataset", "manual__2026-01-01T00:00:00+00:00", "build_dataset", 0
    )
    long = [submission_id_for("d" * 200, f"run{i}", "t") for i in range(2)]
    assert long[0] != long[1] and all(len(x) <= 93 for x in long)
    assert attempt_id(a, 1) == a and attempt_id(a, 3) == f"{a}-r3"


def test_last_json_object_and_new_lines():
    logs = (
        'start\n{"not": "this"}\nprogress {"x": 1}\n{\n  "run_id": "r1",\n  "n": {"a": 1}\n}\nbye\n'
    )
    assert last_json_object(logs) == {"run_id": "r1", "n": {"a": 1}}
    assert last_json_object("no json here\n{broken\n") is None
    lines, shown = new_lines("a\nb\npart", 0)
    assert lines == ["a", "b"] and shown == 4
    lines, shown = new_lines("a\nb\npartial\nc", shown)
    assert lines == ["partial"]
    assert new_lines("a\nb\npartial\nc", shown, final=True)[0] == ["c"]
    assert new_lines("new log\n", 100)[0] == ["new log"]  # a shorter log starts over


def test_connections_from_airflow(monkeypatch, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    monkeypatch.setenv(
        *connection_env("ray_a", conn_type="http", host="ray-head", port=8265, password="t0k")
    )
    monkeypatch.setenv(
        *connection_env(
            "ray_b",
            conn_type="http",
            host="https://ray.example:443",
            extra={"token_path": str(token_file), "verify": False},
        )
    )
    a, b = ray_endpoint("ray_a"), ray_endpoint("ray_b")
    assert (a.url, a.headers) == ("http://ray-head:8265", {"Authorization": "Bearer t0k"})
    assert (b.url, b.token, b.verify) == ("https://ray.example:443", "from-file", False)
    assert "t0k" not in repr(a)
    monkeypatch.setenv(
        *connection_env("llm", conn_type="http", host="http://vllm:8000/v1", password="k")
    )
    monkeypatch.setenv("PMCVL_LLM_BASE_URL", "http://elsewhere:1")
    assert llm_endpoint("llm") == llm_endpoint("llm")
    assert llm_endpoint("llm").base_url == "http://vllm:8000/v1"
    assert llm_endpoint("llm", "http://config:2").base_url == "http://config:2"
    assert llm_endpoint("undefined").base_url == "http://elsewhere:1"


# -- Ray jobs ------------------------------------------------------------------------------


def test_job_runs_deferred_streams_its_log_and_returns_its_summary(ray_conn):
    run_id = f"ok-{uuid.uuid4().hex[:8]}"
    script = (
        "import json; print('hello from ray'); "
        "print(json.dumps({'run_id': 'r1', 'n': 3}, indent=2))"
    )
    op = RayJobOperator(task_id="build", entrypoint=f'python -c "{script}"', poll_interval=0.5)
    trigger = deferred(op, context(run_id))
    assert trigger.serialize()[0] == "operators.ray_trigger.RayJobTrigger"
    trigger._log = Recorder()
    event = run_trigger(trigger)
    assert event["status"] == "SUCCEEDED"
    assert any("hello from ray" in line for line in trigger._log.lines)
    result = op.execute_complete(context(run_id), event)
    assert result["summary"] == {"run_id": "r1", "n": 3}
    assert result["submission_id"] == submission_id_for("tests", run_id, "build")


def test_each_submission_gets_its_own_id_in_the_env_it_asks_for(ray_conn):
    """How ``pmc_dataset`` names the build's run: a resubmission gets its own ``-r2`` id, and
    the runtime env's own variables stay."""
    run_id = f"env-{uuid.uuid4().hex[:8]}"
    script = (
        "import json, os; print(json.dumps({'id': os.environ['MY_ID'], 'x': os.environ['X']}));"
        " raise SystemExit(os.environ['MY_ID'].endswith('-r2') - 1)"  # fails once, then not
    )
    op = RayJobOperator(
        task_id="build",
        entrypoint=f'python -c "{script}"',
        runtime_env={"env_vars": {"X": "kept"}},
        submission_id_env="MY_ID",
        poll_interval=0.5,
        deferrable=False,
    )
    with pytest.raises(AirflowException):
        op.execute(context(run_id))
    result = op.execute(context(run_id, try_number=2))
    base = submission_id_for("tests", run_id, "build")
    assert result["submission_id"] == f"{base}-r2"
    assert result["summary"] == {"id": f"{base}-r2", "x": "kept"}
    assert op.runtime_env == {"env_vars": {"X": "kept"}}  # the operator's own is not changed


def test_failed_job_fails_the_task_with_its_own_message(ray_conn):
    op = RayJobOperator(
        task_id="build",
        entrypoint="python -c \"import sys; sys.exit('boom: the corpus is unreadable')\"",
        poll_interval=0.5,
        deferrable=False,
    )
    with pytest.raises(AirflowException, match=r"(?s)FAILED.*boom: the corpus is unreadable"):
        op.execute(context(f"fail-{uuid.uuid4().hex[:8]}"))


def test_retried_task_reattaches_and_a_failed_job_is_resubmitted(ray_conn):
    run_id = f"retry-{uuid.uuid4().hex[:8]}"
    op = RayJobOperator(task_id="build", entrypoint="sleep 3", poll_interval=0.5)
    first = deferred(op, context(run_id, try_number=1))
    second = deferred(op, context(run_id, try_number=2))  # the worker died; Airflow retries
    assert first.submission_id == second.submission_id
    assert run_trigger(second)["status"] == "SUCCEEDED"
    assert len(jobs_of(run_id)) == 1
    # a retry after success takes the finished job's result without waiting or submitting
    assert op.execute(context(run_id, try_number=3))["status"] == "SUCCEEDED"
    assert len(jobs_of(run_id)) == 1

    run_id = f"refail-{uuid.uuid4().hex[:8]}"
    op = RayJobOperator(task_id="build", entrypoint="exit 3", poll_interval=0.5, deferrable=False)
    with pytest.raises(AirflowException):
        op.execute(context(run_id))
    with pytest.raises(AirflowException):
        op.execute(context(run_id, try_number=2))
    ids = sorted(j.submission_id for j in jobs_of(run_id))
    base = submission_id_for("tests", run_id, "build")
    assert ids == sorted([base, f"{base}-r2"])


def test_killing_the_task_stops_the_ray_job(ray_conn):
    # in the worker (deferrable=False): on_kill from another thread, as Airflow's SIGTERM does
    run_id = f"kill-{uuid.uuid4().hex[:8]}"
    op = RayJobOperator(
        task_id="build", entrypoint="sleep 120", poll_interval=0.5, deferrable=False
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context(run_id))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not jobs_of(run_id) or str(jobs_of(run_id)[0].status.value) != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    op.on_kill()
    thread.join(60)
    assert errors and "STOPPED" in str(errors[0])

    # deferred: the trigger's on_kill
    run_id = f"killd-{uuid.uuid4().hex[:8]}"
    trigger = deferred(
        RayJobOperator(task_id="build", entrypoint="sleep 120", poll_interval=0.5), context(run_id)
    )
    trigger._log = Recorder()
    asyncio.run(trigger.on_kill())
    assert run_trigger(trigger)["status"] == "STOPPED"


def test_a_deferred_job_past_its_execution_timeout_is_stopped(ray_conn):
    run_id = f"late-{uuid.uuid4().hex[:8]}"
    op = RayJobOperator(
        task_id="build",
        entrypoint="sleep 120",
        poll_interval=0.5,
        execution_timeout=timedelta(seconds=3),
    )
    trigger = deferred(op, context(run_id))
    assert trigger.deadline is not None and trigger.serialize()[1]["deadline"] == trigger.deadline
    trigger._log = Recorder()
    event = run_trigger(trigger)
    assert event["status"] == "TIMED_OUT" and "execution_timeout" in event["message"]
    deadline = time.monotonic() + 60
    while str(jobs_of(run_id)[0].status.value) != "STOPPED":
        assert time.monotonic() < deadline, "the Ray job was left running"
        time.sleep(0.5)
    with pytest.raises(AirflowException, match="TIMED_OUT"):
        op.execute_complete(context(run_id), event)


# -- the LLM server ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_llm_sensor_healthy_and_model_missing(fake_llm):  # noqa: F811
    assert asyncio.run(check_llm(fake_llm.url + "/v1", "fake-vlm"))[0]
    ok, why = asyncio.run(check_llm(fake_llm.url, "Qwen/Qwen2.5-VL-7B-Instruct"))
    assert not ok and "not served" in why and "fake-vlm" in why

    sensor = LLMHealthSensor(task_id="llm_health", model="fake-vlm", base_url=fake_llm.url)
    assert "serves fake-vlm" in sensor.execute({})  # ready: no deferral at all

    missing = LLMHealthSensor(
        task_id="llm_health",
        model="other-model",
        base_url=fake_llm.url,
        poke_interval=0.2,
        timeout=1,
    )
    with pytest.raises(TaskDeferred) as info:
        missing.execute({})
    event = run_trigger(info.value.trigger)
    assert not event["ok"] and "not served" in event["detail"]
    with pytest.raises(AirflowSensorTimeout, match="other-model"):
        missing.execute_complete({}, event)


def test_llm_trigger_waits_for_a_server_that_comes_up(monkeypatch):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv(*connection_env("pmcvl_llm", conn_type="http", host=url))
    trigger = LLMHealthTrigger(model="fake-vlm", poll_interval=0.2, timeout=30)
    trigger._log = Recorder()

    async def scenario():  # type: ignore[no-untyped-def]
        waiting = asyncio.ensure_future(anext(trigger.run()))
        await asyncio.sleep(1.0)
        assert not waiting.done()  # down: the trigger keeps polling
        with start_fake_llm(port=port):
            return (await asyncio.wait_for(waiting, 15)).payload

    event = asyncio.run(scenario())
    assert event["ok"], event
    assert any("not reachable" in line for line in trigger._log.lines)
