"""The Asset that chains the DAGs: ``pmc_dataset`` publishes new shards, ``clip_training``
is scheduled on it. The URI is the dataset's manifest, where the deployment keeps it
(``PMCVL_DATASET_URI``: ``s3://bucket/prefix`` or a local folder)."""

from __future__ import annotations

import os

from airflow.sdk import Asset

DEFAULT_DATASET_URI = "/opt/airflow/pmcvl/dataset"


def dataset_uri() -> str:
    """Where the dataset lives (the build job's ``output.uri``)."""
    return os.environ.get("PMCVL_DATASET_URI", DEFAULT_DATASET_URI).rstrip("/")


def manifest_asset_uri(output_uri: str) -> str:
    """``s3://b/p`` → ``s3://b/p/manifest.json``; a local folder becomes a ``file://`` URI."""
    if "://" not in output_uri:
        output_uri = "file://" + os.path.abspath(output_uri)
    return f"{output_uri.rstrip('/')}/manifest.json"


PMC_SHARDS = Asset(name="pmcvl_shards", uri=manifest_asset_uri(dataset_uri()), group="pmcvl")
