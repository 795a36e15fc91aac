"""The versioned prompt files: loading them, naming their version, and filling them in.

Each step's system prompt, user template and JSON schema live together in one YAML file under
``prompts/``, so everything the model is asked is reviewed and versioned as data.
``prompt_version`` is a hash of those files' bytes: editing a prompt changes it, which both
records which prompts wrote a caption and, through the cache key, forces new calls.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any

import yaml

STEPS = ("augment", "feasibility")


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: Template
    schema: dict[str, Any]

    def render(self, **values: object) -> str:
        return self.user.substitute({k: str(v) for k, v in values.items()}).strip()

    def schema_with(self, **limits: dict[str, int]) -> dict[str, Any]:
        """A copy of the schema with ``{property: {keyword: value}}`` limits set, e.g. the
        number of judgements pinned to the number of features sent."""
        schema = copy.deepcopy(self.schema)
        for prop, keywords in limits.items():
            schema["properties"][prop].update(keywords)
        return schema


@dataclass(frozen=True)
class PromptSet:
    version: str
    augment: Prompt
    feasibility: Prompt


def _parse(name: str, text: str) -> Prompt:
    data = yaml.safe_load(text)
    missing = {"system", "user", "schema"} - set(data or {})
    if missing:
        raise ValueError(f"prompt {name}: missing {sorted(missing)}")
    return Prompt(name, data["system"].strip(), Template(data["user"]), data["schema"])


def prompt_set_from_texts(texts: dict[str, str]) -> PromptSet:
    """Build a prompt set from file texts by step name (tests use this to change a prompt)."""
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(name.encode() + b"\0" + texts[name].encode() + b"\0")
    prompts = {name: _parse(name, texts[name]) for name in STEPS}
    return PromptSet(version=f"longcap-{digest.hexdigest()[:12]}", **prompts)


def prompt_texts() -> dict[str, str]:
    folder = resources.files("ray_jobs.longcap") / "prompts"
    return {name: (folder / f"{name}.yaml").read_text(encoding="utf-8") for name in STEPS}


@lru_cache(maxsize=1)
def load_prompts() -> PromptSet:
    """The shipped prompts (read once per process)."""
    return prompt_set_from_texts(prompt_texts())
