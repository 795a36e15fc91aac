"""JATS parsing throughput: pmcvl against pubmed_parser and a bare lxml parse, same input.

Two corpora: the real articles of ../shared/data/jats replicated, and a generated corpus.
Every tool reads each file from disk and extracts the fields it can of what pmcvl extracts:
pubmed_parser runs ``parse_pubmed_xml`` (metadata, abstract), ``parse_pubmed_caption``
(figures) and ``parse_pubmed_paragraph`` (paragraphs with their reference ids, its nearest
equivalent of figure mentions), as a user of it must; the floor is ``lxml.etree.fromstring``
alone. Each cell is the best of ``--repeats`` passes. Run with ``make bench``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lxml import etree

from ray_jobs.pmc.jats import parse_article
from ray_jobs.pmc.sample_corpus import generate_article

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JATS = REPO.parent / "shared" / "data" / "jats"


def build_corpora(work: Path, jats_dir: Path, replicas: int, generated: int) -> dict[str, list]:
    real_dir, gen_dir = work / "real", work / "generated"
    real_dir.mkdir()
    gen_dir.mkdir()
    real = []
    for path in sorted(jats_dir.glob("*.nxml")):
        for i in range(replicas):
            copy = real_dir / f"{i:04d}-{path.name}"
            shutil.copyfile(path, copy)
            real.append(copy)
    gen = []
    for i in range(generated):
        path = gen_dir / f"PMC{i}.nxml"
        path.write_bytes(generate_article(0, i, image_width=32).xml)
        gen.append(path)
    return {"real (8 articles replicated)": real, "generated": gen}


def run_pmcvl(path: Path) -> int:
    return len(parse_article(path.read_bytes()).figures)


def run_bare(path: Path) -> int:
    return len(etree.fromstring(path.read_bytes()))


def run_pubmed_parser(path: Path) -> int:
    import pubmed_parser as pp

    pp.parse_pubmed_xml(str(path))
    captions = pp.parse_pubmed_caption(str(path)) or []
    pp.parse_pubmed_paragraph(str(path), all_paragraph=True)
    return len(captions)


def timed(fn: Callable[[Path], int], paths: list[Path], repeats: int) -> tuple[float, int, int]:
    """Best wall time over the passes, figures found, and files the tool raised on."""
    best, figures, errors = float("inf"), 0, 0
    for _ in range(repeats):
        figures = errors = 0
        start = time.perf_counter()
        for path in paths:
            try:
                figures += fn(path)
            except Exception:
                errors += 1
        best = min(best, time.perf_counter() - start)
    return best, figures, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jats-dir", type=Path, default=DEFAULT_JATS)
    parser.add_argument("--replicas", type=int, default=50)
    parser.add_argument("--generated", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        import pubmed_parser  # noqa: F401
    except ImportError:
        sys.exit("pubmed_parser is not installed: run `make bench`, which installs it")

    tools = {"pmcvl": run_pmcvl, "pubmed_parser": run_pubmed_parser, "lxml fromstring": run_bare}
    with tempfile.TemporaryDirectory(prefix="pmcvl-bench-") as tmp:
        corpora = build_corpora(Path(tmp), args.jats_dir, args.replicas, args.generated)
        header = (
            f"{'corpus':<28} {'tool':<16} {'articles':>8} {'errors':>6} {'figures':>8} "
            f"{'seconds':>8} {'articles/s':>11} {'pmcvl speed ×':>14}"
        )
        print(header)
        print("-" * len(header))
        for corpus, paths in corpora.items():
            results = {name: timed(fn, paths, args.repeats) for name, fn in tools.items()}
            ours = results["pmcvl"][0]
            for name, (seconds, figures, errors) in results.items():
                shown = figures if name != "lxml fromstring" else "-"
                print(
                    f"{corpus:<28} {name:<16} {len(paths):>8} {errors:>6} {shown!s:>8} "
                    f"{seconds:>8.2f} {len(paths) / seconds:>11.0f} {seconds / ours:>14.2f}"
                )
            print()
        print(
            "pmcvl speed ×: the tool's time over pmcvl's (above 1: pmcvl is faster; below 1:"
            " pmcvl is that fraction of the tool's speed)."
        )


if __name__ == "__main__":
    main()
