"""The product never imports model development.

``modeldev`` (generators, held-out families, protocols, training, evaluation) is not in the
runtime images, so a product module that imports it works on a laptop and fails on the cluster;
and a Ray stage worker that loads the figure generator carries code and memory it never uses.
Each check runs in a fresh interpreter (the way a Ray worker starts), with a meta-path hook that
records which module's import brought each of ours in, so a failure names the chain to cut.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OURS = ("ray_jobs", "operators", "modeldev")

# Runs in the child. Prints {"chains": {module: ["__main__", ..., its importer]}, "errors":
# {module: error}} for every module of ours loaded, in the order first asked for.
_HOOK = """
import importlib, json, pkgutil, sys

OURS = {ours!r}
chains = {{}}


class Watch:
    # sees every import before any finder does; finds nothing itself
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in OURS and name not in chains:
            # the modules on the stack: module bodies being run and functions importing lazily
            chain, frame = [], sys._getframe(1)
            while frame is not None:
                module = frame.f_globals.get("__name__") or "?"
                if not module.startswith("importlib") and module not in chain[-1:]:
                    chain.append(module)
                frame = frame.f_back
            chains[name] = chain[::-1]
        return None


sys.meta_path.insert(0, Watch())
errors = {{}}
"""

_WALK = """
for top in ("ray_jobs", "operators"):
    package = importlib.import_module(top)
    onerror = lambda name: errors.setdefault(name, repr(sys.exc_info()[1]))
    for info in pkgutil.walk_packages(package.__path__, top + ".", onerror=onerror):
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            errors[info.name] = repr(exc)
"""

# the Ray stage modules, and what their stage classes import when an actor sets up
STAGE_MODULES = (
    "ray_jobs.pipeline.stages",
    "ray_jobs.figures.panels",
    "ray_jobs.figures.letters.model",
    "ray_jobs.figures.classifier",
    "ray_jobs.pipeline.panels_stage",
    "ray_jobs.pipeline.relevance_stage",
)
# names that belong to model development wherever they appear
DEV_WORDS = ("synth", "heldout", "separators", "protocol", "train")


def _loaded(body: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    script = _HOOK.format(ours=OURS) + body
    script += "\nprint(json.dumps({'chains': chains, 'errors': errors}))\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["chains"], out["errors"]


def _explain(chains: dict[str, list[str]], names: list[str]) -> str:
    return "\n".join(f"  {name}: " + " -> ".join([*chains[name][1:], name]) for name in names)


def test_no_product_module_imports_model_development() -> None:
    """Every module of ``ray_jobs`` and ``operators``, imported in one fresh process (none
    skipped: each imports standalone), loads nothing of ``modeldev``."""
    chains, errors = _loaded(_WALK)
    assert not errors, f"product modules that do not import: {errors}"
    dev = [name for name in chains if name.split(".")[0] == "modeldev"]
    assert not dev, "the product imports model development (importer chain):\n" + _explain(
        chains, dev
    )


def test_stage_workers_load_no_generator_or_training_code() -> None:
    """What a Ray stage actor imports loads no generator, held-out family, separator cut,
    protocol or trainer: none of our modules named after one."""
    body = "".join(f"importlib.import_module({name!r})\n" for name in STAGE_MODULES)
    chains, _ = _loaded(body)
    dev = [name for name in chains if any(word in name for word in DEV_WORDS)]
    assert not dev, "stage modules load model development (importer chain):\n" + _explain(
        chains, dev
    )


def test_the_check_names_the_chain() -> None:
    """The hook does see model development when something imports it, and says through what."""
    chains, _ = _loaded("import ray_jobs.config\nimport modeldev.synth.labels\n")
    assert "modeldev.synth.labels" in chains and "modeldev" in chains
    assert _explain(chains, ["modeldev.synth.labels"]).strip() == (
        "modeldev.synth.labels: modeldev.synth.labels"
    )
