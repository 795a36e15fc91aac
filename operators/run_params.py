"""What a DAG run's params may change: no secrets, and models only from the configured places.

Params are stored in the metadata database, shown in the Airflow UI, copied into XCom and
into the Ray job's runtime environment (shown in the Ray dashboard). So a secret given there
is published, and a model path given there is code the cluster runs (a checkpoint is a
pickle). Both are refused here, before anything is planned, with the place they belong in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlparse

from pydantic import BaseModel, SecretStr

from ray_jobs.config import LLM_API_KEY_ENV, Settings

# config fields that name weights or other model files; a test keeps this list complete
MODEL_FIELDS = frozenset(
    {
        ("detector", "weights"),
        ("detector", "label_reader_weights"),
        ("classifier", "weights"),
        ("classifier", "pretrained"),
        ("captions", "long_tokenizer"),
        ("training", "hf_text_path"),
    }
)
ROOTS_FIELD = ("model_roots",)
SECRET_ENV_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")


class ParamRefused(ValueError):
    """A run param that may not be given as a param."""


def leaves(tree: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple, Any]]:
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            yield from leaves(value, (*path, str(key)))
        else:
            yield (*path, str(key)), value


def secret_fields(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> set[tuple]:
    """Paths of the config's ``SecretStr`` fields (``longcap.api_key``)."""
    found: set[tuple] = set()
    for name, field in model.model_fields.items():
        kinds = [field.annotation, *get_args(field.annotation)]
        if SecretStr in kinds:
            found.add((*path, name))
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found |= secret_fields(kind, (*path, name))
    return found


def has_credentials(value: object) -> bool:
    """A URL with a user and password in it, or a key in its query."""
    if not isinstance(value, str) or "://" not in value:
        return False
    url = urlparse(value)
    return bool(url.password or url.username) or any(
        word in url.query.lower() for word in ("key=", "token=", "password=", "secret=")
    )


def within(value: str, roots: Sequence[str]) -> bool:
    """``value`` names a file under one of ``roots``: a URI by prefix, a path once resolved
    (so ``..`` and links cannot step out)."""
    if "://" in value:
        return any("://" in r and value.startswith(r.rstrip("/") + "/") for r in roots)
    path = Path(value).resolve()
    return any("://" not in r and path.is_relative_to(Path(r).resolve()) for r in roots)


def check_overrides(tree: Mapping[str, Any], model_roots: Sequence[str]) -> None:
    """Raise :class:`ParamRefused` naming every param that may not be given this way."""
    secrets = secret_fields()
    problems = []
    for path, value in leaves(tree):
        name = ".".join(path)
        if path in secrets:
            problems.append(
                f"{name}: a secret, which params would show in the Airflow and Ray UIs; put "
                f"the key in the pmcvl_llm connection (its password, for the health check) and "
                f"the cluster's Secret ({LLM_API_KEY_ENV}, helm value vllm.apiKey."
                "existingSecret)"
            )
        elif has_credentials(value):
            problems.append(f"{name}: a URL with credentials in it; give them as a secret")
        elif path == ROOTS_FIELD:
            problems.append(f"{name}: set in the config file or the environment, not by params")
        elif path in MODEL_FIELDS and value is not None and not within(str(value), model_roots):
            problems.append(
                f"{name}={value!r}: not under the configured model_roots {list(model_roots)}"
            )
    if problems:
        raise ParamRefused("run params refused: " + "; ".join(problems))


def check_runtime_env(runtime_env: Mapping[str, Any] | None) -> None:
    """Refuse env vars that look like secrets: the Ray dashboard shows every job's runtime env."""
    names = [
        n
        for n in ((runtime_env or {}).get("env_vars") or {})
        if any(word in n.upper() for word in SECRET_ENV_WORDS)
    ]
    if names:
        raise ParamRefused(
            f"secrets in the Ray job's runtime_env ({', '.join(sorted(names))}) would show in "
            "the Ray dashboard; the cluster's pods take them from a Kubernetes Secret"
        )
