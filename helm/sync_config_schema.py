"""Keep ``$defs.pmcvlConfig`` of the chart's values schema in step with ``Settings``.

The chart mounts ``pipeline.config`` as the build job's YAML, which pydantic reads with unknown
keys forbidden. Mirroring the key tree (not the types: pydantic checks those when the job
starts) into values.schema.json makes a misspelt key fail at ``helm install`` instead of at
the first run. tests/test_helm_chart.py fails when the two drift; then run

    .venv/bin/python helm/sync_config_schema.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ray_jobs.config import Settings

SCHEMA = Path(__file__).resolve().parent / "pmcvl" / "values.schema.json"


def key_tree(model: type[BaseModel]) -> dict[str, Any]:
    """A closed object per pydantic model; leaves accept any value."""
    props: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            props[name] = key_tree(ann)
        else:
            props[name] = {}
    return {"type": "object", "additionalProperties": False, "properties": props}


def main() -> int:
    schema = json.loads(SCHEMA.read_text())
    schema["$defs"]["pmcvlConfig"] = key_tree(Settings)
    SCHEMA.write_text(json.dumps(schema, indent=2) + "\n")
    print(f"updated {SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
