"""Import ultralytics fully offline: no DNS probe, no font download, no settings sync.

ultralytics looks up DNS at import and fetches Arial.ttf from GitHub for its plots. Both stop
when YOLO_OFFLINE is set, its config folder is ours, and an Arial.ttf is already there (we copy
matplotlib's DejaVuSans, which ships in the venv). Call :func:`ultralytics_offline` before any
ultralytics import.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

from ray_jobs.figures.fonts import font_path


def ultralytics_offline(config_dir: str | os.PathLike[str] | None = None) -> ModuleType:
    base = Path(config_dir or os.environ.get("YOLO_CONFIG_DIR") or Path.home() / ".cache/pmcvl")
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_CONFIG_DIR"] = str(base)
    # checkpoints load with torch's weights_only and ultralytics' allow-list of its own
    # classes, not a full unpickle (read when ultralytics is first imported)
    os.environ["ULTRALYTICS_SAFE_LOAD"] = "1"
    os.environ.setdefault("MPLCONFIGDIR", str(base / "matplotlib"))
    target = base / "Ultralytics" / "Arial.ttf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(font_path(), target)
    import ultralytics
    from ultralytics.utils import SETTINGS

    # no telemetry, no experiment-tracker callbacks; and nothing written beside the caller
    off = (
        "sync",
        "raytune",
        "mlflow",
        "wandb",
        "clearml",
        "comet",
        "dvc",
        "neptune",
        "hub",
        "vscode_msg",
        "openvino_msg",
    )
    wanted: dict[str, object] = {key: False for key in off if key in SETTINGS}
    for key, sub in (("runs_dir", "runs"), ("weights_dir", "weights"), ("datasets_dir", "data")):
        if key in SETTINGS:
            wanted[key] = str(base / sub)
    SETTINGS.update(wanted)
    return ultralytics
