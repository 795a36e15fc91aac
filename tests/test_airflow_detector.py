"""``detector_training``: its commands, the rule that decides a publish, the publish itself in a
real shell, and one tiny ``dag.test()`` run on the local Ray cluster (8 figures, one epoch at
64 px, no GPU) from synthesis to a published checkpoint."""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, datetime

from airflow_fixtures import load_dag

from operators.detector_plan import detector_plan, publish_command, wins

PARAMS = {
    "workdir": "/data/detector",
    "figures": 8,
    "seed": 1,
    "arch": "yolo11n",
    "epochs": 1,
    "imgsz": 64,
    "batch": 4,
    "gpus": 0,
    "current_weights": "/models/it's here/yolo11n-panels.pt",
    "metric": "mAP50_95",
    "min_gain": 0.0,
}


def test_commands_are_per_run_and_quoted():
    plan = detector_plan(PARAMS, "manual__2026-03-01T00:00:00+00:00")
    root = "/data/detector/runs/manual__2026-03-01T00-00-00-00-00"
    assert plan["root"] == root and plan["candidate"] == f"{root}/train/yolo11n-panels.pt"
    assert shlex.split(plan["train"]) == [
        *("pmcvl-dev", "train-detector", "--data", f"{root}/synth/data.yaml"),
        *("--out", f"{root}/train", "--arch", "yolo11n", "--epochs", "1", "--imgsz", "64"),
        *("--batch", "4", "--seed", "1", "--device", "cpu"),
    ]
    assert "--device" not in detector_plan({**PARAMS, "gpus": 1}, "r")["train"]
    assert shlex.quote(PARAMS["current_weights"]) in plan["eval_current"]


def test_the_candidate_must_beat_the_current_checkpoint():
    assert wins({"mAP50_95": 0.5}, {"weights": None})[0]  # nothing published yet
    assert wins({"mAP50_95": 0.5}, {"weights": "c", "mAP50_95": 0.4})[0]
    assert not wins({"mAP50_95": 0.5}, {"weights": "c", "mAP50_95": 0.5})[0]
    assert not wins({"mAP50_95": 0.45}, {"weights": "c", "mAP50_95": 0.4}, min_gain=0.1)[0]
    assert wins({"F1@0.5": 0.9}, {"weights": "c", "F1@0.5": 0.8}, metric="f1")[0]
    assert not wins(None, {"weights": None})[0]


def test_publish_replaces_the_checkpoint_and_keeps_the_old_one(tmp_path):
    candidate = tmp_path / "run" / "candidate.pt"
    candidate.parent.mkdir()
    candidate.write_bytes(b"new")
    current = tmp_path / "models dir" / "it's.pt"
    steps = {"candidate": str(candidate), "current": str(current)}
    metrics = {"weights": "x", "mAP50_95": 0.5, "note": "it's fine"}
    for content in (b"new", b"newer"):
        candidate.write_bytes(content)
        subprocess.run(["bash", "-c", publish_command(steps, metrics)], check=True)
    assert current.read_bytes() == b"newer"
    assert (current.parent / "it's.pt.prev").read_bytes() == b"new"
    assert json.loads((current.parent / "it's.pt.metrics.json").read_text()) == metrics
    assert sorted(p.name for p in current.parent.iterdir()) == [
        "it's.pt",
        "it's.pt.metrics.json",
        "it's.pt.prev",
    ]


def test_detector_training_run_publishes_a_first_checkpoint(airflow_home, ray_connection, tmp_path):
    dag = load_dag("detector_training")
    for task in dag.tasks:
        task.retries = 0
        if hasattr(task, "poll_interval"):
            task.poll_interval = 1
    current = tmp_path / "models" / "yolo11n-panels.pt"
    conf = {**PARAMS, "workdir": str(tmp_path / "work"), "current_weights": str(current)}
    run = dag.test(run_conf=conf, logical_date=datetime(2026, 3, 1, tzinfo=UTC))
    assert str(getattr(run.state, "value", run.state)) == "success"
    assert current.is_file()  # no checkpoint before: the candidate wins
    metrics = json.loads(current.with_name(current.name + ".metrics.json").read_text())
    assert {"mAP50", "mAP50_95", "F1@0.5"} <= set(metrics)
    assert metrics["weights"] == "yolo11n-panels"
