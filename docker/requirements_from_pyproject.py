"""Print pyproject.toml's dependencies as a requirements file, leaving out some by name.

The images install the same dependency list the tests ran with (pins from constraints.txt)
without a hand-kept copy that could drift: the pipeline image takes all of it, the Airflow
image all but the ML stack its tasks never import.

    python requirements_from_pyproject.py pyproject.toml --without torch ultralytics
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalize(match.group(1))


def dependencies(pyproject: Path, without: list[str]) -> list[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    names = {requirement_name(d) for d in deps}
    unknown = {normalize(w) for w in without} - names
    if unknown:  # a typo here would silently keep a 2 GB package in the image
        raise ValueError(f"not dependencies of {pyproject}: {sorted(unknown)}")
    skip = {normalize(w) for w in without}
    return [d for d in deps if requirement_name(d) not in skip]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pyproject", type=Path)
    p.add_argument("--without", nargs="*", default=[], metavar="NAME")
    opts = p.parse_args(argv)
    print("\n".join(dependencies(opts.pyproject, opts.without)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
