"""``pmcvl report`` over a small synthetic output written with the real schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image

from ray_jobs.cli import main
from ray_jobs.config import load_settings
from ray_jobs.contract.failures import FAILURE_SCHEMA
from ray_jobs.contract.records import INDEX_SCHEMA, REJECT_SCHEMA, PanelRecord
from ray_jobs.report import build_report, compute_stats
from ray_jobs.storage.store import LocalStorage

ENRICHMENT_OFF = {
    "enabled": False,
    "reason": "no LLM server configured (set PMCVL_LLM_BASE_URL or longcap.base_url)",
    "model": None,
    "prompt_version": None,
}

# figure key, pmcid, license, n_panels, caption tokens, then per panel: (modality, l1, subcaption)
FIGURES = [
    ("PMC1v1-f1", "PMC1", "CC BY", 3, 100, [("ct", "radiology", 50), ("mri", "radiology", 80),
                                             ("histopathology", "microscopy", 20)]),
    ("PMC1v1-f2", "PMC1", "CC BY", 1, 60, [("ct", "radiology", 60)]),
    ("PMC2v1-f1", "PMC2", "CC BY-NC", 2, 200, [("xray", "radiology", 30), (None, None, 10)]),
]  # fmt: skip


def _record(fig: str, pmcid: str, lic: str, n: int, cap: int, i: int, panel: tuple) -> dict:
    modality, l1, sub = panel
    record = PanelRecord(
        key=f"{fig}-p{i:02d}", figure_key=fig, pmcid=pmcid, pmc_version=1, pmid=None, doi=None,
        journal="J", year=2024, license=lic, license_url=None, figure_id=fig[-2:],
        figure_label=None, caption="c", subcaption="s", panel_index=i, n_panels=n,
        panel_label=None, alignment="label", alignment_confidence=1.0, panel_bbox=[0, 0, 9, 9],
        panel_status="ok", detector_score=0.9, detector_version="t", modality=modality,
        modality_l1=l1, tokens_caption=cap, tokens_subcaption=sub,
        split="val" if pmcid == "PMC2" else "train",
    )  # fmt: skip
    return {**record.to_json_dict(), "shard": "s", "member": record.key}


def _write(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def make_output(root: Path, *, enrichment: dict | None = None, long: dict | None = None) -> Path:
    """Six kept panels in two index parts, four rejects, three failures and a manifest.

    ``long`` maps a panel key to (long caption, CLIP tokens, long-tokenizer tokens or None).
    """
    rows = [
        _record(fig, pmcid, lic, n, cap, i, panel)
        for fig, pmcid, lic, n, cap, panels in FIGURES
        for i, panel in enumerate(panels)
    ]
    for row in rows:
        if long and row["key"] in long:
            row["long_caption"], row["tokens_long_caption"], row["tokens_long_caption_long"] = long[
                row["key"]
            ]
    train = [r for r in rows if r["split"] == "train"]
    val = [r for r in rows if r["split"] == "val"]
    _write(root / "index/train-000000.parquet", train, INDEX_SCHEMA)
    _write(root / "index/val-000000.parquet", val, INDEX_SCHEMA)
    _write(root / "index/train-000001.parquet", train, INDEX_SCHEMA)  # a killed run's leftover
    rejects = [
        {"key": f"PMC3v1-f1-p0{i}", "figure_key": "PMC3v1-f1", "reason": reason}
        for i, reason in enumerate(
            ["low_confidence", "low_confidence", "non_clinical:chart", "duplicate_exact"]
        )
    ]
    _write(root / "rejects/part-000000.parquet", rejects, REJECT_SCHEMA)
    (root / "rejects/notes.txt").write_text("not a part")
    failures = [
        {"source_key": "PMC9", "stage": "fetch", "error_type": "HTTPError", "message": "503",
         "retryable": True, "time": "t"},
        {"source_key": "PMC8", "stage": "fetch", "error_type": "HTTPError", "message": "503",
         "retryable": True, "time": "t"},
        {"source_key": "PMC7", "stage": "parse", "error_type": "XMLSyntaxError",
         "message": "<script>alert(1)</script> bad xml", "retryable": False, "time": "t"},
    ]  # fmt: skip
    _write(root / "failures/part-000000.parquet", failures, FAILURE_SCHEMA)
    (root / "parts").mkdir()
    (root / "parts/part-000000.json").write_text("{}")  # the part's commit record
    # a killed run's uncommitted part: no record, so not counted
    _write(root / "rejects/part-killed.parquet", rejects, REJECT_SCHEMA)
    _write(root / "failures/part-killed.parquet", failures, FAILURE_SCHEMA)
    n_long = len(long or {})
    shards = [
        {"name": f"shards/{s}-000000.tar", "index": f"index/{s}-000000.parquet",
         "stats": f"stats/{s}-000000.json", "split": s, "samples": n, "bytes": 1000,
         "sha256": "0" * 64, "run_id": "r1"}
        for s, n in (("train", len(train)), ("val", len(val)))
    ]  # fmt: skip
    manifest = {
        "format": "pmcvl-dataset/1", "created": "2026-01-01T00:00:00+00:00",
        "code_version": "0.1.0", "config_hash": "abc", "runs": ["r1"], "shards": shards,
        "splits": {"train": {"shards": 1, "samples": 4}, "val": {"shards": 1, "samples": 2}},
        "counts": {"articles": 3, "articles_failed": 1, "articles_skipped": 0, "figures": 4,
                   "figures_failed": 1, "panels": 10, "kept": 6, "enriched": n_long,
                   "failures": 3,
                   "dropped": {"low_confidence": 2, "non_clinical:chart": 1, "duplicate_exact": 1},
                   "detector_dropped": {"too_small": 2}},
        "enrichment": enrichment or ENRICHMENT_OFF,
        "tokenizer_long": None,
    }  # fmt: skip
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def _tokens(stats, name):
    return next(t for t in stats.tokens if t.name == name)


def test_stats_numbers(tmp_path: Path) -> None:
    stats = compute_stats(LocalStorage(make_output(tmp_path)))
    assert stats.warnings == []
    assert stats.funnel == {"articles": 3, "figures": 4, "panels": 10, "kept": 6, "enriched": 0}
    assert stats.losses == {"articles_failed": 1, "articles_skipped": 0, "figures_failed": 1}
    assert stats.dropped == {"low_confidence": 2, "duplicate_exact": 1, "non_clinical:chart": 1}
    assert stats.detector_dropped == {"too_small": 2}
    assert stats.rejects == {"low_confidence": 2, "duplicate_exact": 1, "non_clinical:chart": 1}
    assert stats.splits == {"train": 4, "val": 2}  # the leftover index part is not read
    assert stats.shards == 2 and stats.shard_bytes == 2000
    assert stats.modality_l1 == {"radiology": 4, "microscopy": 1, "unknown": 1}
    assert list(stats.modality_l2.items()) == [
        ("ct", 2), ("histopathology", 1), ("mri", 1), ("unknown", 1), ("xray", 1)
    ]  # fmt: skip
    assert stats.panels_per_figure == {1: 1, 2: 1, 3: 1}
    assert stats.compound_figures == 2 and stats.mean_panels_per_compound == 2.5
    assert stats.licenses == {"CC BY": 4, "CC BY-NC": 2}
    assert stats.license_articles == {"CC BY": 1, "CC BY-NC": 1}
    assert stats.failures_total == 3 and stats.failures_retryable == 2
    assert stats.failures_by_stage == {"fetch": 2, "parse": 1}
    assert [(f.stage, f.error_type, f.count, f.retryable) for f in stats.failures] == [
        ("fetch", "HTTPError", 2, True),
        ("parse", "XMLSyntaxError", 1, False),
    ]

    caption = _tokens(stats, "caption")  # once per figure: 100, 60, 200 tokens
    assert (caption.unit, caption.n, caption.max, caption.median) == ("figure", 3, 200, 100)
    assert caption.waste == pytest.approx({77: 146 / 360, 154: 46 / 360, 256: 0.0, 512: 0.0})
    assert caption.truncated == pytest.approx({77: 2 / 3, 154: 1 / 3, 256: 0.0, 512: 0.0})
    assert sum(caption.histogram.counts) == 3
    sub = _tokens(stats, "subcaption")  # once per panel: 50, 80, 20, 60, 30, 10
    assert sub.n == 6 and sub.waste == pytest.approx({77: 3 / 250, 154: 0, 256: 0, 512: 0})
    long = _tokens(stats, "long_caption")
    assert long.n == 0 and long.note and long.note.startswith("not run: no LLM server")
    assert [t.name for t in stats.tokens] == ["caption", "subcaption", "long_caption"]
    json.loads(stats.to_json())


def test_enriched_long_captions(tmp_path: Path) -> None:
    long = {"PMC1v1-f1-p00": ("x", 300, 250), "PMC2v1-f1-p00": ("y", 100, 90)}
    on = {"enabled": True, "reason": None, "model": "m", "prompt_version": "v1"}
    stats = compute_stats(
        LocalStorage(make_output(tmp_path, enrichment=on, long=long)), windows=[154, 77]
    )
    assert stats.funnel["enriched"] == 2 and stats.windows == [77, 154]
    clip = _tokens(stats, "long_caption")
    assert clip.note is None and clip.n == 2
    assert clip.waste == pytest.approx({77: 246 / 400, 154: 146 / 400})
    assert _tokens(stats, "long_caption_long").waste == pytest.approx(
        {77: 186 / 340, 154: 96 / 340}
    )


def test_long_tokenizer_from_config(tmp_path: Path) -> None:
    """When the run did not count long-tokenizer tokens, the configured tokenizer does."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    on = {"enabled": True, "reason": None, "model": "m", "prompt_version": "v1"}
    out = make_output(tmp_path / "out", enrichment=on, long={"PMC1v1-f2-p00": ("a b c", 5, None)})
    stats = compute_stats(LocalStorage(out), long_tokenizer=str(tmp_path / "tokenizer.json"))
    assert _tokens(stats, "long_caption_long").max == 3


