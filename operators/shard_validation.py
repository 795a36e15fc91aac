"""The Airflow side of dataset validation: the checks themselves are
:mod:`ray_jobs.shards.validate` (no Airflow), which ``pmcvl validate`` runs too; here a report
with problems becomes a task that fails without retries, and the ``pmc_dataset`` DAG's check of
one build is driven from the build's run record (``runs/<run_id>.json``), not its log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from operators.connections import S3_CONN_ID, aws_environment

if TYPE_CHECKING:
    from ray_jobs.config import OutputS3Settings
    from ray_jobs.shards.validate import ValidationReport

RUN_FIELDS = ("run_id", "output", "counts")  # what publish needs from the run record


class DatasetInvalid(AirflowFailException):
    """The output is inconsistent; retrying the check would not change that."""


class ShardValidationOperator(BaseOperator):
    """Fails (without retries) when :func:`~ray_jobs.shards.validate.validate_dataset` finds a
    problem; returns the report (``ValidationReport.to_dict()``) otherwise.

    :param output_uri: the dataset (``output.uri``)
    :param run_id: the build run whose new shards are checked in depth
    :param s3_conn_id: AWS connection for an ``s3://`` output
    """

    template_fields = ("output_uri", "run_id")

    def __init__(
        self,
        *,
        output_uri: str,
        run_id: str | None = None,
        verify: Literal["new", "all"] = "new",
        sample_rows: int = 32,
        s3_conn_id: str | None = S3_CONN_ID,
        s3_endpoint_url: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.output_uri = output_uri
        self.run_id = run_id
        self.verify = verify
        self.sample_rows = sample_rows
        self.s3_conn_id = s3_conn_id
        self.s3_endpoint_url = s3_endpoint_url

    def execute(self, context: Any) -> dict[str, Any]:
        from ray_jobs.config import OutputS3Settings
        from ray_jobs.shards.validate import validate_dataset

        s3 = OutputS3Settings(endpoint_url=self.s3_endpoint_url)
        with aws_environment(self.s3_conn_id):
            report = validate_dataset(
                self.output_uri, self.run_id or None, s3, self.verify, self.sample_rows
            )
        return check_report(report, self.log)


def check_report(report: ValidationReport, log: Any) -> dict[str, Any]:
    """Log the report; raise :class:`DatasetInvalid` with every problem when it has any."""
    if report.problems:
        for problem in report.problems:
            log.error("invalid: %s", problem)
        raise DatasetInvalid(
            f"{len(report.problems)} problem(s) in {report.uri}: " + "; ".join(report.problems[:5])
        )
    log.info(
        "%s is valid: %d shard(s), %d samples; verified %d new shard(s), %d index rows",
        report.uri,
        report.shards,
        report.samples,
        len(report.checked),
        report.rows_checked,
    )
    return report.to_dict()


def validate_build(
    output_uri: str,
    run_id: str,
    s3: OutputS3Settings | None,
    log: Any,
    s3_conn_id: str | None = S3_CONN_ID,
) -> dict[str, Any]:
    """Check build run ``run_id`` from its run record: the report, plus the record's
    :data:`RUN_FIELDS` under ``run``. Skips when the run added no shards; fails when the job
    wrote no record (a DAG build runs only when there is new work, so it always writes one)."""
    from ray_jobs.shards import manifest as mf
    from ray_jobs.shards.validate import read_run_record, validate_dataset
    from ray_jobs.storage.store import open_storage

    with aws_environment(s3_conn_id):
        storage = open_storage(output_uri, s3)
        record = read_run_record(storage, run_id)
        if record is None:
            raise AirflowFailException(
                f"no run record {storage.uri}/{mf.run_key(run_id)}: the job did not take "
                "its run id (PMCVL_RUN_ID) or wrote nothing"
            )
        if not record.get("new_shards"):
            raise AirflowSkipException(f"run {run_id} added no shards: nothing to validate")
        report = validate_dataset(output_uri, run_id, s3)
    return {**check_report(report, log), "run": {k: record.get(k) for k in RUN_FIELDS}}
