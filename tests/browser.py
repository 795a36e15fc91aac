"""A page opened in Debian's headless Chromium, driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` speaks CDP on file descriptors 3 (in) and 4 (out), NUL-framed
JSON: no port, no driver binary, no package beyond the browser. :func:`open_page` loads a
page, waits for its load event and reports what a person would notice: every image (loaded or
not, its natural size), console errors, uncaught exceptions, failed loads; and a screenshot.
``scripts/ensure_chromium.sh`` installs the browser where it is missing (``make test`` runs it).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# the flags this closed network needs (no background connections, no sandbox as root)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
)
_IMAGES = """JSON.stringify([...document.images].map(i => ({
  src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth,
  height: i.naturalHeight})))"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser's path; the test skips, saying why, where there is none."""
    path = find_chromium()
    if path is None:
        pytest.skip("no chromium: run scripts/ensure_chromium.sh as root (make test does)")
    return path


@dataclass
class PageReport:
    images: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    title: str = ""
    screenshot: bytes = b""

    @property
    def broken_images(self) -> list[str]:
        return [i["src"] for i in self.images if not i["complete"] or i["width"] == 0]


class _Pipe:
    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int, timeout: float):
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.deadline = time.monotonic() + timeout  # a hang guard, not a measurement
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise TimeoutError("chromium did not answer on its DevTools pipe")
            ready, _, _ = select.select([self.read_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.read_fd, 1 << 16)
                if not chunk:
                    raise ConnectionError("chromium closed its DevTools pipe")
                self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message())


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", "")) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {}).get("description", "")
            out.append(f"exception: {details.get('text', '')} {thrown}".strip())
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            out.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.loadingFailed":
            out.append(f"network: {params.get('errorText')}")
    return out


def open_page(url: str, chromium: str, *, width: int = 1300, height: int = 2400) -> PageReport:
    """Load ``url`` and report on it (see the module docstring)."""
    profile = tempfile.mkdtemp(prefix="pmcvl-chromium-")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def fds() -> None:  # the child's fd 3 reads our commands, fd 4 writes its answers
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)  # dup2 leaves the copies inheritable
        os.dup2(high_w, 4)

    cmd = [
        chromium,
        *FLAGS,
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    env = {**os.environ, "HOME": profile, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile}
    proc = subprocess.Popen(
        cmd,
        preexec_fn=fds,
        close_fds=False,  # fds 3 and 4 exist only after preexec_fn; the rest is CLOEXEC
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    pipe = _Pipe(proc, to_child_w, from_child_r, timeout=120)
    try:
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.call(f"{domain}.enable", session)
        pipe.events.clear()
        pipe.call("Page.navigate", session, url=url)
        pipe.wait_for("Page.loadEventFired")
        result = pipe.call("Runtime.evaluate", session, expression=_IMAGES, returnByValue=True)
        title = pipe.call("Runtime.evaluate", session, expression="document.title")
        shot = pipe.call(
            "Page.captureScreenshot", session, format="png", captureBeyondViewport=True
        )
        return PageReport(
            images=json.loads(result["result"]["value"]),
            errors=_errors(pipe.events),
            title=title["result"].get("value", ""),
            screenshot=base64.b64decode(shot["data"]),
        )
    finally:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError, ConnectionError):
            pipe.call("Browser.close")
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_child_w)
        os.close(from_child_r)
        shutil.rmtree(profile, ignore_errors=True)


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
