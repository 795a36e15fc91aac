"""The shard validator on a dataset the ``pmc_dataset`` DAG really built, then on copies of it
with one thing broken each: a shard's bytes, a missing shard, an index in the wrong schema, a
manifest whose totals do not add up."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk.exceptions import AirflowFailException

from operators.shard_validation import ShardValidationOperator, validate_dataset


@pytest.fixture(scope="module")
def built(pmc_first_run, pmc_params) -> tuple[Path, str]:
    """The DAG-built dataset and the run id that built it."""
    out = Path(pmc_params["output_uri"])
    manifest = json.loads((out / "manifest.json").read_text())
    return out, manifest["runs"][-1]


@pytest.fixture
def copy(built, tmp_path) -> tuple[Path, str, dict]:
    out, run_id = built
    target = tmp_path / "dataset"
    shutil.copytree(out, target)
    return target, run_id, json.loads((target / "manifest.json").read_text())


def test_a_built_dataset_is_valid(built):
    out, run_id = built
    report = validate_dataset(str(out), run_id)
    assert report.ok, report.problems
    manifest = json.loads((out / "manifest.json").read_text())
    assert report.checked == [s["name"] for s in manifest["shards"]]
    assert report.rows_checked > 0 and report.samples == manifest["counts"]["kept"]
    assert validate_dataset(str(out), verify="all").ok
    result = ShardValidationOperator(
        task_id="validate", output_uri=str(out), run_id=run_id, s3_conn_id=None
    ).execute({})
    assert result["ok"] and result["checked"] == report.checked


def test_a_shard_with_other_bytes_fails(copy):
    out, run_id, manifest = copy
    shard = out / manifest["shards"][0]["name"]
    data = bytearray(shard.read_bytes())
    data[600] ^= 0xFF  # same size, one byte changed
    shard.write_bytes(bytes(data))
    report = validate_dataset(str(out), run_id)
    assert [p for p in report.problems if "sha256 differs" in p] == [
        f"{manifest['shards'][0]['name']}: sha256 differs from the manifest"
    ]
    op = ShardValidationOperator(task_id="v", output_uri=str(out), run_id=run_id, s3_conn_id=None)
    with pytest.raises(AirflowFailException, match="sha256 differs"):
        op.execute({})


def test_a_missing_shard_fails(copy):
    out, run_id, manifest = copy
    name = manifest["shards"][-1]["name"]
    (out / name).unlink()
    assert f"{name}: missing" in validate_dataset(str(out), run_id).problems


def test_an_index_in_another_schema_fails(copy):
    out, run_id, manifest = copy
    index = out / manifest["shards"][0]["index"]
    table = pq.read_table(index)
    table = table.set_column(
        table.schema.get_field_index("year"), "year", table["year"].cast(pa.string())
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    index.write_bytes(buffer.getvalue())
    problems = validate_dataset(str(out), run_id).problems
    assert problems == [f"{manifest['shards'][0]['index']}: not in the index schema"]


def test_a_manifest_that_does_not_add_up_fails(copy):
    out, run_id, manifest = copy
    broken = json.loads(json.dumps(manifest))
    broken["splits"]["train"]["samples"] += 1
    broken["counts"]["kept"] += 5
    (out / "manifest.json").write_text(json.dumps(broken))
    problems = validate_dataset(str(out), run_id).problems
    assert any("split totals" in p for p in problems)
    assert any("counts.kept" in p for p in problems)
    # samples hidden from readers without a tombstone listed for them
    manifest["shards"][0]["current"] -= 1
    manifest["splits"][manifest["shards"][0]["split"]]["samples"] -= 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    problems = validate_dataset(str(out), run_id).problems
    assert problems == ["1 samples superseded in shards, 0 listed"]
    (out / "manifest.json").unlink()
    assert validate_dataset(str(out), run_id).problems == [f"no manifest.json at {out}"]


def test_an_index_row_pointing_nowhere_fails(copy):
    out, run_id, manifest = copy
    shard = manifest["shards"][0]
    table = pq.read_table(out / shard["index"])
    members = table["member"].to_pylist()
    members[0] = "PMC0v1-nowhere-p00.jpg"
    table = table.set_column(
        table.schema.get_field_index("member"), "member", pa.array(members, pa.string())
    )
    pq.write_table(table, out / shard["index"])
    problems = validate_dataset(str(out), run_id).problems
    assert len(problems) == 1 and "not in the shard: PMC0v1-nowhere-p00.jpg" in problems[0]
