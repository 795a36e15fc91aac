"""The commands of one ``detector_training`` run, and whether its candidate wins.

Kept out of the DAG file so the DAG stays a thin graph and these rules are testable alone.
Paths are one folder per run under ``workdir``; every value that reaches a shell is quoted.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

METRIC_KEYS = {"mAP50_95": "mAP50_95", "mAP50": "mAP50", "f1": "F1@0.5"}


def detector_plan(params: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    q = shlex.quote
    root = f"{str(params['workdir']).rstrip('/')}/runs/{re.sub(r'[^A-Za-z0-9_.-]+', '-', run_id)}"
    synth, train = f"{root}/synth", f"{root}/train"
    data = f"{synth}/data.yaml"
    arch = str(params["arch"])
    candidate = f"{train}/{arch}-panels.pt"
    current = str(params["current_weights"])
    gpus = float(params["gpus"])
    evaluate = f"pmcvl-dev eval-detector --data {q(data)} --split val --weights"
    return {
        "root": root,
        "data": data,
        "candidate": candidate,
        "current": current,
        "gpus": gpus,
        "synth": f"pmcvl-dev synth --out {q(synth)} --n {int(params['figures'])} "
        f"--seed {int(params['seed'])}",
        "train": f"pmcvl-dev train-detector --data {q(data)} --out {q(train)} --arch {q(arch)} "
        f"--epochs {int(params['epochs'])} --imgsz {int(params['imgsz'])} "
        f"--batch {int(params['batch'])} --seed {int(params['seed'])}"
        + ("" if gpus else " --device cpu"),
        "eval_candidate": f"{evaluate} {q(candidate)}",
        # no current checkpoint yet: the candidate wins by default
        "eval_current": f"if [ -f {q(current)} ]; then {evaluate} {q(current)}; "
        f"else echo '{{\"weights\": null}}'; fi",
    }


def wins(
    candidate: Mapping[str, Any] | None,
    current: Mapping[str, Any] | None,
    metric: str = "mAP50_95",
    min_gain: float = 0.0,
) -> tuple[bool, str]:
    """(publish?, why): the candidate beats the current checkpoint by more than ``min_gain``."""
    key = METRIC_KEYS[metric]
    if not candidate or candidate.get(key) is None:
        return False, f"the candidate has no {key}: not published"
    score = float(candidate[key])
    if not current or current.get("weights") is None or current.get(key) is None:
        return True, f"no current checkpoint: the candidate ({key} {score:.4f}) is published"
    base = float(current[key])
    if score > base + min_gain:
        return True, f"candidate {key} {score:.4f} beats current {base:.4f} (+{min_gain})"
    return False, f"candidate {key} {score:.4f} does not beat current {base:.4f} (+{min_gain})"


def publish_command(steps: Mapping[str, Any], metrics: Mapping[str, Any]) -> str:
    """Copy the candidate over the current checkpoint atomically (a rename in its folder),
    keep the replaced one as ``.prev``, and write the winning metrics beside it."""
    q = shlex.quote
    current = str(steps["current"])
    tmp = f"{current}.incoming"
    return (
        f'set -e; mkdir -p "$(dirname {q(current)})"; '
        f"if [ -f {q(current)} ]; then cp {q(current)} {q(current + '.prev')}; fi; "
        f"cp {q(steps['candidate'])} {q(tmp)}; mv {q(tmp)} {q(current)}; "
        f"printf '%s\\n' {q(json.dumps(dict(metrics), sort_keys=True))} "
        f"> {q(current + '.metrics.json')}; echo published {q(current)}"
    )
