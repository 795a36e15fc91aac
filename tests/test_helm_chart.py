"""The Helm chart, rendered by the real helm binary and checked offline.

Every built-in object is validated against the Kubernetes OpenAPI schema (kubernetes-validate,
strict: unknown fields fail). The custom resources have no schema here: the KubeRay and
Prometheus Operator CRDs live in their projects' repositories, out of reach offline. Their
embedded pod templates are validated as Kubernetes PodTemplates instead, and the rest of their
structure by the focused assertions below.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_tool import helm_binary

from ray_jobs.config import Settings, load_settings

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "helm" / "pmcvl"
GPU_VALUES = CHART / "values-gpu-cluster.yaml"
CUSTOM = {"ray.io/v1", "monitoring.coreos.com/v1"}
# the chart's kubeVersion floor, and the newest schema kubernetes-validate ships
KUBE_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
RELEASE, NAMESPACE = "pmcvl", "pmcvl"


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("helm-home")
    env = {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "CACHE", "DATA")}
    binary = str(helm_binary())

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    return run


def render(helm, *args: str) -> list[dict[str, Any]]:
    out = helm("template", RELEASE, str(CHART), "-n", NAMESPACE, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def default_objects(helm) -> list[dict[str, Any]]:
    return render(helm)


@pytest.fixture(scope="module")
def gpu_objects(helm) -> list[dict[str, Any]]:
    return render(helm, "-f", str(GPU_VALUES))


@pytest.fixture(params=["default", "gpu"])
def objects(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return request.getfixturevalue(f"{request.param}_objects")


def one(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind} *{suffix}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod the chart defines, RayCluster groups included."""
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield name, obj["spec"]["template"]["spec"]
        elif obj["kind"] == "RayCluster":
            yield f"{name}/head", obj["spec"]["headGroupSpec"]["template"]["spec"]
            for group in obj["spec"]["workerGroupSpecs"]:
                yield f"{name}/{group['groupName']}", group["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("initContainers", []) + spec["containers"]


def gpus(container: dict[str, Any]) -> tuple[Any, Any]:
    res = container.get("resources", {})
    return res.get("requests", {}).get("nvidia.com/gpu"), res.get("limits", {}).get(
        "nvidia.com/gpu"
    )


def config_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(objects, "ConfigMap", "-config")["data"]["pmcvl.yaml"])


# --- helm itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, GPU_VALUES], ids=["default", "gpu"])
def test_helm_lint_strict(helm, values: Path | None) -> None:
    helm("lint", "--strict", str(CHART), *(["-f", str(values)] if values else []))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("ray.gpuWorker.maxReplicas=2", "Additional property gpuWorker is not allowed"),
        ("vllm.maxModelLength=4096", "Additional property maxModelLength is not allowed"),
        ("pipeline.config.detector.wieghts=x.pt", "Additional property wieghts"),
        ("pipeline.config.sorce.kind=s3", "Additional property sorce"),
        ("images.pipeline.tag=latest", "images.pipeline.tag"),
        ("ray.gpuWorkers.resources.limits.nvidia\\.com/gpu=2", "nvidia.com/gpu"),
        ("podSecurityContext.runAsNonRoot=false", "runAsNonRoot"),
        ("vllm.securityContext.runAsUser=0", "runAsUser"),
    ],
)
def test_schema_rejects_bad_values(helm, setting: str, message: str) -> None:
    proc = helm("template", RELEASE, str(CHART), "--set", setting, check=False)
    assert proc.returncode != 0
    assert "schema" in proc.stderr and message in proc.stderr, proc.stderr


def test_required_values_are_named_when_missing(helm) -> None:
    proc = helm("template", RELEASE, str(CHART), "--set", "models.source=pvc", check=False)
    assert proc.returncode != 0 and "models.existingClaim is required" in proc.stderr


# --- the schema and values files -----------------------------------------------------------


