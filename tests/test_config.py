"""One typed config: YAML, environment overrides, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ray_jobs.config import env_overrides, load_settings
from ray_jobs.pmc.sources import open_source


def test_a_local_source_needs_a_path() -> None:
    settings = load_settings(environ={})  # the defaults load; the source says what it lacks
    with pytest.raises(ValueError, match=r"needs source\.path"):
        open_source(settings.source, settings.archive)


def test_yaml_then_env_then_keywords(tmp_path: Path) -> None:
    cfg = tmp_path / "conf" / "pmcvl.yaml"
    cfg.parent.mkdir()
    cfg.write_text(
        "source:\n  kind: local\n  path: corpus\noutput:\n  uri: out\narchive:\n  max_members: 50\n"
    )
    env = {
        "PMCVL__ARCHIVE__MAX_RATIO": "12.5",
        "PMCVL__SOURCE__S3__ENDPOINT_URL": "http://127.0.0.1:9000",
        "PMCVL__LOG_LEVEL": "DEBUG",
        "OTHER": "ignored",
    }
    settings = load_settings(cfg, environ=env, ingest={"workers": 2})
    # relative paths resolve against the file, so the config works from any directory
    assert settings.source.path == str(cfg.parent / "corpus")
    assert settings.output.uri == str(cfg.parent / "out")
    assert settings.archive.max_members == 50
    assert settings.archive.max_ratio == 12.5
    assert settings.source.s3.endpoint_url == "http://127.0.0.1:9000"
    assert settings.log_level == "DEBUG"
    assert settings.ingest.workers == 2


def test_s3_uris_are_not_treated_as_paths(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("source: {kind: s3}\noutput: {uri: 's3://bucket/prefix'}\n")
    assert load_settings(cfg, environ={}).output.uri == "s3://bucket/prefix"


def test_unknown_keys_and_bad_values_are_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("source: {kind: s3, buckett: x}\n")
    with pytest.raises(ValidationError, match="buckett"):
        load_settings(cfg, environ={})
    with pytest.raises(ValidationError, match="max_members"):
        load_settings(environ={"PMCVL__SOURCE__KIND": "s3", "PMCVL__ARCHIVE__MAX_MEMBERS": "0"})


def test_env_overrides_parse_yaml_scalars() -> None:
    assert env_overrides({"PMCVL__A__B": "3", "PMCVL__A__C": "true", "PMCVL__D": "x"}) == {
        "a": {"b": 3, "c": True},
        "d": "x",
    }


def test_fingerprint_tracks_content() -> None:
    a = load_settings(environ={"PMCVL__SOURCE__KIND": "s3"})
    b = load_settings(environ={"PMCVL__SOURCE__KIND": "s3"})
    c = load_settings(environ={"PMCVL__SOURCE__KIND": "s3", "PMCVL__SOURCE__BUCKET": "other"})
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
