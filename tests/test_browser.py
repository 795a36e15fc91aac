"""The report in a real browser (Debian's headless Chromium): every image loads, nothing is
logged as an error; and the check itself sees a broken page."""

from __future__ import annotations

import io
from pathlib import Path

from browser import chromium, file_url, open_page  # noqa: F401 - chromium is a fixture
from click.testing import CliRunner
from PIL import Image
from test_report import make_output

from ray_jobs.cli import main


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), "teal").save(buf, "PNG")
    return buf.getvalue()


def test_the_report_page_loads_cleanly(tmp_path: Path, chromium: str) -> None:  # noqa: F811
    out = make_output(tmp_path)
    assert CliRunner().invoke(main, ["report", str(out)]).exit_code == 0
    seen = open_page(file_url(out / "report/index.html"), chromium)
    assert seen.errors == []
    assert seen.broken_images == []
    assert {"funnel.png", "drops.png", "licenses.png"} <= {i["src"] for i in seen.images}
    assert seen.title.startswith("pmcvl report")
    with Image.open(io.BytesIO(seen.screenshot)) as shot:
        assert shot.format == "PNG" and shot.height > 1000  # the whole page, not a viewport


def test_the_check_sees_a_broken_page(tmp_path: Path, chromium: str) -> None:  # noqa: F811
    """A missing image and a script error are both reported: the check can fail."""
    (tmp_path / "ok.png").write_bytes(_png())
    (tmp_path / "page.html").write_text(
        '<!DOCTYPE html><html><head><title>t</title></head><body><img src="ok.png">'
        '<img src="missing.jpg"><script>undefinedFunction()</script></body></html>'
    )
    seen = open_page(file_url(tmp_path / "page.html"), chromium)
    assert seen.broken_images == ["missing.jpg"]
    assert [i["width"] for i in seen.images] == [40, 0]
    assert any("ERR_FILE_NOT_FOUND" in e for e in seen.errors)
    assert any("undefinedFunction" in e for e in seen.errors)
