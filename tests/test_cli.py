"""The `pmcvl` command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]


def pmcvl(*args: str, cwd: Path | None = None, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "ray_jobs.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_the_commands() -> None:
    proc = pmcvl("--help")
    assert proc.returncode == 0
    for command in ("parse", "sample-corpus", "ingest", "show-config"):
        assert command in proc.stdout


def test_help_groups_commands_by_audience_and_leaves_model_development_out() -> None:
    """``pmcvl --help`` lists each command under its section (none falls to "Other"); the
    model-development commands are ``pmcvl-dev``'s, and only there."""
    from click.testing import CliRunner

    from modeldev.cli import main as dev_main
    from ray_jobs.cli import SECTIONS, main

    help_text = CliRunner().invoke(main, ["--help"]).output
    for title in SECTIONS:
        assert f"\n{title}:\n" in help_text
    assert "Other:" not in help_text and "Commands:" not in help_text
    listed = {name for names in SECTIONS.values() for name in names}
    assert set(main.commands) <= listed
    dev = {"synth", "train-detector", "average-detectors", "eval-detector"}
    dev |= {"classifier-data", "train-classifier", "eval-classifier", "bench-relevance"}
    dev |= {"eval-real", "eval-published", "pseudo-labels", "eval-sample-build"}
    assert set(dev_main.commands) == dev and not dev & set(main.commands)


def test_parse_real_article_prints_the_record(jats_dir: Path) -> None:
    proc = pmcvl("parse", str(jats_dir / "pone.0046493.nxml"))
    assert proc.returncode == 0, proc.stderr
    article = json.loads(proc.stdout)
    assert article["pmcid"] == "PMC3460867"
    assert article["license"]["code"] == "CC BY"
    assert len(article["figures"]) == 4
    assert article["figures"][2]["mentions"][0]["panels"] == ["A", "B", "C"]
    assert article["acronyms"]["THL"] == "Tetrahydrolipstatin"


def test_parse_folder_and_bundle(tmp_path: Path) -> None:
    corpus = tmp_path / "bundles"
    assert (
        pmcvl(
            "sample-corpus", "--out", str(corpus), "--n", "2", "--layout", "bundles", "--seed", "9"
        ).returncode
        == 0
    )
    bundle = sorted(corpus.glob("*.tar.gz"))[0]
    from_bundle = json.loads(pmcvl("parse", str(bundle)).stdout)
    assert from_bundle["pmcid"] == bundle.name.split(".")[0]
    assert all(f["image"] for f in from_bundle["figures"])

    folders = tmp_path / "folders"
    pmcvl("sample-corpus", "--out", str(folders), "--n", "1", "--layout", "s3", "--seed", "9")
    folder = next(p for p in folders.iterdir() if p.name.startswith("PMC"))
    from_folder = json.loads(pmcvl("parse", str(folder)).stdout)
    assert from_folder["version"] == 1
    assert from_folder["figures"][0]["image"].endswith(".jpg")


def test_demo_config_end_to_end(tmp_path: Path) -> None:
    """What `make demo` runs: generate, ingest, and a second ingest that does nothing."""
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    assert pmcvl("sample-corpus", "--out", str(corpus), "--n", "8").returncode == 0
    env = {"PMCVL__SOURCE__PATH": str(corpus), "PMCVL__OUTPUT__URI": str(out)}
    first = pmcvl("ingest", "--config", str(REPO / "configs" / "demo.yaml"), env=env)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    versions = len((corpus / "truth.jsonl").read_text().splitlines())  # 8 plus older versions
    assert summary["listed"] == versions and summary["articles"] + summary["skipped"] == versions
    table = pq.read_table(out / "articles")
    assert table.num_rows == summary["articles"]
    second = pmcvl("ingest", "--config", str(REPO / "configs" / "demo.yaml"), env=env)
    assert json.loads(second.stdout)["unchanged"] == versions
    assert "nothing to do" in second.stderr


def test_show_config_applies_env(tmp_path: Path) -> None:
    proc = pmcvl("show-config", env={"PMCVL__SOURCE__KIND": "s3", "PMCVL__SOURCE__LIMIT": "5"})
    assert proc.returncode == 0, proc.stderr
    assert "limit: 5" in proc.stdout and "kind: s3" in proc.stdout
