"""The parse benchmark's corpora: the 22 real articles of ../shared/data/jats* are their own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_parse", REPO / "benchmarks/bench_parse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_real_articles_corpus_holds_every_jats_folder(jats_dir: Path, tmp_path: Path) -> None:
    bench = load_bench()
    every = bench.real_articles(jats_dir.parent)
    assert len(every) == 22
    assert {p.parent.name for p in every} == {"jats", "jats_more"}
    corpora = bench.build_corpora(tmp_path, jats_dir, jats_dir.parent, replicas=2, generated=3)
    names = list(corpora)
    assert names[0] == "real (8 articles ×2)" and names[-1] == "generated"
    (real22,) = [n for n in names if n.startswith("real jats*")]
    copies = corpora[real22]
    assert len(copies) == 22  # 2 × 8 // 22 rounds up to one copy each
    assert sorted(p.name.split("-", 2)[2] for p in copies) == sorted(p.name for p in every)
    assert len(corpora["generated"]) == 3
