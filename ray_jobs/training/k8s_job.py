"""The CLIP training and evaluation Kubernetes Jobs, rendered from config as plain dicts.

Plain Python, no Jinja or YAML templates: every value comes from :class:`TrainingSettings`
and the run (its name, the dataset manifest), so the CLI (``pmcvl render-training-job``), the
``clip_training`` DAG and the tests render the same spec, and a test validates it against the
Kubernetes schema offline.

A run lives under ``{work_dir}/runs/{run}`` on the work volume. The training pod pulls the
dataset when it is in S3 (init container ``dataset``), builds or pulls the benchmark (init
container ``benchmark``), trains with the benchmark's articles excluded (``train``: torchrun
when it has more than one GPU) and pushes the run to ``{output_uri}/{run}``. The evaluation
pod pulls the run back (when pushed) and scores the last checkpoint (``evaluate``).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
from posixpath import dirname
from typing import Any
from urllib.parse import urlparse

from ray_jobs.config import TrainingSettings
from ray_jobs.training.argv import PRECISIONS

TRAIN, EVALUATE = "train", "evaluate"  # container names; KPO's base_container_name
XCOM_RETURN = "/airflow/xcom/return.json"  # where KubernetesPodOperator's sidecar reads
_RUN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_INIT_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}


def default_run_name(now: dt.datetime | None = None) -> str:
    """``clip-20261130-171200``: UTC, sortable, a valid label."""
    return (now or dt.datetime.now(dt.UTC)).strftime("clip-%Y%m%d-%H%M%S")


def check_run(run: str) -> str:
    """A run name is a DNS label of at most 40 characters (it goes into Job names)."""
    if len(run) > 40 or not _RUN.match(run):
        raise ValueError(f"run name {run!r}: lower-case letters, digits and '-', at most 40")
    return run


def run_dir(settings: TrainingSettings, run: str) -> str:
    return f"{settings.work_dir.rstrip('/')}/runs/{check_run(run)}"


def checkpoint_path(settings: TrainingSettings, run: str) -> str:
    """open_clip saves ``epoch_{n}.pt`` after each epoch; the last is scored."""
    return f"{run_dir(settings, run)}/checkpoints/epoch_{settings.epochs}.pt"


def dataset_in_pod(settings: TrainingSettings, manifest_uri: str) -> tuple[str, list[str] | None]:
    """``(manifest path in the pod, command that pulls it there or None)``.

    An S3 manifest is pulled under ``{work_dir}/datasets/`` (a folder per manifest URI, so a
    claim keeps what an earlier run pulled and the pull skips it); a local one must already be
    on the work volume, the only filesystem the pod shares with the cluster.
    """
    parsed = urlparse(manifest_uri)
    if parsed.scheme == "s3":
        folder = hashlib.sha256(manifest_uri.encode()).hexdigest()[:12]
        dest = f"{settings.work_dir.rstrip('/')}/datasets/{folder}"
        pull = ["python", "-m", "ray_jobs.training.sync", "dataset", manifest_uri, dest]
        return f"{dest}/manifest.json", [*pull, "--split", settings.split, *_s3_flags(settings)]
    path = parsed.path if parsed.scheme == "file" else manifest_uri
    if parsed.scheme not in ("", "file") or not path.startswith(
        settings.work_dir.rstrip("/") + "/"
    ):
        raise ValueError(
            f"manifest {manifest_uri!r}: give s3://... or a path under work_dir "
            f"{settings.work_dir} (the volume the pod mounts)"
        )
    return path, None


def _s3_flags(settings: TrainingSettings) -> list[str]:
    flags = ["--region", settings.s3.region]
    return flags + (
        ["--endpoint-url", settings.s3.endpoint_url] if settings.s3.endpoint_url else []
    )


def benchmark_command(settings: TrainingSettings, manifest_path: str, run: str) -> list[str]:
    out = f"{run_dir(settings, run)}/benchmark"
    if settings.benchmark_uri:  # a fixed benchmark: pulled, not rebuilt
        sync = ["python", "-m", "ray_jobs.training.sync", "copy", settings.benchmark_uri, out]
        return sync + _s3_flags(settings)
    return [
        "pmcvl", "build-benchmark",
        "--dataset", dirname(manifest_path),
        "--out", out,
        "--size", str(settings.benchmark_size),
        "--split", settings.split,
        "--overwrite",  # a retried pod rebuilds the same benchmark from the same dataset
    ]  # fmt: skip


def train_command(settings: TrainingSettings, manifest_path: str, run: str) -> list[str]:
    """The launcher's command line; under torchrun (one process per GPU) past one GPU."""
    if settings.precision not in PRECISIONS:
        raise ValueError(f"training.precision {settings.precision!r} not in {PRECISIONS}")
    gpus = settings.train.gpus
    if gpus > 1:
        launcher = ["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={gpus}"]
    else:
        launcher = ["python"]
    args = [
        "-m", "ray_jobs.training.train",
        "--manifest", manifest_path,
        "--split", settings.split,
        "--exclude-articles", f"{run_dir(settings, run)}/benchmark/excluded_articles.txt",
        "--model", settings.model,
        "--context-length", str(settings.context_length),
        "--caption-key", settings.caption_key,
        "--batch-size", str(settings.batch_size),
        "--epochs", str(settings.epochs),
        "--lr", repr(settings.lr),
        "--wd", repr(settings.wd),
        "--warmup", str(settings.warmup),
        "--workers", str(settings.workers),
        "--precision", settings.precision,
        "--seed", str(settings.seed),
        "--logs", f"{settings.work_dir.rstrip('/')}/runs",
        "--name", run,
    ]  # fmt: skip
    if gpus == 0:
        args += ["--device", "cpu"]
    if settings.hf_text_path:
        args += ["--hf-text-path", settings.hf_text_path]
    if settings.output_uri:
        args += ["--upload-to", f"{settings.output_uri.rstrip('/')}/{run}"]
    return launcher + args + (["--", *settings.extra_args] if settings.extra_args else [])