def _object_schemas(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield path, node
        for key, value in node.items():
            yield from _object_schemas(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _object_schemas(value, f"{path}[{i}]")


def test_schema_closes_every_object() -> None:
    """Closed objects reject unknown keys; the few open ones (Kubernetes' own affinity and
    valueFrom, validated by the API server) say so in a $comment."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    for path, node in _object_schemas(schema):
        if "properties" in node:
            assert node.get("additionalProperties") is False, path
        else:
            assert "additionalProperties" in node or "$comment" in node, path


def test_config_schema_follows_settings() -> None:
    """$defs.pmcvlConfig mirrors ray_jobs.config.Settings; on failure run
    `.venv/bin/python helm/sync_config_schema.py`."""
    spec = importlib.util.spec_from_file_location("sync", REPO / "helm" / "sync_config_schema.py")
    assert spec is not None and spec.loader is not None
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$defs"]["pmcvlConfig"] == sync.key_tree(Settings)


def test_every_value_has_a_doc_comment() -> None:
    """Each key of values.yaml has a comment line right above it (list items excepted)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    list_indent: int | None = None
    undocumented = []
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if not stripped or stripped.startswith("#"):
            continue
        if list_indent is not None and indent > list_indent:
            continue  # inside a list item's mapping
        list_indent = indent if stripped.startswith("- ") else None
        if list_indent is None and re.match(r"[\w.\-/]+:", stripped):
            above = lines[i - 1].strip() if i else ""
            if not above.startswith("#"):
                undocumented.append(f"{i + 1}: {stripped}")
    assert not undocumented, undocumented


# --- validation of the rendered objects ----------------------------------------------------


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_builtin_objects_match_kubernetes_schema(objects: list[dict[str, Any]], kube: str):
    builtin = [o for o in objects if o["apiVersion"] not in CUSTOM]
    assert len(builtin) >= 10
    for obj in builtin:
        kubernetes_validate.validate(obj, kube, strict=True)


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_raycluster_pod_templates_match_kubernetes_schema(
    objects: list[dict[str, Any]], kube: str
) -> None:
    cluster = one(objects, "RayCluster")
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    for group in groups:
        wrapper = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "check"},
            "template": group["template"],
        }
        kubernetes_validate.validate(wrapper, kube, strict=True)


def test_strict_validation_catches_unknown_fields() -> None:
    """The validator itself: a misspelt field must fail, or the tests above prove nothing."""
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prots": []}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSIONS[0], strict=True)


# --- what the objects say ------------------------------------------------------------------


