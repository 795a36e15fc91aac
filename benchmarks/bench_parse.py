"""JATS parsing throughput: pmcvl against pubmed_parser and a bare lxml parse, same input.

Three corpora: the 8 real PMC articles of ../shared/data/jats replicated; the 22 real articles
of ../shared/data/jats* (those 8 plus the 14 of jats_more: eLife and several other publishers,
NLM 2.3 to JATS 1.2) replicated, as their own corpus; and a generated corpus.
Every tool reads each file from disk and extracts the fields it can of what pmcvl extracts:
pubmed_parser runs ``parse_pubmed_xml`` (metadata, abstract), ``parse_pubmed_caption``
(figures) and ``parse_pubmed_paragraph`` (paragraphs with their reference ids, its nearest
equivalent of figure mentions), as a user of it must; the floor is ``lxml.etree.fromstring``
alone. Each cell is the best of ``--repeats`` passes, the tools taking turns. Run with
``make bench``; ``PMCVL_PURE_PYTHON=1`` measures the parser's Python walks instead of the C ones.
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
from ray_jobs.pmc.text import C_WALKS

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
DEFAULT_JATS = SHARED_DATA / "jats"


def real_articles(data_dir: Path) -> list[Path]:
    """Every real article in ``data_dir/jats*/`` (``.nxml`` and ``.xml``), sorted."""
    return sorted(
        path
        for folder in sorted(data_dir.glob("jats*"))
        for path in folder.iterdir()
        if path.suffix in (".nxml", ".xml")
    )


def replicate(sources: list[Path], folder: Path, replicas: int) -> list[Path]:
    folder.mkdir()
    copies = []
    for i in range(replicas):  # interleaved, so no one article's pages stay hot in a row
        for n, path in enumerate(sources):
            copy = folder / f"{i:04d}-{n:02d}-{path.name}"
            shutil.copyfile(path, copy)
            copies.append(copy)
    return copies


def build_corpora(
    work: Path, jats_dir: Path, data_dir: Path, replicas: int, generated: int
) -> dict[str, list]:
    corpora: dict[str, list] = {}
    eight = sorted(jats_dir.glob("*.nxml"))
    corpora[f"real ({len(eight)} articles ×{replicas})"] = replicate(eight, work / "real", replicas)
    every = real_articles(data_dir)
    if every:
        more = max(1, replicas * len(eight) // len(every))
        corpora[f"real jats* ({len(every)} ×{more})"] = replicate(every, work / "jats_all", more)
    gen_dir = work / "generated"
    gen_dir.mkdir()
    gen = []
    for i in range(generated):
        path = gen_dir / f"PMC{i}.nxml"
        path.write_bytes(generate_article(0, i, image_width=32).xml)
        gen.append(path)
    corpora["generated"] = gen
    return corpora


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


def one_pass(fn: Callable[[Path], int], paths: list[Path]) -> tuple[float, int, int]:
    """Wall time of one pass, figures found, and files the tool raised on."""
    figures = errors = 0
    start = time.perf_counter()
    for path in paths:
        try:
            figures += fn(path)
        except Exception:
            errors += 1
    return time.perf_counter() - start, figures, errors


def timed(
    tools: dict[str, Callable[[Path], int]], paths: list[Path], repeats: int
) -> dict[str, tuple[float, int, int]]:
    """Each tool's best pass. The tools take turns within each repeat, so a burst of load on a
    shared machine does not fall on one tool's passes only."""
    best: dict[str, tuple[float, int, int]] = {}
    for _ in range(repeats):
        for name, fn in tools.items():
            result = one_pass(fn, paths)
            if name not in best or result[0] < best[name][0]:
                best[name] = result
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jats-dir", type=Path, default=DEFAULT_JATS)
    parser.add_argument(
        "--data-dir", type=Path, default=SHARED_DATA, help="its jats*/ folders: the 22 corpus"
    )
    parser.add_argument("--replicas", type=int, default=50)
    parser.add_argument("--generated", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    try:
        import pubmed_parser  # noqa: F401
    except ImportError:
        sys.exit("pubmed_parser is not installed: run `make bench`, which installs it")

    tools = {"pmcvl": run_pmcvl, "pubmed_parser": run_pubmed_parser, "lxml fromstring": run_bare}
    with tempfile.TemporaryDirectory(prefix="pmcvl-bench-") as tmp:
        corpora = build_corpora(
            Path(tmp), args.jats_dir, args.data_dir, args.replicas, args.generated
        )
        header = (
            f"{'corpus':<30} {'tool':<16} {'articles':>8} {'errors':>6} {'figures':>8} "
            f"{'seconds':>8} {'articles/s':>11} {'pmcvl speed ×':>14}"
        )
        print(header)
        print("-" * len(header))
        for corpus, paths in corpora.items():
            results = timed(tools, paths, args.repeats)
            ours = results["pmcvl"][0]
            for name, (seconds, figures, errors) in results.items():
                shown = figures if name != "lxml fromstring" else "-"
                print(
                    f"{corpus:<30} {name:<16} {len(paths):>8} {errors:>6} {shown!s:>8} "
                    f"{seconds:>8.2f} {len(paths) / seconds:>11.0f} {seconds / ours:>14.2f}"
                )
            print(
                f"  → pmcvl is {results['pubmed_parser'][0] / ours:.2f}× pubmed_parser's speed"
                f" and takes {ours / results['lxml fromstring'][0]:.2f}× the bare parse time"
                f" ({1000 * ours / len(paths):.2f} ms per article)"
            )
            print()
        print(
            "pmcvl speed ×: the tool's time over pmcvl's (above 1: pmcvl is faster; below 1:"
            " pmcvl is that fraction of the tool's speed)."
        )
        walks = "C (ray_jobs.pmc._ctext)" if C_WALKS is not None else "Python (the fallback)"
        print(f"pmcvl's tree walks: {walks}; PMCVL_PURE_PYTHON=1 measures the Python ones.")


if __name__ == "__main__":
    main()
