"""The shard validator on a dataset the ``pmc_dataset`` DAG really built, then on copies of it
with one thing broken each: a shard's bytes, a missing shard, an index in the wrong schema, a
manifest whose totals do not add up. The same checks through ``pmcvl validate`` (no Airflow)
and through the DAG, which finds the build's run from its run record, not the job's log."""

from __future__ import annotations

import io
import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from click.testing import CliRunner

from operators.shard_validation import RUN_FIELDS, ShardValidationOperator, validate_build
from ray_jobs.cli import main
from ray_jobs.shards.validate import validate_dataset


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


# -- pmcvl validate: the same checks without Airflow -------------------------------------------


def pmcvl_validate(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["validate", *args])


def test_pmcvl_validate_passes_a_built_dataset(built):
    out, run_id = built
    manifest = json.loads((out / "manifest.json").read_text())
    names = [s["name"] for s in manifest["shards"]]
    result = pmcvl_validate(str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["problems"] == [] and result.stderr == ""
    assert report["shards"] == len(names) and report["checked"] == names  # every shard
    assert report["samples"] == manifest["counts"]["kept"] and report["rows_checked"] > 0
    # the Airflow operator runs the same code and returns the same report
    result = pmcvl_validate(str(out), "--run-id", run_id, "--json")
    operator = ShardValidationOperator(
        task_id="v", output_uri=str(out), run_id=run_id, s3_conn_id=None
    )
    assert json.loads(result.stdout) == operator.execute({})
    result = pmcvl_validate(str(out))
    assert result.exit_code == 0 and f"{len(names)} shard(s)" in result.stdout


def test_pmcvl_validate_names_what_is_broken(copy):
    out, _, manifest = copy
    first = manifest["shards"][0]
    shard = out / first["name"]
    data = bytearray(shard.read_bytes())
    data[600] ^= 0xFF
    shard.write_bytes(bytes(data))
    table = pq.read_table(out / first["index"])
    pq.write_table(table.slice(1), out / first["index"])  # an index row gone
    result = pmcvl_validate(str(out))
    assert result.exit_code == 1
    assert f"invalid: {first['name']}: sha256 differs from the manifest" in result.stderr
    rows = f"{first['index']}: {table.num_rows - 1} rows for {first['samples']} samples"
    assert f"invalid: {rows}" in result.stderr
    assert "INVALID (2 problem(s))" in result.stdout

    dropped = manifest["shards"].pop()  # a manifest entry gone
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = pmcvl_validate(str(out), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert not report["ok"] and dropped["name"] not in report["checked"]
    assert any(p.startswith("split totals") for p in report["problems"])
    assert any(p.startswith("counts.kept") for p in report["problems"])


# -- the DAG: the build's run record, not its log --------------------------------------------


def xcom(dag, run, task_id: str):  # type: ignore[no-untyped-def]
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=run.run_id, dag_ids=dag.dag_id, task_ids=task_id, key="return_value"
        )
        return XComModel.deserialize_value(session.scalars(query).first())


def test_the_dag_validates_the_run_its_record_names(pmc_first_run, built):
    """The build job's submission id is its run id, so the DAG finds ``runs/<id>.json``; what
    ``validate`` passes on is the record's, and the shards it checked are the record's."""
    dag, run = pmc_first_run
    out, run_id = built
    job, checked = xcom(dag, run, "build_dataset"), xcom(dag, run, "validate")
    record = json.loads((out / "runs" / f"{job['submission_id']}.json").read_text())
    assert record["run_id"] == job["submission_id"] == run_id
    assert checked["run"] == {k: record[k] for k in RUN_FIELDS}
    assert checked["checked"] == [s["name"] for s in record["new_shards"]]
    assert checked["ok"] and checked["run_id"] == run_id
    again = validate_build(str(out), run_id, None, logging.getLogger(__name__), None)
    assert again == checked


def test_the_dag_needs_the_run_record(copy):
    out, run_id, _ = copy
    log = logging.getLogger(__name__)
    record = out / "runs" / f"{run_id}.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "new_shards": []}))
    with pytest.raises(AirflowSkipException, match="added no shards"):
        validate_build(str(out), run_id, None, log, None)
    record.unlink()
    with pytest.raises(AirflowFailException, match=f"no run record .*runs/{run_id}.json"):
        validate_build(str(out), run_id, None, log, None)


def test_a_run_id_from_the_caller_must_be_a_file_name(tmp_path, monkeypatch):
    from ray_jobs.config import load_settings
    from ray_jobs.jobs.build_dataset import RUN_ID_ENV, run_build

    monkeypatch.setenv(RUN_ID_ENV, "../elsewhere")
    with pytest.raises(SystemExit, match="letters, digits"):
        run_build(load_settings(None, output={"uri": str(tmp_path / "out")}))
    assert not (tmp_path / "out").exists()