def eval_command(settings: TrainingSettings, run: str, xcom: bool = True) -> list[str]:
    ckpt = checkpoint_path(settings, run)
    cmd = [
        "pmcvl", "eval-retrieval",
        "--checkpoint", ckpt,
        "--model", settings.model,
        "--context-length", str(settings.context_length),
        "--benchmark", f"{run_dir(settings, run)}/benchmark",
    ]  # fmt: skip
    if settings.evaluation.gpus == 0:
        cmd += ["--device", "cpu"]
    if settings.hf_text_path:
        cmd += ["--hf-text-path", settings.hf_text_path]
    if xcom:
        cmd += ["--copy-json", XCOM_RETURN]
    if settings.output_uri:
        rel = ckpt[len(run_dir(settings, run)) + 1 :].removesuffix(".pt")
        cmd += ["--copy-json", f"{settings.output_uri.rstrip('/')}/{run}/{rel}.retrieval.json"]
    return cmd


def _env(settings: TrainingSettings, run: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "PMCVL_RUN", "value": run},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},  # weights come from the image or the volume
        {"name": "TRANSFORMERS_OFFLINE", "value": "1"},
        {"name": "AWS_DEFAULT_REGION", "value": settings.s3.region},
    ]
    if settings.s3.endpoint_url:
        env.append({"name": "AWS_ENDPOINT_URL", "value": settings.s3.endpoint_url})
    if settings.s3_secret:
        for name, key in (
            ("AWS_ACCESS_KEY_ID", settings.s3_access_key_id_key),
            ("AWS_SECRET_ACCESS_KEY", settings.s3_secret_access_key_key),
        ):
            ref = {"name": settings.s3_secret, "key": key}
            env.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return env


def _mounts(settings: TrainingSettings, shm: bool) -> list[dict[str, Any]]:
    mounts = [{"name": "work", "mountPath": settings.work_dir}]
    return mounts + ([{"name": "dshm", "mountPath": "/dev/shm"}] if shm else [])


