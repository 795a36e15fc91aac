"""Logging that says what the pipeline is doing, readable in a terminal and in Ray/Airflow logs."""

from __future__ import annotations

import logging
import sys

from rich.logging import RichHandler


def setup_logging(level: str = "INFO") -> None:
    root = logging.getLogger()
    if getattr(setup_logging, "_done", False):
        root.setLevel(level)
        return
    if sys.stderr.isatty():
        handler: logging.Handler = RichHandler(show_path=False, rich_tracebacks=True)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    setup_logging._done = True  # type: ignore[attr-defined]
