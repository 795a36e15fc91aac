"""The training and evaluation Jobs rendered from config, validated against the Kubernetes
schema offline (``kubernetes-validate`` ships the schemas), and the pod's data moves
(``ray_jobs.training.sync``) against local folders and a real S3 API (moto's server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError
from test_benchmark_build import make_dataset

from ray_jobs.cli import main
from ray_jobs.config import TrainingSettings, load_settings
from ray_jobs.training import k8s_job
from ray_jobs.training.sync import copy_tree, pull_dataset
from ray_jobs.training.train import parser as train_parser

RUN = "clip-20261130-120000-abc123"
MANIFEST = "s3://pmcvl-data/dataset/manifest.json"


def _pod(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("version", ["1.30", "1.33"])
def test_default_jobs_are_valid_kubernetes(version: str) -> None:
    settings = TrainingSettings()
    for job in (
        k8s_job.render_training_job(settings, MANIFEST, RUN),
        k8s_job.render_eval_job(settings, RUN),
    ):
        k8s_job.validate(job, version)  # strict: an unknown field is an error too
        assert json.loads(json.dumps(job)) == job  # plain JSON: it travels as XCom


def test_training_job_spec() -> None:
    settings = TrainingSettings()
    job = k8s_job.render_training_job(settings, MANIFEST, RUN)
    spec, pod = job["spec"], _pod(job)
    assert job["metadata"] == {
        "name": f"pmcvl-clip-train-{RUN}",
        "namespace": "pmcvl",
        "labels": {
            "app.kubernetes.io/name": "pmcvl",
            "app.kubernetes.io/component": "clip-train",
            "pmcvl.io/run": RUN,
        },
    }
    assert spec["backoffLimit"] == 0 and spec["ttlSecondsAfterFinished"] == 86400
    assert spec["activeDeadlineSeconds"] == 3 * 86400
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert volumes["work"]["emptyDir"] == {"sizeLimit": "500Gi"}

    (train,) = pod["containers"]
    assert train["name"] == "train" and train["image"] == "pmcvl/trainer:0.1.0"
    assert train["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "64Gi", "nvidia.com/gpu": "1"},
    }
    assert {m["mountPath"] for m in train["volumeMounts"]} == {"/mnt/pmcvl", "/dev/shm"}
    env = _env(train)
    assert env["AWS_ACCESS_KEY_ID"] == {
        "secretKeyRef": {"name": "pmcvl-s3", "key": "AWS_ACCESS_KEY_ID"}
    }
    assert env["AWS_SECRET_ACCESS_KEY"]["secretKeyRef"]["name"] == "pmcvl-s3"
    assert env["HF_HUB_OFFLINE"] == "1" and "AWS_ENDPOINT_URL" not in env

    # init: pull the dataset, then build the benchmark; train excludes its articles
    dataset, bench = pod["initContainers"]
    assert [dataset["name"], bench["name"]] == ["dataset", "benchmark"]
    assert dataset["command"][:5] == ["python", "-m", "ray_jobs.training.sync", "dataset", MANIFEST]
    local_manifest = f"{dataset['command'][5]}/manifest.json"
    run_dir = f"/mnt/pmcvl/runs/{RUN}"
    assert bench["command"] == [
        "pmcvl", "build-benchmark", "--dataset", dataset["command"][5],
        "--out", f"{run_dir}/benchmark", "--size", "1000", "--split", "train", "--overwrite",
    ]  # fmt: skip
    assert "nvidia.com/gpu" not in json.dumps(dataset["resources"])

    cmd = train["command"]
    assert cmd[:3] == ["python", "-m", "ray_jobs.training.train"]
    opts = train_parser().parse_args(cmd[3:])  # the launcher accepts what is rendered
    assert str(opts.manifest) == local_manifest
    assert str(opts.exclude_articles) == f"{run_dir}/benchmark/excluded_articles.txt"
    assert (opts.model, opts.context_length) == ("pmcvl-ViT-B-16-longtext", 256)
    assert opts.caption_key == "long_caption;subcaption" and opts.batch_size == 256
    assert (str(opts.logs), opts.name) == ("/mnt/pmcvl/runs", RUN)
    assert opts.upload_to == f"s3://pmcvl/training/{RUN}"
    assert k8s_job.checkpoint_path(settings, RUN) == f"{run_dir}/checkpoints/epoch_10.pt"


def test_multi_gpu_runs_torchrun() -> None:
    settings = load_settings(
        environ={
            "PMCVL__TRAINING__TRAIN__GPUS": "4",
            "PMCVL__TRAINING__EXTRA_ARGS": "[--grad-checkpointing]",
        }
    ).training
    job = k8s_job.render_training_job(settings, MANIFEST, RUN)
    (train,) = _pod(job)["containers"]
    cmd = train["command"]
    assert cmd[:6] == [
        "torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=4",
        "-m", "ray_jobs.training.train",
    ]  # fmt: skip
    assert cmd[-2:] == ["--", "--grad-checkpointing"]
    assert train["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert train["resources"]["requests"]["nvidia.com/gpu"] == "4"
    k8s_job.validate(job)


def test_claim_and_cpu_evaluation() -> None:
    settings = TrainingSettings(
        volume_claim="pmcvl-work",
        output_uri=None,
        s3_secret=None,
        evaluation={"gpus": 0, "cpu": "2", "memory": "8Gi"},
        benchmark_uri="s3://pmcvl/benchmarks/pmc-2026",
        image="registry.local:5000/pmcvl/trainer@sha256:" + "a" * 64,
    )
    manifest = "file:///mnt/pmcvl/datasets/pmc/manifest.json"
    job = k8s_job.render_training_job(settings, manifest, RUN)
    pod = _pod(job)
    assert {v["name"]: v for v in pod["volumes"]}["work"] == {
        "name": "work",
        "persistentVolumeClaim": {"claimName": "pmcvl-work"},
    }
    (bench,) = pod["initContainers"]  # the dataset is on the claim: no pull
    assert bench["command"][:5] == [
        "python", "-m", "ray_jobs.training.sync", "copy", "s3://pmcvl/benchmarks/pmc-2026"
    ]  # fmt: skip
    train = pod["containers"][0]
    assert "--upload-to" not in train["command"] and "AWS_ACCESS_KEY_ID" not in _env(train)
    assert "/mnt/pmcvl/datasets/pmc/manifest.json" in train["command"]
    k8s_job.validate(job)

    ev = k8s_job.render_eval_job(settings, RUN)
    pod = _pod(ev)
    assert "initContainers" not in pod  # the run is on the claim: nothing to fetch
    assert "nodeSelector" not in pod and "tolerations" not in pod
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "8Gi"},
        "limits": {"memory": "8Gi"},
    }
    assert container["command"][-4:] == ["--device", "cpu", "--copy-json", k8s_job.XCOM_RETURN]
    k8s_job.validate(ev)


def test_eval_job_pulls_the_pushed_run() -> None:
    settings = TrainingSettings(s3={"endpoint_url": "http://minio:9000"})
    ev = k8s_job.render_eval_job(settings, RUN, xcom=False)
    (fetch,) = _pod(ev)["initContainers"]
    assert fetch["command"][3:6] == ["copy", f"s3://pmcvl/training/{RUN}", f"/mnt/pmcvl/runs/{RUN}"]
    assert fetch["command"][-2:] == ["--endpoint-url", "http://minio:9000"]
    cmd = _pod(ev)["containers"][0]["command"]
    assert k8s_job.XCOM_RETURN not in cmd
    assert cmd[-1] == f"s3://pmcvl/training/{RUN}/checkpoints/epoch_10.retrieval.json"
    assert _env(_pod(ev)["containers"][0])["AWS_ENDPOINT_URL"] == "http://minio:9000"


def test_config_errors() -> None:
    for image in ("pmcvl/trainer:latest", "pmcvl/trainer", "registry:5000/pmcvl/trainer"):
        with pytest.raises(ValidationError, match="pinned"):
            TrainingSettings(image=image)
    with pytest.raises(ValidationError, match="output_uri or volume_claim"):
        TrainingSettings(output_uri=None)
    with pytest.raises(ValidationError):
        TrainingSettings(shm_size="lots")
    with pytest.raises(ValidationError):
        TrainingSettings(work_dir="relative/path")
    with pytest.raises(ValidationError):
        load_settings(environ={"PMCVL__TRAINING__GPU": "2"})  # a typo is an error
    settings = TrainingSettings()
    with pytest.raises(ValueError, match="under work_dir"):
        k8s_job.render_training_job(settings, "/data/pmc/manifest.json", RUN)
    with pytest.raises(ValueError, match="run name"):
        k8s_job.render_training_job(settings, MANIFEST, "Clip_Run")
    with pytest.raises(ValueError, match="precision"):
        k8s_job.render_training_job(TrainingSettings(precision="fp8"), MANIFEST, RUN)


def test_render_command_and_v1job(tmp_path: Path) -> None:
    config = tmp_path / "training.yaml"
    config.write_text(yaml.safe_dump({"training": {"train": {"gpus": 2}, "namespace": "ml"}}))
    result = CliRunner().invoke(
        main,
        ["render-training-job", "--config", str(config), "--manifest", MANIFEST, "--run", RUN,
         "--validate", "1.30"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (job,) = list(yaml.safe_load_all(result.output))
    settings = load_settings(config).training
    assert job == k8s_job.render_training_job(settings, MANIFEST, RUN)
    assert job["metadata"]["namespace"] == "ml" and "&id" not in result.output

    result = CliRunner().invoke(
        main,
        ["render-training-job", "--config", str(config), "--manifest", MANIFEST, "--job", "eval"],
    )
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output)["metadata"]["name"].startswith("pmcvl-clip-eval-clip-")

    bad = CliRunner().invoke(
        main, ["render-training-job", "--manifest", "/elsewhere/manifest.json"]
    )
    assert bad.exit_code != 0 and "under work_dir" in bad.output

    from kubernetes.client import ApiClient

    v1 = k8s_job.to_v1job(job)  # what KubernetesJobOperator takes
    assert type(v1).__name__ == "V1Job"
    assert v1.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "2"
    assert ApiClient().sanitize_for_serialization(v1) == job


# --- moving data in and out of the pod -----------------------------------------------------------


def test_pull_dataset_and_copy_tree_locally(tmp_path: Path) -> None:
    source = make_dataset(tmp_path / "source")
    dest = tmp_path / "pod" / "dataset"
    counts = pull_dataset(str(source / "manifest.json"), dest, "train")
    manifest = json.loads((dest / "manifest.json").read_text())
    assert counts["shards"] == 3 and counts["files_pulled"] == 6
    assert {s["split"] for s in manifest["shards"]} == {"train"}
    assert not any(p.name.startswith(".") for p in dest.rglob("*"))
    again = pull_dataset(f"file://{source}/manifest.json", dest, "train")
    assert again["files_present"] == 3  # the shards, checked by sha256, are not pulled twice

    shard = source / manifest["shards"][0]["name"]
    shard.write_bytes(shard.read_bytes() + b"\0" * 512)
    (dest / manifest["shards"][0]["name"]).unlink()
    with pytest.raises(ValueError, match="sha256"):
        pull_dataset(str(source / "manifest.json"), dest, "train")
    assert not (dest / "manifest.json").exists()  # a failed pull leaves nothing to train on

    assert copy_tree(str(source / "index"), str(tmp_path / "copy")) == 4
    with pytest.raises(FileNotFoundError):
        copy_tree(str(tmp_path / "empty"), str(tmp_path / "x"))


def test_sync_through_s3(tmp_path: Path, s3_admin, moto_endpoint: str) -> None:  # type: ignore[no-untyped-def]
    from conftest import upload_tree

    from ray_jobs.config import OutputS3Settings

    s3_admin.create_bucket(Bucket="data")
    source = make_dataset(tmp_path / "source")
    upload_tree(s3_admin, "data", source)
    s3 = OutputS3Settings(endpoint_url=moto_endpoint)
    dest = tmp_path / "pod"
    counts = pull_dataset("s3://data/manifest.json", dest / "dataset", "train", s3)
    assert counts["files_pulled"] == 6
    first = json.loads((source / "manifest.json").read_text())["shards"][0]["name"]
    assert (dest / "dataset" / first).read_bytes() == (source / first).read_bytes()

    assert copy_tree(str(source / "index"), "s3://data/runs/r1/index", s3) == 4
    assert copy_tree("s3://data/runs/r1", str(tmp_path / "back"), s3) == 4
    assert sorted(p.name for p in (tmp_path / "back" / "index").iterdir()) == sorted(
        p.name for p in (source / "index").iterdir()
    )

    from ray_jobs.training import sync

    rc = sync.main(
        ["copy", "s3://data/runs/r1", str(tmp_path / "cli"), "--endpoint-url", moto_endpoint]
    )
    assert rc == 0 and len(list((tmp_path / "cli" / "index").iterdir())) == 4


def test_shipped_cluster_config_renders_valid_jobs() -> None:
    from conftest import REPO

    settings = load_settings(REPO / "configs" / "training.yaml", environ={}).training
    job = k8s_job.render_training_job(settings, "s3://pmcvl/dataset/manifest.json", RUN)
    k8s_job.validate(job)
    cmd = _pod(job)["containers"][0]["command"]
    assert "--nproc_per_node=8" in cmd and "--hf-text-path" in cmd
    k8s_job.validate(k8s_job.render_eval_job(settings, RUN))


def test_training_pods_run_non_root_without_capabilities() -> None:
    settings = TrainingSettings(output_uri="s3://b/runs")
    for job in (
        k8s_job.render_training_job(settings, "s3://b/d/manifest.json", "r1"),
        k8s_job.render_eval_job(settings, "r1"),
    ):
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 1000
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