def _container(
    settings: TrainingSettings,
    name: str,
    command: list[str],
    run: str,
    resources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A container; without ``resources``, a small init container (no /dev/shm)."""
    return {
        "name": name,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": command,
        "env": _env(settings, run),
        "resources": copy.deepcopy(resources or _INIT_RESOURCES),
        "volumeMounts": _mounts(settings, shm=resources is not None),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _main_resources(settings: TrainingSettings, gpus: int, cpu: str, memory: str) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {"memory": memory}
    if gpus:  # extended resources: request and limit must be equal
        requests[settings.gpu_resource] = limits[settings.gpu_resource] = str(gpus)
    return {"requests": requests, "limits": limits}


def _labels(settings: TrainingSettings, component: str, run: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "pmcvl",
        "app.kubernetes.io/component": component,
        "pmcvl.io/run": run,
    }


def _job(
    settings: TrainingSettings,
    component: str,
    run: str,
    gpus: int,
    deadline: int,
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]],
) -> dict[str, Any]:
    labels = _labels(settings, f"clip-{component}", run)
    volume = (
        {"persistentVolumeClaim": {"claimName": settings.volume_claim}}
        if settings.volume_claim
        else {"emptyDir": {"sizeLimit": settings.scratch_size}}
    )
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # the trainer image's user (docker/trainer.Dockerfile); fsGroup makes volumes writable
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": containers,
        "volumes": [
            {"name": "work", **volume},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}},
        ],
    }
    if init_containers:
        pod["initContainers"] = init_containers
    if gpus:
        pod["nodeSelector"] = dict(settings.node_selector)
        pod["tolerations"] = [dict(t) for t in settings.tolerations]
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in settings.image_pull_secrets]
    name = f"{settings.job_name}-{component}-{run}"[:63].rstrip("-")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels},
        "spec": {
            "backoffLimit": settings.backoff_limit,
            "activeDeadlineSeconds": deadline,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        },
    }


def render_training_job(settings: TrainingSettings, manifest_uri: str, run: str) -> dict[str, Any]:
    """The training Job for ``run`` on the dataset whose ``manifest.json`` is ``manifest_uri``."""
    check_run(run)
    manifest_path, pull = dataset_in_pod(settings, manifest_uri)
    init = [] if pull is None else [_container(settings, "dataset", pull, run)]
    bench = benchmark_command(settings, manifest_path, run)
    init.append(_container(settings, "benchmark", bench, run))
    res = settings.train
    main = _container(
        settings,
        TRAIN,
        train_command(settings, manifest_path, run),
        run,
        _main_resources(settings, res.gpus, res.cpu, res.memory),
    )
    return _job(settings, "train", run, res.gpus, res.active_deadline_seconds, [main], init)


def render_eval_job(settings: TrainingSettings, run: str, xcom: bool = True) -> dict[str, Any]:
    """The evaluation Job: the run's last checkpoint on its benchmark. With ``xcom`` the scores
    are also written where the Airflow operator's sidecar collects them."""
    init = []
    if settings.output_uri:  # the training pod's disk is gone: pull what it pushed
        pull = ["python", "-m", "ray_jobs.training.sync", "copy"]
        pull += [f"{settings.output_uri.rstrip('/')}/{run}", run_dir(settings, run)]
        init.append(_container(settings, "fetch", pull + _s3_flags(settings), run))
    res = settings.evaluation
    main = _container(
        settings,
        EVALUATE,
        eval_command(settings, run, xcom),
        run,
        _main_resources(settings, res.gpus, res.cpu, res.memory),
    )
    return _job(settings, "eval", run, res.gpus, res.active_deadline_seconds, [main], init)


def to_yaml(*specs: dict[str, Any]) -> str:
    """Multi-document YAML in the order given, keys in the order rendered."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # no &id001 anchors: plain manifests
            return True

    return yaml.dump_all(list(specs), Dumper=_Dumper, sort_keys=False)


def to_v1job(spec: dict[str, Any]) -> Any:
    """The kubernetes client's ``V1Job`` for a rendered spec (what KubernetesJobOperator takes)."""
    from kubernetes.client import ApiClient

    class _Response:  # ApiClient.deserialize reads a response's JSON body from .data
        data = json.dumps(spec)

    return ApiClient().deserialize(_Response(), "V1Job")


def validate(spec: dict[str, Any], kubernetes_version: str = "1.30") -> None:
    """Raise unless ``spec`` is valid for the Kubernetes API (strict: no unknown fields).
    ``kubernetes-validate`` ships the schemas, so this works offline."""
    import kubernetes_validate

    kubernetes_validate.validate(spec, kubernetes_version, strict=True)
