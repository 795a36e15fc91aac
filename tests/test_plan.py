"""Planning in columns: which listed versions are built, which are stale, which published ones
are replaced, and how rows are cut into parts (every row of an article in one part)."""

from __future__ import annotations

import json

import pyarrow as pa

from ray_jobs.pipeline.plan import BUILD, PLANS, REPLACE, STALE, make_plan, plan_rows
from ray_jobs.pmc.ledger import LEDGER_SCHEMA, REF_SCHEMA
from ray_jobs.storage.parquet import write_parquet
from ray_jobs.storage.store import LocalStorage


def refs(*rows: tuple[str, int | None, str]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"pmcid": p, "version": v, "etag": e, "source": "local", "location": f"/{p}.{v}"}
            for p, v, e in rows
        ],
        schema=REF_SCHEMA,
    )


def ledger(*rows: tuple[str, int | None, str, str, str]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "pmcid": p,
                "version": v,
                "etag": e,
                "status": s,
                "retryable": False,
                "part": part,
                "time": "2026-01-01T00:00:00+00:00",
            }
            for p, v, e, s, part in rows
        ],
        schema=LEDGER_SCHEMA,
    )


def roles(table: pa.Table) -> dict[tuple, tuple]:
    return {
        (r["pmcid"], r["version"], r["etag"], r["role"]): (r["part"], r["old_part"])
        for r in table.to_pylist()
    }


def test_the_newest_version_is_built_and_replaces_what_it_supersedes() -> None:
    pending = refs(
        ("A", 1, "a1"),  # listed beside its version 2: stale
        ("A", 2, "a2"),
        ("B", 1, "b1-new"),  # the same version republished
        ("C", 1, "c1"),  # older than the version 2 already built
        ("D", 1, "d1"),  # failed before, listed unchanged: a retry
        ("E", None, "e"),  # unversioned and new
    )
    latest = ledger(
        ("A", 1, "a1", "failed", "000002"),  # may have published some panels
        ("B", 1, "b1-old", "ok", "000000"),
        ("C", 2, "c2", "ok", "000000"),
        ("D", 1, "d1", "failed", "000001"),
        ("F", 1, "f1", "ok", "000000"),  # not listed again: untouched
    )
    names, table = plan_rows(pending, latest, per_part=2, next_seq=5)
    assert names == ["000005", "000006", "000007"]
    assert roles(table) == {
        ("A", 1, "a1", STALE): ("000005", None),
        ("A", 2, "a2", BUILD): ("000005", None),
        ("A", 1, "a1", REPLACE): ("000005", "000002"),
        ("B", 1, "b1-new", BUILD): ("000006", None),
        ("B", 1, "b1-old", REPLACE): ("000006", "000000"),
        ("C", 1, "c1", STALE): ("000006", None),
        ("D", 1, "d1", BUILD): ("000007", None),
        ("E", None, "e", BUILD): ("000007", None),
    }


def test_an_article_is_never_cut_across_parts() -> None:
    rows = [(f"P{i:03d}", v, f"e{i}.{v}") for i in range(40) for v in range(1, 1 + i % 4)]
    names, table = plan_rows(refs(*rows), ledger(), per_part=3, next_seq=0)
    parts_of: dict[str, set[str]] = {}
    for r in table.to_pylist():
        parts_of.setdefault(r["pmcid"], set()).add(r["part"])
    assert all(len(p) == 1 for p in parts_of.values())
    assert sorted(set().union(*parts_of.values())) == names  # numbered densely
    built = [r for r in table.to_pylist() if r["role"] == BUILD]
    assert sorted(r["pmcid"] for r in built) == sorted({p for p, _, _ in rows})
    assert all(r["version"] == int(r["pmcid"][1:]) % 4 for r in built)  # the newest


def test_a_resumed_plan_keeps_its_parts_and_holds_its_articles_back(tmp_path) -> None:
    """A plan written before roles existed reads as all-build; an article of a resumed part
    that is listed again in another version waits for the next run."""
    storage = LocalStorage(tmp_path)
    old = refs(("A", 1, "a1"), ("B", 1, "b1")).append_column("part", pa.array(["000000", "000000"]))
    write_parquet(storage, f"{PLANS}/r0.parquet", old)
    record = {"run_id": "r0", "parts": ["000000"], "next_seq": 1}
    storage.write_bytes(f"{PLANS}/r0.json", json.dumps(record).encode())
    pending = refs(("A", 1, "a1"), ("A", 2, "a2"), ("B", 1, "b1"), ("C", 1, "c1"))
    plan = make_plan(storage, "r1", pending, ledger(), committed=set(), per_part=10)
    assert plan.resumed == ["000000"] and plan.parts == ["000000", "000001"]
    assert roles(plan.refs) == {
        ("A", 1, "a1", BUILD): ("000000", None),
        ("B", 1, "b1", BUILD): ("000000", None),
        ("C", 1, "c1", BUILD): ("000001", None),
    }
    assert plan.sizes() == {"000000": 2, "000001": 1}
    assert plan.refs_of({"000001"}).column_names == [*REF_SCHEMA.names, "part"]


def test_a_run_takes_at_most_its_part_budget_and_finished_plans_are_pruned(tmp_path) -> None:
    storage = LocalStorage(tmp_path)
    pending = refs(*[(f"P{i}", 1, f"e{i}") for i in range(10)])
    first = make_plan(storage, "r1", pending, ledger(), set(), per_part=3, max_parts=2)
    assert first.parts == ["000000", "000001"] and first.sizes() == {"000000": 3, "000001": 3}
    # r1 finished its parts; what it left pending is planned by r2, numbered on from r1's
    rest = pending.slice(6)
    second = make_plan(storage, "r2", rest, ledger(), set(first.parts), per_part=3)
    assert second.parts == ["000002", "000003"] and second.resumed == []
    files = [f"{PLANS}/{run}.{ext}" for run in ("r1", "r2") for ext in ("json", "parquet")]
    assert sorted(storage.list(f"{PLANS}/")) == files
    # once r2's parts are committed too, only the newest plan (the numbering) is kept
    third = make_plan(storage, "r3", refs(), ledger(), {*first.parts, *second.parts}, 3)
    assert third.parts == []
    assert sorted(storage.list(f"{PLANS}/")) == files[2:]
