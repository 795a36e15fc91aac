"""Our open_clip model configs, rendered per run and registered with open_clip.

The packaged JSON files are templates: the context length is a run parameter (77, 154, 256,
512) and an HF text tower's weights live at a path known only at run time. So a run renders the
template into its own folder under a derived name (``pmcvl-tiny-ctx256``) and registers only that
folder; the package folder is never registered, so the HF template (whose path is empty) can
never be built by accident as a default text tower.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEMPLATES_DIR = Path(__file__).with_name("model_configs")

# open_clip (and transformers under it) must never reach a hub: set before they are imported
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def template_names() -> list[str]:
    """Names of the packaged templates (file stems)."""
    return sorted(p.stem for p in TEMPLATES_DIR.glob("*.json"))


def load_template(name: str) -> dict[str, Any]:
    path = TEMPLATES_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"unknown model config {name!r}; known: {', '.join(template_names())}")
    return json.loads(path.read_text(encoding="utf-8"))


def is_hf_text(cfg: dict[str, Any]) -> bool:
    return "hf_model_name" in cfg["text_cfg"]


def rendered_name(template: str, context_length: int | None) -> str:
    return template if context_length is None else f"{template}-ctx{context_length}"


def render_model_config(
    template: str, *, context_length: int | None = None, hf_text_path: str | None = None
) -> dict[str, Any]:
    """The template with the run's context length and, for an HF text tower, its local folder.

    The HF path must be an absolute local folder (weights fetched from S3 or a volume before the
    run): a relative name would be read by ``transformers`` as a hub id and fetched.
    """
    cfg = load_template(template)
    text = cfg["text_cfg"]
    if context_length is not None:
        if context_length < 2:
            raise ValueError(f"context_length must be >= 2, got {context_length}")
        text["context_length"] = context_length
    if is_hf_text(cfg):
        if not hf_text_path or not Path(hf_text_path).is_absolute():
            raise ValueError(
                f"{template} has an HF text tower: pass hf_text_path, an absolute local folder "
                f"holding its config, tokenizer and weights (got {hf_text_path!r})"
            )
        text["hf_model_name"] = text["hf_tokenizer_name"] = str(hf_text_path)
    elif hf_text_path:
        raise ValueError(f"{template} has no HF text tower; hf_text_path does not apply")
    return cfg


def write_model_config(cfg: dict[str, Any], name: str, out_dir: Path) -> Path:
    """Write ``{out_dir}/{name}.json``; open_clip names a model by its file stem."""
    if "." in name or "/" in name:
        raise ValueError(f"model name {name!r} must not hold '.' or '/' (it is a file stem)")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    return path


def register_model_configs(config_dir: Path) -> list[str]:
    """Make open_clip (this process) see every config in ``config_dir``; returns the names."""
    import open_clip

    open_clip.add_model_config(config_dir)
    return sorted(p.stem for p in Path(config_dir).glob("*.json"))


def prepare_model(
    template: str,
    out_dir: Path,
    *,
    context_length: int | None = None,
    hf_text_path: str | None = None,
) -> str:
    """Render, write and register one config; returns the model name to pass as ``--model``."""
    name = rendered_name(template, context_length)
    cfg = render_model_config(template, context_length=context_length, hf_text_path=hf_text_path)
    write_model_config(cfg, name, out_dir)
    register_model_configs(out_dir)
    return name