def _check_report(out: Path) -> str:
    page = (out / "report/index.html").read_text()
    linked = set(re.findall(r'<img src="([^"]+)"', page))
    written = {p.name for p in (out / "report").glob("*.png")}
    assert linked == written
    for name in written:
        assert (out / "report" / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        with Image.open(out / "report" / name) as image:
            image.verify()
    json.loads((out / "report/stats.json").read_text())
    return page


def test_cli_report_enrichment_off(tmp_path: Path) -> None:
    out = make_output(tmp_path)
    (out / "report").mkdir()
    (out / "report/old.png").write_bytes(b"stale")
    result = CliRunner().invoke(main, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert f"report: {out.resolve()}/report/index.html" in result.output
    page = _check_report(out)
    assert not (out / "report/old.png").exists()
    for name in ("funnel", "drops", "modality_l1", "modality_l2", "panels_per_figure",
                 "tokens_caption", "tokens_subcaption", "tokens_long_caption", "licenses",
                 "failures_stage", "failures_type"):  # fmt: skip
        assert f'src="{name}.png"' in page
    assert "LongCAP enrichment did not run" in page
    assert "not run: no LLM server configured" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
    assert json.loads((out / "report/stats.json").read_text())["funnel"]["kept"] == 6


def test_cli_report_config_windows(tmp_path: Path) -> None:
    out = make_output(tmp_path / "out")
    config = tmp_path / "c.yaml"
    config.write_text("captions:\n  token_windows: [77, 300]\n")
    result = CliRunner().invoke(main, ["report", str(out), "--config", str(config)])
    assert result.exit_code == 0, result.output
    stats = json.loads((out / "report/stats.json").read_text())
    assert stats["windows"] == [77, 300]
    assert set(stats["tokens"][0]["waste"]) == {"77", "300"}


def test_report_empty_outputs(tmp_path: Path) -> None:
    """A folder no run has committed to, and a manifest with no shards, both give a page."""
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "no manifest.json" in result.output
    page = _check_report(tmp_path)
    assert "no manifest.json" in page and "No data." in page

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "manifest.json").write_text(
        json.dumps({"format": "pmcvl-dataset/1", "runs": [], "shards": [], "counts": {},
                    "enrichment": ENRICHMENT_OFF})
    )  # fmt: skip
    stats = compute_stats(LocalStorage(empty))
    assert stats.warnings == [] and set(stats.funnel.values()) == {0}
    assert stats.panels_per_figure == {} and _tokens(stats, "caption").n == 0
    assert CliRunner().invoke(main, ["report", str(empty)]).exit_code == 0
    _check_report(empty)

    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "no such folder" in missing.output


def test_missing_index_part_is_a_warning(tmp_path: Path) -> None:
    out = make_output(tmp_path)
    (out / "index/val-000000.parquet").unlink()
    stats = compute_stats(LocalStorage(out))
    assert any("val-000000.parquet is listed" in w for w in stats.warnings)
    assert any("counts 6 kept panels, the index holds 4" in w for w in stats.warnings)


def test_report_on_s3(tmp_path: Path, moto_endpoint: str, aws_credentials: None) -> None:
    out = make_output(tmp_path)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="report-ds")
    for path in out.rglob("*"):
        if path.is_file():
            client.put_object(
                Bucket="report-ds", Key=f"run/{path.relative_to(out)}", Body=path.read_bytes()
            )
    settings = load_settings(
        environ={}, output={"s3": {"endpoint_url": moto_endpoint, "anonymous": False}}
    )
    stats, page = build_report("s3://report-ds/run", settings)
    assert page == "s3://report-ds/run/report/index.html"
    assert stats.funnel["kept"] == 6 and stats.splits == {"train": 4, "val": 2}
    keys = {
        o["Key"]
        for o in client.list_objects_v2(Bucket="report-ds", Prefix="run/report/")["Contents"]
    }
    assert {"run/report/index.html", "run/report/stats.json", "run/report/funnel.png"} <= keys