def test_raycluster_structure(objects: list[dict[str, Any]]) -> None:
    cluster = one(objects, "RayCluster")
    spec = cluster["spec"]
    assert spec["rayVersion"] == version("ray")  # the Ray the pipeline is pinned to
    assert spec["enableInTreeAutoscaling"] is True
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # the head schedules no work
    assert {g["groupName"] for g in spec["workerGroupSpecs"]} == {"cpu", "gpu"}
    for group in [head, *spec["workerGroupSpecs"]]:
        params = group["rayStartParams"]
        assert all(isinstance(v, str) for v in params.values()), params  # map[string]string
        assert params["metrics-export-port"] == "8080"
        main = group["template"]["spec"]["containers"][0]  # KubeRay's Ray container is first
        assert {"name": "metrics", "containerPort": 8080} in main["ports"]
        env = {e["name"]: e for e in main["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        secret = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert one(objects, "Secret", "-ray-auth")["metadata"]["name"] == secret["name"]
        assert {"mountPath": "/etc/pmcvl", "name": "config", "readOnly": True} in main[
            "volumeMounts"
        ]
    for group in spec["workerGroupSpecs"]:
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    autoscaler_env = {e["name"] for e in spec["autoscalerOptions"]["env"]}
    assert {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} <= autoscaler_env


def test_gpu_cluster_bounds(gpu_objects: list[dict[str, Any]]) -> None:
    groups = {g["groupName"]: g for g in one(gpu_objects, "RayCluster")["spec"]["workerGroupSpecs"]}
    assert groups["gpu"]["maxReplicas"] == 8 and groups["gpu"]["minReplicas"] == 0
    training = config_of(gpu_objects)["training"]
    assert training["train"]["gpus"] == 8
    assert training["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_gpus_only_where_they_belong(objects: list[dict[str, Any]]) -> None:
    """nvidia.com/gpu on the GPU worker group and vLLM (request = limit), nowhere else: not
    the head, the CPU workers, the autoscaler or an init container."""
    expected = {"RayCluster/pmcvl/gpu/ray-gpu-worker": 1}
    if any(o["kind"] == "Deployment" for o in objects):
        expected["Deployment/pmcvl-vllm/vllm"] = 1
    seen = {}
    for where, spec in pod_specs(objects):
        for c in containers(spec):
            request, limit = gpus(c)
            if request is not None or limit is not None:
                assert request == limit, f"{where}/{c['name']}"
                seen[f"{where}/{c['name']}"] = limit
    assert seen == expected
    autoscaler = one(objects, "RayCluster")["spec"]["autoscalerOptions"]
    assert "nvidia.com/gpu" not in json.dumps(autoscaler)


def test_every_container_runs_as_non_root(objects: list[dict[str, Any]]) -> None:
    def check_container(where: str, ctx: dict[str, Any]) -> None:
        assert ctx["allowPrivilegeEscalation"] is False, where
        assert "ALL" in ctx["capabilities"]["drop"], where
        assert not ctx.get("privileged", False), where

    specs = list(pod_specs(objects))
    assert specs
    for where, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, where
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", where
        for c in containers(spec):
            check_container(f"{where}/{c['name']}", c["securityContext"])
    autoscaler = one(objects, "RayCluster")["spec"]["autoscalerOptions"]
    check_container("autoscaler", autoscaler["securityContext"])


def test_images_are_pinned(objects: list[dict[str, Any]]) -> None:
    images = [c["image"] for _, spec in pod_specs(objects) for c in containers(spec)]
    images.append(config_of(objects)["training"]["image"])
    for image in images:
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag and tag not in ("", "latest"), image
        assert re.fullmatch(r"\d+\.\d+\.\d+", tag), image


def test_services_select_their_pods(gpu_objects: list[dict[str, Any]]) -> None:
    objects = gpu_objects
    cluster_name = one(objects, "RayCluster")["metadata"]["name"]
    dashboard = one(objects, "Service", "-ray-dashboard")["spec"]
    # KubeRay labels its pods ray.io/cluster and ray.io/node-type
    assert dashboard["selector"] == {"ray.io/cluster": cluster_name, "ray.io/node-type": "head"}
    assert dashboard["ports"][0]["targetPort"] == "dashboard"
    vllm = one(objects, "Deployment", "-vllm")
    pod_labels = vllm["spec"]["template"]["metadata"]["labels"]
    service = one(objects, "Service", "-vllm")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert vllm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    services = [o for o in objects if o["kind"] == "Service"]
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, monitor["metadata"]["name"]
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        assert all(e["port"] in ports for e in monitor["spec"]["endpoints"])
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    metrics = one(objects, "Service", "-ray-metrics")["spec"]
    assert metrics["clusterIP"] == "None" and metrics["selector"] == {
        "ray.io/cluster": cluster_name
    }


def test_network_policies(gpu_objects: list[dict[str, Any]]) -> None:
    policies = {
        o["metadata"]["name"]: o["spec"] for o in gpu_objects if o["kind"] == "NetworkPolicy"
    }
    assert set(policies) == {"pmcvl-ray", "pmcvl-vllm", "pmcvl-trainer"}
    vllm_pods = one(gpu_objects, "Deployment", "-vllm")["spec"]["template"]["metadata"]["labels"]
    assert policies["pmcvl-vllm"]["podSelector"]["matchLabels"].items() <= vllm_pods.items()
    sources = [
        p["podSelector"]["matchLabels"] for p in policies["pmcvl-vllm"]["ingress"][0]["from"]
    ]
    assert {"ray.io/cluster": "pmcvl"} in sources and {"tier": "airflow"} in sources
    # egress stays open: the pods read S3 and the public PMC bucket
    assert all(p["policyTypes"] == ["Ingress"] for p in policies.values())


def test_vllm_server(gpu_objects: list[dict[str, Any]]) -> None:
    deployment = one(gpu_objects, "Deployment", "-vllm")
    spec = deployment["spec"]["template"]["spec"]
    (server,) = spec["containers"]
    args = server["args"]
    assert args[0] == "/models/Qwen2.5-VL-7B-Instruct"
    assert "--max-model-len=16384" in args
    assert '--limit-mm-per-prompt={"image":1}' in args
    assert "--structured-outputs-config.backend=xgrammar" in args
    config = config_of(gpu_objects)["longcap"]
    assert f"--served-model-name={config['model']}" in args
    assert config["enabled"] is True and config["base_url"] == "http://pmcvl-vllm:8000"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["httpGet"]["path"] == "/health"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "pmcvl-vllm-models"
    (fetch,) = spec["initContainers"]  # copies the model from S3, never a hub
    assert fetch["args"][0].startswith("s3://")
    assert fetch["volumeMounts"] == [{"name": "models", "mountPath": "/models"}]
    assert fetch["args"][1].startswith("/models/")
    env = {e["name"]: e for e in server.get("env", [])}
    assert "HF_TOKEN" not in env


def test_default_install_is_small_and_coherent(default_objects: list[dict[str, Any]]) -> None:
    kinds = {o["kind"] for o in default_objects}
    assert "Deployment" not in kinds and "ServiceMonitor" not in kinds  # vLLM, monitoring off
    groups = {
        g["groupName"]: g for g in one(default_objects, "RayCluster")["spec"]["workerGroupSpecs"]
    }
    assert groups["gpu"]["replicas"] == 0 and groups["cpu"]["replicas"] == 1
    config = config_of(default_objects)
    assert config["longcap"] == {"enabled": False}  # no server to call
    assert config["source"]["bucket"] == "pmc-oa-opendata"
    assert config["output"]["uri"] == "s3://pmcvl-data/pmcvl/dataset"
    env = one(default_objects, "ConfigMap", "-env")["data"]
    assert env["PMCVL_DATASET_URI"] == config["output"]["uri"]
    assert env["RAY_API_SERVER_ADDRESS"] == "http://pmcvl-ray-dashboard.pmcvl.svc:8265"
    assert "PMCVL_LLM_BASE_URL" not in env


def test_rendered_config_loads(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    """The ConfigMap is a valid pmcvl config: pydantic, unknown keys forbidden, reads it."""
    path = tmp_path / "pmcvl.yaml"
    path.write_text(one(objects, "ConfigMap", "-config")["data"]["pmcvl.yaml"])
    settings = load_settings(path, environ={})
    assert settings.detector.weights.startswith("/opt/pmcvl/models/")
    assert settings.classifier.weights.startswith("/opt/pmcvl/models/")
    assert settings.training.volume_claim == "pmcvl-training"
    assert settings.training.namespace == NAMESPACE


def test_airflow_overlay_matches_the_chart(helm, gpu_objects: list[dict[str, Any]]) -> None:
    """airflow-values.yaml names objects of a release called pmcvl: they must exist."""
    overlay = yaml.safe_load((CHART / "airflow-values.yaml").read_text())
    names = {(o["kind"], o["metadata"]["name"]) for o in gpu_objects}
    for ref in yaml.safe_load(overlay["extraEnvFrom"]):
        kind, target = (
            ("ConfigMap", ref["configMapRef"])
            if "configMapRef" in ref
            else (
                "Secret",
                ref["secretRef"],
            )
        )
        assert target.get("optional") or (kind, target["name"]) in names, target
    (token,) = yaml.safe_load(overlay["extraEnv"])
    assert ("Secret", token["valueFrom"]["secretKeyRef"]["name"]) in names
    assert ("ConfigMap", overlay["volumes"][0]["configMap"]["name"]) in names
    assert overlay["volumeMounts"][0]["mountPath"] == "/etc/pmcvl"
    env = one(gpu_objects, "ConfigMap", "-env")["data"]
    assert env["PMCVL_CONFIG"] == "/etc/pmcvl/pmcvl.yaml"
    account = overlay["workers"]["serviceAccount"]["name"]
    assert overlay["triggerer"]["serviceAccount"]["name"] == account
    assert ("ServiceAccount", account) in names
    binding = one(gpu_objects, "RoleBinding", "-training-jobs")
    assert binding["subjects"][0]["name"] == account
    rules = one(gpu_objects, "Role", "-training-jobs")["rules"]
    assert any("jobs" in r["resources"] and "create" in r["verbs"] for r in rules)
    assert any("pods/log" in r["resources"] for r in rules)
    assert any("pods/exec" in r["resources"] for r in rules)  # the eval Job's XCom sidecar
    assert overlay["images"]["airflow"]["tag"] != "latest"


def test_s3_keys_become_a_secret(helm) -> None:
    objects = render(helm, "--set", "s3.accessKeyId=AKID", "--set", "s3.secretAccessKey=SECRET")
    secret = one(objects, "Secret", "-s3")
    assert set(secret["stringData"]) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    head = one(objects, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    refs = [
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in head["containers"][0]["env"]
        if "valueFrom" in e and e["name"].startswith("AWS_")
    ]
    assert refs == [secret["metadata"]["name"]] * 2
    assert config_of(objects)["training"]["s3_secret"] == secret["metadata"]["name"]
